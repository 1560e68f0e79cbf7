"""composegen.shm.reclaim against real files on a tmpfs: the preview, what `--yes` removes and what it must
leave (held, replaced, newly held, behind a symlinked directory, a mount point, younger than --min-age),
the bytes it frees, and its refusals: a holder's /proc cannot be read, a PID namespace of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from composegen.errors import BadInput
from composegen.shm import reclaim as shm_reclaim
from composegen.shm.reports import ShmReclaim
from composegen.shm.text import format_reclaim_text
from tests.support.shmreclaim import settled_apply, settled_reclaim
from tests.support.shmscan import MAP_AND_CLOSE, NO_LABELS, entry_named, scan_json

REPO = Path(__file__).resolve().parents[2]


def _fill_for_reclaim(shm_dir: Path, tmp_path: Path) -> Path:
    (shm_dir / "psm_deadbeef").write_bytes(b"\0" * 8192)
    (shm_dir / "sem.mp-leftover").write_bytes(b"\0" * 32)
    (shm_dir / "my-app-cache").write_bytes(b"y" * 100)
    (shm_dir / "psm_subdir").mkdir()
    (shm_dir / "psm_subdir" / "psm_inner000").write_bytes(b"inner")
    outside = tmp_path / "outside"
    outside.write_text("keep me")
    (shm_dir / "psm_link").symlink_to(outside)
    return outside


def test_reclaim_preview_removes_nothing_and_yes_removes_only_unheld_leftover_files(
    shm_dir, tmp_path, holders
):
    outside = _fill_for_reclaim(shm_dir, tmp_path)
    holders("f = open(os.path.join(D, 'psm_held0000'), 'wb')", shm_dir)
    before = sorted(os.listdir(shm_dir))
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, container_labels=lambda cid: None)
    assert isinstance(plan, ShmReclaim) and not plan.applied
    preview = plan.to_json()
    assert sorted(os.listdir(shm_dir)) == before and preview["applied"] is False
    assert sorted(c["name"] for c in preview["candidates"]) == ["psm_deadbeef", "sem.mp-leftover"]
    assert preview["candidate_bytes"] == 8192 + 4096
    reasons = {s["name"]: s["reason"] for s in preview["skipped"]}
    assert reasons["psm_held0000"].startswith("in use by pid") and "symlink" in reasons["psm_link"]

    done = settled_reclaim(
        str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, container_labels=lambda cid: None
    ).to_json()
    assert sorted(r["name"] for r in done["removed"]) == ["psm_deadbeef", "sem.mp-leftover"]
    assert done["bytes_freed"] == 8192 + 4096
    assert sorted(os.listdir(shm_dir)) == ["my-app-cache", "psm_held0000", "psm_link", "psm_subdir"]
    assert (shm_dir / "psm_subdir" / "psm_inner000").exists() and outside.read_text() == "keep me"
    assert done["remaining"]["totals"]["in-use"]["count"] == 1
    assert done["remaining"]["totals"]["unknown"]["count"] == 1

    more = settled_reclaim(
        str(shm_dir),
        yes=True,
        include_unknown=True,
        ignore_unreadable=True,
        min_age=0,
        container_labels=lambda cid: None,
    )
    assert [r.name for r in more.removed] == ["my-app-cache"]
    assert (shm_dir / "psm_link").is_symlink() and outside.read_text() == "keep me"
    assert "removed 1 files" in format_reclaim_text(more)


def test_reclaim_skips_a_file_replaced_after_the_scan(shm_dir):
    (shm_dir / "psm_swapped0").write_bytes(b"old")
    (shm_dir / "psm_stays000").write_bytes(b"old")
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, container_labels=lambda cid: None)
    replacement = shm_dir / ".new"
    replacement.write_bytes(b"new content")
    os.rename(replacement, shm_dir / "psm_swapped0")  # same name, different inode
    done = settled_apply(plan, ignore_unreadable=True, container_labels=lambda cid: None).to_json()
    assert [r["name"] for r in done["removed"]] == ["psm_stays000"]
    assert (shm_dir / "psm_swapped0").read_bytes() == b"new content"
    assert any(
        s["name"] == "psm_swapped0" and s["reason"].startswith("replaced") for s in done["skipped"]
    )


def test_reclaim_skips_a_file_that_became_held_after_the_scan(shm_dir, holders):
    (shm_dir / "psm_late0000").write_bytes(b"x")
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, container_labels=lambda cid: None)
    proc, _ = holders(MAP_AND_CLOSE + "m = map_and_close('psm_late0000', 1)", shm_dir)
    done = settled_apply(plan, ignore_unreadable=True, container_labels=lambda cid: None).to_json()
    assert done["removed"] == [] and (shm_dir / "psm_late0000").exists()
    assert done["skipped"][-1]["reason"] == f"now in use by pid {proc.pid}; put back"


def test_reclaim_refuses_a_symlinked_directory_but_scan_follows_it(shm_dir, tmp_path):
    (shm_dir / "psm_deadbeef").write_bytes(b"x")
    link = tmp_path / "shm-link"
    link.symlink_to(shm_dir)
    assert [e["name"] for e in scan_json(link)["entries"]] == ["psm_deadbeef"]
    with pytest.raises(BadInput, match="symbolic link"):
        shm_reclaim.reclaim(str(link), yes=True, ignore_unreadable=True)
    assert (shm_dir / "psm_deadbeef").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_mount_point_inside_the_directory_gets_its_own_holder_pass(shm_dir, holders):
    mnt = shm_dir / "psm_mnt"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        proc, _ = holders("fd = os.open(os.path.join(D, 'psm_mnt'), os.O_RDONLY)", shm_dir)
        entry = entry_named(scan_json(shm_dir), "psm_mnt")
        assert entry["dev"] != os.stat(shm_dir).st_dev and entry["kind"] == "dir"
        assert entry["class"] == "in-use" and [h["pid"] for h in entry["holders"]] == [proc.pid]
    finally:
        # lazy: the holder may still have it open
        subprocess.run(["umount", "-l", str(mnt)], check=True)


UNREADABLE_AS_NOBODY = """
import json, os, sys, tempfile
from composegen.shm import reclaim, scan
from composegen.errors import CheckFailed
def no_labels(cid):
    return None
# Run both once as root on an empty directory first: pydantic builds report models (and imports
# importlib.metadata) on first use, and an interpreter under /root (pyenv) is closed to nobody.
with tempfile.TemporaryDirectory(dir=os.path.dirname(sys.argv[1])) as warm:
    scan.scan(warm, container_labels=no_labels)
    try:
        reclaim.reclaim(warm, yes=True, min_age=0, container_labels=no_labels)
    except CheckFailed:
        pass  # refused while some pid (PID 1 in a sandbox) is closed even to root: same code path
os.setgroups([]); os.setgid(65534); os.setuid(65534)  # now /proc of root is closed
report = scan.scan(sys.argv[1], container_labels=no_labels)
try:
    reclaim.reclaim(sys.argv[1], yes=True, min_age=0, container_labels=no_labels)
    refused = None
except CheckFailed as exc:
    refused = exc.message
print(json.dumps({"report": report.to_json(), "refused": refused}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_unreadable_holder_is_reported_and_blocks_reclaim(shm_dir, holders):
    proc, _ = holders("f = open(os.path.join(D, 'psm_rootheld'), 'wb')", shm_dir)
    out = subprocess.run(
        [sys.executable, "-c", UNREADABLE_AS_NOBODY, str(shm_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    unreadable = {u["pid"]: u for u in result["report"]["unreadable_pids"]}
    assert proc.pid in unreadable and unreadable[proc.pid]["uid"] == 0
    assert unreadable[proc.pid]["comm"].startswith("python")
    # Seen from nobody the root-held file has no visible holder: exactly why reclaim must refuse.
    assert entry_named(result["report"], "psm_rootheld")["class"] == "leftover"
    assert result["refused"] and str(proc.pid) in result["refused"]
    assert (shm_dir / "psm_rootheld").exists()


def test_bytes_freed_counts_only_an_inodes_last_name(shm_dir):
    (shm_dir / "psm_linked00").write_bytes(b"\0" * 8192)
    os.link(shm_dir / "psm_linked00", shm_dir / "other-name")  # an unknown name keeps the blocks
    (shm_dir / "psm_single00").write_bytes(b"\0" * 4096)
    done = settled_reclaim(
        str(shm_dir), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS
    ).to_json()
    assert sorted(r["name"] for r in done["removed"]) == ["psm_linked00", "psm_single00"]
    assert done["bytes_freed"] == 4096 and (shm_dir / "other-name").stat().st_size == 8192


def test_a_fresh_file_is_left_alone_until_min_age(shm_dir):
    (shm_dir / "psm_fresh000").write_bytes(b"x")
    result = settled_reclaim(
        str(shm_dir), yes=True, ignore_unreadable=True, min_age=3600, **NO_LABELS
    )
    done = result.to_json()
    assert done["removed"] == [] and done["candidates"] == []
    [skip] = done["skipped"]
    assert skip["name"] == "psm_fresh000" and skip["reason"].startswith("changed ")
    assert skip["reason"].endswith("s ago (--min-age 3600s)")
    assert "left alone: 1 file(s) changed less than --min-age 3600s ago" in format_reclaim_text(
        result
    )
    assert (shm_dir / "psm_fresh000").exists()


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_min_age_must_be_a_finite_number_of_seconds(shm_dir, bad):
    with pytest.raises(shm_reclaim.BadInput, match="--min-age"):
        shm_reclaim.reclaim(str(shm_dir), min_age=bad, **NO_LABELS)


def test_reclaim_from_a_pid_namespace_of_its_own_refuses(shm_dir, holders):
    """From a container's PID namespace /proc shows none of the host's processes: every holder is invisible."""
    if subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True
    ).returncode:
        pytest.skip("cannot create a PID namespace here (needs root and util-linux unshare)")
    holders("f = open(os.path.join(D, 'psm_held0000'), 'wb')", shm_dir)
    argv = [
        sys.executable,
        "-m",
        "composegen",
        "shm",
        "reclaim",
        "--yes",
        "--min-age",
        "0",
        "--path",
        str(shm_dir),
    ]
    res = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert res.returncode == 1 and res.stdout == ""
    assert (
        "runs in a PID namespace of its own" in res.stderr and "nothing was removed" in res.stderr
    )
    assert (shm_dir / "psm_held0000").exists()
