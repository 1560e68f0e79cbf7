"""Issue 51 #10, the small ones: outside a project the hint says how to make one; `composegen docs`
lists the pages a user reads apart from the developers' ones; `doctor` with an engine that does not
answer says so in one line and does not offer `provision` for a remote engine."""

from __future__ import annotations

import re

from tests.support.cli import run_cli
from tests.support.helpers import REPO

DEVELOPER = {"contributing", "stack", "emulator", "testing", "hostile", "benchmarks"}


def test_outside_a_project_the_hint_names_init(tmp_path):
    res = run_cli("list", cwd=tmp_path, env={"COMPOSEGEN_ROOT": ""})
    assert res.returncode == 2, res.stderr
    assert "composegen init" in res.stderr.split("hint:", 1)[1], res.stderr


def test_docs_lists_user_pages_apart_from_developer_pages():
    res = run_cli("docs")
    assert res.returncode == 0, res.stderr
    users, _, developers = res.stdout.partition("for developers")
    assert developers, res.stdout
    listed = lambda text: {line.split()[0] for line in text.splitlines() if line.startswith("  ")}  # noqa: E731
    assert listed(developers) == DEVELOPER, developers
    assert "install" in listed(users) and not DEVELOPER & listed(users), users
    pages = {p.stem for p in (REPO / "docs").glob("*.md")} - {"README"}
    assert listed(users) | listed(developers) == pages


def test_doctor_with_a_remote_engine_that_does_not_answer_is_one_line_and_no_provision():
    res = run_cli("doctor", env={"DOCKER_HOST": "tcp://127.0.0.1:9"}, timeout=120)
    assert res.returncode == 3, res.stdout + res.stderr
    engine = [line for line in res.stdout.splitlines() if line.startswith("FAIL  engine")]
    assert engine[0].endswith("tried DOCKER_HOST=tcp://127.0.0.1:9: no answer (Connection refused)")
    assert not re.search("urllib3|HTTPConnection|Traceback", res.stdout + res.stderr), res.stdout
    assert "composegen provision" not in res.stdout + res.stderr, res.stdout + res.stderr
