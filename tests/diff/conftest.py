from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def diff_dir(data_dir: Path) -> Path:
    return data_dir / "diff"
