"""Safe reading of Python-repr text such as vLLM's `non-default args: {...}` line.

`parse_literal(text)` understands dicts, lists, tuples, sets, strings, numbers, True/False/None
(and JSON's true/false/null). Anything else — `<DynamicShapesType.BACKED: 'backed'>`,
`PosixPath('/x')`, `CompilationConfig(level=3)`, `__import__('os').system('x')` — is kept as its
source text (a str). Nothing is ever evaluated: the only evaluator used is `ast.literal_eval` on a
single, already isolated string token.

Output is JSON-able: tuples and sets become lists, bytes and non-scalar dict keys become text.
Raises `LiteralError` (a ValueError) on text that is not balanced (e.g. a truncated log line).

`same_value(profile, engine)` compares a value as written in a profile with the value as the engine
printed it (see its docstring)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping

__all__ = ["LiteralError", "enum_repr_parts", "parse_literal", "same_value"]


class LiteralError(ValueError):
    """The text is not a complete repr (unbalanced brackets or quotes, trailing garbage)."""


_NUMBER = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?)"
)
_STRING_START = re.compile(r"(?:[rRbBuU]|[rR][bB]|[bB][rR])?(?:'''|\"\"\"|'|\")")
_NAMES = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_ENUM_REPR = re.compile(r"^<(?P<cls>[\w.]+)\.(?P<name>\w+): (?P<value>.*)>$", re.S)


def enum_repr_parts(text: str) -> tuple[str, str] | None:
    """`<CUDAGraphMode.FULL: 2>` -> ("FULL", "2"); None when the text is no enum repr."""
    m = _ENUM_REPR.match(text.strip())
    return (m.group("name"), m.group("value")) if m else None


def parse_literal(text: str) -> object:
    parser = _Parser(text)
    value = parser.value(terminators="")
    parser.skip_ws()
    if parser.pos != len(text):
        raise LiteralError(
            f"unexpected text at offset {parser.pos}: {text[parser.pos : parser.pos + 20]!r}"
        )
    return value


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    # -- helpers -------------------------------------------------------------------------------
    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _ends_value(self, terminators: str) -> bool:
        """After a value only a separator, a closer or the end may follow."""
        self.skip_ws()
        ch = self.peek()
        return ch == "" or ch in terminators

    # -- values --------------------------------------------------------------------------------
    def value(self, terminators: str) -> object:
        self.skip_ws()
        start = self.pos
        try:
            parsed = self._structured_or_scalar(terminators)
        except _NotLiteral:
            parsed = _NotLiteral
        # `'a'.join(x)` or `{...}.keys()` start like literals but are expressions: keep the text.
        if parsed is _NotLiteral or not self._ends_value(terminators):
            self.pos = start
            return self._opaque(terminators)
        return parsed

    def _structured_or_scalar(self, terminators: str) -> object:
        ch = self.peek()
        if ch == "{":
            return self._dict_or_set()
        if ch == "[":
            return self._sequence("[", "]")
        if ch == "(":
            return self._sequence("(", ")")
        if _STRING_START.match(self.text, self.pos):
            return self._strings()
        m = _NUMBER.match(self.text, self.pos)
        if m and m.group(0) not in ("+", "-", "."):
            return self._number(m)
        m = re.compile(r"[A-Za-z_]\w*").match(self.text, self.pos)
        if m and m.group(0) in _NAMES:
            self.pos = m.end()
            return _NAMES[m.group(0)]
        raise _NotLiteral

    def _number(self, m: re.Match) -> object:
        token = m.group(0)
        nxt = self.text[m.end() : m.end() + 1]
        if nxt and (nxt.isalnum() or nxt in "_.'\""):
            raise _NotLiteral  # e.g. `1j`, `3abc`
        self.pos = m.end()
        body = token.lstrip("+-")
        try:
            if body[:2].lower() in ("0x", "0o", "0b"):
                number: object = int(token, 0)
            elif any(c in body for c in ".eE"):
                number = float(token)
            else:
                number = int(token)
        except ValueError:
            raise _NotLiteral from None
        return number

    def _strings(self) -> object:
        """One string token, or adjacent tokens ('a' 'b') joined like Python does."""
        parts = []
        while True:
            token = self._string_token()
            try:
                parts.append(ast.literal_eval(token))  # a lone string token: safe
            except (ValueError, SyntaxError):
                raise _NotLiteral from None
            self.skip_ws()
            if not _STRING_START.match(self.text, self.pos):
                break
        if all(isinstance(p, str) for p in parts):
            return "".join(parts)
        raise _NotLiteral  # bytes (or a str/bytes mix) are not JSON-able: keep the text

    def _string_token(self) -> str:
        m = _STRING_START.match(self.text, self.pos)
        assert m is not None
        quote = m.group(0).lstrip("rRbBuU")
        i = m.end()
        while i < len(self.text):
            if self.text[i] == "\\":
                i += 2
                continue
            if self.text.startswith(quote, i):
                token = self.text[self.pos : i + len(quote)]
                self.pos = i + len(quote)
                return token
            if len(quote) == 1 and self.text[i] == "\n":
                break
            i += 1
        raise LiteralError(f"unterminated string at offset {self.pos}")

    def _dict_or_set(self) -> object:
        self.pos += 1  # {
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            return {}
        result: dict | list | None = None
        while True:
            key = self.value(terminators=":,}")
            self.skip_ws()
            if result is None:
                result = {} if self.peek() == ":" else []
            if isinstance(result, dict):
                if self.peek() != ":":
                    raise LiteralError(f"expected ':' at offset {self.pos}")
                self.pos += 1
                result[_json_key(key)] = self.value(terminators=",}")
            else:
                result.append(key)
            self.skip_ws()
            ch = self.peek()
            self.pos += 1
            if ch == "}":
                return result
            if ch != ",":
                raise LiteralError(f"expected ',' or '}}' at offset {self.pos - 1}")
            self.skip_ws()
            if self.peek() == "}":  # trailing comma
                self.pos += 1
                return result

    def _sequence(self, opener: str, closer: str) -> list:
        self.pos += 1
        items: list = []
        while True:
            self.skip_ws()
            if self.peek() == closer:
                self.pos += 1
                return items
            items.append(self.value(terminators="," + closer))
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
            elif ch != closer:
                raise LiteralError(f"expected ',' or {closer!r} at offset {self.pos}")

    # -- anything that is not a literal ---------------------------------------------------------
    def _opaque(self, terminators: str) -> str:
        """Scan to the next separator at bracket depth 0, stepping over strings and <...> reprs."""
        start = self.pos
        stack: list[str] = []
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if not stack and ch in terminators:
                break
            if _STRING_START.match(text, self.pos) and (
                ch in "'\"" or not text[self.pos - 1 : self.pos].isalnum()
            ):
                self._string_token()
                continue
            if ch in _CLOSERS:
                stack.append(_CLOSERS[ch])
            elif ch == "<" and re.match(r"[A-Za-z_]", text[self.pos + 1 : self.pos + 2]):
                stack.append(">")  # an object repr such as <Enum.X: 1> or <function f at 0x..>
            elif stack and ch == stack[-1]:
                stack.pop()
            elif ch in ")]}":
                raise LiteralError(f"unbalanced {ch!r} at offset {self.pos}")
            self.pos += 1
        if stack:
            raise LiteralError(f"unterminated {stack[-1]!r} expression starting at offset {start}")
        source = text[start : self.pos].strip()
        if not source:
            raise LiteralError(f"missing value at offset {start}")
        return source


class _NotLiteral(Exception):
    """Internal: the value at this position is not a plain literal."""


def _json_key(key: object) -> object:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return key
    return repr(key) if not isinstance(key, list) else str(key)


# --- comparing a profile's value with the value the engine printed
# ---------------------------------


def _norm(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.lower() in ("none", "null"):
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d*\.\d+(?:[eE][+-]?\d+)?|-?\d+[eE][+-]?\d+", text):
        return float(text)
    if text[:1] in "{[":
        try:
            return json.loads(text)
        except ValueError:
            try:
                return parse_literal(text)
            except LiteralError:
                return text
    return text


def same_value(profile: object, engine: object) -> bool:
    """Whether a profile's value is what the engine printed, compared normalised: 4096 == "4096",
    a dict == its JSON or repr text, a profile dict matches when every key it sets has the engine's
    value (the engine fills in the rest), an enum repr matches its member name or value, and a
    scalar matches a one-element list."""
    p, e = _norm(profile), _norm(engine)
    if isinstance(p, dict):
        return _same_dict(p, e)
    if isinstance(e, list) and not isinstance(p, list):
        return len(e) == 1 and same_value(p, e[0])
    if isinstance(p, list):
        items = e if isinstance(e, list) else [e]
        return len(p) == len(items) and all(same_value(a, b) for a, b in zip(p, items, strict=True))
    enum = _same_enum(p, e)
    if enum is not None:
        return enum
    if isinstance(p, bool) or isinstance(e, bool):
        return type(p) is type(e) and p == e
    if isinstance(p, (int, float)) and isinstance(e, (int, float)):
        return float(p) == float(e)
    return p == e


def _same_dict(p: Mapping[object, object], e: object) -> bool:
    """Every key the profile sets has the engine's value (the engine fills in the rest)."""
    if not isinstance(e, dict):
        return False
    by_key = {str(k): v for k, v in e.items()}
    return all(str(k) in by_key and same_value(v, by_key[str(k)]) for k, v in p.items())


def _same_enum(p: object, e: object) -> bool | None:
    """When either side is an enum repr: whether the other is its member name or value; else
    None."""
    for enum_text, other in ((e, p), (p, e)):
        if isinstance(enum_text, str) and (parts := enum_repr_parts(enum_text)):
            name, raw_value = parts
            try:
                value = parse_literal(raw_value)
            except LiteralError:
                value = raw_value
            if isinstance(other, str):
                return other.lower() == name.lower() or other == value
            return same_value(other, value)
    return None
