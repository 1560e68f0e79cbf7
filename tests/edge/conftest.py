from __future__ import annotations

import pytest

from tests.support.edge import edge_image
from tests.support.parallel import once_per_run


@pytest.fixture(scope="session")
def edge_img(tmp_path_factory) -> str:
    # Built and pushed once per run: workers pushing one tag at once would race over what it names.
    return once_per_run(tmp_path_factory, "edge-image", lambda tmp: {"ref": edge_image(tmp)})["ref"]
