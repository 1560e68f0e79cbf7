"""Bind mounts and secret references: what a profile may mount from the host (a closed grammar, and
places refused unless `service.unsafe_mounts` lists them with a reason), and where `${SECRET}` may
go (environment values only). The rules, as a user reads them: docs/profile-safety.md (Mounts, `$`
and secrets)."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from composegen.profiles.schema import SECRET_RE

HF_CACHE_TARGET = "/root/.cache/huggingface"
_PATH = r"[^:${}\x00-\x1f\x7f]*"
_REF = re.compile(rf"\$\{{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)({_PATH}))?\}}({_PATH})")
_ANY_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
CREDENTIALS = (".ssh", ".docker", ".aws", ".kube", ".gnupg", ".config/gcloud", ".azure")
SYSTEM = ("/etc", "/root", "/proc", "/sys", "/dev", "/boot")
ENGINE: tuple[str, ...] = (
    "/run/docker",
    "/var/run/docker",
    "/run/containerd",
    "/var/run/containerd",
)
ENGINE += (
    "/var/lib/docker",
    "/var/lib/containerd",
    "/run/podman",
    "/var/run/podman",
    "/run/secrets",
    "/var/run/secrets",
)
HOLDERS = (
    "/var",
    "/run",
    "/var/run",
    "/var/lib",
    "/home",
    "/usr",
    "/opt",
    "/srv",
    "/mnt",
    "/media",
)
ENV_PLACES = (("service", "environment"), ("emulate", "env"))


def grammar_problem(source: str) -> str | None:
    """Why `source` is not a bind source of the closed grammar (None when it is one, or a volume
    name)."""
    if not source.startswith(("/", ".", "~", "$")):
        return None  # a named volume (its grammar is the schema's)
    if source.startswith("$"):
        m = _REF.fullmatch(source)
        if m is None:
            return "a reference is ${VAR}, ${VAR:-DEFAULT} or ${VAR-DEFAULT} at the start, with no ':' or '$' after it"
        name, default, rest = m.group(1), m.group(3), m.group(4)
        if SECRET_RE.search(name):
            return f"${{{name}}} is a secret reference; secrets go in environment values only, never in a path"
        if rest and not rest.startswith("/"):
            return f"after ${{{name}}} comes '/' and a path, got {rest!r}"
        if default is not None and (problem := _path_problem(default, "its default")):
            return problem
        return _path_problem(rest or "/", "the path after the reference")
    return _path_problem(source, "it")


def _path_problem(path: str, what: str) -> str | None:
    if not (path.startswith(("/", "./", "~/")) or path in (".", "~")):
        return f"{what} must start with /, ./ or ~/ (not {path[:40]!r})"
    if re.search(r"[:${}\x00-\x1f\x7f]", path):
        return f"{what} holds ':', '$', '{{' or '}}' (compose would read them)"
    if ".." in path.split("/"):
        return f"{what} has a '..' component; a mount stays where it says"
    return None


def danger(path: str) -> str | None:
    """What a (grammatical) host path would hand the container, or None."""
    home = path == "~" or path.startswith("~/")
    parts = [p for p in path.removeprefix("~").split("/") if p not in ("", ".")]
    norm = "/" + "/".join(parts)
    if not home and not path.startswith("/"):
        return None  # ./PATH: inside out/NAME/
    if any(p.endswith(".sock") for p in parts):
        return "a socket (the engine's socket hands over the host)"
    return _home_danger(parts, norm) if home else _host_danger(parts, norm)


def _home_danger(parts: list[str], norm: str) -> str | None:
    """~ itself, or a path into (or above) one of its credential directories."""
    if not parts:
        return "the home directory (it holds ~/.ssh, ~/.docker, ~/.aws, ~/.kube)"
    for cred in CREDENTIALS:
        if (
            norm == "/" + cred
            or norm.startswith(f"/{cred}/")
            or ("/" + cred).startswith(norm + "/")
        ):
            return f"~/{cred} (credentials)"
    return None


def _host_danger(parts: list[str], norm: str) -> str | None:
    if norm == "/":
        return "the host's root directory"
    for place, what in (
        (SYSTEM, "a host system directory"),
        (ENGINE, "the container engine's state or socket"),
    ):
        for p in place:
            if norm == p or norm.startswith(p + "/"):
                return f"{p} ({what})"
    if norm in HOLDERS or (norm.startswith("/home/") and len(parts) == 2):
        return f"{norm} (it holds engine sockets, system state or home directories)"
    for cred in CREDENTIALS:
        if f"/{cred}/" in norm + "/":
            return f"a {cred} directory (credentials)"
    return None


def _judged(source: str) -> tuple[list[str], bool]:
    """(the paths to judge, whether a reference makes it a path from the environment)."""
    m = _REF.fullmatch(source)
    if m is None:
        return [source], False
    default, rest = m.group(3), m.group(4)
    paths = [posixpath.join(default, rest.lstrip("/")) if rest else default] if default else []
    return paths, True


def cache_targets(profile: Any) -> set[str]:
    """Container paths of the declared model cache: the Hugging Face cache and model.path's home."""
    env = profile.service.environment
    found = {HF_CACHE_TARGET}
    for key in ("HF_HOME", "HF_HUB_CACHE"):
        value = env.get(key)
        if isinstance(value, str) and "$" not in value:
            found.add(value.rstrip("/") or "/")
    return found


def _is_cache(target: str, profile: Any) -> bool:
    target = target.rstrip("/") or "/"
    if target in cache_targets(profile):
        return True
    path = profile.model.path
    return bool(path) and target != "/" and (path == target or path.startswith(target + "/"))


def mount_problems(profile: Any) -> list[tuple[tuple[Any, ...], str]]:
    """(key path, message) for every bind source the rules refuse."""
    svc = profile.service
    opted = {m.source for m in svc.unsafe_mounts}
    out: list[tuple[tuple[Any, ...], str]] = []
    sources = [
        (("service", "volumes", i, "source"), v.source, v.target) for i, v in enumerate(svc.volumes)
    ]
    for i, node in enumerate(profile.nodes.members if profile.nodes else []):
        if node.hf_cache:
            sources.append((("nodes", "members", i, "hf_cache"), node.hf_cache, HF_CACHE_TARGET))
    for path, source, target in sources:
        if problem := grammar_problem(source):
            out.append((path, f"{source!r}: {problem}"))
            continue
        if not source.startswith(("/", ".", "~", "$")) or source in opted:
            continue
        paths, from_env = _judged(source)
        bad = next((d for p in paths if (d := danger(p))), None)
        if bad:
            out.append(
                (
                    path,
                    f"{source!r} mounts {bad}; list it in service.unsafe_mounts with a reason to allow it",
                )
            )
        elif (from_env or not source.startswith(".")) and not _is_cache(target, profile):
            out.append(
                (
                    path,
                    f"{source!r} is outside the project and is not the model cache; list it in "
                    "service.unsafe_mounts with a reason to allow it",
                )
            )
    sources_named = {s for _, s, _ in sources}
    for i, m in enumerate(svc.unsafe_mounts):
        if m.source not in sources_named:
            out.append(
                (
                    ("service", "unsafe_mounts", i, "source"),
                    f"{m.source!r} is not the source of any mount",
                )
            )
    return out


def secret_reference_problems(
    data: Any, path: tuple[Any, ...] = ()
) -> list[tuple[tuple[Any, ...], str]]:
    """(key path, message) for every secret reference outside an environment value."""
    if path in ENV_PLACES or (len(path) == 4 and path[0] == "nodes" and path[3] == "environment"):
        return []
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in secret_reference_problems(v, (*path, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in secret_reference_problems(v, (*path, i))]
    if isinstance(data, str):
        for m in _ANY_REF.finditer(data):
            if SECRET_RE.search(m.group(1)):
                return [
                    (
                        path,
                        f"${{{m.group(1)}}} is a secret reference; secrets belong in environment values "
                        "(service.environment) only, never in paths, flags or names",
                    )
                ]
    return []
