"""A switch journal (.composegen/edge/switch.json) is composegen's own file, but whatever it holds —
a hand edit, a pid beyond a C long (issue 49: `status` and `edge status` ended in internal errors),
any type in any field — it is read as a journal or as none, never a crash. Fuzzed as
tests/test_fuzz_inputs.py does: a fixed seed, in process."""

from __future__ import annotations

import json
import os

from hypothesis import given
from hypothesis import strategies as st

from composegen.edge import journal
from composegen.project import Project
from tests.test_fuzz_inputs import FUZZ, SCALARS

VALID = {"alias": "ds4-flash", "source": "8192-131k", "target": "4096-131k", "by": "promote",
         "emulate": True, "path": "standby", "source_emulated": True, "target_was": "asleep",
         "step": "waking 4096-131k", "pid": 1, "started": "", "since": "2026-12-06T05:00:00Z"}  # fmt: skip
HUGE = st.sampled_from([2**63, 2**64 + 1, 10**30, -(2**63) - 1, -1, 0, 2**31, 4194305])


def _project(tmp_path) -> Project:
    (tmp_path / "profiles").mkdir(exist_ok=True)
    return Project(tmp_path)


def test_a_pid_beyond_a_c_long_or_any_process_is_no_journal(tmp_path):
    project = _project(tmp_path)
    path = journal.journal_path(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    for pid in (2**63, 10**30, -5, 0, 2**22 + 1):
        path.write_text(json.dumps({**VALID, "pid": pid}))
        assert journal.read(project) is None, pid
        assert journal.interrupted(project) is None, pid
    path.write_text(json.dumps({**VALID, "pid": os.getpid()}))  # this one: alive, its owner
    assert journal.read(project) is not None and journal.interrupted(project) is None


@FUZZ
@given(field=st.sampled_from(sorted(VALID)), value=st.one_of(SCALARS, HUGE))
def test_any_value_in_any_field_is_a_journal_or_none(tmp_path_factory, field, value):
    project = _project(tmp_path_factory.mktemp("j"))
    path = journal.journal_path(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**VALID, field: value}))
    entry = journal.interrupted(project)  # never raises
    if entry is not None:
        assert 0 < entry["pid"] <= journal.PID_MAX
        assert journal.interrupted_stage(entry).endswith("run composegen edge recover")
