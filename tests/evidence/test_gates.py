"""Functional gates against the emulator (a local subprocess, no Docker)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from composegen.errors import BadInput, EngineError
from composegen.evidence import gate_checks, gate_client, gates
from tests.support.emulator_proc import EmulatorProc, free_port


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    with EmulatorProc.start(tmp_path_factory.mktemp("emu")) as proc:
        yield proc


def test_all_gates_pass_on_a_healthy_server(emu):
    found = gates.run_gates(emu.base_url, emu.model)
    result = found.to_json()
    assert [g["name"] for g in result["gates"]] == list(gates.GATES)
    failed = [(g["name"], g["reason"]) for g in result["gates"] if not g["passed"]]
    assert failed == []
    assert (result["passed"], result["total"], result["ok"]) == (6, 6, True)
    assert result["tools"] == {"passed": 20, "total": 20}
    assert all(g["latency_s"] > 0 and g["reason"] is None for g in result["gates"])
    text = gates.format_text(found)
    assert "tools         20/20" in text and "6/6 gates passed: ok" in text


def test_only_a_subset_and_more_tools_than_the_catalogue(emu):
    result = gates.run_gates(emu.base_url, emu.model, only="tools,smoke", tools=23).to_json()
    assert [g["name"] for g in result["gates"]] == ["smoke", "tools"]
    assert result["tools"] == {"passed": 23, "total": 23}
    without_tools = gates.run_gates(emu.base_url, emu.model, only=["responses"]).to_json()
    assert without_tools["tools"] is None and without_tools["total"] == 1


def test_tool_catalogue_is_distinct_typed_and_valid_json_schema():
    specs = gates.tool_specs(25)
    names = [name for name, _, _ in specs]
    assert len(set(names)) == 25
    kinds = set()
    for _, tool, prompt in specs:
        params = tool["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert params["required"] and prompt
        for prop in params["properties"].values():
            kinds.add("enum" if "enum" in prop else prop.get("type"))
    assert {"enum", "integer", "object", "array", "string", "number", "boolean"} <= kinds


def test_arguments_that_break_the_schema_fail():
    params = gates.TOOL_CATALOG[1][2]  # book_flight: passengers 1..9, cabin enum
    gate_checks.check_arguments(
        '{"origin": "BOS", "destination": "DEN", "passengers": 2, "cabin": "business"}', params, {}
    )
    for bad, says in [
        (
            '{"origin": "BOS", "destination": "DEN", "passengers": 0, "cabin": "business"}',
            "passengers",
        ),
        ('{"origin": "BOS", "destination": "DEN", "passengers": 2, "cabin": "coach"}', "cabin"),
        ('{"origin": "BOS", "passengers": 2, "cabin": "economy"}', "destination"),
        ('{"origin": "BOS", ', "not valid JSON"),
    ]:
        with pytest.raises(gates.GateFailed, match=says):
            gate_checks.check_arguments(bad, params, {})


def test_a_length_finish_fails_the_gate(emu):
    result = gates.run_gates(
        emu.base_url, emu.model, only=["json", "tools"], tools=2, max_tokens=2
    ).to_json()
    assert result["ok"] is False
    for gate in result["gates"]:
        assert gate["passed"] is False and "length" in gate["reason"]
    assert result["tools"] == {"passed": 0, "total": 2}


def test_broken_tool_stream_fails_only_stream_tools(tmp_path):
    with EmulatorProc.start(tmp_path, env={"EMU_FAULT": "broken_tool_stream"}) as bad:
        steps: list[str] = []
        result = gates.run_gates(bad.base_url, bad.model, tools=3, on_step=steps.append).to_json()
    # the failure is said the moment it is known: after its gate began, before the next
    said = steps.index("gates 4/6: stream_tools")
    assert (
        steps[said + 1].startswith("FAIL gate stream_tools: ") and "tool_calls" in steps[said + 1]
    )
    assert steps[said + 2] == "gates 5/6: continuation" and len(steps) == 7
    by_name = {g["name"]: g for g in result["gates"]}
    assert by_name["stream_tools"]["passed"] is False
    assert "tool_calls" in by_name["stream_tools"]["reason"]
    assert [n for n, g in by_name.items() if not g["passed"]] == ["stream_tools"]
    assert result["ok"] is False and result["passed"] == 5


def test_the_equivalence_gate_holds_the_candidates_answers_to_the_controls(emu, tmp_path):
    control = gates.run_gates(emu.base_url, emu.model, only="smoke", reference=[])
    recorded = control.gates[-1]  # the control arm: its answers become the reference
    assert (recorded.name, recorded.passed, recorded.details["compared"]) == (
        "equivalence",
        True,
        False,
    )
    answers = recorded.details["answers"]
    assert len(answers) == len(gates.ANSWER_PROMPTS) and len(set(answers)) == len(answers)
    same = gates.run_gates(emu.base_url, emu.model, only="smoke", reference=answers)
    assert same.ok and same.gates[-1].details == {"answers": answers, "compared": True}
    assert [g.name for g in gates.run_gates(emu.base_url, emu.model, only="smoke").gates] == [
        "smoke"
    ]  # without a reference (no campaign) the gate is not run
    with EmulatorProc.start(tmp_path, env={"EMU_FAULT": "answers_changed"}) as changed:
        steps: list[str] = []
        result = gates.run_gates(
            changed.base_url, changed.model, only="smoke", reference=answers, on_step=steps.append
        )
    smoke, equivalence = result.gates
    assert smoke.passed and not equivalence.passed and not result.ok
    assert equivalence.reason == "4 of 4 answers differ from the control's (prompt 1, 2, 3, 4)"
    assert steps[-1] == f"FAIL gate equivalence: {equivalence.reason}"
    first = equivalence.details["differences"][0]
    assert first == {"prompt": 1, "control": answers[0], "candidate": answers[0] + " (changed)"}


def test_api_key_is_required_and_used(tmp_path):
    with EmulatorProc.start(tmp_path, env={"VLLM_API_KEY": "s3cret"}) as keyed:
        with pytest.raises(BadInput, match="api key"):
            gates.run_gates(keyed.base_url, keyed.model, only="smoke")
        assert gates.run_gates(keyed.base_url, keyed.model, api_key="s3cret", only="smoke").ok


def test_unreachable_server_and_unknown_model_are_engine_errors(emu):
    with pytest.raises(EngineError):
        gates.run_gates(f"http://127.0.0.1:{free_port()}", "x", only="smoke", timeout=5)
    with pytest.raises(EngineError, match="not served"):
        gates.run_gates(emu.base_url, "some-other-model", only="smoke")


def test_bad_arguments_are_bad_input():
    with pytest.raises(BadInput, match="unknown gate nope"):
        gates.run_gates("http://127.0.0.1:1", "m", only="smoke,nope")
    with pytest.raises(BadInput, match="at least 1"):
        gates.run_gates("http://127.0.0.1:1", "m", tools=0)


def test_every_gate_that_generates_asks_for_temperature_0(emu):
    import httpx
    from openai import OpenAI

    sent: list[dict] = []
    record = lambda request: sent.append(json.loads(request.content or b"{}"))  # noqa: E731
    client = OpenAI(
        base_url=emu.base_url.rstrip("/").removesuffix("/v1") + "/v1",
        api_key="EMPTY",
        http_client=httpx.Client(event_hooks={"request": [record]}),
    )
    ctx = gate_client.GateContext(
        client, emu.model, n_tools=1, max_tokens=64, reasoning_effort=None
    )
    gates.gate_responses(ctx)
    gates.gate_smoke(ctx)
    assert [body.get("temperature") for body in sent] == [0, 0]  # /v1/responses as the chat gates
