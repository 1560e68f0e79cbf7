"""Semantic diff of two Compose stacks (rendered by composegen or hand-written).

Inputs (`load_side(spec, root)`): a compose file path (relative to the cwd, else to root),
`REF:path` (the file at a git revision of the repository at root), or a profile name (rendered in
memory with `composegen.render.render_profile_text`). A Side is (label, text, data). The YAML itself
is read by composeyaml.py (bounded, no aliases, service shapes checked).

Normalisation (spelling does not count as a change) and the classification rule (a difference
that only renames an otherwise identical stack is "identity") are in docs/diff.md. Identity paths
come from the CLI (the `identity:` lists of the profiles involved, identity_paths_for)."""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composegen.diff import gitref
from composegen.diff.argv import CATALOG_VERSION, flag_default
from composegen.diff.composeyaml import parse_compose_text, read_file
from composegen.diff.normalise import flatten_into, jsonable, normalise_service
from composegen.diff.reports import DiffChange
from composegen.errors import BadInput
from composegen.profiles import identity, resolve
from composegen.project import Project
from composegen.render import render_profile_text

FUNCTIONAL = "functional"
IDENTITY = "identity"
COMPOSEGEN_LABEL_PREFIX = "io.composegen."
_IGNORED_TOP_LEVEL = {"version"}  # obsolete; compose only warns about it


@dataclass(frozen=True)
class Side:
    label: str  # what the user named: the path, REF:path, or profile:NAME
    text: str
    data: dict


@dataclass(frozen=True)
class Change:
    path: str
    change_class: str  # FUNCTIONAL or IDENTITY
    before: Any  # None when absent on side a
    after: Any  # None when absent on side b
    segments: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.segments:  # built by hand from a dotted path
            object.__setattr__(self, "segments", tuple(self.path.split(".")))

    def report(self) -> DiffChange:
        # by the alias: `class` cannot be a keyword argument
        return DiffChange.model_validate(
            {
                "path": self.path,
                "class": self.change_class,
                "before": self.before,
                "after": self.after,
            }
        )


# ---------------------------------------------------------------- inputs


def load_side(spec: str, root: Path) -> Side:
    """Read and parse one diff input: a compose file, `REF:path`, or a profile name."""
    root = Path(root)
    if not spec or not spec.strip():
        raise BadInput("diff: input: empty (give a compose file, REF:path or a profile name)")
    path = _existing_path(spec, root)
    if path is not None:
        text = read_file(path, spec)
        return Side(spec, text, parse_compose_text(text, spec))
    ref_spec = gitref.split_ref_spec(spec)
    if ref_spec is not None:
        text = gitref.read_at_ref(root, *ref_spec)
        return Side(spec, text, parse_compose_text(text, spec))
    node_of_profile = (
        spec.count("/") == 1 and (Path(root) / "profiles" / f"{spec.split('/')[0]}.yaml").is_file()
    )
    # NAME/NODE: one node of a multi-node profile
    if _looks_like_path(spec) and not node_of_profile:
        problem = "is a directory, not a compose file" if Path(spec).is_dir() else "no such file"
        raise BadInput(f"{spec}: diff input: {problem}")
    label = f"profile:{spec}"
    text = render_profile_text(root, spec)
    return Side(label, text, parse_compose_text(text, label))


LABEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def identity_paths_for(project: Any, specs: Iterable[str]) -> list[str]:
    """The identity paths the profiles behind the inputs mark (each profile's `identity:` list),
    sorted.

    A profile-name spec uses that profile. A file or REF:path uses the profile named by its
    `io.composegen.profile` label when the project still has it (with that profile's current list).
    """
    project = project if isinstance(project, Project) else Project(Path(project))
    named, labelled = [], []
    for spec in specs:
        if _is_profile_spec(spec, project.root):
            named.append(spec)
            continue
        for service in _services(load_side(spec, project.root).data).values():
            label = normalise_service(service).get(("labels", COMPOSEGEN_LABEL_PREFIX + "profile"))
            # a file's text, not a path to open
            if label and not LABEL_NAME_RE.fullmatch(str(label)):
                raise BadInput(
                    f"{spec}: label {COMPOSEGEN_LABEL_PREFIX}profile is not a profile name "
                    f"({len(str(label)):,} characters: {str(label)[:40]!r}…)"
                )
            if label and project.profile_path(label).is_file():
                labelled.append(label)
    paths = {p for name in named for p in resolve.load(project, name).profile.identity}
    for name in labelled:
        # a profile broken since that stack was rendered must not block
        with contextlib.suppress(BadInput):
            paths.update(resolve.load(project, name).profile.identity)
    return sorted(paths)


def _is_profile_spec(spec: str, root: Path) -> bool:
    return not (_existing_path(spec, root) or gitref.split_ref_spec(spec) or _looks_like_path(spec))


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or spec.endswith((".yaml", ".yml"))


def _existing_path(spec: str, root: Path) -> Path | None:
    for candidate in (Path(spec), root / spec):
        if candidate.is_file():
            return candidate
    return None


# ---------------------------------------------------------------- compare


def compare(a: dict, b: dict, *, identity_paths: Iterable[str] = ()) -> list[Change]:
    """Semantic changes from stack a to stack b; functional first, then by path."""
    extra = (identity_paths,) if isinstance(identity_paths, str) else tuple(identity_paths)
    # the profile schema refuses these already; any other caller gets the same rule
    for pattern in extra:
        if why := identity.problem(pattern):
            raise BadInput(f"identity: {why}")
    flat_a, flat_b = _flatten_stack(a), _flatten_stack(b)
    services_a, services_b = _services(a), _services(b)
    for name in services_a.keys() | services_b.keys():
        if name in services_a and name in services_b:
            for flat, service in ((flat_a, services_a[name]), (flat_b, services_b[name])):
                for sub, leaf in normalise_service(service).items():
                    flat[("services", name, *sub)] = leaf
        else:
            # A service on one side only is one change holding the whole service, not one per key.
            for flat, services in ((flat_a, services_a), (flat_b, services_b)):
                if name in services:
                    flat[("services", name)] = jsonable(services[name])
    changes = []
    for segments in flat_a.keys() | flat_b.keys():
        before, after = flat_a.get(segments), flat_b.get(segments)
        if not _same(before, after):
            change_class = classify(segments, before, after, extra)
            changes.append(Change(".".join(segments), change_class, before, after, segments))
    changes.sort(key=lambda c: (c.change_class != FUNCTIONAL, c.segments))
    return changes


# The labels that carry a profile's reviewed opt-ins: turning one on or off changes what the stack
# may do.
_REVIEWED_OPT_INS = {
    COMPOSEGEN_LABEL_PREFIX + "unsafe-mounts",
    COMPOSEGEN_LABEL_PREFIX + "image-policy",
}


def classify(
    segments: tuple[str, ...], before: Any, after: Any, identity_paths: tuple[str, ...] = ()
) -> str:
    """FUNCTIONAL or IDENTITY for one differing path (the rule is in the module docstring)."""
    if segments == ("name",):
        return IDENTITY
    rest = segments[2:] if segments[0] == "services" else ()
    if rest in {("container_name",), ("command", "--served-model-name")}:
        return IDENTITY
    if len(rest) == 2 and rest[0] == "ports" and before is not None and after is not None:
        return IDENTITY
    if len(rest) == 2 and rest[0] == "labels" and rest[1].startswith(COMPOSEGEN_LABEL_PREFIX):
        return FUNCTIONAL if rest[1] in _REVIEWED_OPT_INS else IDENTITY
    if any(identity.matches(segments, pattern, before, after) for pattern in identity_paths):
        return IDENTITY
    return FUNCTIONAL


def _flatten_stack(doc: dict) -> dict[tuple[str, ...], Any]:
    flat: dict[tuple[str, ...], Any] = {}
    for key, value in doc.items():
        if str(key) not in _IGNORED_TOP_LEVEL and str(key) != "services":
            flatten_into(flat, (str(key),), value)
    return flat


def _services(doc: dict) -> dict[str, dict]:
    services = doc.get("services")
    if not isinstance(services, dict):
        return {}
    return {
        str(name): service if isinstance(service, dict) else {}
        for name, service in services.items()
    }


def _same(before: Any, after: Any) -> bool:
    # Strict: plain == would call True and 1 (or "a" list and tuple) equal; sort_keys ignores key
    # order.
    dump = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731
    return dump(before) == dump(after)


# ---------------------------------------------------------------- output


def exit_status(changes: Iterable[Change], functional_only: bool = False) -> int:
    """0 when the stacks are equivalent, 1 when they differ (only functional ones, if asked)."""
    counted = [c for c in changes if not functional_only or c.change_class == FUNCTIONAL]
    return 1 if counted else 0


def format_text(changes: list[Change], label_a: str, label_b: str) -> str:
    """Human-readable report: one line per change, functional group first, then a summary line."""
    lines = [f"--- {label_a}", f"+++ {label_b}"]
    services = {
        c.segments[1] for c in changes if c.segments[0] == "services" and len(c.segments) > 1
    }
    shown = [(c, _display_path(c.segments, show_service=len(services) > 1)) for c in changes]
    width = min(max((len(p) for _, p in shown), default=0), 48)
    for change, shown_path in shown:
        values = f"{_show(change.before)} → {_show(change.after)}"
        lines.append(
            f"{change.change_class:<10}  {shown_path:<{width}}  {values}{_default_note(change)}"
        )
    functional = sum(c.change_class == FUNCTIONAL for c in changes)
    if not changes:
        lines.append("summary: no semantic differences")
    else:
        lines.append(
            f"summary: {functional} functional, {len(changes) - functional} identity "
            f"({len(changes)} change{'s' if len(changes) != 1 else ''})"
        )
    return "\n".join(lines)


def unified(text_a: str, text_b: str, label_a: str, label_b: str) -> str:
    """Plain line diff of the two texts (what a reviewer sees in git)."""
    return "".join(
        difflib.unified_diff(_lines(text_a), _lines(text_b), fromfile=label_a, tofile=label_b)
    )


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


def _display_path(segments: tuple[str, ...], show_service: bool) -> str:
    if segments[0] != "services" or len(segments) < 2:
        return " ".join(segments)
    if len(segments) == 2:
        return f"service {segments[1]}"
    rest = segments[2:]
    # a flag, or model/args
    shown = rest[1] if rest[0] == "command" and len(rest) == 2 else " ".join(rest)
    return f"{segments[1]}: {shown}" if show_service else shown


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, str):
        text = value if value else '""'
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


def _default_note(change: Change) -> str:
    segments = change.segments
    if len(segments) != 4 or segments[2] != "command" or None not in (change.before, change.after):
        return ""
    default = flag_default(segments[3])
    if default is None:
        return ""
    return f"  (absent = vLLM {CATALOG_VERSION} default {_show(default)})"
