"""The emulator's deterministic tokenizer (shared by /tokenize and usage.prompt_tokens).

Rules:
  * text: one token per whitespace-separated piece (`re.findall(r"\\s*\\S+")`, so pieces keep their
    leading whitespace and concatenate back to the text); id = crc32(piece.strip()) % 150000 + 1000.
  * chat messages: each message costs MESSAGE_OVERHEAD template tokens (<|im_start|>, role, <|im_end|>,
    newline) plus the tokens of its text (string content, the text parts of list content, one token per
    non-text part, tool-call names and argument JSON); add_generation_prompt (default true) adds
    GENERATION_PROMPT tokens; a `tools` list adds the tokens of its compact JSON plus TOOLS_OVERHEAD.
Completion text is produced as these same pieces, so one streamed delta = one token."""

from __future__ import annotations

import json
import re
import zlib

MESSAGE_OVERHEAD = 4
GENERATION_PROMPT = 3
TOOLS_OVERHEAD = 6
_VOCAB = 150_000
_SPECIAL = {"im_start": 151644, "im_end": 151645, "newline": 198, "tools": 151657}
_PIECE = re.compile(r"\s*\S+")


def pieces(text: str) -> list[str]:
    return _PIECE.findall(text or "")


# id -> piece, for /detokenize (ids are hashes, so only seen pieces decode)
_SEEN: dict[int, str] = {}
_SEEN_MAX = 200_000


def token_id(piece: str) -> int:
    word = piece.strip()
    number = zlib.crc32(word.encode("utf-8")) % _VOCAB + 1000
    if len(_SEEN) < _SEEN_MAX:
        _SEEN.setdefault(number, word)
    return number


def encode(text: str) -> list[int]:
    return [token_id(p) for p in pieces(text)]


VOCAB_SIZE = _VOCAB + 1000  # ids are 1000 … 150999 (below 1000: never produced, still decodable)


def decode(ids: list[int]) -> str | None:
    """Text of token ids: the piece for an id this process produced, `<id>` for another id in the
    vocabulary; None when an id is outside it (a 400 in vLLM too)."""
    if any(not 0 <= i < VOCAB_SIZE for i in ids):
        return None
    return " ".join(_SEEN.get(i, f"<{i}>") for i in ids)


def content_text(content: object) -> tuple[str, int]:
    """Flatten OpenAI message content into (text, number of non-text parts)."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts, others = [], 0
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                texts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                texts.append(part)
            else:
                others += 1
        return " ".join(texts), others
    return json.dumps(content), 0


def message_text(message: dict) -> tuple[str, int]:
    text, others = content_text(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += f" {function.get('name', '')} {function.get('arguments', '')}"
    return text, others


def encode_chat(
    messages: list[dict], tools: list | None = None, add_generation_prompt: bool = True
) -> list[int]:
    ids: list[int] = []
    if tools:
        ids += [_SPECIAL["tools"]] * TOOLS_OVERHEAD + encode(
            json.dumps(tools, separators=(",", ":"))
        )
    for message in messages:
        text, others = message_text(message)
        ids += [_SPECIAL["im_start"], token_id(str(message.get("role", "user")))]
        ids += encode(text) + [_SPECIAL["tools"]] * others
        ids += [_SPECIAL["im_end"], _SPECIAL["newline"]]
    if add_generation_prompt:
        ids += [_SPECIAL["im_start"], token_id("assistant"), _SPECIAL["newline"]]
    return ids
