"""Gate failure reasons that name the real cause, as a real vLLM server shows it
(tests/data/real-0.26.0-h200):

no tool parser     vLLM answers 400 `tool_choice=function "X" requires --tool-call-parser to be set` or
                   `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to
                   be set`
no valid call      the model wrote text (maybe a `<tool_call>` block its parser could not read: the server
                   logs a JSONDecodeError and returns it as content) and no `tool_calls`
does not validate  the call's arguments are JSON but break the tool's JSON Schema (gate_checks.py)
"""

from __future__ import annotations

import re

_PARSER_400 = re.compile(r"requires (?:--enable-auto-tool-choice and )?--tool-call-parser")
_CALL_MARKUP = ("<tool_call>", "<|tool", "<｜tool", '{"name"', "[TOOL_CALLS]", "<function")
NO_PARSER = (
    "no tool parser is configured on the server (start vLLM with --enable-auto-tool-choice and "
    "--tool-call-parser <parser>)"
)


def http_reason(status: int, message: str) -> str:
    """`HTTP 400: …`, prefixed with the cause when the message names one composegen knows."""
    if status == 400 and _PARSER_400.search(message):
        return f"{NO_PARSER}; HTTP 400: {message}"
    return f"HTTP {status}: {message}"


def no_call_reason(content: str | None, finish_reason: str | None) -> str:
    """The model answered without a (parseable) tool call."""
    text = (content or "").strip()
    shown = f"{text[:60]!r}{'…' if len(text) > 60 else ''}"
    why = f"finish_reason {finish_reason}" if finish_reason else "no finish_reason"
    if any(mark in text for mark in _CALL_MARKUP):
        return (
            f"the model emitted no valid tool call: its text starts a call the server's tool parser could not "
            f"read ({why}; content {shown}); check --tool-call-parser matches the model, or max_tokens"
        )
    if text:
        return f"the model emitted no valid tool call: it answered in text instead ({why}; content {shown})"
    return f"the model emitted no valid tool call and no text ({why})"
