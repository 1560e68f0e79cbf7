"""Bench prompts sized to exactly `input_tokens` by the server's own /tokenize, for any tokenizer.

A prompt is `SALT FILLER PAD`: the salt (`[bench SEED.INDEX]`) makes every prompt different, so
prefix caching cannot serve one request from another's work; FILLER is the first n words of the
seed's fixed word stream; PAD is k copies of one piece the server's tokenizer counts as exactly one
token (found through /tokenize: on a coarse tokenizer a filler word costs 5–9 tokens, so whole words
alone rarely land on the size). The first prompt finds (n, k); every prompt then counts itself once
(its salt may cost a token more or less) and moves k by the difference until /tokenize says exactly
`input_tokens` — usually one call.

Thread-safe by construction: after `plan()` the shared state (the plan, the word list, the pad
piece) is never written again, and every prompt works on local copies (make_many sizes them on 8
threads).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypedDict

from composegen.errors import BadInput, EngineError
from composegen.wire.http import CutShort

PREPARE_THREADS = 8  # /tokenize calls in flight while the prompts are made
PAD_CANDIDATES = (" a", " x", " I", " 0", " .", " -", " the", " of")
PAD_CHECK = 8  # a piece is one token when 1 and 8 copies cost 1 and 8 tokens more
PAD_WINDOW = 64  # whole words land at most this far below the size (a word costing more is refused)
MAX_FIT_STEPS = 8

MAX_SIZING_STEPS = 16
_WORDS = (  # noqa: SIM905 (fifty words: a text to split, not a line each)
    "river stone garden signal harbor lantern copper meadow engine window paper orbit violet "
    "thunder canvas pepper marble forest silver bridge candle falcon glacier hollow island "
    "jacket kettle ladder mirror nectar oyster pillow quartz ribbon saddle tunnel umbrella "
    "velvet walnut yellow zephyr anchor basket cobalt desert ember fabric granite horizon "
    "ivory jasmine kernel lagoon monsoon"
).split()


class Filler:
    """A fixed word stream: the first n words are always the same, so counts grow with n."""

    def __init__(self, seed: int = 20260810):
        self.rng = random.Random(seed)
        self.words: list[str] = []

    def text(self, n: int) -> str:
        while len(self.words) < n:
            word = self.rng.choice(_WORDS)
            self.words.append(
                f"{word}{self.rng.randrange(100)}" if self.rng.random() < 0.15 else word
            )
        return " ".join(self.words[:n])


class ChatMessage(TypedDict):
    """One message of an OpenAI chat request, as the wire carries it (ladder, bench and
    /tokenize)."""

    role: str
    content: str


class Tokenizer:
    """POST /tokenize on the server (vLLM serves it at the root, outside /v1)."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float):
        # why: httpx, +22 ms measured; compare/plan never need it
        from composegen.wire import transport

        root = base_url.rstrip("/").removesuffix("/v1")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # bounded; replies checked (wire.replies)
        self.client = transport.client(root, headers, timeout)
        self.model = model
        self.calls = 0

    def count(self, messages: list[ChatMessage]) -> int:
        import httpx

        self.calls += 1
        body = {"model": self.model, "messages": messages}
        try:
            try:
                resp = self.client.post("/tokenize", json=body)
            except CutShort:  # a reply cut in flight (seen once through the door): ask once more
                resp = self.client.post("/tokenize", json=body)
        except httpx.HTTPError as exc:
            raise EngineError(f"{self.client.base_url}/tokenize: {exc}") from None
        if resp.status_code != 200:
            msg = f"{self.client.base_url}/tokenize: HTTP {resp.status_code}: {resp.text[:300]}"
            raise EngineError(msg)
        # an int ≥ 0: checked by the transport (wire.replies.TokenizeReply)
        return int(resp.json()["count"])


def size_prompt(
    count: Callable[[int], int], target: int, low: int, high: int
) -> tuple[int, int, str | None]:
    """(words, tokens, problem): the number of filler words whose count lands in [low, high].

    `count(n)` is the token count of the prompt with n filler words (monotone non-decreasing in
    n)."""
    overhead = count(0)
    if overhead > high:
        return 0, overhead, f"the fixed prompt alone is {overhead} tokens, above the window"
    probe = max(1, min(2000, target - overhead))
    probe_tokens = count(probe)
    per_word = max((probe_tokens - overhead) / probe, 1e-3)
    below, above = (0, overhead), None  # bracket: (words, tokens) below low / above high
    n, tokens = probe, probe_tokens
    for _ in range(MAX_SIZING_STEPS):
        if low <= tokens <= high:
            return n, tokens, None
        if tokens < low:
            below = max(below, (n, tokens))
        else:
            above = min(above, (n, tokens)) if above else (n, tokens)
        guess = n + round((((low + high) / 2) - tokens) / per_word)
        lo_n, hi_n = below[0], above[0] if above else math.inf
        if not lo_n < guess < hi_n:  # the secant step left the bracket: bisect instead
            guess = int((lo_n + hi_n) // 2) if above else max(lo_n + 1, 2 * lo_n)
        if guess in (n, lo_n) or (above and guess >= hi_n):
            break  # word granularity: no whole number of words lands in the window
        n, tokens = guess, count(guess)
        if n > below[0] and tokens > overhead:
            per_word = max((tokens - overhead) / n, 1e-3)
    if low <= tokens <= high:
        return n, tokens, None
    return n, tokens, f"no prompt size landed in [{low}, {high}] (closest: {tokens} tokens)"


Messages = list[ChatMessage]
Count = Callable[[Messages], int]


def _messages(text: str) -> Messages:
    return [{"role": "user", "content": text}]


@dataclass(frozen=True)
class Plan:
    words: int  # filler words
    pads: int  # copies of the pad piece (for the first prompt; each prompt corrects its own)
    pad: str  # a piece of exactly one token


class Prompts:
    """Exactly sized, pairwise different prompts (see the module's docstring)."""

    def __init__(self, count: Count, target: int, seed: int):
        self.count, self.target, self.seed = count, target, seed
        self._filler = Filler(seed)
        self._words: tuple[str, ...] = ()
        self._plan: Plan | None = None
        self._planning = threading.Lock()

    def _salt(self, index: int) -> str:
        return f"[bench {self.seed:x}.{index:07d}]"

    def _text(self, salt: str, words: int, pad: str, pads: int) -> str:
        return " ".join((salt, *self._words[:words])) + pad * pads

    def plan(self) -> Plan:
        """The sizing of prompt 0 (made once, under a lock; later calls return it)."""
        with self._planning:
            if self._plan is None:
                self._plan = self._make_plan()
            return self._plan

    def _make_plan(self) -> Plan:
        salt = self._salt(0)
        overhead = self.count(_messages(salt))
        if overhead > self.target:
            raise BadInput(
                f"bench: --input-tokens {self.target}: the fixed prompt alone is {overhead} tokens"
            )

        def with_words(n: int) -> int:
            self._words = tuple(self._filler.text(n).split(" ")) if n else self._words
            return self.count(_messages(self._text(salt, n, "", 0)))

        low = max(overhead, self.target - PAD_WINDOW)
        words, tokens, problem = size_prompt(with_words, self.target, low, self.target)
        if problem:  # no whole number of words within PAD_WINDOW below the size: take fewer words
            while words > 0 and tokens > self.target:
                words -= 1
                tokens = with_words(words)
        self._words = tuple(self._filler.text(max(words, 1)).split(" "))
        pad = self._pad_piece(self._text(salt, words, "", 0), tokens)
        return Plan(words, self.target - tokens, pad)

    def _pad_piece(self, text: str, tokens: int) -> str:
        """A piece that adds exactly one token per copy after `text` (which costs `tokens`)."""
        for piece in PAD_CANDIDATES:
            one = self.count(_messages(text + piece))
            if (
                one == tokens + 1
                and self.count(_messages(text + piece * PAD_CHECK)) == tokens + PAD_CHECK
            ):
                return piece
        raise EngineError(
            f"bench: /tokenize counts none of {', '.join(repr(p) for p in PAD_CANDIDATES)} as one token: "
            "the prompts cannot be sized exactly"
        )

    def make(self, index: int) -> tuple[Messages, int]:
        """Prompt `index`, exactly `target` tokens by /tokenize (EngineError if it cannot be
        reached)."""
        plan = self.plan()
        salt, words, pads = self._salt(index), plan.words, plan.pads
        tokens = -1
        for _ in range(MAX_FIT_STEPS):
            messages = _messages(self._text(salt, words, plan.pad, pads))
            tokens = self.count(messages)
            if tokens == self.target:
                return messages, tokens
            pads += self.target - tokens
            if pads < 0:  # this salt costs more than the pad can give back: one word fewer
                words, pads = max(0, words - 1), 0
        raise EngineError(
            f"bench: prompt {index}: /tokenize counted {tokens} tokens, not {self.target}, after {MAX_FIT_STEPS} "
            "corrections (does the tokenizer merge the pad piece with its neighbours?)"
        )

    def make_many(self, indices: list[int]) -> list[tuple[Messages, int]]:
        """Several prompts, sized on PREPARE_THREADS threads (one /tokenize call each, usually)."""
        self.plan()
        with ThreadPoolExecutor(PREPARE_THREADS) as pool:
            return list(pool.map(self.make, indices))
