"""Every weights download has a total deadline and a size cap: the real huggingface_hub client against a
local Hub stand-in whose shard server drips, never ends, or sends more than the Hub announced. Each gets
one clear line, exit 3, no partial file in the cache, and no hang."""

from __future__ import annotations

import time

import pytest

from composegen.weights import transfer
from tests.support.hub import Hub, tiny_model
from tests.weights.test_weights import project, snapshot, weights

SHARD = "model-00001-of-00001.safetensors"
SHARD_BYTES = 4096


class LyingHub(Hub):
    """The Hub stand-in whose shard GETs misbehave as `how` says; HEAD and the listing stay honest."""

    how = "honest"

    def _file(self, h, name, repo, data, head):  # type: ignore[no-untyped-def]
        if head or name != SHARD or self.how == "honest":
            return super()._file(h, name, repo, data, head)
        h.send_response(200)
        h.send_header("X-Repo-Commit", repo.sha)
        if self.how == "endless":
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(len(data) * (256 if self.how == "oversize" else 1)))
        h.end_headers()
        try:
            # the announced length, one byte every 50 ms: no read ever times out
            if self.how == "drip":
                for i in range(len(data)):
                    h.wfile.write(data[i : i + 1])
                    h.wfile.flush()
                    time.sleep(0.05)
            elif self.how == "endless":
                while True:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            elif self.how == "oversize":
                for _ in range(256):
                    h.wfile.write(data)
        except OSError:  # the client went away: the lie was caught
            pass
        h.close_connection = True


@pytest.fixture
def hub():
    h = LyingHub().start()
    yield h
    h.close()


def _incomplete(cache, model: str) -> list[str]:
    blobs = cache / "hub" / f"models--{model.replace('/', '--')}" / "blobs"
    return (
        sorted(p.name for p in blobs.iterdir() if p.name.endswith(".incomplete"))
        if blobs.is_dir()
        else []
    )


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("drip", "did not finish within 3 s"),
        ("endless", f"sent more than {SHARD_BYTES} bytes (the expected size)"),
        ("oversize", f"sent more than {SHARD_BYTES} bytes (the expected size)"),
    ],
)
def test_a_shard_server_that_breaks_the_budget_is_stopped(tmp_path, hub, how, said):
    hub.how = how
    repo = hub.add_repo("org/tiny", tiny_model(shards=1, shard_bytes=SHARD_BYTES))
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    started = time.monotonic()
    res = weights(proj, hub, cache, "--download", COMPOSEGEN_DOWNLOAD_DEADLINE_S="3")
    took = time.monotonic() - started
    assert res.returncode == 3, res.stdout + res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("composegen:")]
    assert errors == [f"composegen: {SHARD}: the server at {hub.url} {said}; download stopped"], (
        res.stderr
    )
    assert "Traceback" not in res.stderr
    assert _incomplete(cache, "org/tiny") == []  # no partial file left to resume a liar's bytes
    assert not (snapshot(cache, "org/tiny", repo.sha) / SHARD).exists()
    assert took < 25, took  # no hang: the 3 s deadline (or the cap) ended it

    hub.how = "honest"  # the next run against an honest server completes from scratch
    assert weights(proj, hub, cache, "--download").returncode == 0
    assert (snapshot(cache, "org/tiny", repo.sha) / SHARD).stat().st_size == SHARD_BYTES


class SizeLiarHub(LyingHub):
    """The listing says one size, the file's own metadata another."""

    def _send(self, h, status, headers, body, head):  # type: ignore[no-untyped-def]
        if "X-Linked-Size" in headers:
            headers = {**headers, "X-Linked-Size": str(int(headers["X-Linked-Size"]) * 2)}
        super()._send(h, status, headers, body, head)


def test_a_file_whose_metadata_contradicts_the_listing_is_refused(tmp_path):
    hub = SizeLiarHub().start()
    try:
        repo = hub.add_repo("org/tiny", tiny_model(shards=1, shard_bytes=SHARD_BYTES))
        proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
        res = weights(proj, hub, cache, "--download")
    finally:
        hub.close()
    assert res.returncode == 3, res.stdout + res.stderr
    assert (
        f"the Hub lists {SHARD_BYTES} bytes but the file announces {SHARD_BYTES * 2}; refused"
        in res.stderr
    )
    assert "Traceback" not in res.stderr and _incomplete(cache, "org/tiny") == []


def test_the_budget_of_a_file_of_unknown_size_is_the_configured_cap(monkeypatch):
    monkeypatch.delenv("COMPOSEGEN_DOWNLOAD_DEADLINE_S", raising=False)
    monkeypatch.setenv("COMPOSEGEN_DOWNLOAD_MAX_BYTES", str(2**20))
    assert transfer.budget_for(None) == transfer.Budget(2**20, 121.0, cap_known=False)
    assert transfer.budget_for(10 * 2**20) == transfer.Budget(10 * 2**20, 130.0, cap_known=True)
    monkeypatch.setenv("COMPOSEGEN_DOWNLOAD_MAX_BYTES", "nan")
    with pytest.raises(transfer.BadInput, match="COMPOSEGEN_DOWNLOAD_MAX_BYTES"):
        transfer.budget_for(None)


def test_a_write_past_the_configured_cap_stops_the_transfer(tmp_path):
    budget = transfer.Budget(10, 5.0, cap_known=False)
    stop = pytest.raises(
        transfer.OverBudget, match=r"more than 10 bytes \(COMPOSEGEN_DOWNLOAD_MAX_BYTES\)"
    )
    with open(tmp_path / "part", "wb") as fh, stop:
        transfer.run(lambda f: [f.write(b"x" * 4) for _ in range(5)] and None, fh, budget)
    assert (tmp_path / "part").stat().st_size == 8
