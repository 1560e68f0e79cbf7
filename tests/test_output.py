"""Everything composegen prints passes composegen.output.mask: its own lines, JSON documents (which stay
valid JSON), and the text of compose's own errors passed through (a real `docker compose` run)."""

from __future__ import annotations

import json
import uuid

import pytest

from composegen import output
from composegen.cli import exits
from composegen.errors import EngineError

TOKEN = "hf_realtoken_" + uuid.uuid4().hex[:12]


def test_lines_and_json_are_masked(monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("SOME_API_KEY", 'quo"te\\d')
    output.out(f"token {TOKEN} here")
    output.err(f"stderr {TOKEN}")
    output.emit_json({"a": f"x{TOKEN}y", TOKEN: ['quo"te\\d', 1234], "n": 1234}, pretty=False)
    got = capsys.readouterr()
    lines = got.out.splitlines()
    assert lines[0] == "token *** here" and got.err == "stderr ***\n"
    assert json.loads(lines[1]) == {"a": "x***y", "***": ["***", 1234], "n": 1234}  # still JSON
    assert TOKEN not in got.out + got.err


def test_short_values_are_not_masked(monkeypatch):
    monkeypatch.setenv("X_TOKEN", "1")
    assert output.mask("1 + 1") == "1 + 1"


@pytest.mark.docker
def test_a_real_compose_error_carrying_the_token_is_masked(tmp_path, monkeypatch, capsys):
    from composegen.stack import compose

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    file = tmp_path / "compose.yaml"
    # What a `${HF_TOKEN}` volume source did: compose reads the token as a volume name.
    file.write_text("services:\n  x:\n    image: busybox\n    volumes: ['${HF_TOKEN}:/x']\n")
    stack = compose.Stack(f"cg-mask-{uuid.uuid4().hex[:8]}", [file])
    with pytest.raises(EngineError) as failed:
        stack.up()
    assert TOKEN in (failed.value.details or "")  # the class: compose's own text names the token

    def command() -> None:
        raise failed.value

    assert exits.run(command) == 3
    printed = capsys.readouterr().err
    assert TOKEN not in printed and "***" in printed and "undefined volume" in printed, printed
