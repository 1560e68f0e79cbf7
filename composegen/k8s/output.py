"""out/NAME/k8s/: the manifests as YAML text, each file under composegen's generated header; the
workload's header lists the notes. Our own small block emitter (keys as
composegen.templating.yaml_key writes them, scalars as JSON, a script as a literal block when it
reads back exactly): byte-identical output wherever it runs, with or without libyaml, and a tenth of
PyYAML's time.

Keys of `render_profile`/`render_all` are paths under out/ (NAME/k8s/FILE), beside the compose keys
of composegen.render, so `render.write`, `render.check` and the orphan sweep treat both targets
alike."""

from __future__ import annotations

import json
import re
from typing import Any

from composegen.k8s.manifests import Manifests, build
from composegen.k8s.notes import Notes
from composegen.ledger import GENERATED_HEADER, K8S_DIR
from composegen.ledger import K8S_CACHE_FILE as CACHE_FILE
from composegen.profiles import resolve
from composegen.profiles.reports import K8sNote, K8sRendered
from composegen.project import Project
from composegen.render import monitoring_files, render_stack
from composegen.templating import yaml_key

# Only printable ASCII without trailing blanks reads back from a literal block exactly.
_NOT_LITERAL = re.compile(r"[ \t]\n|[^\x20-\x7e\n]")


def _block(text: str, indent: str) -> list[str] | None:
    """A multi-line string as a YAML literal block, when it reads back exactly (else None:
    JSON-quoted)."""
    if (
        not text.endswith("\n")
        or text.endswith("\n\n")
        or text[0] in " \t"
        or _NOT_LITERAL.search(text)
    ):
        return None
    return ["|", *[f"{indent}{line}" if line else "" for line in text.split("\n")[:-1]]]


def _yaml(value: Any, indent: str = "") -> list[str]:
    """Block-style YAML lines of a JSON-like value (mappings in insertion order)."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{indent}{yaml_key(str(key))}:"
            if isinstance(item, (dict, list)) and item:
                out += [head, *_yaml(item, indent + ("  " if isinstance(item, dict) else ""))]
            else:
                out += _leaf(head, item, indent + "  ")
        return out
    for item in value:  # a list: items at the parent key's indentation, as kubectl writes them
        if isinstance(item, dict) and item:
            first, *rest = _yaml(item, indent + "  ")
            out += [f"{indent}- {first.lstrip()}", *rest]
        elif isinstance(item, list) and item:
            out += [f"{indent}-", *_yaml(item, indent + "  ")]
        else:
            out += _leaf(f"{indent}-", item, indent + "  ")
    return out


def _leaf(head: str, item: Any, indent: str) -> list[str]:
    if isinstance(item, (dict, list)):
        return [f"{head} {'{}' if isinstance(item, dict) else '[]'}"]
    block = _block(item, indent) if isinstance(item, str) and "\n" in item else None
    if block is None:
        # JSON scalars are YAML scalars (strings always quoted, as in the compose files): no quoting
        # rules to get wrong; ASCII escapes, or YAML would read U+2028, U+0085 and other
        # non-printables inside quotes
        return [f"{head} {json.dumps(item)}"]
    return [f"{head} {block[0]}", *block[1:]]


def _comment(text: str) -> str:
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)


def header(r: resolve.Resolved, what: str, notes: Notes | None = None) -> list[str]:
    lines = [
        f"{GENERATED_HEADER[2:]}{r.path}. Do not edit: change the profile and run `composegen render --target k8s`.",
        f"profile: {r.name}  hash: {r.hash}  {what}",
    ]
    if notes is not None:
        for title, items in (
            ("Compose settings without a Kubernetes equivalent (NOT rendered):", notes.unmapped),
            ("Rendered another way than compose does:", notes.adapted),
            (
                "Security-relevant, emitted only because the compose stack has the same:",
                notes.security,
            ),
        ):
            if items:
                lines.append(title)
                lines += [f"  {n.setting}: {n.value} -> {n.k8s}" for n in items]
    return [("# " + _comment(line)).rstrip() for line in lines]


CACHE_HEADER = (
    "the compile caches' claim: vLLM's torch.compile, Inductor, Triton, FlashInfer and CUDA JIT "
    "artifacts, named by the key of what makes them valid (docs/caches.md)"
)
# it starts empty: the init container holds vLLM back until the pinned snapshot is in it
CLAIM_HEADER = (
    "the Hugging Face cache the pods mount; fill it with the pinned snapshot before they start"
)


def dump(doc: dict, comments: list[str]) -> str:
    return "\n".join([*comments, *_yaml(doc)]) + "\n"


def render_profile(r: resolve.Resolved) -> tuple[dict[str, str], Manifests]:
    """{NAME/k8s/FILE: text} of one profile, and the manifests they came from (for the notes)."""
    m = build(r)
    base = f"{r.name}/{K8S_DIR}"
    kind = f"{m.kind} {m.workload['apiVersion']}"
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [
            m.workload_file,
            "service.yaml",
            *(["pvc.yaml"] if m.claim else []),
            *([CACHE_FILE] if m.cache_claim else []),
        ],
    }
    files = {
        f"{base}/kustomization.yaml": dump(
            kustomization, header(r, "`kubectl apply -k` this directory")
        ),
        f"{base}/{m.workload_file}": dump(m.workload, header(r, kind, m.notes)),
        f"{base}/service.yaml": dump(m.service, header(r, "the API of the stack")),
    }
    if m.claim:
        files[f"{base}/pvc.yaml"] = dump(m.claim, header(r, CLAIM_HEADER))
    if m.cache_claim:
        files[f"{base}/{CACHE_FILE}"] = dump(m.cache_claim, header(r, CACHE_HEADER))
    return files, m


def rendered_profiles(project: Project) -> set[str]:
    """Profiles that already have out/NAME/k8s/: `render` without --target keeps them fresh."""
    out = project.out_dir
    if not out.is_dir() or out.is_symlink():
        return set()
    return {d.parent.name for d in out.glob(f"*/{K8S_DIR}") if d.is_dir() and not d.is_symlink()}


TARGETS = ("compose", "k8s", "all")


def render_targets(
    project: Project, names: list[str] | None, target: str | None
) -> tuple[dict[str, str], list[Manifests], tuple[str, ...], list[str]]:
    """Every file `render` writes or checks (in memory first: bad input writes nothing), the k8s
    manifests among them, and the targets whose orphans count. No --target: compose, plus k8s for
    every profile that already has out/NAME/k8s/ (rendered for Kubernetes once, a profile stays
    fresh and drift-checked); else compose, k8s, or all of both. Each profile is loaded once for
    both targets. Last: the profiles with `standby` (their dev routes must stay behind the edge)."""
    keep = rendered_profiles(project) if target is None else None
    rendered: dict[str, str] = {}
    built: list[Manifests] = []
    standby: list[str] = []
    for r in resolve.load_all(project, names):
        if r.profile.standby is not None:
            standby.append(r.name)
        if target != "k8s":
            rendered |= render_stack(r) | monitoring_files(r)
        if target != "compose" and (keep is None or r.name in keep):
            files, m = render_profile(r)
            rendered |= files
            built.append(m)
    swept = ("compose", "k8s") if target in (None, "all") else (target,)
    return rendered, built, swept, standby


def report(built: list[Manifests]) -> list[K8sRendered]:
    def notes(items: list) -> list[K8sNote]:
        return [K8sNote(setting=n.setting, value=n.value, k8s=n.k8s) for n in items]

    return [
        K8sRendered(
            profile=m.profile,
            kind=m.kind,  # type: ignore[arg-type]
            files=[
                f"out/{m.profile}/{K8S_DIR}/{f}"
                for f in ("kustomization.yaml", m.workload_file, "service.yaml")
                + (("pvc.yaml",) if m.claim else ())
                + ((CACHE_FILE,) if m.cache_claim else ())
            ],
            unmapped=notes(m.notes.unmapped),
            adapted=notes(m.notes.adapted),
            security=notes(m.notes.security),
        )
        for m in built
    ]
