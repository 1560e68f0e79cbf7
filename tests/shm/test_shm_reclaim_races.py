"""`shm reclaim` never removes a held file (issue 14, class 10), against real processes: openers racing
the reclaim and rename-swaps racing it (--min-age 0), a swap between the last stat and the rename, and
putting back: after Ctrl-C, and never over a file created meanwhile. Threads: test_shm_reclaim_threads.py;
an fd in flight over a unix socket: test_shm_hiddenrefs.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from composegen.shm import procscan
from composegen.shm import reclaim as shm_reclaim
from tests.support.shmreclaim import settled_apply, settled_reclaim
from tests.support.shmscan import NO_LABELS

LATE_OPENER = """
held = {}
def race():
    names = sorted(n for n in os.listdir(D) if n.startswith('psm_'))
    for name in names[::3]:  # a third of the files, opened while the reclaim runs
        try:
            fd = os.open(os.path.join(D, name), os.O_RDWR)
        except FileNotFoundError:
            continue  # removed, or renamed aside for the moment: not held
        held[name] = fd
        time.sleep(0.0002)
    return len(held)
def report():
    return {name: [os.fstat(fd).st_nlink, os.fstat(fd).st_ino] for name, fd in held.items()}
handlers = {'race': race, 'report': report}
"""

RENAME_SWAP = """
held = {}
def race():
    names = sorted(n for n in os.listdir(D) if n.startswith('psm_'))
    for name in names[::3]:  # write a new version aside, keep it open, rename it over the old one
        tmp = os.path.join(D, '.new-' + name)
        fd = os.open(tmp, os.O_CREAT | os.O_RDWR, 0o600)
        os.write(fd, b'new')
        os.rename(tmp, os.path.join(D, name))
        held[name] = fd
        time.sleep(0.0002)
    return len(held)
def report():
    return {name: [os.fstat(fd).st_nlink, os.fstat(fd).st_ino] for name, fd in held.items()}
handlers = {'race': race, 'report': report}
"""


def _race(shm_dir: Path, actors, code: str, rounds: int, files: int) -> int:
    """Rounds of: `files` leftovers, an actor racing a real reclaim (--min-age 0) over them. Asserts every
    file the actor holds is still there under its name and everything else is gone; returns how many
    files the actor held in all."""
    held_total = 0
    for round_ in range(rounds):
        directory = shm_dir / f"round{round_}"
        directory.mkdir()
        for i in range(files):
            (directory / f"psm_{i:08x}").write_bytes(b"old")
        actor = actors(code, directory)
        actor.proc.stdin.write("race\n")
        actor.proc.stdin.flush()  # the actor starts now; the reclaim right after
        settled_reclaim(str(directory), yes=True, ignore_unreadable=True, min_age=0, **NO_LABELS)
        assert actor.proc.stdout.readline().strip().isdigit()
        held = actor.ask("report")
        unlinked = sorted(name for name, (nlink, _) in held.items() if nlink == 0)
        assert unlinked == [], f"round {round_}: held files removed: {unlinked}"
        names = sorted(n for n in os.listdir(directory) if not n.startswith(".new-"))
        assert names == sorted(held), f"round {round_}: kept {len(names)} files, {len(held)} held"
        # the held inode, by its name
        assert all(os.stat(directory / n).st_ino == held[n][1] for n in names)
        actor.close()
        held_total += len(held)
    return held_total


def test_openers_racing_the_reclaim_never_lose_a_held_file(shm_dir, actors):
    assert _race(shm_dir, actors, LATE_OPENER, rounds=15, files=300) > 0


def test_rename_swaps_racing_the_reclaim_never_lose_a_held_file(shm_dir, actors):
    assert _race(shm_dir, actors, RENAME_SWAP, rounds=30, files=300) > 0


def test_a_swap_between_stat_and_rename_is_put_back(shm_dir, holders, monkeypatch):
    """The window (d) needs, made certain: the file is swapped right after the reclaim's last stat."""
    (shm_dir / "psm_swapme00").write_bytes(b"old")
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, **NO_LABELS)
    holders("f = open(os.path.join(D, '.new'), 'wb'); f.write(b'new'); f.flush()", shm_dir)
    real_stat = os.stat

    def stat_then_swap(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if path == "psm_swapme00" and (shm_dir / ".new").exists():
            os.rename(shm_dir / ".new", shm_dir / "psm_swapme00")
        return result

    monkeypatch.setattr(shm_reclaim.os, "stat", stat_then_swap)
    done = settled_apply(plan, ignore_unreadable=True, **NO_LABELS).to_json()
    assert done["removed"] == [] and (shm_dir / "psm_swapme00").read_bytes() == b"new"
    assert done["skipped"][-1] == {
        "name": "psm_swapme00",
        "reason": "replaced during the reclaim; put back",
    }
    assert sorted(os.listdir(shm_dir)) == ["psm_swapme00"]


def test_an_interrupted_reclaim_puts_every_file_back(shm_dir, monkeypatch):
    for i in range(5):
        (shm_dir / f"psm_{i:08x}").write_bytes(b"x")
    before = {n: os.stat(shm_dir / n).st_ino for n in os.listdir(shm_dir)}
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, **NO_LABELS)
    aside = []

    # Ctrl-C during the holder pass, every candidate renamed aside
    def interrupted(*args, **kwargs):
        aside.extend(os.listdir(shm_dir))
        raise KeyboardInterrupt

    monkeypatch.setattr(procscan, "index_holders", interrupted)
    with pytest.raises(KeyboardInterrupt):
        shm_reclaim.apply_plan(plan, ignore_unreadable=True, **NO_LABELS)
    assert len(aside) == 5 and all(n.startswith(shm_reclaim.QUARANTINE_PREFIX) for n in aside)
    assert {n: os.stat(shm_dir / n).st_ino for n in os.listdir(shm_dir)} == before


def test_a_held_file_is_never_put_back_over_a_file_created_meanwhile(shm_dir, holders, monkeypatch):
    (shm_dir / "psm_taken000").write_bytes(b"old")
    plan = shm_reclaim.reclaim(str(shm_dir), min_age=0, **NO_LABELS)
    real_index = procscan.index_holders

    # while the candidate is aside: someone holds it, another file takes its name
    def meanwhile(*args, **kwargs):
        if not (shm_dir / "psm_taken000").exists():
            [hidden] = os.listdir(shm_dir)
            holders(f"f = open(os.path.join(D, {hidden!r}), 'rb')", shm_dir)
            (shm_dir / "psm_taken000").write_bytes(b"new")
        return real_index(*args, **kwargs)

    monkeypatch.setattr(procscan, "index_holders", meanwhile)
    done = settled_apply(plan, ignore_unreadable=True, **NO_LABELS).to_json()
    [hidden] = [n for n in os.listdir(shm_dir) if n.startswith(shm_reclaim.QUARANTINE_PREFIX)]
    assert done["removed"] == [] and done["skipped"][-1]["reason"].endswith(
        f"a new file took its name meanwhile: kept as {hidden}"
    )
    assert (shm_dir / "psm_taken000").read_bytes() == b"new" and (
        shm_dir / hidden
    ).read_bytes() == b"old"
