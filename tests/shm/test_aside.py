"""aside.Aside: a function run in a forked child returns what it would return inline, always."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from composegen.shm.aside import Aside

PARENT = os.getpid()


def _whoami(tag: str) -> tuple:
    return tag, os.getpid()


def _fails_in_a_child() -> str:
    if os.getpid() != PARENT:
        raise RuntimeError("only in the child")
    return "computed inline"


def _not_marshalable() -> object:
    return threading.Lock if os.getpid() == PARENT else threading.Lock()


FRESH_INTERPRETER = """
import os
from composegen.shm.aside import Aside
with Aside(lambda tag: (tag, os.getpid()), "x") as pending:
    tag, pid = pending.result()
print(tag, pid != os.getpid())
"""


def test_runs_in_another_process_and_returns_the_value():
    # In a fresh interpreter: threads other tests leave behind (servers, pools) make Aside run inline here.
    res = subprocess.run(
        [sys.executable, "-c", FRESH_INTERPRETER], capture_output=True, text=True, check=True
    )
    assert res.stdout.split() == ["x", "True"]


def test_runs_inline_while_other_threads_exist():
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        with Aside(_whoami, "y") as pending:
            assert pending.result() == ("y", PARENT)
    finally:
        stop.set()
        worker.join()


@pytest.mark.parametrize(
    "function, expected",
    [(_fails_in_a_child, "computed inline"), (_not_marshalable, threading.Lock)],
)
def test_a_failing_child_falls_back_to_inline(function, expected):
    with Aside(function) as pending:
        assert pending.result() == expected


REAPS = """
import os, time
from composegen.shm.aside import Aside
with Aside(time.sleep, 0.2) as pending:
    child = pending._pid
    assert child is not None, "ran inline"
try:
    os.waitpid(child, os.WNOHANG)
    print("not reaped")
except ChildProcessError:
    print("reaped")
"""


def test_leaving_without_a_result_reaps_the_child():
    # A fresh interpreter, as above: with another test's threads alive here, Aside would run inline.
    res = subprocess.run([sys.executable, "-c", REAPS], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.split() == ["reaped"], res.stdout + res.stderr
