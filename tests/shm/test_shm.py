"""composegen.shm.scan / composegen.shm.procscan against real processes holding real files on a tmpfs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from composegen.errors import BadInput
from composegen.shm import fastjson, listing, procscan
from composegen.shm import scan as shm
from composegen.shm.reports import ShmScan, Unreadable
from tests.support.shmscan import MAP_AND_CLOSE, entry_named, scan_json, scan_model

REPO = Path(__file__).resolve().parents[2]
CID = "ab" * 32


def test_open_fd_holder_is_found(shm_dir, holders):
    proc, _ = holders(
        "f = open(os.path.join(D, 'psm_0a0b0c0d'), 'wb'); f.write(b'x' * 5000); f.flush()", shm_dir
    )
    entry = entry_named(scan_json(shm_dir), "psm_0a0b0c0d")
    assert entry["class"] == "in-use" and entry["pattern"] == "psm"
    assert [(h["pid"], h["how"]) for h in entry["holders"]] == [(proc.pid, ["fd"])]
    assert entry["allocated_bytes"] >= 5000 and entry["size_bytes"] == 5000


def test_mapped_file_with_closed_fd_is_found_through_maps(shm_dir, holders):
    proc, _ = holders(MAP_AND_CLOSE + "m = map_and_close('nccl-03v824')", shm_dir)
    entry = entry_named(scan_json(shm_dir), "nccl-03v824")
    assert entry["class"] == "in-use"
    assert [(h["pid"], h["how"]) for h in entry["holders"]] == [(proc.pid, ["map"])]


def test_renamed_mapped_file_is_matched_by_inode_not_name(shm_dir, holders):
    proc, _ = holders(
        MAP_AND_CLOSE + "m = map_and_close('before')\nos.rename(os.path.join(D, 'before'), "
        "os.path.join(D, 'psm_after000'))",
        shm_dir,
    )
    assert not Path(f"/proc/{proc.pid}/fd").is_dir() or all(
        "psm_after000" not in os.readlink(f"/proc/{proc.pid}/fd/{fd}")
        for fd in os.listdir(f"/proc/{proc.pid}/fd")
    )
    entry = entry_named(scan_json(shm_dir), "psm_after000")
    assert entry["class"] == "in-use" and entry["holders"][0]["pid"] == proc.pid


def test_glibc_semaphore_style_link_then_unlink_is_in_use(shm_dir, holders):
    # glibc sem_open: create sem.XXXXXX, map it, link it to the final name, unlink the temporary.
    proc, _ = holders(
        MAP_AND_CLOSE + "m = map_and_close('sem.Nuc6Q6')\n"
        "os.link(os.path.join(D, 'sem.Nuc6Q6'), os.path.join(D, 'sem.mp-k2x9_abc'))\n"
        "os.unlink(os.path.join(D, 'sem.Nuc6Q6'))",
        shm_dir,
    )
    maps = Path(f"/proc/{proc.pid}/maps").read_text()
    assert "sem.Nuc6Q6 (deleted)" in maps and "sem.mp-k2x9_abc" not in maps
    report = scan_json(shm_dir)
    assert [e["name"] for e in report["entries"]] == ["sem.mp-k2x9_abc"]
    entry = report["entries"][0]
    assert entry["class"] == "in-use" and entry["pattern"] == "sem-mp"
    assert entry["holders"][0]["how"] == ["map"]


def test_real_multiprocessing_semaphore_in_dev_shm_is_in_use(holders, tmp_path):
    proc, lines = holders(
        "import multiprocessing as mp\nlock = mp.get_context('spawn').Lock()\nprint(lock._semlock.name)",
        tmp_path,
    )
    name = "sem." + lines[0].lstrip("/")
    entry = entry_named(scan_json("/dev/shm"), name)
    assert entry["class"] == "in-use" and entry["pattern"] == "sem-mp"
    assert any(h["pid"] == proc.pid and "map" in h["how"] for h in entry["holders"])


def test_classes_kinds_owner_and_symlink(shm_dir, tmp_path):
    (shm_dir / "psm_deadbeef").write_bytes(b"\0" * 8192)
    (shm_dir / "vllm_offload_1f2e.mmap.2").write_bytes(b"x")
    (shm_dir / "my-app-cache").write_bytes(b"y")
    (shm_dir / "psm_subdir").mkdir()
    outside = tmp_path / "target"
    outside.write_text("keep me")
    (shm_dir / "psm_link").symlink_to(outside)
    foreign = shm_dir / "torch_123_456"
    foreign.write_bytes(b"z")
    os.chown(foreign, 65534, 65534)
    report = scan_json(shm_dir)
    by_name = {e["name"]: e for e in report["entries"]}
    assert {n: (e["class"], e["kind"]) for n, e in by_name.items()} == {
        "psm_deadbeef": ("leftover", "file"),
        "vllm_offload_1f2e.mmap.2": ("leftover", "file"),
        "my-app-cache": ("unknown", "file"),
        "psm_subdir": ("leftover", "dir"),
        "psm_link": ("leftover", "symlink"),
        "torch_123_456": ("leftover", "file"),
    }
    assert by_name["psm_deadbeef"]["allocated_bytes"] == 8192
    # the link, not its target
    assert by_name["psm_link"]["inode"] == os.lstat(shm_dir / "psm_link").st_ino
    assert (by_name["torch_123_456"]["uid"], by_name["torch_123_456"]["user"]) == (65534, "nobody")
    assert report["totals"]["leftover"]["count"] == 5 and report["totals"]["unknown"]["count"] == 1
    assert report["totals"]["all"]["allocated_bytes"] == sum(
        e["allocated_bytes"] for e in report["entries"]
    )
    fs = report["filesystem"]
    assert 0 < fs["free_bytes"] <= fs["total_bytes"]


def test_entry_vanishing_between_listdir_and_stat_is_skipped(shm_dir, monkeypatch):
    (shm_dir / "psm_real0000").write_bytes(b"x")
    real_listdir = os.listdir
    # Only the listing of the scanned directory (an fd) gains a name that is gone by the time of stat.
    ghost = ["psm_ghost000"]
    monkeypatch.setattr(
        listing.os, "listdir", lambda d: real_listdir(d) + (ghost if isinstance(d, int) else [])
    )
    report = scan_json(shm_dir)
    assert [e["name"] for e in report["entries"]] == ["psm_real0000"] and report["vanished"] == 1


def test_scan_survives_files_created_and_removed_meanwhile(shm_dir):
    churn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import os, sys, time
        d, end = sys.argv[1], time.time() + 3
        i = 0
        while time.time() < end:
            p = os.path.join(d, f'psm_{i % 50:08x}')
            open(p, 'wb').close()
            if i % 2: os.unlink(p) if os.path.exists(p) else None
            i += 1
    """),
            str(shm_dir),
        ]
    )
    try:
        deadline = time.time() + 2
        while time.time() < deadline:
            report = scan_json(shm_dir)
            assert all(e["kind"] in ("file", "dir", "symlink", "other") for e in report["entries"])
    finally:
        churn.wait(timeout=10)


@pytest.mark.parametrize(
    "make, problem",
    [(lambda p: p / "missing", "does not exist"), (lambda p: p / "afile", "not a directory")],
)
def test_bad_paths_are_bad_input(tmp_path, make, problem):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(BadInput, match=problem) as info:
        shm.scan(str(make(tmp_path)))
    assert info.value.exit_code == 2


def _fake_proc(root: Path, pid: int, *, cgroup: str, fds=(), maps="", comm="vllm") -> None:
    pdir = root / str(pid)
    (pdir / "fd").mkdir(parents=True)
    for number, target in enumerate(fds, start=3):
        (pdir / "fd" / str(number)).symlink_to(target)
    (pdir / "maps").write_text(maps)
    (pdir / "cgroup").write_text(cgroup)
    (pdir / "comm").write_text(comm + "\n")
    (pdir / "status").write_text(f"Name:\t{comm}\nUid:\t1000\t1000\t1000\t1000\n")


def test_injected_proc_root_gives_container_attribution(shm_dir, tmp_path):
    by_fd, by_map = shm_dir / "psm_0000fd00", shm_dir / "vllm_offload_e1.mmap"
    by_fd.write_bytes(b"a")
    by_map.write_bytes(b"b")
    st = os.stat(by_map)
    dev = procscan.maps_dev_token(st.st_dev).decode()
    maps = (
        f"7f00-7f10 rw-s 00000000 {dev} {st.st_ino}    /dev/shm/vllm_offload_e1.mmap.tmp (deleted)\n"
        "7f10-7f20 r-xp 00000000 fd:01 1234    /usr/lib/libc.so.6\n"
    )
    fake = tmp_path / "proc"
    _fake_proc(fake, 4242, cgroup=f"0::/system.slice/docker-{CID}.scope\n", fds=[by_fd], maps=maps)
    _fake_proc(
        fake,
        4343,
        cgroup="4:memory:/process_api/49c9fa80070be3551817670fc990cc68\n0::/\n",
        fds=[by_map],
    )
    asked = []

    def labels(cid):
        asked.append(cid)
        return {"com.docker.compose.project": "r33", "io.composegen.profile": "r33-4096"}

    model = shm.scan(str(shm_dir), container_labels=labels, proc_root=str(fake))
    report = model.to_json()
    fd_holder = entry_named(report, "psm_0000fd00")["holders"]
    assert fd_holder == [
        {
            "pid": 4242,
            "comm": "vllm",
            "how": ["fd"],
            "container_id": CID,
            "compose_project": "r33",
            "composegen_profile": "r33-4096",
        }
    ]
    map_holders = {h["pid"]: h for h in entry_named(report, "vllm_offload_e1.mmap")["holders"]}
    assert map_holders[4242]["how"] == ["map"] and map_holders[4343]["how"] == ["fd"]
    assert (
        map_holders[4343]["container_id"] is None and map_holders[4343]["compose_project"] is None
    )
    assert set(asked) == {CID}
    assert report["unreadable_pids"] == []
    assert "[r33]" in shm.format_text(model)


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"12:memory:/docker/{CID}\n0::/\n", CID),
        (f"0::/system.slice/docker-{CID}.scope\n", CID),
        (f"0::/kubepods/burstable/pod1/cri-containerd-{CID}.scope\n", CID),
        (f"0::/docker/{'cd' * 32}/docker/{CID}\n", CID),
        ("4:memory:/process_api/49c9fa80070be3551817670fc990cc68\n0::/\n", None),
        (f"0::/user.slice/x{CID}f\n", None),
    ],
)
def test_container_id_from_cgroup(text, expected):
    assert procscan.container_id_from_cgroup(text) == expected


@pytest.mark.parametrize(
    "name, pattern",
    [
        ("psm_58e49b37", "psm"),
        ("sem.mp-k2x9_abc", "sem-mp"),
        ("sem.loky-12-ab", "sem-loky"),
        ("nccl-03v824", "nccl"),
        ("torch_123_456_0", "torch"),
        ("vllm_offload_ab12.mmap", "vllm-offload"),
        ("vllm_offload_ab12.mmap.3", "vllm-offload"),
        ("vllm_ec_ab12.mmap", "vllm-ec"),
        ("pym-12-xyz", "pym"),
        ("vllm_offload_ab12.mmapx", None),
        ("psm", None),
        ("sem.Nuc6Q6", None),
        ("random.bin", None),
    ],
)
def test_leftover_patterns(name, pattern):
    assert shm.match_pattern(name) == pattern
    globs = [f"`{p['glob']}`" for p in shm.LEFTOVER_PATTERNS if p["id"] == pattern]
    assert all(glob in shm.patterns_table_markdown() for glob in globs) and len(globs) == bool(
        pattern
    )


def test_check_budget_warnings(shm_dir):
    (shm_dir / "psm_deadbeef").write_bytes(b"\0" * 8192)
    report = scan_model(shm_dir)
    fs = report.filesystem
    assert shm.check_budget(report, 0, 1 << 30) == []
    [too_big] = shm.check_budget(report, fs.total_bytes + 1, 1 << 30)
    assert "in total" in too_big
    [short] = shm.check_budget(report, fs.free_bytes + 1, 1 << 30)
    assert "free but the profile needs" in short and "reclaiming 1 leftovers" in short
    [piled] = shm.check_budget(report, 0, 4096)
    assert "1 leftover files use 8.0 KiB" in piled


def test_format_text_lists_entries_and_totals(shm_dir, holders):
    holders("f = open(os.path.join(D, 'psm_held0000'), 'wb')", shm_dir)
    (shm_dir / "stray").write_bytes(b"x")
    text = shm.format_text(scan_model(shm_dir))
    assert all(word in text for word in ("psm_held0000", "stray", "in-use: 1", "unknown: 1"))


def test_ten_thousand_entries_with_a_few_mapped(shm_dir, holders):
    for i in range(10_000):
        (shm_dir / f"psm_{i:08x}").touch()
    proc, _ = holders(
        MAP_AND_CLOSE + "ms = [map_and_close(f'psm_{i:08x}', 1) for i in range(0, 10000, 500)]",
        shm_dir,
    )
    report = scan_json(shm_dir)
    held = [e["name"] for e in report["entries"] if e["class"] == "in-use"]
    assert held == [f"psm_{i:08x}" for i in range(0, 10_000, 500)]
    assert all(e["holders"][0]["pid"] == proc.pid for e in report["entries"] if e["holders"])
    assert (
        report["totals"]["leftover"]["count"] == 10_000 - 20
        and report["totals"]["all"]["count"] == 10_000
    )


# with enough entries the forked child stats a share
@pytest.mark.parametrize("plain", [0, listing.SPLIT_FROM])
def test_scan_json_is_the_scan_report_as_compact_sorted_json(
    shm_dir, holders, tmp_path, monkeypatch, plain
):
    # the child stats half of a large listing
    monkeypatch.setattr(listing, "PROC_COST_IN_ENTRIES", 0)
    for i in range(plain):
        # sorted first: the named entries fall in the child's share
        (shm_dir / f"aa_plain{i:05d}").touch()
    names = [
        "psm_plain000",
        'quote"back\\slash',
        "tab\there",
        "caf\u00e9-\u2603",
        "sem.mp-x",
        "unknown.bin",
        "vllm_offload_e1.mmap.2",
        "nl\nname",
    ]
    for name in names:
        (shm_dir / name).write_bytes(b"x" * 3)
    # mtime in the future: age 0.0
    os.utime(shm_dir / "psm_plain000", (time.time() + 3600, time.time() + 3600))
    with open(os.fsencode(str(shm_dir)) + b"/psm_\xff\xfe", "wb") as handle:  # not UTF-8
        handle.write(b"y")
    if os.geteuid() == 0:
        os.chown(shm_dir / "unknown.bin", 54321, -1)  # a uid with no passwd entry: user null
    (shm_dir / "psm_dir").mkdir()
    (shm_dir / "psm_link").symlink_to(tmp_path)
    holders("f = open(os.path.join(D, 'psm_held0000'), 'wb')", shm_dir)
    frozen = time.time()
    # same ages and scanned_at in both scans
    monkeypatch.setattr(listing.time, "time", lambda: frozen)

    summary, pieces = fastjson.scan_json(str(shm_dir), container_labels=lambda cid: None)
    text = "".join(pieces)
    # byte for byte
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    report = scan_json(shm_dir)
    assert any(e["holders"] for e in report["entries"]) and any(
        e["age_seconds"] == 0.0 for e in report["entries"]
    )
    if os.geteuid() == 0:
        assert entry_named(report, "unknown.bin")["user"] is None
    # Other processes share /dev/shm (its free space) and come and go (unreadable ones): not the subject here.
    for doc in (report, summary, parsed := json.loads(text)):
        for key in ("scan_seconds", "filesystem", "unreadable_pids"):
            doc.pop(key)
    assert parsed == report and summary == {k: v for k, v in report.items() if k != "entries"}


def test_docs_list_every_leftover_pattern():
    assert shm.patterns_table_markdown() in (REPO / "docs" / "shm.md").read_text()


def test_down_carries_the_scan_model_and_prints_it_as_the_scan_did(shm_dir):
    from composegen.stack.reports import DownReport

    (shm_dir / "psm_deadbeef").write_bytes(b"x")
    scan = scan_model(shm_dir)
    down = DownReport(name="p", project="composegen-p", removed=[], shm=scan)
    assert isinstance(down.shm, ShmScan) and down.to_json()["shm"] == scan.to_json()
    # it reads back typed
    assert DownReport.model_validate_json(down.model_dump_json(by_alias=True)).shm == scan


def test_down_shows_one_line_when_nothing_is_left_to_reclaim(shm_dir, holders):
    """`down` with nothing to reclaim: no empty table header, no warning about unreadable processes
    (PID 1 of a container); a leftover brings the table (and the warning) back."""
    holders("f = open(os.path.join(D, 'psm_held0001'), 'wb')", shm_dir)
    pid1 = Unreadable.model_validate({"pid": 1, "comm": "init", "uid": 0, "denied": ["fd"]})
    held = scan_model(shm_dir).model_copy(update={"unreadable_pids": [pid1]})
    assert held.unreadable_pids and shm.format_text(held).startswith("CLASS")
    text = shm.format_after_down(held)
    assert "\n" not in text and "CLASS" not in text and "warning" not in text, text
    assert text.startswith(f"{shm_dir}: nothing to reclaim (in-use 1: `composegen shm` lists them)")
    (shm_dir / "psm_0123abcd").write_bytes(b"x")  # a leftover: nothing holds it
    left = scan_model(shm_dir).model_copy(update={"unreadable_pids": held.unreadable_pids})
    text = shm.format_after_down(left)
    assert (
        text.startswith("CLASS") and "psm_0123abcd" in text and "warning: holders unknown" in text
    )
