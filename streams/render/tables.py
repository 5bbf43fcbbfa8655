"""Plain text tables for the terminal: the benefit report's sections and the learned alphas."""

from __future__ import annotations

from streams.analytics.alphas import ALPHA_COLUMNS


def alpha_table(rows: list[dict]) -> str:
    """`cnsched report alpha` as text (rows of streams.analytics.alphas.learned_alphas)."""
    return table(list(ALPHA_COLUMNS), [tuple(r[c] for c in ALPHA_COLUMNS) for r in rows])


def sections(sections: list[dict], show_sql: bool = False) -> str:
    lines = []
    for s in sections:
        lines.append(s["title"])
        if show_sql:
            lines += ["  " + x for x in s["sql"].splitlines()]
        lines += ["  " + x for x in table(s["columns"], s["rows"]).splitlines()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def table(columns: list[str], rows: list[tuple]) -> str:
    """A plain text table: text left, numbers right, '-' for missing."""
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:,.2f}" if abs(v) < 1e6 else f"{v:,.0f}"
        return str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) for i in range(len(columns))]

    def fmt(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric, strict=True))

    out = [fmt(columns), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells]
    if not rows:
        out.append("(no rows)")
    return "\n".join(x.rstrip() for x in out)
