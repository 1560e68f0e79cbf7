"""`qualify NAME --alias ALIAS` on the real engine, cold (profiles without `standby:`): one command gets
proof for a profile while another serves the alias (issue 40 #4). A client polls the alias through the
real Caddy throughout and sees only the old model, then 503 + Retry-After + a stage saying what happens
("qualifying NAME", its gates), then the old model again (`--then restore`) or the new one (`--then
promote`, the qualification just written as the proof); a profile that fails to start leaves the serving
stack restored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.edge import EdgeProject, Poller, edge_project, phases, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
# judged by the gate the tiny profile can pass (it has no tool parser: the tool gates would fail)
QUALIFY = "qualify: {gates: [smoke]}\n"


def with_qualify(edge: EdgeProject, *names: str) -> None:
    for name in names:
        path = edge.root / "profiles" / f"{name}.yaml"
        path.write_text(path.read_text(encoding="utf-8") + QUALIFY, encoding="utf-8")
    edge.ok("render")


def set_fault(edge: EdgeProject, name: str, fault: str | None) -> None:
    """NAME's emulated engine with FAULT (EMU_FAULT), or without any; rendered again."""
    path = edge.root / "profiles" / f"{name}.yaml"
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if "EMU_FAULT" not in ln]
    text = "\n".join(lines) + "\n"
    if fault:
        text = text.replace("  env:\n", f'  env:\n    EMU_FAULT: "{fault}"\n', 1)
    path.write_text(text, encoding="utf-8")
    edge.ok("render")


def polled(edge: EdgeProject, action: Callable[[], None]) -> list:
    """What a client polling the alias saw while ACTION ran (it starts once the alias answers)."""
    poller = Poller(edge, edge.ok("edge", "keys", "add", f"p{time.monotonic_ns()}").strip())
    edge.ca_file()
    poller.start()
    try:
        poller.wait_for(5)
        action()
        poller.wait_for(len(poller.seen) + 5)  # what the alias serves after the action
    finally:
        poller.stop.set()
        poller.join(60)
    bad = [s for s in poller.seen if not (s[0] == 200 or (s[0] == 503 and s[1]))]
    assert not bad, f"answers that are neither a model nor 503 + Retry-After: {bad[:5]}"
    return poller.seen


def assigned(edge: EdgeProject) -> list[dict]:
    doc = json.loads((edge.root / ".composegen/edge/assignments.json").read_text())
    return doc["aliases"]["ds4-flash"]


@pytest.fixture
def edge(tmp_path, edge_img):
    project = edge_project(tmp_path, edge_img, load=2)
    with_qualify(project, project.old, project.new)
    with serving(project) as ready:
        yield ready


def test_qualify_in_the_alias_place_restores_promotes_and_restores_after_a_failure(edge):
    old_model, new_model = f"{edge.old}-served", f"{edge.new}-served"
    argv = ("qualify", edge.new, "--alias", "ds4-flash", "--emulate", "--json")
    found: dict = {}
    seen = polled(edge, lambda: found.update(json.loads(edge.ok(*argv, timeout=600))))
    assert found["qualified"] and found["path"] == "cold", found
    assert (found["serving_before"], found["serving_after"]) == (edge.old, edge.old)
    steps = [s["step"] for s in found["steps"]]
    assert steps == [f"stopping {edge.old}", f"starting {edge.new}", f"qualifying {edge.new}",
                     f"stopping {edge.new}", f"starting {edge.old}", f"gates on {edge.old}"], steps  # fmt: skip
    assert all(s["seconds"] >= 0 for s in found["steps"]) and found["seconds"] > 0
    assert phases(seen) == [old_model, "503", old_model], phases(seen)
    told = {s[2] for s in seen if s[0] == 503}
    assert f"qualifying {edge.new}" in told or any(
        t.startswith(f"qualifying {edge.new}: gates") for t in told
    ), told
    # the bundle is kept: the proof a later `promote --run` accepts
    assert (edge.root / found["qualify"]["run"] / "qualify.json").is_file()
    kept = edge.root / ".composegen/edge/assignments.json"
    assert not kept.exists() or assigned(edge)[-1]["profile"] == edge.old  # the alias never moved

    # --then promote: the alias moves to the profile on the qualification just recorded
    argv = ("qualify", edge.new, "--alias", "ds4-flash", "--then", "promote", "--emulate", "--json")
    promoted: dict = {}
    seen = polled(edge, lambda: promoted.update(json.loads(edge.ok(*argv, timeout=600))))
    assert promoted["serving_after"] == edge.new and promoted["evidence"]["kind"] == "qualify"
    assert phases(seen) == [old_model, "503", new_model], phases(seen)
    last = assigned(edge)[-1]
    assert (last["profile"], last["by"], last["evidence"]) == (
        edge.new,
        "promote",
        promoted["evidence"],
    )
    assert (edge.root / promoted["evidence"]["ref"]).resolve() == Path(
        promoted["qualify"]["run"]
    ).resolve()

    # a profile that does not start: the serving stack (now the new one) is restored, exit 1
    set_fault(edge, edge.old, "crash_during_load")
    res: list = []
    argv = ("qualify", edge.old, "--alias", "ds4-flash", "--emulate")
    seen = polled(edge, lambda: res.append(edge.cli(*argv, timeout=600)))
    assert res[0].returncode == 1, (res[0].stdout, res[0].stderr)
    assert f"restored: ds4-flash points at {edge.new} again" in res[0].stderr, res[0].stderr
    assert phases(seen) == [new_model, "503", new_model], phases(seen)
    assert any(
        f"qualifying {edge.old} failed, restoring {edge.new}" in s[2] for s in seen if s[0] == 503
    )
    assert assigned(edge)[-1]["profile"] == edge.new
    assert not (edge.root / ".composegen/edge/switch.json").exists()  # the journal ends with it


def loading_stage(routes: Path, proc: subprocess.Popen) -> str | None:
    """The 503 stage once NEW loads its weights (the old stack is down then), or the last seen."""
    deadline, stage = time.monotonic() + 120, None
    while time.monotonic() < deadline and proc.poll() is None:
        route = json.loads(routes.read_text())["aliases"]["ds4-flash"] if routes.is_file() else {}
        stage = (route.get("switch") or {}).get("stage")
        if stage and stage.startswith("loading weights"):
            break
        time.sleep(0.05)
    return stage


def test_ctrl_c_while_qualifying_restores_the_serving_stack(edge):
    """Ctrl-C during the qualification: the old stack serves the alias again before composegen ends
    (exit 130), no journal is left for `edge recover`."""
    # NEW's emulated engine stays in its weights for good (never_ready): the Ctrl-C lands while it
    # loads however late a busy machine hands its log over (a 0.6 s weights stage, drained with the
    # lines after it in one batch, was gone before the poll saw it and the qualification passed)
    set_fault(edge, edge.new, "never_ready")
    routes = edge.root / ".composegen/edge/routes.json"
    argv = [sys.executable, "-m", "composegen", "--root", str(edge.root), "qualify", edge.new,
            "--alias", "ds4-flash", "--emulate"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "NO_COLOR": "1"}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        stage = loading_stage(routes, proc)
        assert stage and stage.startswith("loading weights"), stage
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()  # a failed assertion above leaves no composegen running
    assert proc.returncode == 130, (out, err)
    assert f"restored: ds4-flash points at {edge.old} again" in err, err
    assert not (edge.root / ".composegen/edge/switch.json").exists()
    key = edge.ok("edge", "keys", "add", "after").strip()
    body = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    status, _, data = edge.request("POST", "/v1/chat/completions", key, body)
    assert status == 200 and json.loads(data)["model"] == f"{edge.old}-served", (status, data)
    up = {s["profile"] for s in json.loads(edge.ok("status", "--json"))["stacks"]}
    assert edge.old in up and edge.new not in up, up  # the candidate taken down again
