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

import contextlib
import json
import re
import threading
import zlib
from dataclasses import dataclass, field

from tests.support.stub_server import Quiet, serving, url

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
    _serving: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def start(self) -> CoarseServer:
        server = self

        class Handler(Quiet):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                kind = {"content-type": "text/plain; version=0.0.4"}
                self.reply(200, server.metrics().encode(), kind)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path == "/tokenize":
                    count = json.dumps({"count": count_messages(body["messages"])}).encode()
                    return self.reply(200, count, {"content-type": "application/json"})
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
                    delta = {"index": 0, "delta": {"content": f" t{n}"}, "finish_reason": finish}
                    self._event({"choices": [delta]})
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

        self.httpd = self._serving.enter_context(serving(Handler))
        return self

    @property
    def base_url(self) -> str:
        return url(self.httpd) + "/v1"

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
        self._serving.close()
