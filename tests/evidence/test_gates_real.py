"""Gate failure reasons on a real vLLM 0.26.0 server's recorded answers (tests/data/real-0.26.0-h200): a stub
on 127.0.0.1 replays the recorded response bodies, and each failing gate must name the real cause."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from composegen.evidence import gates
from tests.support.stub_server import Quiet, serving, url

REAL = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200"


def _recorded(recording: str) -> dict[str, dict]:
    return {
        e["name"]: e
        for e in json.loads((REAL / f"probes-{recording}.json").read_text(encoding="utf-8"))
    }


BF16, FP8 = _recorded("bf16"), _recorded("fp8-hermes-apikey")


@contextmanager
def replaying(
    chat: dict, stream: dict | None = None, json_answer: dict | None = None
) -> Iterator[str]:
    """A server answering /v1/models and chat requests with recorded exchanges."""

    class Handler(Quiet):
        def _reply(self, exchange: dict) -> None:
            content_type = dict((k.lower(), v) for k, v in exchange["headers"]).get("content-type")
            kind = {"content-type": content_type or "application/json"}
            self.reply(exchange["status"], exchange["body"].encode(), kind)

        def do_GET(self):
            self._reply(BF16["models"])

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if request.get("response_format") and json_answer is not None:
                self._reply(json_answer)
            elif request.get("stream") and stream is not None:
                self._reply(stream)
            else:
                self._reply(chat)

    with serving(Handler) as server:
        yield url(server)


def _reason(result: dict, gate: str) -> str:
    row = next(g for g in result["gates"] if g["name"] == gate)
    assert row["passed"] is False
    return row["reason"]


def test_no_tool_parser_is_named_as_the_cause():
    with replaying(chat=BF16["chat_tools_named"], stream=BF16["chat_tools_auto"]) as url:
        result = gates.run_gates(
            url, "tiny", only="tools,stream_tools", tools=2, timeout=10
        ).to_json()
    for gate in ("tools", "stream_tools"):
        reason = _reason(result, gate)
        assert "no tool parser is configured" in reason and "--tool-call-parser" in reason, reason
    assert result["tools"] == {"passed": 0, "total": 2}
    import jsonschema

    from composegen.cli import reports

    jsonschema.validate(result, reports.schema("gate"))


def test_a_call_the_parser_could_not_read_is_no_valid_call():
    with replaying(chat=FP8["chat_tools_required"], stream=FP8["chat_tools_auto_stream"]) as url:
        result = gates.run_gates(
            url, "tiny", only="tools,stream_tools", tools=1, timeout=10
        ).to_json()
    tools = _reason(result, "tools")
    assert "the model emitted no valid tool call" in tools and "parser could not read" in tools, (
        tools
    )
    assert "finish_reason length" in tools
    stream = _reason(result, "stream_tools")
    assert "the model emitted no valid tool call: it answered in text instead" in stream, stream


def test_json_that_is_not_json_or_does_not_validate():
    with replaying(chat=BF16["chat"], json_answer=BF16["chat_json_object"]) as url:
        reason = _reason(gates.run_gates(url, "tiny", only="json", timeout=10).to_json(), "json")
    assert reason.startswith("json_object: the answer is not JSON"), reason
    valid_json = dict(BF16["chat_json_object"])
    body = json.loads(valid_json["body"])
    answer = {
        "language": "python",
        "major_version": 0,  # below the schema's minimum of 1
        "statically_typed": False,
        "creator": {"name": "Guido van Rossum", "year": 1989},
    }
    body["choices"][0]["message"]["content"] = json.dumps(answer)
    body["choices"][0]["finish_reason"] = "stop"
    valid_json["body"] = json.dumps(body)
    with replaying(chat=BF16["chat"], json_answer=valid_json) as url:
        reason = _reason(gates.run_gates(url, "tiny", only="json", timeout=10).to_json(), "json")
    assert reason.startswith("json_schema: does not validate:") and "major_version" in reason, (
        reason
    )
