from __future__ import annotations

import pytest

from tests.support.edge import edge_image


@pytest.fixture(scope="session")
def edge_img(tmp_path_factory) -> str:
    return edge_image(tmp_path_factory.mktemp("edge-image"))
