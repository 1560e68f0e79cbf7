"""Normalisation behind `composegen.diff.semantic`: one Compose service → {path tuple: comparable
JSON value}, e.g. {("command", "--max-num-batched-tokens"): 8192, ("ports", "8000/tcp"):
"127.0.0.1:39071", ...}. The vLLM argv part lives in argv.py; what counts as the same: docs/diff.md.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from composegen.diff.argv import (
    CATALOG_VERSION,
    argv_words,
    compose_str,
    parse_vllm_args,
    split_vllm_argv,
)
from composegen.units import BYTE_UNITS, parse_bytes, parse_duration

# `environment: [NAME]`: compose copies the value from its own env
FROM_HOST_ENV = "(from host env)"
_SET_LIKE_KEYS = {
    "cap_add",
    "cap_drop",
    "devices",
    "dns",
    "expose",
    "group_add",
    "profiles",
    "security_opt",
}
_HEALTH_DURATIONS = {"interval", "timeout", "start_period", "start_interval"}
# render.py writes it: the catalog to read the argv with
VLLM_VERSION_LABEL = "io.composegen.vllm-version"


# ---------------------------------------------------------------- service


def normalise_service(service: dict) -> dict[tuple[str, ...], Any]:
    flat: dict[tuple[str, ...], Any] = {}
    rest = dict(service)
    entrypoint, command = (
        argv_words(rest.pop("entrypoint", None)),
        argv_words(rest.pop("command", None)),
    )
    split = split_vllm_argv(entrypoint, command, service.get("image"))
    if split is not None:
        launcher, args = split
        version = (
            _key_values(service.get("labels"), missing="").get(VLLM_VERSION_LABEL)
            or CATALOG_VERSION
        )
        # each side read with its own vLLM version's catalog
        parsed = parse_vllm_args(args, version)
        _put(flat, ("entrypoint",), launcher or None)
        _put(flat, ("command", "model"), parsed["model"])
        _put(flat, ("command", "args"), parsed["args"] or None)
        for flag, value in parsed["flags"].items():
            flat[("command", flag)] = jsonable(value)
    else:
        _put(flat, ("entrypoint",), entrypoint)
        _put(flat, ("command",), command)
    _put_map(flat, "environment", _key_values(rest.pop("environment", None), missing=FROM_HOST_ENV))
    _put_map(flat, "labels", _key_values(rest.pop("labels", None), missing=""))
    _put_map(flat, "ports", _ports(rest.pop("ports", None)))
    _put_map(flat, "volumes", _volumes(rest.pop("volumes", None)))
    _put_map(flat, "ulimits", _ulimits(rest.pop("ulimits", None)))
    _put_map(flat, "image", _image(rest.pop("image", None)))
    _put(flat, ("gpus",), _gpu_requests(rest.pop("gpus", None), rest) or None)
    _put(flat, ("shm_size",), _bytes(rest.pop("shm_size", None)))
    _put(flat, ("stop_grace_period",), _duration(rest.pop("stop_grace_period", None)))
    health = rest.pop("healthcheck", None)
    if isinstance(health, dict):
        flatten_into(flat, ("healthcheck",), _healthcheck(health))
    else:
        _put(flat, ("healthcheck",), jsonable(health))
    for key in _SET_LIKE_KEYS & rest.keys():
        value = jsonable(rest.pop(key))
        _put(flat, (key,), sorted(value, key=json.dumps) if isinstance(value, list) else value)
    flatten_into(flat, (), rest)
    return flat


def flatten_into(flat: dict, prefix: tuple[str, ...], value: Any) -> None:
    """Nested maps become one entry per leaf; lists and scalars are leaves; nulls mean 'absent'."""
    if isinstance(value, dict):
        for key, sub in value.items():
            flatten_into(flat, (*prefix, str(key)), sub)
    elif value is not None:
        flat[prefix] = jsonable(value)


def jsonable(value: Any) -> Any:
    """YAML can give dates and other objects; output must be plain JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _put(flat: dict, path: tuple[str, ...], value: Any) -> None:
    if value is not None:
        flat[path] = value


def _put_map(flat: dict, key: str, mapping: dict) -> None:
    for sub, value in mapping.items():
        _put(flat, (key, sub), value)


def _key_values(value: Any, missing: str) -> dict[str, str]:
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = [
            (str(e).partition("=")[0], str(e).partition("=")[2] if "=" in str(e) else None)
            for e in value
        ]
    else:
        items = []
    return {str(k): missing if v is None else compose_str(v) for k, v in items}


def _ports(value: Any) -> dict[str, Any]:
    bindings: dict[str, list[str]] = {}
    for entry in value or []:
        for key, binding in _port_entries(entry):
            bindings.setdefault(key, []).append(binding)
    return {key: found[0] if len(found) == 1 else sorted(found) for key, found in bindings.items()}


def _port_entries(entry: Any) -> list[tuple[str, str]]:
    if isinstance(entry, dict):
        key = f"{entry.get('target')}/{entry.get('protocol') or 'tcp'}"
        binding = _binding(str(entry.get("host_ip") or ""), str(entry.get("published") or ""))
        extras = [
            f"{k}={entry[k]}"
            for k in ("app_protocol", "mode")
            if entry.get(k) not in (None, "ingress")
        ]
        return [(key, binding + (f" ({', '.join(extras)})" if extras else ""))]
    text, _, protocol = str(entry).partition("/")
    host_ip = ""
    bracketed = re.match(r"^\[([^\]]+)\]:(.*)$", text)  # [::1]:8000:8000
    if bracketed:
        host_ip, text = bracketed[1], bracketed[2]
    parts = _split_outside_variables(text)
    if len(parts) > 3:
        return [(str(entry), "")]
    container = parts[-1]
    published = parts[-2] if len(parts) >= 2 else ""
    host_ip = parts[0] if len(parts) == 3 else host_ip
    containers, publisheds = _port_range(container), _port_range(published)
    if len(publisheds) != len(containers):
        publisheds = [published] * len(containers)  # e.g. one container port on a host port range
    return [
        (f"{c}/{protocol or 'tcp'}", _binding(host_ip, p))
        for c, p in zip(containers, publisheds, strict=True)
    ]


def _split_outside_variables(text: str) -> list[str]:
    """Split on ':' except inside `${VAR:-default}` (compose interpolates after parsing)."""
    parts, current, depth = [], "", 0
    for index, char in enumerate(text):
        if char == "{" and text[index - 1 : index] == "$":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        if char == ":" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _port_range(text: str) -> list[str]:
    match = re.fullmatch(r"(\d+)-(\d+)", text)
    if not match or int(match[2]) < int(match[1]):
        return [text]
    return [str(port) for port in range(int(match[1]), int(match[2]) + 1)]


def _binding(host_ip: str, published: str) -> str:
    ipv6 = ":" in host_ip and "$" not in host_ip
    host = f"[{host_ip}]:" if ipv6 else f"{host_ip}:" if host_ip else ""
    return f"{host}{published or '*'}"


def _volumes(value: Any) -> dict[str, Any]:
    volumes = {}
    for entry in value or []:
        if isinstance(entry, dict):
            spec = {k: jsonable(v) for k, v in entry.items() if k != "target" and v is not None}
            if spec.get("read_only") is False:
                del spec["read_only"]
            volumes[str(entry.get("target"))] = spec
            continue
        parts = _split_outside_variables(str(entry))
        if len(parts) == 1:
            volumes[parts[0]] = {"type": "volume"}  # anonymous volume
            continue
        source, target, *options = parts
        # `${HF_HOME:-~/.cache/huggingface}` sources are host paths in practice.
        kind = "bind" if source.startswith(("/", ".", "~", "$")) else "volume"
        spec = {"type": kind, "source": source}
        modes = set(",".join(options).split(",")) - {"", "rw"}
        if "ro" in modes:
            spec["read_only"] = True
            modes.discard("ro")
        if modes:
            spec["mode"] = ",".join(sorted(modes))
        volumes[target] = spec
    return volumes


def _ulimits(value: Any) -> dict[str, Any]:
    limits = {}
    for name, limit in (value or {}).items() if isinstance(value, dict) else ():
        if isinstance(limit, dict):
            soft, hard = _int(limit.get("soft")), _int(limit.get("hard"))
            limits[str(name)] = soft if soft == hard else {"soft": soft, "hard": hard}
        else:
            limits[str(name)] = _int(limit)
    return limits


def _int(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return jsonable(value)


def _image(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    name, _, digest = str(value).strip().partition("@")
    tag = None
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    for registry in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(registry):
            name = name[len(registry) :]
            break
    name = name.removeprefix("library/")
    # With a digest the tag is ignored by the engine; without one, the tag is what gets pulled.
    return {"repo": name, "digest": digest} if digest else {"repo": name, "tag": tag or "latest"}


def _gpu_requests(gpus: Any, rest: dict) -> list:
    requests: list = []
    if gpus == "all":
        requests.append({"capabilities": ["gpu"], "count": "all"})
    elif isinstance(gpus, list):
        requests.extend(_device_request(d, implicit_gpu=True) for d in gpus)
    elif gpus is not None:
        requests.append(jsonable(gpus))
    deploy = rest.get("deploy")
    reservations = (
        deploy.get("resources", {}).get("reservations") if isinstance(deploy, dict) else None
    )
    if isinstance(deploy, dict) and isinstance(reservations, dict) and "devices" in reservations:
        deploy = copy.deepcopy(deploy)  # never mutate the caller's stack
        devices = deploy["resources"]["reservations"].pop("devices") or []
        rest["deploy"] = deploy
        requests.extend(_device_request(d, implicit_gpu=False) for d in devices)
    return sorted(requests, key=lambda r: json.dumps(r, sort_keys=True))


def _device_request(device: Any, implicit_gpu: bool) -> Any:
    if not isinstance(device, dict):
        return jsonable(device)
    request = {str(k): jsonable(v) for k, v in device.items() if v is not None}
    capabilities = {str(c) for c in request.get("capabilities") or []} | (
        {"gpu"} if implicit_gpu else set()
    )
    if capabilities:
        request["capabilities"] = sorted(capabilities)
    count = request.get("count")
    if count in (-1, "-1"):
        request["count"] = "all"
    elif isinstance(count, str) and count.isdigit():
        request["count"] = int(count)
    if isinstance(request.get("device_ids"), list):
        request["device_ids"] = [str(d) for d in request["device_ids"]]
    return request


def _healthcheck(health: dict) -> dict:
    normal = dict(health)
    test = normal.get("test")
    if isinstance(test, str):
        normal["test"] = ["CMD-SHELL", test]
    for key in _HEALTH_DURATIONS & normal.keys():
        normal[key] = _duration(normal[key])
    if normal.get("disable") is False:
        del normal["disable"]
    return normal


def _duration(value: Any) -> Any:
    if not isinstance(value, str):
        return jsonable(value)
    seconds = parse_duration(value)
    if seconds is None:
        return value
    return f"{format(seconds.normalize(), 'f')}s"


def _bytes(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return jsonable(value)
    amount = parse_bytes(str(value))
    if amount is None:
        return jsonable(value)
    for unit in "ptgmk":
        if amount >= BYTE_UNITS[unit] and amount % BYTE_UNITS[unit] == 0:
            return f"{amount // BYTE_UNITS[unit]}{unit}"
    return str(amount)
