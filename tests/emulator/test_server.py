"""The emulator as a local process (no Docker): readiness and the OpenAI-compatible endpoints."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest

from composegen.emulator.tokenizer import pieces

READY = "Application startup complete."
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "minLength": 1},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture
def emu(start):
    return start(
        "org/m",
        "--served-model-name",
        "demo",
        "alias",
        "--max-model-len",
        "4096",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "deepseek_v31",
        "--reasoning-parser",
        "deepseek_v3",
    )


def chat(emu, **body) -> dict:
    response = httpx.post(f"{emu.url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def stream(emu, **body) -> list[dict]:
    chunks = []
    with httpx.stream(
        "POST", f"{emu.url}/v1/chat/completions", json={**body, "stream": True}, timeout=30
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                chunks.append(line[6:])
    assert chunks[-1] == "[DONE]"
    return [json.loads(c) for c in chunks[:-1]]


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_port_refuses_until_ready_then_health(start):
    emu = start("m", ready=False, EMU_LOAD_SECONDS="1.5")
    emu.wait_for("non-default args")
    assert not emu.port_open()  # loading: nothing listens yet, like vLLM
    emu.wait_for(READY)
    health = httpx.get(f"{emu.url}/health")
    assert health.status_code == 200 and health.content == b""
    assert httpx.get(f"{emu.url}/version").json() == {"version": "0.33.0+composegen-emulator"}
    assert "composegen vLLM emulator" in emu.lines[0] and "TEST DOUBLE" in emu.lines[0]


def test_models_tokenize_and_usage_agree(emu):
    models = httpx.get(f"{emu.url}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["demo", "alias"]
    assert {m["root"] for m in models["data"]} == {"org/m"}
    assert models["data"][0]["max_model_len"] == 4096 and models["data"][0]["owned_by"] == "vllm"
    prompt = httpx.post(f"{emu.url}/tokenize", json={"prompt": "one two  three\nfour"}).json()
    assert prompt["count"] == 4 == len(prompt["tokens"]) and prompt["max_model_len"] == 4096
    messages = ask("How many tokens is this?")
    counted = httpx.post(
        f"{emu.url}/tokenize", json={"model": "demo", "messages": messages}
    ).json()["count"]
    reply = chat(emu, model="alias", messages=messages)
    usage = reply["usage"]
    assert usage["prompt_tokens"] == counted
    content = reply["choices"][0]["message"]["content"]
    assert usage["completion_tokens"] == len(pieces(content))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert reply["choices"][0]["finish_reason"] == "stop" and reply["model"] == "demo"
    missing = httpx.post(
        f"{emu.url}/v1/chat/completions", json={"model": "nope", "messages": messages}
    )
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFoundError"


def test_plain_stream_matches_and_max_tokens_cuts(emu):
    messages = ask("Please describe the weather of Mars in some detail")
    whole = chat(emu, messages=messages)["choices"][0]["message"]["content"]
    chunks = stream(emu, messages=messages, stream_options={"include_usage": True})
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == whole
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == len(
        pieces(whole)
    )
    cut = chat(emu, messages=messages, max_tokens=3)
    assert cut["choices"][0]["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 3
    assert cut["choices"][0]["message"]["content"] == "".join(pieces(whole)[:3])


def test_exact_reply_json_object_and_json_schema(emu):
    assert (
        chat(emu, messages=ask("Reply with exactly PONG"))["choices"][0]["message"]["content"]
        == "PONG"
    )
    obj = chat(emu, messages=ask('Return ONLY a JSON object: {"language":"python","ok":true}'))
    assert json.loads(obj["choices"][0]["message"]["content"]) == {"language": "python", "ok": True}
    schema = {
        "type": "object",
        "required": ["name", "tags", "score", "meta"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "maxLength": 5},
            "kind": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "score": {"type": "number", "minimum": 3, "maximum": 4},
            "meta": {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 10}},
                "required": ["ok", "n"],
            },
        },
    }
    reply = chat(
        emu,
        messages=ask("Describe a thing"),
        response_format={"type": "json_schema", "json_schema": {"name": "thing", "schema": schema}},
    )
    jsonschema.validate(json.loads(reply["choices"][0]["message"]["content"]), schema)


def test_tool_call_and_continuation(emu):
    messages = ask("What is the weather in Oakland right now?")
    reply = chat(emu, messages=messages, tools=WEATHER, tool_choice="auto")
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and call["type"] == "function"
    arguments = json.loads(call["function"]["arguments"])
    jsonschema.validate(arguments, WEATHER[0]["function"]["parameters"])
    assert arguments["city"] == "Oakland"
    follow = [
        *messages,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": '{"temperature_f": 72}'},
    ]
    answer = chat(emu, messages=follow, tools=WEATHER)["choices"][0]
    assert (
        answer["finish_reason"] == "stop"
        and '{"temperature_f": 72}' in answer["message"]["content"]
    )
    exact = chat(emu, messages=follow + ask("Reply exactly OAKLAND 72F"), tools=WEATHER)
    assert exact["choices"][0]["message"]["content"] == "OAKLAND 72F"
    named = chat(
        emu,
        messages=ask("hello"),
        tools=WEATHER,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    assert named["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_tool_call_streams_as_deltas(emu):
    chunks = stream(emu, messages=ask("weather in Paris please"), tools=WEATHER)
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    assert (
        calls[0]["id"].startswith("chatcmpl-tool-")
        and calls[0]["function"]["name"] == "get_weather"
    )
    assert len(calls) > 2 and all("name" not in c["function"] for c in calls[1:])
    arguments = json.loads("".join(c["function"]["arguments"] for c in calls))
    jsonschema.validate(arguments, WEATHER[0]["function"]["parameters"])
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_reasoning_counted_and_responses_api(emu):
    reply = chat(emu, messages=ask("Reply with exactly READY"), reasoning_effort="high")
    message = reply["choices"][0]["message"]
    assert message["content"] == "READY" and message["reasoning"]
    details = reply["usage"]["completion_tokens_details"]
    assert details["reasoning_tokens"] == len(pieces(message["reasoning"]))
    assert reply["usage"]["completion_tokens"] == details["reasoning_tokens"] + 1
    response = httpx.post(
        f"{emu.url}/v1/responses",
        json={"model": "demo", "input": "Reply with exactly READY", "max_output_tokens": 64},
    ).json()
    assert response["object"] == "response" and response["status"] == "completed"
    texts = [
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    ]
    assert texts == ["READY"] and response["usage"]["output_tokens"] == 1


def test_too_long_prompt_and_metrics(emu):
    long_prompt = httpx.post(
        f"{emu.url}/v1/chat/completions", json={"messages": ask("word " * 5000)}
    )
    assert long_prompt.status_code == 400
    assert "maximum context length is 4096 tokens" in long_prompt.json()["error"]["message"]
    replies = [chat(emu, messages=ask(f"count {i} " * (i + 1))) for i in range(3)]
    text = httpx.get(f"{emu.url}/metrics").text

    def value(name: str) -> float:
        return float(re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M).group(1))

    assert value("vllm:prompt_tokens_total") == sum(r["usage"]["prompt_tokens"] for r in replies)
    assert value("vllm:generation_tokens_total") == sum(
        r["usage"]["completion_tokens"] for r in replies
    )
    assert value("vllm:time_to_first_token_seconds_count") == 3
    assert value("vllm:num_requests_running") == 0 and value("vllm:kv_cache_usage_perc") == 0
    blocks = int(re.search(r'vllm:cache_config_info{[^}]*num_gpu_blocks="(\d+)"', text).group(1))
    tokens = int(
        re.search(r"GPU KV cache size: ([\d,]+) tokens", emu.log).group(1).replace(",", "")
    )
    assert blocks == tokens // 16


def test_api_key_guards_v1_only(start):
    emu = start("m", "--api-key", "s3cret")
    assert httpx.get(f"{emu.url}/v1/models").status_code == 401
    assert (
        httpx.get(f"{emu.url}/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code
        == 200
    )
    assert (
        httpx.get(f"{emu.url}/v1/models", headers={"Authorization": "Bearer wrong"}).status_code
        == 401
    )
    for path in ("/health", "/metrics", "/version", "/ping"):
        assert httpx.get(f"{emu.url}{path}").status_code == 200
    env_key = start("m", VLLM_API_KEY="envkey")
    assert (
        httpx.get(
            f"{env_key.url}/v1/models", headers={"Authorization": "Bearer envkey"}
        ).status_code
        == 200
    )
    # tools with tool_choice auto need --enable-auto-tool-choice, as in vLLM
    refused = httpx.post(
        f"{env_key.url}/v1/chat/completions",
        headers={"Authorization": "Bearer envkey"},
        json={"messages": ask("weather in Oslo"), "tools": WEATHER},
    )
    assert (
        refused.status_code == 400
        and "--enable-auto-tool-choice" in refused.json()["error"]["message"]
    )
