"""`/v1/completions` (text completion, not streamed) and `/detokenize`, shaped as a real vLLM 0.26.0
server's."""

from __future__ import annotations

from composegen.emulator import replies, versions
from composegen.emulator.chat import (
    RequestError,
    ServingInfo,
    budget,
    check_model,
    new_id,
    validation_error,
)
from composegen.emulator.tokenizer import VOCAB_SIZE, decode, encode, pieces

DEFAULT_MAX_TOKENS = 16  # the OpenAI completions default, which vLLM keeps


def completion(body: dict, info: ServingInfo, created: int) -> tuple[dict, int, int, str]:
    """(the `text_completion` object, prompt tokens, completion tokens, finish reason)."""
    check_model(body, info)
    prompt = body.get("prompt")
    if "prompt" not in body:
        raise validation_error("missing", ("body", "prompt"), "Field required", body, "body.prompt")
    if not isinstance(prompt, str):
        prompt = " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)
    if body.get("stream"):
        raise RequestError(
            400, "stream=true is not supported for /v1/completions by the composegen emulator"
        )
    prompt_tokens = len(encode(prompt))
    wanted = body.get("max_tokens", DEFAULT_MAX_TOKENS)
    allowed = budget(wanted, prompt_tokens, info.max_model_len)
    answer = pieces(replies.default_text(prompt))
    if body.get("ignore_eos") is True:  # vLLM's extension, as in chat: every asked token
        answer = (answer * (allowed // len(answer) + 1))[: allowed + 1]
    text, finish = answer[:allowed], "stop" if allowed >= len(answer) else "length"
    choice = {
        "index": 0,
        "text": "".join(text),
        "logprobs": None,
        "finish_reason": finish,
        "stop_reason": None,
        "token_ids": None,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "routed_experts": None,
    }
    usage = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + len(text),
        "completion_tokens": len(text),
        "prompt_tokens_details": None,
    }
    payload = {
        "id": new_id("cmpl-"),
        "object": "text_completion",
        "created": created,
        "model": info.name,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": versions.active().fingerprint,
        "usage": usage,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }
    return payload, prompt_tokens, len(text), finish


def detokenize(body: dict, info: ServingInfo) -> dict:
    check_model(body, info)
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        msg = "Input should be a valid list"
        raise validation_error("list_type", ("body", "tokens"), msg, tokens, "body.tokens")
    text = decode(tokens)
    if text is None:
        outside = f"Token id out of vocabulary: every id must be in [0, {VOCAB_SIZE})"
        raise RequestError(400, outside, param="tokens")
    return {"prompt": text}
