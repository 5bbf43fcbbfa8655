"""Progress bars for long commands (tqdm): drawn on standard error when it is a terminal, never with
``--quiet`` or ``--json`` and never into a pipe or a file, so scripts and logs see only results."""

from __future__ import annotations

import sys


class Off:
    """The bar when there is none: every call does nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass


def bar(total: int, desc: str, quiet: bool = False, unit: str = "it"):
    if quiet or not sys.stderr.isatty():
        return Off()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
