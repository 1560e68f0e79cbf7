"""`composegen weights`: the real huggingface_hub client against a local Hub stand-in (tests/support/hub.py).

Covers: complete vs incomplete (exit 0 / 1), download of exactly the pinned revision, resume after an
interrupted download (a Range request from the partial blob's size), a wrong revision (2), a missing shard,
a corrupt shard (hash mismatch, then repaired), a gated repository (401 without the token, 0 with it, and
the token never printed), the Hub unreachable when needed (3), and model.path directories.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.helpers import REPO, make_project
from tests.support.hub import Hub, tiny_model

PROFILE = """\
image: example/vllm@sha256:{digest}
model:
  id: {model}
  revision: {rev}
  served_name: tiny
  {path}
service:
  port: {{host: 39999}}
  gpus: {{count: 1}}
  shm_size: 4gb
  volumes:
    - {{source: "${{CG_TEST_HF:-/nonexistent-hf}}", target: /root/.cache/huggingface}}
vllm:
  max-model-len: 4096
"""


@pytest.fixture
def hub():
    h = Hub().start()
    yield h
    h.close()


def project(tmp_path: Path, model: str, rev: str, path: str = "") -> Path:
    text = PROFILE.format(
        digest="a" * 64, model=model, rev=rev, path=f"path: {path}" if path else ""
    )
    return make_project(tmp_path / "proj", {"tiny": text})


def weights(
    proj: Path, hub: Hub, cache: Path, *args: str, **env: str
) -> subprocess.CompletedProcess:
    base = {"CG_TEST_HF": str(cache), "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    return run_cli("--root", str(proj), "weights", "tiny", *args, env={**base, **env})


def snapshot(cache: Path, model: str, rev: str) -> Path:
    return cache / "hub" / f"models--{model.replace('/', '--')}" / "snapshots" / rev


def test_empty_cache_is_incomplete_then_download_completes(tmp_path, hub):
    files = tiny_model()
    repo = hub.add_repo("org/tiny", files)
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    res = weights(proj, hub, cache, "--json")
    assert res.returncode == 1, res.stderr
    report = json.loads(res.stdout)
    assert report["complete"] is False and "config.json" in report["missing"]
    # offline check
    assert report["cache_dir"] == str(cache / "hub") and not any(r.method == "GET" for r in hub.log)

    res = weights(proj, hub, cache, "--download", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    shards = sorted(n for n in files if n.endswith(".safetensors"))
    assert report["complete"] is True and report["missing"] == []
    assert [f["name"] for f in report["files"] if f["name"].endswith(".safetensors")] == shards
    assert report["total_bytes"] == sum(len(files[f["name"]]) for f in report["files"])
    assert "README.md" not in {f["name"] for f in report["files"]}  # only what the engine loads
    assert all(
        r.path.split("/resolve/")[1].startswith(repo.sha) for r in hub.log if "/resolve/" in r.path
    )
    snap = snapshot(cache, "org/tiny", repo.sha)
    assert (snap / shards[0]).read_bytes() == files[shards[0]]

    res = weights(proj, hub, cache, "--verify")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.rstrip().endswith("complete")


def test_missing_shard_is_named_and_only_it_is_fetched(tmp_path, hub):
    repo = hub.add_repo("org/tiny", tiny_model())
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    assert weights(proj, hub, cache, "--download").returncode == 0
    gone = "model-00002-of-00003.safetensors"
    link = snapshot(cache, "org/tiny", repo.sha) / gone
    link.resolve().unlink()  # the blob too: a shard that never arrived
    link.unlink()
    res = weights(proj, hub, cache, "--json")
    assert res.returncode == 1
    assert json.loads(res.stdout)["missing"] == [gone]
    text = weights(proj, hub, cache)
    assert f"MISSING   {gone}" in text.stdout and "INCOMPLETE" in text.stdout
    hub.log.clear()
    assert weights(proj, hub, cache, "--download").returncode == 0
    assert [
        r.path.rsplit("/", 1)[1] for r in hub.log if r.method == "GET" and "/resolve/" in r.path
    ] == [gone]


def test_corrupt_shard_fails_verify_and_download_repairs_it(tmp_path, hub):
    files = tiny_model()
    repo = hub.add_repo("org/tiny", files)
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    assert weights(proj, hub, cache, "--download").returncode == 0
    bad = "model-00001-of-00003.safetensors"
    blob = (snapshot(cache, "org/tiny", repo.sha) / bad).resolve()
    data = bytearray(blob.read_bytes())
    data[1000] ^= 0xFF  # same size, different content: only a hash can tell
    blob.write_bytes(bytes(data))
    assert weights(proj, hub, cache).returncode == 0  # sizes alone look complete
    res = weights(proj, hub, cache, "--verify", "--json")
    assert res.returncode == 1
    report = json.loads(res.stdout)
    assert [f["name"] for f in report["files"] if f["verified"] is False] == [bad]
    assert any(bad in p and "hash" in p for p in report["problems"])
    res = weights(proj, hub, cache, "--verify", "--download", "--json")
    assert res.returncode == 0, res.stderr
    assert blob.read_bytes() == files[bad]


def test_wrong_revision_is_bad_input(tmp_path, hub):
    hub.add_repo("org/tiny", tiny_model())
    proj, cache = project(tmp_path, "org/tiny", "c" * 40), tmp_path / "hf"
    res = weights(proj, hub, cache, "--download")
    assert res.returncode == 2, res.stderr
    assert "model.revision: " + "c" * 40 + " is not a revision of org/tiny" in res.stderr
    assert "Traceback" not in res.stderr


def test_gated_repo_needs_the_token_and_never_prints_it(tmp_path, hub):
    token = "hf_test_" + "x1y2z3" * 4
    repo = hub.add_repo("org/gated", tiny_model(shards=1), token=token)
    proj, cache = project(tmp_path, "org/gated", repo.sha), tmp_path / "hf"
    res = weights(proj, hub, cache, "--download", HF_TOKEN="")
    assert res.returncode == 3, res.stderr
    assert "refused org/gated" in res.stderr and "HF_TOKEN" in res.stderr
    hub.log.clear()
    res = weights(proj, hub, cache, "--download", "--verify", "--json", HF_TOKEN=token)
    assert res.returncode == 0, res.stderr
    assert token not in res.stdout + res.stderr
    asked = [r for r in hub.log if r.path.startswith(("/api/models/org/gated", "/org/gated"))]
    assert asked and all(r.authorized for r in asked)


def test_hub_unreachable_when_needed_is_3_and_not_needed_is_fine(tmp_path, hub):
    repo = hub.add_repo("org/tiny", tiny_model())
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    dead = Hub().start()  # closed at once: connections to it are refused
    url = dead.url
    dead.close()
    res = run_cli(
        "--root",
        str(proj),
        "weights",
        "tiny",
        "--verify",
        env={"CG_TEST_HF": str(cache), "HF_ENDPOINT": url},
    )
    assert res.returncode == 3 and "unreachable" in res.stderr, res.stderr
    res = run_cli(
        "--root", str(proj), "weights", "tiny", env={"CG_TEST_HF": str(cache), "HF_ENDPOINT": url}
    )
    assert res.returncode == 1  # an offline check needs no Hub: incomplete, not unreachable


def test_resume_after_an_interrupted_download(tmp_path, hub):
    big = "model-00001-of-00002.safetensors"
    files = tiny_model(shards=2, shard_bytes=24 * 2**20)
    repo = hub.add_repo("org/tiny", files)
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    hub.stall(big, 16 * 2**20)  # the first GET sends 16 MiB, then hangs until released
    env = {
        **os.environ,
        "CG_TEST_HF": str(cache),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "composegen", "--root", str(proj), "weights", "tiny", "--download"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert hub.stalled.wait(60), "the download never reached the stalled shard"
        blobs = cache / "hub" / "models--org--tiny" / "blobs"
        deadline = time.monotonic() + 30
        while (
            not any(p.stat().st_size for p in blobs.glob("*.incomplete"))
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # the user's Ctrl-C, by this test's own child pid
        _, stderr = proc.communicate(timeout=60)
    finally:
        hub.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    partial = [p.stat().st_size for p in blobs.glob("*.incomplete")]
    assert len(partial) == 1 and 0 < partial[0] < len(files[big])
    report = json.loads(weights(proj, hub, cache, "--json").stdout)
    assert report["partial_bytes"] == partial[0] and big in report["missing"]

    hub.log.clear()
    res = weights(proj, hub, cache, "--download", "--verify", "--json")
    assert res.returncode == 0, res.stderr
    assert [r.range for r in hub.gets(big)] == [f"bytes={partial[0]}-"]  # resumed, not started over
    assert (snapshot(cache, "org/tiny", repo.sha) / big).read_bytes() == files[big]


def test_model_path_directory_is_checked_instead(tmp_path, hub):
    files = tiny_model(shards=1)
    repo = hub.add_repo("org/tiny", files)
    proj, cache = (
        project(tmp_path, "org/tiny", repo.sha, path="/root/.cache/huggingface/local/tiny"),
        tmp_path / "hf",
    )
    res = weights(proj, hub, cache, "--download", "--verify", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["kind"] == "path" and report["snapshot"] == str(cache / "local" / "tiny")
    assert (cache / "local" / "tiny" / "config.json").read_bytes() == files["config.json"]


def test_unmounted_cache_and_schema(tmp_path, hub):
    text = PROFILE.format(digest="a" * 64, model="org/tiny", rev="d" * 40, path="").split(
        "  volumes:"
    )[0]
    proj = make_project(tmp_path / "p", {"tiny": text + "vllm:\n  max-model-len: 4096\n"})
    res = run_cli("--root", str(proj), "weights", "tiny")
    assert res.returncode == 2 and "nothing mounts the container's Hugging Face cache" in res.stderr
    schema = json.loads(run_cli("schema", "--report", "weights").stdout)
    assert {
        "profile",
        "model",
        "revision",
        "cache_dir",
        "snapshot",
        "complete",
        "files",
        "missing",
    } <= set(schema["properties"])
