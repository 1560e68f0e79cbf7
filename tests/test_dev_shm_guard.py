"""The suite's /dev/shm guard (tests/conftest.py, tests/support/devshm.py) counts this run's own names,
this worker's, and nothing another checkout or worker made; what the session owns goes with it."""

from __future__ import annotations

import pytest

from tests.support import devshm


@pytest.fixture(autouse=True)
def _needs_dev_shm():
    if not devshm.available():
        pytest.skip("no /dev/shm on this machine")


def test_this_runs_names_count_and_no_one_elses():
    other_run = "0" * 8 if devshm.RUN != "0" * 8 else "1" * 8
    strangers = [
        devshm.SHM / f"cg-test-{other_run}-{devshm.WORKER}-probe-0",  # another run
        devshm.SHM / f"cg-test-{devshm.RUN}-{devshm.WORKER}x-probe-0",  # another worker
        devshm.SHM / f"{devshm.PREFIX[:-1]}",  # not below the prefix
    ]
    mine = devshm.make_dir("probe")
    try:
        for path in strangers:
            path.mkdir()
        left = devshm.leftovers()
        assert mine.name in left and not {p.name for p in strangers} & set(left)
    finally:
        devshm.remove(mine)
        for path in strangers:
            devshm.remove(path)
    assert mine.name not in devshm.leftovers()


def test_what_the_session_owns_goes_with_the_session(monkeypatch):
    monkeypatch.setattr(devshm, "_session_owned", [])  # this worker's own (the aged files) stay
    owned = devshm.session_owned(devshm.make_dir("owned"))
    (owned / "psm_00000000").write_bytes(b"x")
    assert owned.name in devshm.leftovers()
    devshm.remove_session_owned()
    assert not owned.exists() and owned.name not in devshm.leftovers()
    with pytest.raises(AssertionError):
        devshm.session_owned(devshm.SHM / "not-this-runs")  # only names of this run
