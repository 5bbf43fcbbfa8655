"""Charts with matplotlib: a readable PNG of the asked size, drawn (not blank), a band, gaps, a log
scale; a clear error without matplotlib."""

import sys

import numpy as np
import pytest

from streams.render.charts import Band, PlotUnavailable, line_chart


def test_a_chart_is_a_png_of_its_size_with_ink(tmp_path):
    from matplotlib.image import imread

    y = np.sin(np.arange(200) / 10.0)
    y[50:60] = np.nan  # a gap
    path = tmp_path / "c.png"
    line_chart(path, [("truth", y), ("forecast", y * 0.9)], band=Band("band", y * 0.9, y * 1.1),
               title="t", xlabel="x", ylabel="y")
    img = imread(path)
    assert img.shape[:2] == (450, 1000)
    assert img[..., :3].std() > 0.05  # not one colour
    # the band is shaded: some pixels are neither white nor a line colour, light red
    rgb = img[..., :3]
    light_red = (rgb[..., 0] > 0.85) & (rgb[..., 1] < 0.85) & (rgb[..., 1] > 0.5) & (rgb[..., 2] < 0.85)
    assert light_red.sum() > 500


def test_log_scale_and_an_unwritable_path(tmp_path):
    line_chart(tmp_path / "log.png", [("a", np.array([1.0, 10.0, 1000.0]))], title="t", xlabel="x", ylabel="y",
               x=np.array([1, 2, 3]), log_y=True)
    assert (tmp_path / "log.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(OSError):
        line_chart(tmp_path / "no" / "dir.png", [("a", np.ones(3))], title="t", xlabel="x", ylabel="y")


def test_without_matplotlib_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(PlotUnavailable, match=r"pip install 'cnsched\[plot\]'"):
        line_chart(tmp_path / "x.png", [("a", np.ones(3))], title="t", xlabel="x", ylabel="y")
