"""kill -9 of composegen in the middle of a switch (issue 39): the alias is never left at 503 for good and
never answers with a model it does not point at. At each step of promote (stopping the old stack, the new
one's load, its gates) and of rollback, composegen is killed; `edge status` then says the switch was
interrupted, clients read the same in the 503 stage, `promote` refuses to start another switch, and
`composegen edge recover` brings the stack the alias points at back; a client polls the alias throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.edge.test_switch_engine import decide
from tests.support.edge import EdgeProject, Poller, edge_project, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
CHAT = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img):
    # both stacks decode slowly, so their gates (a few tokens) last long enough to be killed in
    project = edge_project(
        tmp_path_factory.mktemp("recover"), edge_img, load=3, both_env={"EMU_DECODE_TOK_S": "4"}
    )
    with serving(project) as ready:
        yield ready


def _killed_at(edge: EdgeProject, prefix: str, *args: str) -> str:
    """Start `composegen ARGS`, SIGKILL it once its journal's step starts with PREFIX; the step it died in."""
    journal = edge.root / ".composegen/edge/switch.json"
    proc = subprocess.Popen([sys.executable, "-m", "composegen", "--root", str(edge.root), *args], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                entry = json.loads(journal.read_text())
            except (OSError, ValueError):
                entry = {}
            if str(entry.get("step", "")).startswith(prefix):
                assert entry["pid"] == proc.pid
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
                return entry["step"]
            time.sleep(0.005)
        pytest.fail(
            f"{args} never reached a step starting {prefix!r} (exit {proc.poll()}): {proc.stderr.read()}"
        )  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _recovers(
    edge: EdgeProject, key: str, serving_model: str, target: str, again: tuple[str, ...]
) -> None:
    status = json.loads(edge.ok("edge", "status", "--json"))
    (row,) = [a for a in status["aliases"] if a["alias"] == "ds4-flash"]
    assert row["interrupted"] and "interrupted at" in row["switching"]["stage"], row
    code, headers, data = edge.request("POST", "/v1/chat/completions", key, CHAT)
    assert code == 503 and headers.get("Retry-After"), (code, data)
    assert json.loads(data)["error"]["stage"].endswith("run composegen edge recover"), data
    # the same switch again: refused until the interrupted one is recovered
    refused = edge.cli(*again)
    assert refused.returncode == 1 and "was interrupted at" in refused.stderr, refused.stderr
    done = json.loads(edge.ok("edge", "recover", "--json", timeout=600))
    assert done["action"].startswith("undone") and done["profile"] != target, done
    code, _, data = edge.request("POST", "/v1/chat/completions", key, CHAT)
    assert code == 200 and json.loads(data)["model"] == serving_model, (code, data)
    assert not (edge.root / ".composegen/edge/switch.json").exists()


def test_kill_9_at_every_step_of_promote_and_rollback_is_recovered(edge):
    old_model, new_model = f"{edge.old}-served", f"{edge.new}-served"
    decide(edge, "c1", edge.new)
    key = edge.ok("edge", "keys", "add", "poller").strip()
    poller = Poller(edge, key)
    poller.start()
    try:
        promote = ("promote", edge.new, "--alias", "ds4-flash", "--campaign", "c1", "--emulate")
        for prefix in ("stopping", "starting", "loading weights", "gates on"):
            step = _killed_at(edge, prefix, *promote)
            assert step.startswith(prefix)
            _recovers(edge, key, old_model, edge.new, promote)
        # nothing stuck: a switch runs through
        promoted = json.loads(edge.ok(*promote, "--json", timeout=600))
        assert promoted["profile"] == edge.new
        rollback = ("rollback", "ds4-flash", "--emulate")
        for prefix in ("stopping", "starting", "loading weights", "gates on"):
            _killed_at(edge, prefix, *rollback)
            _recovers(edge, key, new_model, edge.old, rollback)
    finally:
        poller.stop.set()
        poller.join(60)
    assert "nothing to recover" in edge.ok("edge", "recover")
    wrong = [s for s in poller.seen if s[0] == 200 and s[2] not in (old_model, new_model)]
    unexplained = [s for s in poller.seen if s[0] not in (200, 503) or (s[0] == 503 and not s[1])]
    assert not wrong and not unexplained, (wrong[:3], unexplained[:3])
    # before the promote that ran through, only the old model answered; after it, only the new one
    models = [s[2] for s in poller.seen if s[0] == 200]
    first_new = models.index(new_model)
    assert set(models[:first_new]) == {old_model} and set(models[first_new:]) == {new_model}


def test_a_cold_target_that_cannot_start_is_refused_before_the_cut(tmp_path, edge_img):
    """Without --emulate the target runs its pinned image: absent here (and its weights too), so the switch is
    refused before the alias is marked — nothing is stopped, no 503 is published, no journal is left."""
    project = edge_project(tmp_path, edge_img)
    decide(project, "c1", project.new)
    res = project.cli("promote", project.new, "--alias", "ds4-flash", "--campaign", "c1")
    assert res.returncode == 1, res.stderr
    assert (
        f"{project.new} cannot start: " in res.stderr
        and "its image example/vllm@sha256:" in res.stderr
    )
    assert "is not on this engine" in res.stderr and "nothing was changed" in res.stderr
    # this tiny profile mounts no Hugging Face cache
    assert "its weights cannot be checked" in res.stderr
    assert ("nvidia runtime" in res.stderr) == ("nvidia" not in json.loads(subprocess.check_output(
        ["docker", "info", "--format", "{{json .Runtimes}}"])))  # fmt: skip
    state = project.root / ".composegen/edge"
    assert not (state / "switch.json").exists() and not (state / "routes.json").exists()
