"""out/NAME/k8s/: the manifests as YAML text (PyYAML's safe emitter: every value quoted as YAML needs, key
order as built), each file under composegen's generated header; the workload's header lists the notes.

Keys of `render_profile`/`render_all` are paths under out/ (NAME/k8s/FILE), beside the compose keys of
composegen.render, so `render.write`, `render.check` and the orphan sweep treat both targets alike.
"""

from __future__ import annotations

import re

import yaml

from composegen.k8s.manifests import Manifests, Notes, build
from composegen.profiles import resolve as profiles
from composegen.profiles.reports import K8sNote, K8sRendered
from composegen.project import Project
from composegen.render import GENERATED_HEADER, K8S_DIR


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:  # a shared dict (the probes' httpGet) is written out twice
        return True


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not re.search(r"[ \t]\n|[ \t]$", value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def _comment(text: str) -> str:
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)


def header(r: profiles.Resolved, what: str, notes: Notes | None = None) -> list[str]:
    lines = [
        f"{GENERATED_HEADER[2:]}{r.path}. Do not edit: change the profile and run `composegen render --target k8s`.",
        f"profile: {r.name}  hash: {r.hash}  {what}",
    ]
    if notes is not None:
        for title, items in (
            ("Compose settings without a Kubernetes equivalent (NOT rendered):", notes.unmapped),
            ("Rendered another way than compose does:", notes.adapted),
            ("Security-relevant, emitted only because the compose stack has the same:", notes.security),
        ):
            if items:
                lines.append(title)
                lines += [f"  {n.setting}: {n.value} -> {n.k8s}" for n in items]
    return [("# " + _comment(line)).rstrip() for line in lines]


def dump(doc: dict, comments: list[str]) -> str:
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100_000)
    return "\n".join([*comments, body])


def render_profile(r: profiles.Resolved) -> tuple[dict[str, str], Manifests]:
    """{NAME/k8s/FILE: text} of one profile, and the manifests they came from (for the notes)."""
    m = build(r)
    base = f"{r.name}/{K8S_DIR}"
    kind = f"{m.kind} {m.workload['apiVersion']}"
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [m.workload_file, "service.yaml"],
    }
    files = {
        f"{base}/kustomization.yaml": dump(kustomization, header(r, "`kubectl apply -k` this directory")),
        f"{base}/{m.workload_file}": dump(m.workload, header(r, kind, m.notes)),
        f"{base}/service.yaml": dump(m.service, header(r, "the API of the stack")),
    }
    return files, m


def rendered_profiles(project: Project) -> set[str]:
    """Profiles that already have out/NAME/k8s/: `render` without --target keeps them fresh."""
    out = project.out_dir
    if not out.is_dir() or out.is_symlink():
        return set()
    return {d.parent.name for d in out.glob(f"*/{K8S_DIR}") if d.is_dir() and not d.is_symlink()}


def render_all(
    project: Project, names: list[str] | None = None, *, existing_only: bool = False
) -> tuple[dict[str, str], list[Manifests]]:
    """The k8s files of the named profiles (all by default; with existing_only, only those with out/NAME/k8s/)."""
    rendered: dict[str, str] = {}
    built = []
    keep = rendered_profiles(project) if existing_only else None
    for r in profiles.load_all(project, names):
        if keep is not None and r.name not in keep:
            continue
        files, m = render_profile(r)
        rendered.update(files)
        built.append(m)
    return rendered, built


TARGETS = ("compose", "k8s", "all")


def render_targets(
    project: Project, names: list[str] | None, target: str | None
) -> tuple[dict[str, str], list[Manifests], tuple[str, ...]]:
    """Every file `render` writes or checks, the k8s manifests among them, and the targets whose orphans
    count. No --target: compose, plus k8s for every profile that already has out/NAME/k8s/ (so a profile
    rendered for Kubernetes once stays fresh and drift-checked); else compose, k8s, or all of both."""
    from composegen import render as compose

    rendered: dict[str, str] = {}
    if target in (None, "compose", "all"):
        rendered |= compose.render_all(project, names)
    built: list[Manifests] = []
    if target != "compose":
        k8s, built = render_all(project, names, existing_only=target is None)
        rendered |= k8s
    swept = {None: ("compose", "k8s"), "compose": ("compose",), "k8s": ("k8s",), "all": ("compose", "k8s")}
    return rendered, built, swept[target]


def report(built: list[Manifests]) -> list[K8sRendered]:
    def notes(items: list) -> list[K8sNote]:
        return [K8sNote(setting=n.setting, value=n.value, k8s=n.k8s) for n in items]

    return [
        K8sRendered(
            profile=m.profile,
            kind=m.kind,  # type: ignore[arg-type]
            files=[f"out/{m.profile}/{K8S_DIR}/{f}" for f in ("kustomization.yaml", m.workload_file, "service.yaml")],
            unmapped=notes(m.notes.unmapped),
            adapted=notes(m.notes.adapted),
            security=notes(m.notes.security),
        )
        for m in built
    ]
