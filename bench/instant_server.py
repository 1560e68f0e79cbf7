"""A server that answers at once: vLLM's /tokenize and streamed /v1/chat/completions, no model, no pacing.

    python bench/instant_server.py PORT        (stdlib only; keep-alive, chunked SSE like uvicorn)

bench/bench_client.sh runs it in its own process to show that `composegen bench`'s client is not the
bottleneck: whatever rate the client reaches here is the ceiling it could ever report. Token counting
follows the emulator's tokenizer (one token per whitespace piece, 4 per message, 3 for the prompt), so
prompts size exactly; each completion streams max_tokens one-word deltas and a usage chunk.
"""

from __future__ import annotations

import asyncio
import json
import sys


def _count(messages: list[dict]) -> int:
    return sum(4 + len(str(m.get("content") or "").split()) for m in messages) + 3


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _stream(body: dict) -> bytes:
    prompt, n = _count(body.get("messages") or []), int(body.get("max_tokens") or 16)
    head = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": body.get("model"),
        "created": 0,
    }
    events = []
    for i in range(n):
        finish = "length" if i == n - 1 else None
        delta = {"content": " word"} if i else {"role": "assistant", "content": "word"}
        events.append({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
    events.append({**head, "choices": [], "usage": usage})
    payload = b"".join(_chunk(b"data: " + json.dumps(e).encode() + b"\n\n") for e in events)
    return payload + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict]:
    """One HTTP/1.1 request: its path and JSON body (the only shapes the bench client sends)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        (
            int(v)
            for k, _, v in (h.partition(":") for h in lines[1:])
            if k.lower() == "content-length"
        ),
        0,
    )
    return lines[0].split(" ")[1], (json.loads(await reader.readexactly(length)) if length else {})


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            path, body = await read_request(reader)
            if path == "/tokenize":
                data = json.dumps({"count": _count(body.get("messages") or [])}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
            else:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                writer.write(_stream(body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
