"""The real data beside the checkout (../shared/data): tests that read it skip where it is not there
(a clone elsewhere), and say so."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")
