"""A rendered stack keeps what its start compiled (docs/caches.md), on the real engine with the emulated
vLLM: `up`, `down`, `up` of the same profile reports `cache: warm` and a shorter compile; another image
digest is another volume, and starts cold. An emulated start fills a volume of its own (KEY-emulated),
never the one a real start of the profile would load."""

from __future__ import annotations

import io
import json
import secrets
import subprocess
import tarfile

import pytest

from composegen.profiles import caches
from composegen.project import Project
from composegen.stack import driver
from tests.support.cli import run_cli, run_inproc
from tests.support.engine import emulated_project, force_remove, free_port

pytestmark = pytest.mark.docker


def _up(root, name: str) -> dict:
    res = run_cli("--root", str(root), "up", name, "--emulate", "--json")
    assert res.returncode == 0, res.stderr
    down = run_cli("--root", str(root), "down", name)
    assert down.returncode == 0, down.stderr
    return json.loads(res.stdout)["startup"]


def test_a_second_up_is_warm_and_another_image_starts_cold(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=3.0)
    profile = root / "profiles" / f"{name}.yaml"
    # keys no other test (nor another checkout on this engine) shares: this run's own image pins;
    # the emulated stack runs the emulator image whatever the pin says
    first, other = secrets.token_hex(32), secrets.token_hex(32)
    profile.write_text(profile.read_text().replace("c" * 64, first))
    volumes = []
    try:
        for step in ("cold", "warm", "other image"):
            if step == "other image":
                profile.write_text(profile.read_text().replace(first, other))
            assert run_cli("--root", str(root), "render", name).returncode == 0
            shown = json.loads(run_cli("--root", str(root), "show", name, "--json").stdout)
            real = shown["caches"]["volume"]
            volumes.append(real + caches.EMULATED)
            startup = _up(root, name)
            assert real not in _volume_names()  # the emulator never fills a real start's volume
            if step == "cold":
                cold = startup
                assert startup["cache"] == "cold"
            elif step == "warm":
                assert startup["cache"] == "warm"
                assert startup["cache_directory"] == cold["cache_directory"]
                assert startup["compile_seconds"] < cold["compile_seconds"]
                # the record's last cold start of this key, for the summary's "cold was"
                assert startup["cache_cold_compile_seconds"] == cold["compile_seconds"]
            else:
                assert startup["cache"] == "cold" and volumes[2] != volumes[0]
        listed = subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True)
        assert volumes[0] in listed.stdout.split() and volumes[0].startswith(caches.VOLUME_PREFIX)
        _the_cache_commands(root, name, volumes, tmp_path, cold, (other, first))
    finally:
        force_remove(f"composegen-{name}")
        subprocess.run(["docker", "volume", "rm", *set(volumes)], capture_output=True)


def _cache(root, *args: str) -> tuple[int, dict]:
    res = run_inproc("--root", str(root), "cache", *args, "--json")
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else res.stderr


def _the_cache_commands(root, name: str, volumes: list[str], tmp_path, cold: dict, pins) -> None:
    """list, verify, export, prune, import (a tampered archive refused, then the real one) and
    warm, on the volumes the starts above left: the first key no profile renders any more."""
    old, new = volumes[0], volumes[2]
    # `up`'s estimate counts a warm start when a start filled the profile's volume of its kind
    project = Project(root)
    assert driver.filled(project, name, True) and driver.filled(project, name, None)
    assert not driver.filled(project, name, False)  # no real start filled the real one
    code, listed = _cache(root, "list")
    rows = {v["volume"]: v for v in listed["volumes"]}
    assert code == 0 and rows[old]["used_by"] == [name] and rows[old]["rendered_by"] == []
    assert rows[old]["ours"] and rows[new]["rendered_by"] == [name] and rows[old]["bytes"] > 0
    assert rows[old]["cold_compile_seconds"] == cold["compile_seconds"] and rows[old]["emulated"]
    assert rows[old]["gpus"][0].endswith("(EMULATED)")
    assert "-emulated  " in run_inproc("--root", str(root), "cache", "list").stdout
    code, checked = _cache(root, "verify", name)  # the real volume: absent, nothing to check
    real = new.removesuffix(caches.EMULATED)
    said = [(v["volume"], v["present"], v["problems"]) for v in checked["volumes"]]
    assert code == 0 and said == [(real, False, []), (new, True, [])]
    # a real start's volume and record (as note_start writes them), on an engine without GPUs
    subprocess.run(["docker", "volume", "create", real], capture_output=True, check=True)
    volumes.append(real)
    record = root / ".composegen" / "caches" / f"{real.removeprefix(caches.VOLUME_PREFIX)}.json"
    record.write_text(json.dumps({"key": real[-16:], "gpus": ["NVIDIA H100 80GB HBM3, 550.54.15"]}))
    code, checked = _cache(root, "verify", name)
    rows = {v["volume"]: v for v in checked["volumes"]}
    assert code == 1 and "no GPU runtime" in rows[real]["problems"][0] and not rows[new]["problems"]
    assert not rows[real]["emulated"] and rows[real]["gpus"] == ["NVIDIA H100 80GB HBM3, 550.54.15"]
    archive = tmp_path / "old.tar"
    code, exported = _cache(root, "export", old.removeprefix(caches.VOLUME_PREFIX), str(archive))
    assert code == 0 and exported["files"] >= 2 and archive.is_file()
    assert _cache(root, "export", old.removeprefix(caches.VOLUME_PREFIX), str(archive))[0] == 2
    assert _cache(root, "import", str(archive))[0] == 1  # no profile here renders that key now
    code, pruned = _cache(root, "prune")  # dry run: says, removes nothing
    assert code == 0 and [(v["volume"], v["pruned"]) for v in pruned["volumes"]] == [(old, False)]
    assert _cache(root, "prune", "--yes")[1]["volumes"][0]["pruned"] is True
    assert old not in _volume_names()
    profile = root / "profiles" / f"{name}.yaml"  # the first image again: the old key is rendered
    profile.write_text(profile.read_text().replace(*pins))
    assert run_cli("--root", str(root), "render", name).returncode == 0
    tampered = tmp_path / "tampered.tar"
    with tarfile.open(archive) as src, tarfile.open(tampered, "w") as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else b""
            data = data + b"x" if m.isfile() and m.name != "composegen-cache.json" else data
            m.size = len(data)
            out.addfile(m, io.BytesIO(data))
    assert _cache(root, "import", str(tampered))[0] == 2
    assert old not in _volume_names()  # the volume the refused import made is removed again
    code, imported = _cache(root, "import", str(archive))
    assert code == 0 and imported["files"] == exported["files"]
    warmed = run_inproc("--root", str(root), "cache", "warm", name, "--emulate", "--json")
    startup = json.loads(warmed.stdout)["startup"]
    assert warmed.returncode == 0 and startup["cache"] == "warm", warmed.stderr
    assert startup["cache_cold_compile_seconds"] == cold["compile_seconds"]  # the export's record
    assert _cache(root, "import", str(archive))[0] == 1  # its volume is there now


def _volume_names() -> list[str]:
    listed = subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True)
    return listed.stdout.split()


def test_a_renamed_copy_shares_the_volume_and_starts_warm(tmp_path):
    root, name, port = emulated_project(tmp_path, load=3.0)
    profile = root / "profiles" / f"{name}.yaml"
    text = profile.read_text().replace("c" * 64, secrets.token_hex(32))  # a key of its own
    profile.write_text(text)
    copy = f"{name}-b"  # another name, served name and port: the same compiled code
    other = free_port()
    (root / "profiles" / f"{copy}.yaml").write_text(
        text.replace(f"{name}-served", f"{copy}-served").replace(f"host: {port}", f"host: {other}")
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    shown = [
        json.loads(run_cli("--root", str(root), "show", n, "--json").stdout)["caches"]["volume"]
        for n in (name, copy)
    ]
    try:
        assert shown[0] == shown[1]
        assert _up(root, name)["cache"] == "cold"
        assert _up(root, copy)["cache"] == "warm"
    finally:
        for n in (name, copy):
            force_remove(f"composegen-{n}")
        subprocess.run(["docker", "volume", "rm", shown[0] + caches.EMULATED], capture_output=True)
