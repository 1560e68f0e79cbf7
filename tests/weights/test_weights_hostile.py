"""Names from the network never become paths outside the cache: shard names from a downloaded index,
etags from the server, and links planted in the cache (the real huggingface_hub client against the
local Hub stand-in, tests/support/hub.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composegen.weights.snapshot import checked_listing, judge, list_local
from tests.support.hub import Hub, tiny_model
from tests.weights.test_weights import project, snapshot, weights

HOSTILE_SHARDS = [
    "../../../../victim",
    "/tmp/abs-victim",
    "sub/dir.safetensors",
    ".",
    "..",
    "nul\0.safetensors",
]


@pytest.fixture
def hub():
    h = Hub().start()
    yield h
    h.close()


def _index_naming(files: dict[str, bytes], shard: str) -> dict[str, bytes]:
    index = json.loads(files["model.safetensors.index.json"])
    index["weight_map"]["layers.evil.weight"] = shard
    return {
        **files,
        "model.safetensors.index.json": json.dumps(index).encode(),
        shard: b"evil bytes",
    }


@pytest.mark.parametrize("shard", HOSTILE_SHARDS)
def test_a_shard_name_that_is_not_one_component_is_refused(tmp_path, hub, shard):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    repo = hub.add_repo("org/tiny", _index_naming(tiny_model(shards=1, shard_bytes=1024), shard))
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    res = weights(proj, hub, cache, "--download", "--json")
    # the index is bad: incomplete, and says why
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert any("names the shard" in p and "refused" in p for p in report["problems"]), report[
        "problems"
    ]
    assert victim.read_text() == "precious\n" and not victim.is_symlink()
    assert not Path("/tmp/abs-victim").is_symlink()
    # never asked for
    assert not any(r.path.endswith("/" + shard) for r in hub.log if "/resolve/" in r.path)
    assert "Traceback" not in res.stderr


class EtagHub(Hub):
    """A server that answers every file with an etag that climbs out of blobs/."""

    etag = '"../../../../etag-victim"'

    def _send(self, h, status, headers, body, head):  # type: ignore[no-untyped-def]
        if "ETag" in headers:
            headers = {**headers, "ETag": self.etag, "X-Linked-Etag": self.etag}
        super()._send(h, status, headers, body, head)


def test_an_etag_that_is_not_a_blob_name_is_refused(tmp_path):
    victim = tmp_path / "etag-victim"
    victim.write_text("precious\n")
    hub = EtagHub().start()
    try:
        repo = hub.add_repo("org/tiny", tiny_model(shards=1, shard_bytes=1024))
        proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
        res = weights(proj, hub, cache, "--download")
    finally:
        hub.close()
    assert res.returncode == 3, res.stdout + res.stderr
    assert "is not a plain blob name; refused" in res.stderr and "Traceback" not in res.stderr
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("planted", ["blobs", "snapshots", "rev", "partial", "blob"])
def test_a_link_planted_in_the_cache_is_never_written_through(tmp_path, hub, planted):
    files = tiny_model(shards=1, shard_bytes=1024)
    repo = hub.add_repo("org/tiny", files)
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious\n")
    repo_dir = cache / "hub" / "models--org--tiny"
    import hashlib

    from tests.support.hub import git_sha1

    config_blob = git_sha1(files["config.json"])
    where = {
        "blobs": (repo_dir / "blobs", outside),
        "snapshots": (repo_dir / "snapshots", outside),
        "rev": (snapshot(cache, "org/tiny", repo.sha), outside),
        "partial": (repo_dir / "blobs" / f"{config_blob}.incomplete", victim),
        "blob": (repo_dir / "blobs" / config_blob, victim),
    }
    link, target = where[planted]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    res = weights(proj, hub, cache, "--download")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "never writes through links" in res.stderr and "Traceback" not in res.stderr
    assert victim.read_text() == "precious\n" and sorted(p.name for p in outside.iterdir()) == [
        "victim"
    ]
    assert (
        hashlib.sha256(victim.read_bytes()).hexdigest() == hashlib.sha256(b"precious\n").hexdigest()
    )


def test_verify_never_blocks_on_a_fifo_planted_as_a_snapshot_file(tmp_path, hub):
    import os

    files = tiny_model(shards=1, shard_bytes=1024)
    repo = hub.add_repo("org/tiny", files)
    proj, cache = project(tmp_path, "org/tiny", repo.sha), tmp_path / "hf"
    assert weights(proj, hub, cache, "--download").returncode == 0
    entry = snapshot(cache, "org/tiny", repo.sha) / "config.json"
    entry.unlink()
    os.mkfifo(entry)
    res = weights(proj, hub, cache, "--verify", "--json")
    assert res.returncode == 1, res.stderr
    assert [f["name"] for f in json.loads(res.stdout)["files"] if f["verified"] is False] == [
        "config.json"
    ]


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ([], "JSON object"),
        ({"exists": "yes", "files": {}, "partial": {}}, "exists"),
        ({"exists": True, "files": {"config.json": "12"}, "partial": {}}, "files"),
        ({"exists": True, "files": {"config.json": True}, "partial": {}}, "files"),
        ({"exists": True, "files": {}, "index": {"weight_map": {}}, "partial": {}}, "index"),
        ({"exists": True, "files": {}, "partial": {"x.incomplete": None}}, "partial"),
        ({"exists": True, "files": []}, "files"),
    ],
)
def test_a_nodes_listing_of_the_wrong_shape_is_refused_naming_the_field(answer, field):
    """A remote node's listing comes back as a container's output: every field is checked before use."""
    with pytest.raises(ValueError, match=field):
        checked_listing(answer)


def test_a_nodes_listing_of_the_right_shape_is_judged_like_a_local_one(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    local = list_local(str(tmp_path), None)
    remote = checked_listing(json.loads(json.dumps(local)))
    assert remote == local and judge(remote).missing == judge(local).missing
