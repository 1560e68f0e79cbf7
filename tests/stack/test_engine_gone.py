"""A container on its way out counts as gone: `status` listed a test's container, another process
removed it, and `docker logs` got the engine's 409 "dead or marked for removal" — which ended the whole
`status` with exit 3 (CI). Other 409s (a restarting container's exec) stay errors."""

from __future__ import annotations

import docker.errors
import pytest
import requests

from composegen.errors import EngineError
from composegen.stack import engine


def _refusal(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("409 Client Error", response=response, explanation=explanation)


def _raises(exc: Exception):
    def call():
        raise exc

    return call


@pytest.mark.parametrize(
    "explanation",
    [
        "can not get logs from container which is dead or marked for removal",
        "removal of container 1f2e3d is already in progress",
    ],
)
def test_a_dying_container_is_gone(explanation):
    assert engine.unless_gone(_raises(_refusal(409, explanation)), "docker logs x") is None


def test_a_restarting_container_is_still_an_error():
    refusal = _refusal(409, "Container 91cc is restarting, wait until the container is running")
    with pytest.raises(EngineError, match=r"docker exec x: .*is restarting"):
        engine.unless_gone(_raises(refusal), "docker exec x")


def test_other_refusals_stay_errors():
    with pytest.raises(EngineError, match="docker logs x"):
        engine.unless_gone(_raises(_refusal(500, "is dead")), "docker logs x")
