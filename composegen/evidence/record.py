"""Checks of evidence.json before its model (reports/bundle.py: EvidenceBundle) is trusted, so
compare, plan and qualify never meet a damaged bundle (a string where a number belongs, NaN, a
5000-digit integer, a field nested 10,000 deep).
Anywhere in the document: numbers are finite and fit 64 bits, nesting stops at MAX_DEPTH.
"""

from __future__ import annotations

import math
from itertools import chain, compress, repeat
from operator import is_
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from composegen.errors import BadInput
from composegen.evidence.reports.bundle import INT_LIMIT, EvidenceBundle, LoadedRun
from composegen.project import profile_name_problem
from composegen.report import Report

SCHEMA: Final = "composegen.evidence/v1"
MAX_DEPTH = 32  # evidence.json nests 5 deep; deeper is damage, and would exhaust the stack later on
Part = TypeVar("Part", bound=Report)


def check_document(doc: Any, where: str) -> EvidenceBundle:
    """The bundle as the model, or BadInput `where: field: problem` (one line)."""
    if not _fine(doc):  # where, found entry by entry
        _walk(doc, (), where)
    profile = doc.get("profile") if isinstance(doc, dict) else None
    name = profile.get("name") if isinstance(profile, dict) else None
    if isinstance(name, str) and (problem := profile_name_problem(name)):
        raise BadInput(f"{where}: profile.name: {problem}")
    try:
        return EvidenceBundle.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "document"
        shown = repr(first.get("input"))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise BadInput(f"{where}: {field}: {first['msg']}, got {shown}") from None


def load_part(doc: LoadedRun, key: str, model: type[Part]) -> Part | None:
    """One part of a loaded bundle (`bench`, `ladder`) as its own report model, None when the run
    has none; a hand-edited part that does not fit is bad input (exit 2)."""
    if (part := getattr(doc, key)) is None:
        return None
    # the part as the file holds it: the bundle model reads only some of its keys
    raw = part.model_dump(mode="json", exclude_unset=True) if isinstance(part, Report) else part
    try:
        return model.model_validate(raw)
    except ValueError as exc:
        problem = " ".join(str(exc).splitlines()[1:3]).strip()
        raise BadInput(f"{doc.path}/evidence.json: {key}: {problem}") from None


# entries of one list: a sweep or a ladder has dozens; report time stays bounded
MAX_ITEMS = 100_000
MAX_STRING = 64 * 1024  # the longest text a bundle records (an args line, an error) is a few kB


def _encodes(text: str) -> bool:
    """No lone surrogate (\\ud800-\\udfff): text a report can print, plot and write."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fine(doc: Any) -> bool:
    """Nothing in DOC that _walk refuses, checked a depth at a time, each kind of value of a depth
    sifted at C speed (a bench of 30,000 levels holds 1.5 million: 3 s entry by entry here)."""
    values, depth = [doc], 0
    while values:
        types = list(map(type, values))
        dicts, lists, strings, floats, ints = (
            list(compress(values, map(is_, types, repeat(kind))))
            for kind in (dict, list, str, float, int)  # exactly: a bool is no int
        )
        strings += map(str, chain.from_iterable(dicts))  # the keys
        if not (
            depth <= MAX_DEPTH
            and all(map(math.isfinite, floats))
            and max(map(abs, ints), default=0) <= INT_LIMIT
            and max(map(len, strings), default=0) <= MAX_STRING
            and max(map(len, lists), default=0) <= MAX_ITEMS
            and _encodes("".join(strings))
        ):
            return False
        values = [*chain.from_iterable(map(dict.values, dicts)), *chain.from_iterable(lists)]
        depth += 1
    return True


def _walk(value: Any, path: tuple, where: str) -> None:
    """Refuse what no field of any report means, wherever it sits: NaN/inf, huge integers, deep
    nesting."""
    field = ".".join(map(str, path)) or "document"
    if len(path) > MAX_DEPTH:
        msg = f"{where}: {'.'.join(map(str, path[:4]))}…: nested deeper than {MAX_DEPTH} levels"
        raise BadInput(msg)
    if isinstance(value, float) and not math.isfinite(value):
        msg = f"{where}: {field}: {value} is not a number (NaN and infinities are refused)"
        raise BadInput(msg)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
        raise BadInput(f"{where}: {field}: integer out of range (at most 2**63-1)")
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise BadInput(f"{where}: {field}: a {len(value)}-character string (at most {MAX_STRING})")
    if isinstance(value, str) and not _encodes(value):
        raise BadInput(f"{where}: {field}: holds a lone surrogate (\\ud800-\\udfff), not text")
    if isinstance(value, dict):
        for key, child in value.items():
            _walk(str(key), path, where)  # a key: text of the dict's own field
            _walk(child, (*path, key), where)
    elif isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise BadInput(f"{where}: {field}: {len(value)} entries (at most {MAX_ITEMS})")
        for index, child in enumerate(value):
            _walk(child, (*path, index), where)
