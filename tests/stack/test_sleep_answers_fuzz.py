"""Whatever an engine answers to /is_sleeping, /sleep, /wake_up and /collective_rpc — junk JSON,
wrong types, huge bodies, odd status lines, a failed exec — the sleep-mode client
(composegen/stack/sleepmode.py) says what it found or raises composegen's error: never an internal
error. Fuzzed at its two data boundaries: the `docker exec` client's output and the private
network's reply."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from composegen.errors import ComposegenError
from composegen.project import Project
from composegen.stack import sleepmode
from composegen.stack.facts import ContainerFacts
from composegen.wire.http import Reply
from tests.test_fuzz_inputs import FUZZ, VALUES

CTR = ContainerFacts(id="c1", name="e1", state="running", running=True, health=None, restarts=0,
                     exit_code=None, started_at=None, labels={}, image_id="i", networks=(),
                     host_port=None)  # fmt: skip
R = SimpleNamespace(
    name="sb",
    profile=SimpleNamespace(
        standby=SimpleNamespace(level=1),
        service=SimpleNamespace(
            port=SimpleNamespace(container=8000), gpus=SimpleNamespace(ids=list)
        ),
    ),
)
STATUS = st.one_of(st.sampled_from([200, 404, 500, 503]), st.integers(-(2**40), 2**40))
BODY = st.one_of(
    VALUES.map(json.dumps),  # wrong types: {"is_sleeping": "yes"}, [1], 1e999, null…
    st.text(max_size=60),
    st.builds(lambda n, c: c * n, st.integers(0, 1 << 20), st.sampled_from(["x", "{", "\n", "é"])),
    st.just('{"is_sleeping": true}'),
    st.builds(
        "Sleep mode freed 1 GiB memory, {} GiB memory is still in use.".format,
        st.sampled_from(["0.87", "1.2.3", ".", "9" * 400, "1e999"]),
    ),
)
# the exec client's stdout (its status line, then the answer) with its exit code, or a peer's reply
EXEC = st.tuples(st.sampled_from([0, 1, 137]), st.one_of(
    st.builds(lambda s, b: f"{s}\n{b}", STATUS, BODY), st.text(max_size=40)))  # fmt: skip
PEER = st.builds(lambda s, b: Reply(s % 1000, b.encode("utf-8", "replace")), STATUS, BODY)


@FUZZ
@given(
    answers=st.lists(st.one_of(EXEC, PEER), min_size=1, max_size=4), level=st.sampled_from([1, 2])
)
def test_no_sleep_mode_answer_is_an_internal_error(tmp_path_factory, monkeypatch, answers, level):
    project = Project(tmp_path_factory.mktemp("sleep"))
    queue = list(answers)

    def next_answer():
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def exec_output(ctr, argv, max_bytes):
        found = next_answer()
        return found if isinstance(found, tuple) else (0, f"{found.status}\n{found.body.decode()}")

    def fetch(method, path, data=None, deadline_s=None, cap=None):
        found = next_answer()
        return found if isinstance(found, Reply) else Reply(200, found[1].encode())

    peer = SimpleNamespace(fetch=fetch, host="172.18.0.2")
    monkeypatch.setattr(sleepmode.engine, "exec_output", exec_output)
    monkeypatch.setattr(sleepmode.engine, "logs", lambda ctr, tail: exec_output(ctr, [], 0)[1])
    monkeypatch.setattr(sleepmode, "_private_peer", lambda c, p: peer if len(queue) % 2 else None)
    monkeypatch.setattr(
        sleepmode, "time", SimpleNamespace(sleep=lambda s: None, monotonic=time.monotonic)
    )
    for call in (
        lambda: sleepmode.is_sleeping(CTR, 8000),
        lambda: sleepmode.is_sleeping(CTR, 8000, strict=True),
        lambda: sleepmode.state(project, R, CTR, strict=True),
        lambda: sleepmode.sleep(project, sleepmode.Handle(R, CTR, None), level),
        lambda: sleepmode.wake(project, R, CTR, level),
    ):
        try:
            found = call()
        except ComposegenError:
            continue
        assert found is None or isinstance(found, bool | float | sleepmode.Asleep)
        if isinstance(found, sleepmode.Asleep):
            assert found.residue_gib is None or 0 <= found.residue_gib < float("inf")
