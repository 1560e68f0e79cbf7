"""A switch by sleep that fails puts the old engine back awake and the alias on it (issue 37 item 3), on
the real engine with the emulator: the candidate's engine fails its second wake (EMU_FAULT=wake_fails),
so a promote, a rollback, then a promote again — that last one fails at `waking NEW`. Exit 1 saying
so, the old engine awake and serving the alias, the new one asleep, nothing restarted, the journal
closed (the next switch is not refused as interrupted)."""

from __future__ import annotations

import json

import pytest

from tests.edge.test_switch_engine import decide
from tests.support.edge import edge_project, serving

pytestmark = pytest.mark.docker


def test_a_failed_wake_leaves_the_old_engine_awake_and_the_alias_on_it(tmp_path, edge_img):
    project = edge_project(tmp_path, edge_img, load=2, standby=True, share=0.45,
                           both_env={"EMU_WEIGHTS_GIB": "0.0043"},
                           new_env={"EMU_FAULT": "wake_fails"})  # fmt: skip
    with serving(project) as edge:
        edge.ok("up", edge.new, "--emulate", "--standby")
        decide(edge, "c1", edge.new)
        promote = ("promote", edge.new, "--alias", "ds4-flash", "--campaign", "c1", "--emulate")
        assert json.loads(edge.ok(*promote, "--json"))["path"] == "standby"  # its first wake
        assert (
            json.loads(edge.ok("rollback", "ds4-flash", "--emulate", "--json"))["path"] == "standby"
        )
        started = {name: edge.container_started(name) for name in (edge.old, edge.new)}

        res = edge.cli(*promote)  # the second wake of the new engine fails
        assert res.returncode == 1, (res.stdout, res.stderr)
        assert f"switching ds4-flash to {edge.new} by sleep failed" in res.stderr, res.stderr
        assert f"{edge.old} is awake again: ds4-flash points at {edge.old} again" in res.stderr, (
            res.stderr
        )

        aliases = json.loads(edge.ok("edge", "status", "--json"))["aliases"]
        assert [(a["alias"], a["profile"], a["switching"]) for a in aliases] == [
            ("ds4-flash", edge.old, None)
        ]
        sleeping = {s["profile"]: s["endpoint"]["sleeping"]
                    for s in json.loads(edge.ok("status", "--json"))["stacks"]}  # fmt: skip
        assert sleeping[edge.old] is None and sleeping[edge.new] is not None, sleeping
        key = edge.ok("edge", "keys", "add", "after").strip()
        body = {
            "model": "ds4-flash",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
        }
        status, _, data = edge.request("POST", "/v1/chat/completions", key, body, timeout=30)
        assert status == 200 and json.loads(data)["model"] == f"{edge.old}-served", data[:300]
        assert {name: edge.container_started(name) for name in (edge.old, edge.new)} == started
        # the switch's journal is closed: the next one is not refused as interrupted (exit 1 for
        # that, too) but runs, and fails at the same wake (every wake after the first fails)
        again = edge.cli(*promote)
        assert again.returncode == 1, (again.stdout, again.stderr)
        assert "was interrupted" not in again.stderr, again.stderr
        assert f"switching ds4-flash to {edge.new} by sleep failed" in again.stderr, again.stderr
