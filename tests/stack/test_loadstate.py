"""status's columns for a stack that loads: composegen's readiness next to Docker's health."""

from __future__ import annotations

import pytest

from composegen.stack import loadstate
from composegen.stack.reports import LoadingStatus


def _loading(**changes) -> LoadingStatus:
    values = dict(
        stage="weights", label="loading weights", summary="loading weights 3/8", done=3, total=8
    )
    values.update(elapsed_s=40.0, in_start_period=True, failed=None)
    values.update(changes)
    return LoadingStatus(**values)


@pytest.mark.parametrize(
    ("healthy", "served", "loading", "text"),
    [
        (True, "tiny", None, "ready"),
        (True, None, None, "health 200"),
        (None, None, None, "down"),
        (False, None, _loading(), "loading: loading weights 3/8"),
        (False, None, _loading(in_start_period=False), "unhealthy"),  # past startup_timeout: it is
        (False, None, _loading(failed="EngineCore failed to start."), "failed"),
        (False, None, None, "unhealthy"),
    ],
)
def test_api_column(healthy, served, loading, text):
    assert loadstate.api_text(healthy, served, loading) == text


def test_health_column_shows_our_readiness_while_dockers_check_has_not_run_yet():
    assert loadstate.health_text("starting", ready=True) == "ready (docker's check pending)"
    assert loadstate.health_text("starting", ready=False) == "starting"
    assert loadstate.health_text("healthy", ready=True) == "healthy"
    assert loadstate.health_text(None, ready=False) == "-"


def test_docker_timestamped_lines_are_split():
    rows = loadstate.stamped(
        "2026-11-30T15:51:41.123456789Z (EngineCore pid=1) hello\nno stamp here"
    )
    assert rows[0][1] == "(EngineCore pid=1) hello" and rows[0][0] == pytest.approx(
        1796053901.123456
    )
    assert rows[1] == (None, "no stamp here")
