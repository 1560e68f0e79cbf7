"""A small OpenAI-style server over real TCP with a coarse tokenizer like the real tiny model's (recorded in
tests/data/real-0.26.0-h200-graphs: byte-level BPE with a 1952-entry vocabulary, where a filler word costs
5–9 tokens). Rules of its tokenizer, made to be awkward for sizing:
  * a word of letters costs 5 + crc32(word) % 5 tokens (5–9), one letter 1 token, except "a" (2 tokens);
  * a run of digits costs its number of distinct digits (an index `0000001` 2 tokens, `0004567` 5);
  * every other character 1 token; the chat template 11 tokens per message plus 3.
/tokenize (messages form) and the usage of /v1/chat/completions count the same way. A stream sends
`max_tokens` content chunks with `ignore_eos`, else at most `natural` (the emulated early stop); /metrics
shows speculative-decoding counters when `spec_tokens` is set. Every chat prompt's count is recorded."""

from __future__ import annotations

import json
import re
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_PIECE = re.compile(r"[A-Za-z]+|\d+|\S")


def count_text(text: str) -> int:
    total = 0
    for piece in _PIECE.findall(text):
        if piece.isdigit():
            total += len(set(piece))
        elif piece.isalpha():
            total += (
                2 if piece == "a" else 1 if len(piece) == 1 else 5 + zlib.crc32(piece.encode()) % 5
            )
        else:
            total += 1
    return total


def count_messages(messages: list[dict]) -> int:
    return sum(11 + count_text(str(m.get("content") or "")) for m in messages) + 3


@dataclass
class CoarseServer:
    natural: int = 30  # output tokens without ignore_eos
    spec_tokens: int = 0
    prompts: list[int] = field(default_factory=list)
    drafts: int = 0
    accepted: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> CoarseServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(200, server.metrics().encode(), "text/plain; version=0.0.4")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path == "/tokenize":
                    self._send(
                        200, json.dumps({"count": count_messages(body["messages"])}).encode()
                    )
                    return
                self._chat(body)

            def _chat(self, body: dict) -> None:
                prompt = count_messages(body["messages"])
                wanted = int(body["max_tokens"])
                tokens = wanted if body.get("ignore_eos") else min(wanted, server.natural)
                server.record(prompt, tokens)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for n in range(tokens):
                    finish = "length" if n == tokens - 1 else None
                    self._event(
                        {
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {"content": f" t{n}"},
                                    "finish_reason": finish,
                                }
                            ]
                        }
                    )
                usage = {
                    "prompt_tokens": prompt,
                    "completion_tokens": tokens,
                    "total_tokens": prompt + tokens,
                }
                self._event({"choices": [], "usage": usage})
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")

            def _event(self, data: dict) -> None:
                self._chunk(b"data: " + json.dumps(data).encode() + b"\n\n")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def record(self, prompt: int, tokens: int) -> None:
        with self.lock:
            self.prompts.append(prompt)
            # each draft step: position p accepted for p < 2 (a fixed, known pattern)
            if self.spec_tokens:
                steps = max(1, tokens // 3)
                self.drafts += steps
                self.accepted = self.accepted or [0] * self.spec_tokens
                self.accepted[0] += steps
                self.accepted[1] += steps

    def metrics(self) -> str:
        if not self.spec_tokens:
            return "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
        with self.lock:
            rows = [
                ("vllm:spec_decode_num_drafts_total", "", self.drafts),
                ("vllm:spec_decode_num_draft_tokens_total", "", self.drafts * self.spec_tokens),
                ("vllm:spec_decode_num_accepted_tokens_total", "", sum(self.accepted)),
            ]
            rows += [
                ("vllm:spec_decode_num_accepted_tokens_per_pos_total", f',position="{p}"', v)
                for p, v in enumerate(self.accepted or [0] * self.spec_tokens)
            ]
        out = []
        for name, extra, value in rows:
            if not any(line.endswith(f"{name} counter") for line in out):
                out += [f"# HELP {name} x", f"# TYPE {name} counter"]
            out.append(f'{name}{{engine="0",model_name="m"{extra}}} {float(value)}')
        return "\n".join(out) + "\n"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
