"""A server that streams like a real one: one SSE event every 2 ms, each its own TCP write (TCP_NODELAY).

    python bench/paced_server.py PORT [INTERVAL_MS]      (stdlib only; keep-alive, chunked SSE like uvicorn)

bench/instant_server.py sends a whole stream in one write, so the client parses all its events from one
buffer; a real vLLM sends each token as it is made, so the client wakes up once per event. This server
does that (the role chunk, then max_tokens content deltas INTERVAL_MS apart, the usage chunk, [DONE]),
so bench/bench_client.py --paced measures what the client costs per event on a real server (the issue 26
recording: 0.2–0.3 ms per event with the httpx client). /tokenize counts as instant_server does.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instant_server import _chunk, _count, read_request


def _events(body: dict) -> list[bytes]:
    prompt, n = _count(body.get("messages") or []), int(body.get("max_tokens") or 16)
    head = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": body.get("model"),
        "created": 0,
    }
    events = [
        {
            **head,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            ],
        }
    ]
    for i in range(n):
        finish = "length" if i == n - 1 else None
        events.append(
            {
                **head,
                "choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": finish}],
            }
        )
    usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
    events.append({**head, "choices": [], "usage": usage})
    return [_chunk(b"data: " + json.dumps(e).encode() + b"\n\n") for e in events] + [
        _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    ]


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, interval: float
) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            path, body = await read_request(reader)
            if path == "/tokenize":
                data = json.dumps({"count": _count(body.get("messages") or [])}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
                await writer.drain()
                continue
            if path == "/metrics":
                data = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(data), data))
                await writer.drain()
                continue
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            for event in _events(body):
                await asyncio.sleep(interval)
                writer.write(event)
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int, interval_ms: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, interval_ms / 1000), "127.0.0.1", port, backlog=1024
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 2.0))
