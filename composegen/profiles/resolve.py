"""Loading profiles: YAML with line marks, `extends:` merging, the schema, flags and cross-field
rules.

Merge rule for `extends:` — maps merge deeply (the child's keys win), lists replace the parent's
list whole, and a `null` value removes the inherited key (e.g. `speculative-config: null` in
`vllm:`)."""

from __future__ import annotations

import difflib
import json
import math
import os
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

from composegen.errors import BadInput
from composegen.output import show_value
from composegen.profiles import rules
from composegen.profiles.resolved import MANAGED_FLAGS, Resolved
from composegen.profiles.schema import Profile, ProjectFile, Scope
from composegen.profiles.yamlio import INT_LIMIT, Marked, Marks, load_marked
from composegen.project import Project, profile_name_problem
from composegen.vllm.catalog import Catalog, Flag, FlagError, load_catalog

SCOPE_FILE = "composegen.yaml"  # at the project root: a second copy on one engine (scope)


def merge(base: Any, over: Any, base_marks: Marks, over_marks: Marks, path: tuple = ()) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            child = (*path, key)
            if value is None:
                out.pop(key, None)
                for mark in [m for m in base_marks if m[: len(child)] == child]:
                    del base_marks[mark]
                continue
            out[key] = (
                merge(base.get(key), value, base_marks, over_marks, child) if key in base else value
            )
        return out
    # Lists and scalars replace: drop the parent's marks below this path.
    for mark in [m for m in base_marks if m[: len(path)] == path and len(m) > len(path)]:
        del base_marks[mark]
    return over


MAX_EXTENDS = 16  # a base, a family, a variant…: deeper is a mistake, and each level costs a merge


def _extends_line(doc: Marked) -> str:
    """ ":LINE" of DOC's `extends:` key, when known."""
    where = doc.where(("extends",))
    return f":{where[1]}" if where else ""


def _check_link(
    project: Project, chain: list[str], docs: list[Marked], current: str, child: str | None
) -> None:
    """Refuse the next name of the chain: one too many, a cycle, not a profile name."""
    if len(chain) >= MAX_EXTENDS:
        raise BadInput(
            f"{child}{_extends_line(docs[-1])}: extends: a chain of more than {MAX_EXTENDS} profiles"
        )
    if current in chain:
        cycle = " -> ".join([*chain, current])
        raise BadInput(f"{project.rel(project.profile_path(chain[-1]))}: extends: cycle {cycle}")
    problem = profile_name_problem(current)
    if problem and child is None:
        raise BadInput(f"{current}: {problem}")
    if problem:
        raise BadInput(f"{child}{_extends_line(docs[-1])}: extends: {problem}")


def _refuse_missing(
    project: Project, current: str, display: str, docs: list[Marked], child: str | None
) -> NoReturn:
    if child is None:
        known = project.profile_names()
        close = difflib.get_close_matches(current, known, n=1)
        # Nothing close: name what there is, so every command answers a typo the same
        # helpful way.
        listed = f" (profiles: {', '.join(known)})" if known else ""
        hint = f" (did you mean {close[0]!r}?)" if close else listed
        raise BadInput(f"{display}: no such profile {current!r}{hint}")
    raise BadInput(
        f"{child}{_extends_line(docs[-1])}: extends: no profile {current!r} ({display} is missing)"
    )


def _read(path: Path, display: str) -> tuple[Marked, str | None]:
    """One profile of the chain and the name it extends."""
    doc = load_marked(path, display)
    if not isinstance(doc.data, dict):
        raise BadInput(f"{display}:1: a profile must be a YAML map")
    parent = doc.data.get("extends")
    if parent is not None and not isinstance(parent, str):
        where = doc.where(("extends",))
        raise BadInput(
            f"{display}:{where[1] if where else 1}: extends: must be a profile name, got {parent!r}"
        )
    return doc, parent


def _merged(docs: list[Marked]) -> Marked:
    """Merge from the root ancestor down to the profile itself."""
    data: dict = {}
    marks: Marks = {}
    for doc in reversed(docs):
        over_marks = dict(doc.marks)
        data = merge(data, doc.data, marks, over_marks)
        marks.update(over_marks)
    for key in ("extends", "description"):
        if key in docs[0].data:
            data[key] = docs[0].data[key]
        else:
            data.pop(key, None)
    return Marked(data, marks)


def _load_chain(project: Project, name: str) -> tuple[Marked, list[str]]:
    """The profile merged over its `extends:` ancestors (its data and line marks), and the chain's
    names."""
    chain: list[str] = []
    docs: list[Marked] = []
    current: str | None = name
    child_display = None
    while current is not None:
        _check_link(project, chain, docs, current, child_display)
        path = project.profile_path(current)
        display = project.rel(path)
        # anything else there (a link, a FIFO) is refused by the reader
        if not os.path.lexists(path):
            _refuse_missing(project, current, display, docs, child_display)
        doc, parent = _read(path, display)
        chain.append(current)
        docs.append(doc)
        child_display = display
        current = parent
    return _merged(docs), chain


def load(project: Project, name: str) -> Resolved:
    """The resolved profile. An error found in an ancestor's file names that file and line, and says
    which profile was being resolved (so CI does not blame a parent that is fine on its own)."""
    display = project.rel(project.profile_path(name))
    try:
        return _load(project, name, display)
    except BadInput as exc:
        if not exc.message.startswith((f"{display}:", f"{SCOPE_FILE}:")):
            exc.message = f"{exc.message} (resolving {display})"
            exc.args = (exc.message,)
        raise


def scope(project: Project) -> Scope | None:
    """composegen.yaml's scope (None without the file; docs/profiles.md)."""
    path = project.root / SCOPE_FILE
    if not (path.exists() or path.is_symlink()):
        return None
    marked = load_marked(path, SCOPE_FILE)
    if not marked.data or not isinstance(marked.data, dict):
        raise BadInput(f"{SCOPE_FILE}:1: scope: a map, e.g. scope: {{name: a, port_offset: 100}}")
    try:
        found = ProjectFile.model_validate(marked.data).scope
    except ValidationError as exc:
        raise _schema_error(exc, marked, SCOPE_FILE, ProjectFile) from None
    if found.name == "composegen":  # it would share the unscoped copy's compose projects
        at = _where(marked, ("scope", "name"), SCOPE_FILE)
        raise BadInput(f"{at}: scope.name: composegen names the unscoped stacks; pick another")
    found._at = _where(marked, ("scope", "port_offset"), SCOPE_FILE)
    return found


def prefix(project: Project) -> str:
    """Of every compose project here: composegen.yaml's scope.name, else composegen."""
    return sc.name if (sc := scope(project)) else "composegen"


def _scoped(profile: Profile, sc: Scope, display: str) -> Profile:
    """PROFILE in its project's scope: its container name prefixed, its published ports moved."""
    svc, mon = profile.service, profile.monitoring
    host = sc.port(svc.port.host, f"{display}'s service.port.host")
    port = svc.port.model_copy(update={"host": host})
    named = svc.container_name and f"{sc.name}-{svc.container_name}"
    if mon.prometheus:
        mon = mon.model_copy(update={"port": sc.port(mon.port, f"{display}'s monitoring.port")})
    service = svc.model_copy(update={"port": port, "container_name": named})
    return profile.model_copy(update={"service": service, "monitoring": mon})


def _load(project: Project, name: str, display: str) -> Resolved:
    marked, chain = _load_chain(project, name)
    try:
        profile = Profile.model_validate(marked.data)
    except ValidationError as exc:
        raise _schema_error(exc, marked, display) from None
    if sc := scope(project):
        profile = _scoped(profile, sc, display)
    catalog = _catalog(profile, marked, display)
    flags: dict[str, Any] = {}
    for flag_name, value in profile.vllm.items():
        where = _where(marked, ("vllm", flag_name), display)
        if flag_name in MANAGED_FLAGS:
            raise BadInput(
                f"{where}: vllm.{flag_name}: set by composegen from {MANAGED_FLAGS[flag_name]}"
            )
        try:
            flags[flag_name] = inert(catalog.get(flag_name), catalog.check(flag_name, value))
        # ValueError: e.g. a JSON integer past Python's digit limit
        except (FlagError, ValueError) as exc:
            raise BadInput(f"{where}: vllm.{flag_name}: {str(exc).splitlines()[0][:200]}") from None
        except RecursionError:  # json.loads counts its depth: a 100,000-deep JSON value ends here
            raise BadInput(f"{where}: vllm.{flag_name}: JSON nested too deeply") from None
    prefix = sc.name if sc else "composegen"
    resolved = Resolved(name, display, chain, profile, flags, catalog, marks=marked, prefix=prefix)
    for problem in rules.check(resolved):
        where = _where(marked, problem.path, display)
        raise BadInput(f"{where}: {'.'.join(map(str, problem.path))}: {problem.message}")
    resolved.warnings = rules.warnings(resolved)
    resolved.notes = rules.notes(resolved)
    return resolved


def inert(flag: Flag, value: Any) -> Any:
    """A checked flag value that stays the one value it was meant to be: a list item never starts
    with '-' (it would be the next option, e.g. `--api-key=…`), numbers are finite and fit 64 bits,
    JSON has no NaN."""
    if flag.kind == "list":
        for item in value:
            if item.startswith("-") or not item.isprintable():
                raise FlagError(
                    f"item {item!r} would not stay one value (starts with '-' or holds control characters)"
                )
    elif flag.kind == "json":
        _finite_json(json.loads(value, parse_constant=_no_constant))
    elif isinstance(value, str) and not value.isprintable():
        raise FlagError(f"{value!r} holds control characters")
    else:
        _finite_json(value)
    return value


def _no_constant(name: str) -> Any:
    raise FlagError(f"{name} is not a JSON value a flag can take")


def _finite_json(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise FlagError(f"{value} is not a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
        raise FlagError("integer out of range (at most 2**63-1)")
    for child in (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    ):
        _finite_json(child)


def load_all(project: Project, names: list[str] | None = None) -> list[Resolved]:
    names = names or project.profile_names()
    if not names:
        raise BadInput(f"{project.rel(project.profiles_dir)}: no profiles (*.yaml) found")
    return [load(project, n) for n in names]


def _catalog(profile: Profile, marked: Marked, display: str) -> Catalog:
    try:
        return load_catalog(profile.vllm_version)
    except FlagError as exc:
        raise BadInput(
            f"{_where(marked, ('vllm_version',), display)}: vllm_version: {exc}"
        ) from None


def _where(marked: Marked, path: tuple, display: str) -> str:
    mark = marked.where(path)
    return f"{mark[0]}:{mark[1]}" if mark else display


def _schema_error(
    exc: ValidationError, marked: Marked, display: str, model: type[BaseModel] = Profile
) -> BadInput:
    # In a union (`nofile: 5` or `{soft, hard}`), the member that got past the type check says more.
    err = min(exc.errors(), key=lambda e: (e["type"].endswith("_type"), 0))
    loc = _data_path(err["loc"], marked.data)
    field_path = ".".join(loc)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key{_did_you_mean(loc, model)}"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif "input" in err and err["type"] not in ("value_error",):
        msg = f"{msg}, got {show_value(err['input'])}"
    msg = msg.removeprefix("Value error, ")
    # a quoted value can be huge
    msg = msg if len(msg) <= 400 else f"{msg[:300]}… ({len(msg)} characters)"
    return BadInput(f"{_where(marked, loc, display)}: {field_path}: {msg}")


def _data_path(loc: tuple, data: Any) -> tuple[str, ...]:
    """The error's location as keys of the document: pydantic also puts a union member's name in
    `loc` ('int', 'Ulimit', 'constrained-int'), which is dropped unless the document has such a key
    there (a key `Foo` or `a[b]` written by the user stays)."""
    path: list[str] = []
    for part in loc:
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if (isinstance(data, dict) and part in data) or in_list:
            data = data[part]
        elif _is_union_tag(part):
            continue
        else:
            data = None
        path.append(str(part))
    return tuple(path)


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the union member's type name in `loc` (e.g. 'int', 'Ulimit', 'constrained-int').
    return isinstance(part, str) and (
        part in {"int", "str", "bool", "float"}
        or part[:1].isupper()
        or "[" in part
        or part.startswith("constrained")
    )


def _did_you_mean(loc: tuple, root: type[BaseModel]) -> str:
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        info = model.model_fields.get(part) if model else None
        ann = getattr(info, "annotation", None) if info else None
        model = next(
            (
                a
                for a in getattr(ann, "__args__", (ann,))
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
    if model is None or not loc:
        return ""
    close = difflib.get_close_matches(loc[-1].replace("-", "_"), list(model.model_fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
