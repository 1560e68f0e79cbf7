"""edge/procstart.py's one reading of /proc/PID/stat field 22 (a process's start, in clock ticks since
boot): the switch timeline's origin (process_age) and the journal's owner check (journal._start_time)
both use it, against this machine's real /proc — a command name with spaces and parentheses
included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from composegen.edge import journal, procstart, timeline

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="Linux /proc only")


def test_this_process_s_start_is_read_once_for_the_timeline_and_the_journal():
    mine = procstart.start_ticks()
    assert isinstance(mine, int) and mine > 0
    assert procstart.start_ticks(os.getpid()) == mine
    assert journal._start_time(os.getpid()) == str(mine)
    age = timeline.process_age()
    assert age is not None and 0.0 <= age < time.monotonic()  # this process is younger than boot


def test_a_command_name_with_spaces_and_parentheses_and_a_gone_process(tmp_path):
    odd = tmp_path / "py ) (x"  # comm is the executable's name: ") (" inside it
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 5
        while "py ) (x" not in Path(f"/proc/{child.pid}/stat").read_text(encoding="ascii"):
            assert time.monotonic() < deadline, "the child never showed its name"
            time.sleep(0.02)
        started = procstart.start_ticks(child.pid)
        assert started is not None and started >= (procstart.start_ticks() or 0)
    finally:
        child.kill()
        child.wait()
    assert procstart.start_ticks(child.pid) is None  # reaped: no /proc entry
    assert journal._start_time(child.pid) == ""
