"""Compose documents from resolved profiles, via templates/compose.yaml.j2; atomic writes; drift check.

Same profiles give byte-identical files: nothing time- or host-dependent reaches the output.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from composegen import profile as profiles
from composegen.project import Project, atomic_write, templates_dir

HEALTH_PY = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=5)"
LABEL_PREFIX = "io.composegen."


@lru_cache(maxsize=1)
def _template():
    import jinja2  # imported here: `composegen --version` must stay fast

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    # JSON scalars and flow collections are valid YAML and need no further quoting rules.
    env.filters["j"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env.get_template("compose.yaml.j2")


def project_name(r: profiles.Resolved) -> str:
    return f"composegen-{r.name}".lower().replace(".", "-")


def context(r: profiles.Resolved) -> dict[str, Any]:
    p, svc = r.profile, r.profile.service
    ulimits = {k: (v if isinstance(v, int) else v.model_dump()) for k, v in sorted(svc.ulimits.items())}
    volumes = [f"{v.source}:{v.target}{':ro' if v.read_only else ''}" for v in svc.volumes]
    labels = {
        f"{LABEL_PREFIX}profile": r.name,
        f"{LABEL_PREFIX}hash": r.hash,
        f"{LABEL_PREFIX}served-name": p.model.served_name,
        f"{LABEL_PREFIX}vllm-version": p.vllm_version,
    }
    return {
        "source": r.path,
        "name": r.name,
        "hash": r.hash,
        "project": project_name(r),
        "image": p.image,
        "container_name": svc.container_name,
        "command": r.argv(),
        "port": f"{svc.port.bind}:{svc.port.host}:{svc.port.container}",
        "environment": sorted((k, str(v)) for k, v in svc.environment.items()),
        "volumes": volumes,
        "named_volumes": sorted({v.source for v in svc.volumes if v.named}),
        "ipc": svc.ipc if svc.ipc != "private" else "private",
        "shm_size": svc.shm_size,
        "init": svc.init,
        "ulimits": list(ulimits.items()),
        "gpus": svc.gpus,
        "stop_grace_period": svc.stop_grace_period,
        "restart": svc.restart,
        "healthcheck": ["CMD", "python3", "-c", HEALTH_PY.format(port=svc.port.container)],
        # Failures inside start_period do not count, so it must cover the whole model load.
        "start_period": f"{svc.startup_timeout}s",
        "labels": sorted(labels.items()),
    }


def render(r: profiles.Resolved) -> str:
    return _template().render(**context(r))


def render_profile_text(root, name: str) -> str:
    """The compose text of profile `name` in the project at `root` (used by diff)."""
    project = root if isinstance(root, Project) else Project(root)
    return render(profiles.load(project, name))


@dataclass
class Drift:
    path: str
    reason: str  # "stale", "missing", "orphan"
    diff: str


def render_all(project: Project, names: list[str] | None = None) -> dict[str, str]:
    """Render every named profile (all by default) in memory first: bad input writes nothing."""
    return {r.name: render(r) for r in profiles.load_all(project, names)}


def write(project: Project, rendered: dict[str, str]) -> list[str]:
    written = []
    for name, text in rendered.items():
        path = project.out_path(name)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        atomic_write(path, text)
        written.append(project.rel(path))
    return written


def check(project: Project, rendered: dict[str, str], *, all_profiles: bool) -> list[Drift]:
    drift: list[Drift] = []
    for name, text in rendered.items():
        path = project.out_path(name)
        rel = project.rel(path)
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True), f"a/{rel}", f"b/{rel}"))
            drift.append(Drift(rel, "stale" if current else "missing", diff))
    if all_profiles and project.out_dir.is_dir():
        for compose in sorted(project.out_dir.glob("*/compose.yaml")):
            if compose.parent.name not in rendered:
                rel = project.rel(compose)
                drift.append(Drift(rel, "orphan", f"{rel}: no profiles/{compose.parent.name}.yaml renders this file\n"))
    return drift
