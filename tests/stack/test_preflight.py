"""Preflight checks that need no engine: ports, ulimit ceilings, shm reclaim, emulator override."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import yaml

from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.shm import scan as shm
from composegen.stack import emulate, preflight
from tests.support import devshm

REPO = Path(__file__).resolve().parents[2]


def test_port_free_sees_a_listener():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not preflight.port_free("127.0.0.1", port)
    assert preflight.port_free("127.0.0.1", port)


def test_ulimit_check_and_clamp_against_the_engine_ceiling():
    ceiling = {"memlock": 8 * 2**20, "nofile": 20000, "stack": -1}
    requested = {"memlock": -1, "nofile": 1048576, "stack": 67108864}
    assert preflight.ulimit_check(requested, ceiling, emulate=False).status == "fail"
    assert preflight.ulimit_check(requested, ceiling, emulate=True).status == "warn"
    assert preflight.ulimit_check({"nofile": 1024}, ceiling, emulate=False).status == "ok"
    clamped, warnings = emulate.clamp_ulimits(requested, ceiling)
    assert clamped == {
        "memlock": {"soft": 8 * 2**20, "hard": 8 * 2**20},
        "nofile": {"soft": 20000, "hard": 20000},
        "stack": {"soft": 67108864, "hard": 67108864},
    }
    assert len(warnings) == 2 and "memlock -1" in warnings[0]


def test_reclaim_shm_removes_leftovers_or_says_why_not():
    # reclaim works on a tmpfs only
    shm_dir = devshm.make_dir("preflight")
    leftover = shm_dir / "psm_deadbeef"
    leftover.write_bytes(b"x" * 4096)
    try:
        # ctime cannot be aged: no minimum age here
        check = preflight.reclaim_shm(str(shm_dir), min_age=0)
        unreadable = shm.scan(str(shm_dir)).unreadable_pids
    finally:
        remaining = leftover.exists()
        shutil.rmtree(shm_dir, ignore_errors=True)
    if unreadable:  # e.g. PID 1 here, even for root: reclaim must refuse rather than guess
        assert check.status == "warn" and "--ignore-unreadable" in check.message
        assert remaining
    else:
        assert check.status == "ok" and not remaining


def test_emulator_override_swaps_image_removes_gpus_and_keeps_the_rest():
    r = profile.load(Project(REPO), "393k-offload")
    text = emulate.override_text(
        r, "composegen/vllm-emulator:abc", {"memlock": {"soft": 1, "hard": 1}}
    )
    assert (
        "deploy: !reset null" in text and "gpus: !reset []" in text and "ulimits: !override" in text
    )

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: f"<{suffix}>")
    doc = yaml.load(text, Loader=Loader)["services"]["vllm"]
    assert doc["image"] == "composegen/vllm-emulator:abc"
    assert doc["labels"] == {"io.composegen.emulated": "true", "io.composegen.gpus": "ids:0,1"}
    assert "command" not in doc and "ports" not in doc  # the real argv and ports are kept


def test_emulator_override_writes_emulate_env_as_compose_literals(tmp_path):
    from tests.support.helpers import MINIMAL, make_project

    hostile = 'emulate:\n  env: {EMU_WEIGHTS_GIB: "pa$word", EMU_X: "${HF_TOKEN}"}\n'
    root = make_project(tmp_path, {"hostile": MINIMAL + hostile})
    r = profile.load(Project(root), "hostile")
    text = emulate.override_text(r, "composegen/vllm-emulator:abc", {})

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: f"<{suffix}>")
    doc = yaml.load(text, Loader=Loader)["services"]["vllm"]
    # `$$` is how compose spells a literal `$`: neither value is interpolated, no token reaches the engine.
    assert doc["environment"] == {"EMU_WEIGHTS_GIB": "pa$$word", "EMU_X": "$${HF_TOKEN}"}


def test_shm_check_scans_when_leftovers_could_pass_the_bound():
    """Over LEFTOVER_WARN_BYTES in use on the tmpfs: the whole scan runs and warns about the leftover."""
    r = profile.load(Project(REPO), "4096-131k")
    shm_dir = devshm.make_dir("preflight")
    try:
        fd = os.open(shm_dir / "psm_0badcafe", os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, preflight.LEFTOVER_WARN_BYTES + 2**20)
        finally:
            os.close(fd)
        assert preflight._free_if_nothing_to_warn(str(shm_dir), 0) is None
        checks = preflight.shm_check(r, str(shm_dir))
    finally:
        shutil.rmtree(shm_dir, ignore_errors=True)
    assert [c.name for c in checks] == ["shm", "shm-leftovers"], checks
    assert "1 leftover files use" in checks[1].message


def test_shm_check_without_the_walk_says_what_the_scan_says(monkeypatch):
    r = profile.load(Project(REPO), "4096-131k")
    shm_dir = devshm.make_dir("preflight")
    try:
        vfs = os.statvfs(shm_dir)
        quiet = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize <= preflight.LEFTOVER_WARN_BYTES
        fast = preflight.shm_check(r, str(shm_dir))
        assert (preflight._free_if_nothing_to_warn(str(shm_dir), 0) is not None) == quiet
        monkeypatch.setattr(preflight, "_free_if_nothing_to_warn", lambda path, need: None)
        scanned = preflight.shm_check(r, str(shm_dir))
    finally:
        shutil.rmtree(shm_dir, ignore_errors=True)
    assert [(c.name, c.status) for c in fast] == [(c.name, c.status) for c in scanned]
    assert fast[0].message.split(":")[0] == scanned[0].message.split(":")[0]
