"""A small line chart written as a PNG with numpy and zlib only (no plotting library): series over a
shared x axis, a zero line, y tick labels and a legend in a built-in 5x7 pixel font."""

from __future__ import annotations

import struct
import zlib

import numpy as np

# 5x7 glyphs, rows top to bottom, '#' = ink
_GLYPHS = {
    '0': ' ### #   ##  ### # ###  ##   # ### ',
    '1': '  #   ##    #    #    #    #   ### ',
    '2': ' ### #   #    #   #   #   #   #####',
    '3': '#####   #   #     #     ##   # ### ',
    '4': '   #   ##  # # #  # #####   #    # ',
    '5': '######    ####     #    ##   # ### ',
    '6': '  ##  #   #    #### #   ##   # ### ',
    '7': '#####    #   #   #   #    #    #   ',
    '8': ' ### #   ##   # ### #   ##   # ### ',
    '9': ' ### #   ##   # ####    #   #  ##  ',
    '.': '                          ##   ##  ',
    '-': '                ###                ',
    '+': '       #    #  #####  #    #       ',
    '/': '    #    #   #   #   #   #    #    ',
    'a': '           ###     # #####   # ####',
    'b': '#    #    # ## ##  ##   ##   ##### ',
    'c': '           ### #    #    #   # ### ',
    'd': '    #    # ## ##  ###   ##   # ####',
    'e': '           ### #   #######     ### ',
    'f': '  ##  #   ####  #    #    #    #   ',
    '>': '#     #     #     #   #   #   #    ',
    '_': '                              #####',
    'g': '      #####   ##   # ####    # ### ',
    'h': '#    #    # ## ##  ##   ##   ##   #',
    'i': '  #        ##    #    #    #   ### ',
    'k': '#    #    #  # # #  ##   # #  #  # ',
    'l': ' ##    #    #    #    #    #   ### ',
    'm': '          ## # # # ## # ##   ##   #',
    'n': '          # ## ##  ##   ##   ##   #',
    'o': '           ### #   ##   ##   # ### ',
    'p': '          #### #   ##### #    #    ',
    'r': '          # ## ##  ##    #    #    ',
    's': '           #####     ###     ##### ',
    't': ' #    #   ###   #    #    #  #  ## ',
    'u': '          #   ##   ##   ##  ## ## #',
    'w': '          #   ##   ## # ## # # # # ',
    'y': '          #   ##   # ####    # ### ',
    'M': '#   ### ### # ## # ##   ##   ##   #',
    'W': '#   ##   ##   ## # ## # ### ###   #',
    " ": " " * 35,
}


def _glyph(ch: str) -> np.ndarray:
    rows = _GLYPHS.get(ch, _GLYPHS[" "]).ljust(35)[:35]
    return np.array([c == "#" for c in rows], bool).reshape(7, 5)


def _text(img: np.ndarray, x: int, y: int, text: str, color) -> None:
    for i, ch in enumerate(text):
        g = _glyph(ch)
        x0 = x + 6 * i
        if x0 + 5 > img.shape[1] or y + 7 > img.shape[0] or x0 < 0 or y < 0:
            continue
        img[y:y + 7, x0:x0 + 5][g] = color


def _line(img: np.ndarray, xs: np.ndarray, ys: np.ndarray, color) -> None:
    """Polyline through pixel coordinates (many points per column: vertical spans per column)."""
    h, w = img.shape[:2]
    for a in range(len(xs) - 1):
        if not (np.isfinite(ys[a]) and np.isfinite(ys[a + 1])):
            continue  # a gap in the series: no line across it
        n = int(max(abs(xs[a + 1] - xs[a]), abs(ys[a + 1] - ys[a]))) + 1
        px = np.clip(np.round(np.linspace(xs[a], xs[a + 1], n)).astype(int), 0, w - 1)
        py = np.clip(np.round(np.linspace(ys[a], ys[a + 1], n)).astype(int), 0, h - 1)
        img[py, px] = color


def line_chart(series: list[tuple[str, np.ndarray, tuple[int, int, int]]], width: int = 900, height: int = 400,
               unit: str = "MW") -> bytes:
    """PNG bytes of the series (name, values, rgb) on one y axis; NaN values are gaps."""
    img = np.full((height, width, 3), 255, np.uint8)
    left, right, top, bottom = 70, 20, 30, 30
    pw, ph = width - left - right, height - top - bottom
    allv = np.concatenate([np.asarray(v, float) for _, v, _ in series])
    allv = allv[np.isfinite(allv)]
    lo, hi = (float(np.min(allv)), float(np.max(allv))) if allv.size else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad

    def ypix(v):
        return top + (hi - np.asarray(v, float)) / (hi - lo) * ph

    grey, dark = (200, 200, 200), (60, 60, 60)
    for k in range(5):  # y ticks and grid
        v = lo + (hi - lo) * k / 4
        y = int(round(float(ypix(v))))
        img[y, left:left + pw] = grey
        _text(img, 4, y - 3, f"{v:9.4g}"[-10:], dark)
    if lo < 0 < hi:
        img[int(round(float(ypix(0.0)))), left:left + pw] = dark
    img[top:top + ph, left] = dark
    img[top + ph, left:left + pw] = dark
    img[top, left:left + pw] = dark
    img[top:top + ph, left + pw - 1] = dark
    for _name, values, color in series:
        v = np.asarray(values, float)
        n = v.size
        if n > 2 * pw:  # min/max per pixel column
            cols = (np.arange(n) * pw // n).astype(int)
            starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
            mins, maxs = np.fmin.reduceat(v, starts), np.fmax.reduceat(v, starts)
            for c, a, b in zip(cols[starts], ypix(maxs), ypix(mins), strict=True):
                if np.isfinite(a):  # a column of gaps only draws nothing
                    img[int(a):int(b) + 1, left + c] = color
        else:
            xs = left + np.arange(n) * (pw - 1) / max(n - 1, 1)
            _line(img, xs, ypix(v), color)
    x = left + 10
    for name, _, color in series:  # legend
        img[10:17, x:x + 12] = color
        _text(img, x + 16, 10, name, dark)
        x += 16 + 6 * len(name) + 20
    _text(img, width - 6 * len(unit) - 24, 10, unit, dark)
    return _png(img)


def _png(img: np.ndarray) -> bytes:
    h, w, _ = img.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), img.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
