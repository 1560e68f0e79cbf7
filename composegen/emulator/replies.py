"""What the emulated model "says": deterministic text for a conversation (no randomness, no model).

Rules, first match wins (the last user message is "the question"):
  1. response_format json_schema -> an instance of the schema (schema_instance), compact JSON;
     json_object -> the JSON object quoted in the conversation, else {"answer": <default text>}.
  2. "reply/respond/answer/say/return (with) exactly|only X" -> X, the rest of that line (the last such
     line wins; quotes and a final period stripped; a JSON object quoted in X is returned as written).
  3. a tool result is in the conversation -> "The <tool> tool returned: <result>." (mentions the result).
  4. the question mentions JSON and quotes a JSON object -> that object.
  5. the question asks for a secret/code/password/needle -> the UPPER-CASE-WITH-DASHES codes found in
     the conversation (e.g. ZEBRA-42917-QUARTZ).
  6. a Python sum one-liner over a `name` -> `sum(name)`.
  7. otherwise: "Emulated reply (composegen vLLM emulator): <the first 24 words of the question>".
Reasoning (when requested) is a short, effort-scaled restatement of the question."""

from __future__ import annotations

import json
import re

from composegen.emulator.schema_instance import instance_for
from composegen.emulator.tokenizer import content_text

_EXACT = re.compile(
    r"(?im)\b(?:reply|respond|answer|say|output|return)\b(?:[ \t]+with)?[ \t]+(?:exactly|only|just)\b"
    r"[ \t]*:?[ \t]*(.+?)[ \t]*$"
)  # the rest of that line
_CODE = re.compile(r"\b[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+\b")
_SECRET_WORDS = ("secret", "code", "password", "passphrase", "needle", "magic")
_QUESTIONS = {"What", "What's", "Whats", "How", "Is", "Are", "Can", "Could", "Would"}
_REQUESTS = {"Please", "Reply", "Return", "Call", "Use", "Tell", "Give", "Get", "Find", "Check"}
_STOP = _QUESTIONS | _REQUESTS | {"The", "I", "A", "An", "In", "On", "For"}
_EFFORT_SENTENCES = {"minimal": 1, "low": 1, "medium": 2, "high": 3, "xhigh": 4, "max": 4}


def last_user_text(messages: list[dict]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))[0]
    return ""


def tool_results(messages: list[dict]) -> list[tuple[str, str]]:
    """(tool name, result text) for every `tool` message, names looked up from the assistant's
    calls."""
    names: dict[str, str] = {}
    results = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[str(call.get("id"))] = (call.get("function") or {}).get("name", "tool")
        if message.get("role") == "tool":
            name = message.get("name") or names.get(str(message.get("tool_call_id")), "tool")
            results.append((name, content_text(message.get("content"))[0]))
    return results


def hints_from(text: str) -> dict:
    """{"*": first run of capitalised words that does not start a sentence} (e.g. a city), for
    string fields."""
    for sentence in re.split(r"(?<=[.?!])\s+", text.strip()):
        run: list[str] = []
        for word in sentence.split()[1:]:
            bare = word.strip(",.?!;:'\"()")
            if re.fullmatch(r"[A-Z][a-zA-Z]+", bare) and bare not in _STOP:
                run.append(bare)
                if bare != word:  # punctuation ends the name
                    break
            elif run:
                break
        if run:
            return {"*": " ".join(run)}
    return {}


def _quoted_json_object(text: str) -> str | None:
    """The first JSON object literal quoted in `text`, exactly as written."""
    start = text.find("{")
    while start != -1:
        try:
            value, end = json.JSONDecoder().raw_decode(text[start:])
            if isinstance(value, dict):
                return text[start : start + end]
        except ValueError:
            pass
        start = text.find("{", start + 1)
    return None


def default_text(question: str) -> str:
    words = question.split()
    echo = " ".join(words[:24]) + (" …" if len(words) > 24 else "")
    label = "Emulated reply (composegen vLLM emulator)"
    return f"{label}: {echo}" if echo else f"{label}."


def answer_text(messages: list[dict], response_format: dict | None = None) -> str:
    question = last_user_text(messages)
    everything = " ".join(content_text(m.get("content"))[0] for m in messages)
    fmt = (response_format or {}).get("type")
    if fmt == "json_schema" and response_format is not None:
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema", spec if "type" in spec else {})
        return json.dumps(instance_for(schema, hints_from(question)), separators=(", ", ": "))
    if fmt == "json_object":
        quoted = _quoted_json_object(question)
        return quoted if quoted is not None else json.dumps({"answer": default_text(question)})
    exact = _EXACT.findall(question)
    if exact:
        wanted = exact[-1].strip()  # the last instruction wins
        return _quoted_json_object(wanted) or wanted.rstrip(".").strip("\"'`")
    results = tool_results(messages)
    if results:
        name, result = results[-1]
        return f"The {name} tool returned: {result}."
    lowered = question.lower()
    if "json" in lowered:
        quoted = _quoted_json_object(question)
        if quoted is not None:
            return quoted
    if any(word in lowered for word in _SECRET_WORDS):
        codes = [c for c in dict.fromkeys(_CODE.findall(everything))]
        if codes:
            return "The secret is " + ", ".join(codes) + "."
    if "python" in lowered and re.search(r"\bsum\b", lowered):
        found = re.search(r"`([A-Za-z_]\w*)`", question)
        return f"`sum({found.group(1) if found else 'xs'})`"
    return default_text(question)


def reasoning_text(question: str, effort: str) -> str:
    words = question.split()
    topic = " ".join(words[:12]) or "an empty message"
    sentences = [
        f"The user asks: {topic}.",
        "A deterministic emulator answers from fixed rules.",
        "No model weights are involved, so the answer is the same every time.",
        "Checking the rules once more before answering.",
    ]
    return " ".join(sentences[: _EFFORT_SENTENCES.get(effort, 2)])


def reasoning_effort(body: dict) -> str | None:
    """The requested thinking level, or None when the request does not ask the model to think."""
    effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
    if effort and effort != "none":
        return str(effort)
    kwargs = body.get("chat_template_kwargs") or {}
    if kwargs.get("enable_thinking") or kwargs.get("thinking"):
        return str(kwargs.get("reasoning_effort") or "medium")
    return None


def choose_tool(tools: list[dict], tool_choice: object, messages: list[dict]) -> dict | None:
    """The tool to call, or None for a plain answer (auto: one round, name words must match the
    question)."""
    functions = [t.get("function") or t for t in tools if isinstance(t, dict)]
    if not functions or tool_choice == "none":
        return None
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        return next((f for f in functions if f.get("name") == wanted), None)
    question = last_user_text(messages).lower()

    def score(name: str) -> int:  # the name's words (3 letters or more) the question holds
        return sum(part in question for part in re.split(r"[_\-]", name) if len(part) >= 3)

    scored = [(score(f.get("name", "")), i) for i, f in enumerate(functions)]
    best_score, best = max(scored, key=lambda item: (item[0], -item[1]))
    if tool_choice == "required":
        return functions[best]
    if tool_results(messages) or best_score == 0:
        return None
    return functions[best]


def tool_arguments(function: dict, messages: list[dict]) -> str:
    schema = function.get("parameters") or {"type": "object", "properties": {}}
    return json.dumps(instance_for(schema, hints_from(last_user_text(messages))))
