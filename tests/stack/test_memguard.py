"""The memory guard's pieces without an engine (meminfo parsing, the judgement, the watcher thread), and
`up`'s weights preflight for a single-node profile: fail on a real host, a warning with --emulate or
--allow-download, and the HF_HUB_OFFLINE override written only when complete and not `hf_online`."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from composegen.errors import EngineError
from composegen.profiles import resolve
from composegen.project import find_project
from composegen.stack import memguard, nodecache, placement
from tests.support.helpers import make_project

GIB = 2**30


def test_parse_meminfo_reads_this_host_and_refuses_a_file_without_memavailable(
    tmp_path, monkeypatch
):
    mem = memguard.read_local()
    assert 0 < mem.available <= mem.total
    fake = tmp_path / "meminfo"
    fake.write_text("MemTotal: 1000 kB\nMemFree: 10 kB\n")
    monkeypatch.setenv(memguard.MEMINFO_ENV, str(fake))
    with pytest.raises(EngineError, match="no MemAvailable line"):
        memguard.read_local()
    fake.write_text("MemTotal:  2048 kB\nMemAvailable:   1024 kB\n")
    assert memguard.read_local() == memguard.Memory(1024 * 1024, 2048 * 1024)


@pytest.mark.parametrize(
    "declared, detected, available, status",
    [
        (None, False, 1, "ok"),  # not unified: the guard is off
        (False, True, 1, "ok"),  # declared off wins over detection
        (None, True, 4, "fail"),
        (True, False, 4, "fail"),
        (True, False, 9, "ok"),
    ],
)
def test_judge(declared, detected, available, status):
    got, message = memguard.judge(
        "spark-2", memguard.Memory(available * GIB, 128 * GIB), 8 * GIB, declared, detected
    )
    assert got == status
    if status == "fail":
        assert message.startswith(
            f"spark-2: MemAvailable {available}.0 GiB of 128.0 GiB, below the floor of 8.0 GiB"
        )


def test_watcher_stops_once_and_names_the_node():
    readings = {"a": 20 * GIB, "b": 20 * GIB}
    stops: list[int] = []
    stopped = threading.Event()

    def stop() -> None:
        stops.append(1)
        stopped.set()

    readers = {n: (lambda n=n: memguard.Memory(readings[n], 64 * GIB)) for n in readings}
    with memguard.Watcher(8 * GIB, readers, stop, poll_s=0.01) as guard:
        guard.check()  # above the floor: nothing to say
        readings["b"] = 3 * GIB
        assert stopped.wait(10)
        with pytest.raises(
            memguard.MemoryLow, match=r"node b: MemAvailable 3\.0 GiB of 64\.0 GiB fell below"
        ):
            guard.check()
    assert stops == [1]


PROFILE = """\
image: example/vllm@sha256:{digest}
model: {{id: org/tiny, revision: "{rev}", served_name: tiny}}
service:
  port: {{host: 39999}}
  gpus: {{count: 1}}
  shm_size: 4gb
  hf_online: {online}
  volumes:
    - {{source: "{cache}", target: /root/.cache/huggingface}}
vllm:
  max-model-len: 4096
"""


def load(tmp_path: Path, online: bool = False):
    cache = tmp_path / "hf"
    text = PROFILE.format(digest="a" * 64, rev="e" * 40, cache=cache, online=str(online).lower())
    project = find_project(make_project(tmp_path / "p", {"tiny": text}))
    return (
        project,
        resolve.load(project, "tiny"),
        cache / "hub" / "models--org--tiny" / "snapshots" / ("e" * 40),
    )


def test_weights_preflight_fails_warns_and_goes_offline(tmp_path):
    project, r, snap = load(tmp_path)
    [check], complete = nodecache.preflight_checks(
        placement.deployment(project, r), None, emulate=False, allow_download=False
    )
    assert (check.name, check.status, complete) == ("weights", "fail", False)
    assert (
        "missing config.json" in check.message
        and "`composegen weights tiny --download`" in check.message
    )
    assert (
        nodecache.preflight_checks(
            placement.deployment(project, r), None, emulate=True, allow_download=False
        )[0][0].status
        == "warn"
    )
    [check], _ = nodecache.preflight_checks(
        placement.deployment(project, r), None, emulate=False, allow_download=True
    )
    assert check.status == "warn" and "--allow-download" in check.message
    assert nodecache.offline_override(project, r, None, complete) is None

    snap.mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json", "tokenizer.json", "model.safetensors"):
        (snap / name).write_text("{}")
    [check], complete = nodecache.preflight_checks(
        placement.deployment(project, r), None, emulate=False, allow_download=False
    )
    assert check.status == "ok" and complete
    path = nodecache.offline_override(project, r, None, complete)
    assert path is not None and 'HF_HUB_OFFLINE: "1"' in path.read_text()

    project, r, _ = load(tmp_path / "online", online=True)
    # hf_online keeps the engine online
    assert nodecache.offline_override(project, r, None, True) is None
