"""`composegen top NAME` on an emulated two-node stack (head on the main engine, worker on a second dockerd):
the sample is the head's engine's, which serves every request."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.stack.test_multinode_engine import REST
from tests.support.engine import HELD_DECODE, free_port, tiny_profile, top_under_load
from tests.support.helpers import make_project, run_cli
from tests.support.second_engine import (  # noqa: F401 - the session fixture
    force_remove,
    leftovers,
    second_engine,
)

pytestmark = pytest.mark.docker


def test_top_shows_the_heads_engine_of_a_two_node_stack(tmp_path, second_engine):  # noqa: F811
    name, port = f"mn-{uuid.uuid4().hex[:8]}", free_port()
    rest = REST.format(
        master=free_port(),
        load=0.2,
        worker_where=f', docker_host: "{second_engine.url}"',
        head_where="",
    )
    text = tiny_profile(
        f"{name}-served",
        f"{{host: {port}, bind: 127.0.0.1}}",
        rest=rest + "".join(f'    {k}: "{v}"\n' for k, v in HELD_DECODE.items()),
    )
    root = make_project(tmp_path, {name: text})
    try:
        assert run_cli("--root", str(root), "render", name).returncode == 0
        up = run_cli("--root", str(root), "up", name, "--emulate", timeout=600)
        assert up.returncode == 0, up.stderr
        res = top_under_load(root, name, port, clients=3)
        assert res.returncode == 0, res.stderr
        sample = json.loads(res.stdout)
        assert sample["view"] == "head" and sample["url"] == f"http://127.0.0.1:{port}"
        # max-num-seqs 1, on the head's engine
        assert sample["running"] == 1 and sample["waiting"] >= 1
        assert run_cli("--root", str(root), "down", name).returncode == 0
    finally:
        force_remove(f"composegen-{name}-n0")
        force_remove(f"composegen-{name}-n1", second_engine.url)
    assert (
        leftovers(f"composegen-{name}-n0") == []
        and leftovers(f"composegen-{name}-n1", second_engine.url) == []
    )
