"""The `model:` and `service:` parts of a profile, and what every part of the model shares: the
strict base model, ports, GPUs, environment names, secrets only by `${VAR}` reference, host paths.

Strict types throughout: YAML's `yes` is not a boolean-as-int, `4096.5` is not an integer.
Unknown keys are errors (extra="forbid"). profiles/schema.py assembles the whole `Profile`."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from composegen.output import SECRET_RE
from composegen.units import DURATION_PATTERN, parse_duration

# A secret may only come from the environment: `${VAR}`, `${VAR:-}` (empty when unset) or
# `${VAR:?why}`; a non-empty default (`${VAR:-hunter2}`) would commit the value itself.
REF_RE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-|:?\?[^}]*)?\}$")
SIZE_RE = re.compile(r"^\d+(?:\.\d+)?\s*(?:b|k|kb|m|mb|g|gb|t|tb)?$", re.I)
DURATION_RE = re.compile(rf"^{DURATION_PATTERN}$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
# what a shell (and compose's .env) calls a variable
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Docker's ulimit names (`docker run --ulimit`); anything else is refused by the engine, or worse,
# pasted.
_ULIMITS = (
    "core cpu data fsize locks memlock msgqueue nice nofile nproc rss rtprio rttime sigpending "
    "stack"
)
ULIMIT_NAMES = frozenset(_ULIMITS.split())
ULIMIT_MAX = 2**63 - 1
VOLUME_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # docker volume names
GPU_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._-]*$")  # an index, or a GPU-/MIG- UUID
# org/name, or a plain name
HF_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9._-]+)?$")
# Printable, no spaces, no leading '-': a value that becomes a command-line word stays that one
# word.
WORD_PATTERN = r"^[!-,.-~][!-~]*$"
MAX_GRACE_S = 86400

Port = Annotated[StrictInt, Field(ge=1, le=65535)]


class Strict(BaseModel):
    # Validators are built at the first validation: a command that loads no profile never pays,
    # and the first load builds the whole Profile's schema once, not one per nested model.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


def _no_control(text: str, what: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError(
            f"{what} cannot contain control characters (newline, tab, NUL…), got {text!r}"
        )
    return text


# MAX_ARG_STRLEN: one NAME=value string, its NUL included, must be shorter
MAX_ENV_STRING = 128 * 1024


def env_names(env: dict) -> dict:
    for key in env:
        if not ENV_NAME_RE.fullmatch(key):
            raise ValueError(
                f"{key!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            )
    for key, value in env.items():
        if isinstance(value, str):
            _no_control(value.replace("\t", " "), key)
            if len(f"{key}={value}".encode()) >= MAX_ENV_STRING:
                raise ValueError(
                    f"{key}: {len(value.encode())} bytes; the kernel refuses an environment string over "
                    f"{MAX_ENV_STRING // 1024} KiB (the container would not start)"
                )
    return env


class Model(Strict):
    id: Annotated[StrictStr, Field(pattern=HF_ID_RE.pattern)] = Field(
        description="Hugging Face model id, e.g. deepseek-ai/DeepSeek-V4-Flash-0731"
    )
    revision: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}$", description="40-hex commit")]
    served_name: Annotated[
        StrictStr, Field(pattern=WORD_PATTERN, max_length=256, description="--served-model-name")
    ]
    path: Annotated[StrictStr, Field(pattern=r"^/[!-~]*$")] | None = Field(
        None, description="absolute model path inside the container (default: id)"
    )


class Published(Strict):
    host: Port = Field(description="host port")
    container: Port = Field(default=8000, description="port vLLM listens on inside the container")
    bind: StrictStr = Field(
        default="127.0.0.1", description="host address; 0.0.0.0 exposes the API to the network"
    )

    @field_validator("bind")
    @classmethod
    def _ip(cls, bind: str) -> str:
        try:
            ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(
                f"must be an IP address (compose publishes ports on addresses), got {bind!r}"
            ) from None
        if "%" in bind:
            raise ValueError(f"compose cannot publish on a scoped address (%zone), got {bind!r}")
        return bind


class Gpus(Strict):
    count: Annotated[StrictInt, Field(ge=1, le=1024)] | None = None
    device_ids: (
        Annotated[list[Annotated[StrictStr, Field(pattern=GPU_ID_RE.pattern)]], Field(min_length=1)]
        | None
    ) = None
    driver: Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")] = "nvidia"
    spelling: Literal["deploy", "gpus"] = Field(
        "deploy",
        description="deploy.resources.reservations.devices, or the service-level gpus: attribute",
    )

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.count is None) == (self.device_ids is None):
            raise ValueError("give exactly one of count or device_ids (compose forbids both)")
        if self.device_ids is not None and len(set(self.device_ids)) != len(self.device_ids):
            raise ValueError(
                f"device_ids must be unique (compose refuses repeats), got {self.device_ids}"
            )
        return self

    @property
    def n(self) -> int:
        return self.count if self.count is not None else len(self.device_ids or [])

    def ids(self) -> list[str]:
        """The GPUs named; a count N is taken as GPUs 0..N-1 (which ones the runtime would pick is
        not known before it starts): what the standby plan and the emulated GPUs share by."""
        return (
            list(self.device_ids)
            if self.device_ids is not None
            else [str(i) for i in range(self.n)]
        )


UlimitValue = Annotated[StrictInt, Field(ge=-1, le=ULIMIT_MAX, description="-1: unlimited")]


class Ulimit(Strict):
    soft: UlimitValue
    hard: UlimitValue

    @model_validator(mode="after")
    def _order(self) -> Self:
        if self.hard != -1 and (self.soft == -1 or self.soft > self.hard):
            raise ValueError(f"soft {self.soft} exceeds hard {self.hard}")
        return self


class Volume(Strict):
    source: StrictStr = Field(
        description="host path (absolute, ./relative or ${VAR}) or a named volume"
    )
    # The short syntax splits on ':' and ',' separates mount options: neither may hide in the
    # target.
    target: Annotated[StrictStr, Field(pattern=r"^/[^:,\x00-\x1f\x7f]*$")]
    read_only: StrictBool = False

    @field_validator("source")
    @classmethod
    def _no_colon(cls, source: str) -> str:
        return host_path_problem(source, "a volume source")

    @property
    def named(self) -> bool:
        return not self.source.startswith(("/", ".", "~", "$"))


def host_path_problem(source: str, what: str) -> str:
    """A volume source: a host path (absolute, ./relative, ~ or ${VAR}) or a docker volume name."""
    _no_control(source, what)
    # The short volume syntax splits on ':'; only a ${VAR:-default} may carry one.
    if ":" in re.sub(r"\$\{[^}]*\}", "", source) or not source:
        raise ValueError(f"{what} cannot contain ':' (outside ${{VAR:-default}}), got {source!r}")
    if not source.startswith(("/", ".", "~", "$")) and not VOLUME_NAME_RE.fullmatch(source):
        raise ValueError(
            f"{what} is neither a path (/, ./, ~, ${{VAR}}) nor a volume name, got {source!r}"
        )
    return source


def secrets_by_reference(env: dict) -> dict:
    for key, value in env.items():
        if SECRET_RE.search(key) and not (isinstance(value, str) and REF_RE.fullmatch(value)):
            raise ValueError(
                f"{key}: secrets must be a ${{VAR}} reference, never a value (write {key}: ${{{key}}})"
            )
    return env


# an environment: names checked, secrets only by `${VAR}` reference (a service's, a node's)
Environment = Annotated[
    dict[StrictStr, StrictStr | StrictInt],
    AfterValidator(lambda env: secrets_by_reference(env_names(env))),
]


class UnsafeMount(Strict):
    """A reviewed exception to the mount rules (composegen/profiles/mounts.py): `diff` reports it as
    a functional change and `status` shows it."""

    source: StrictStr = Field(
        description="exactly the `source` of the volume (or a node's hf_cache) it allows"
    )
    reason: Annotated[
        StrictStr, Field(min_length=8, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")
    ] = Field(description="why this stack needs it (read by whoever reviews the profile)")


class MemoryGuard(Strict):
    """Host-memory floor (composegen/stack/memguard.py): on a unified-memory host (DGX Spark: the
    GPU uses system memory) running out during the load hard-resets the machine instead of failing
    with an out-of-memory error."""

    min_available: Annotated[StrictStr, Field(pattern=SIZE_RE.pattern, max_length=24)] = Field(
        "8gb",
        description="MemAvailable below this refuses `up`, and stops a loading stack (exit 3)",
    )
    unified: StrictBool | None = Field(
        None,
        description="declare the hosts unified-memory (true) or not (false); default: detected (GB10, Tegra)",
    )


class Service(Strict):
    port: Published
    container_name: Annotated[StrictStr, Field(pattern=NAME_RE.pattern)] | None = None
    gpus: Gpus
    ipc: Literal["host", "private", "shareable"] = "private"
    shm_size: Annotated[StrictStr, Field(pattern=SIZE_RE.pattern, max_length=24)] | None = Field(
        None, description="e.g. 32gb"
    )
    init: StrictBool = True
    ulimits: dict[StrictStr, UlimitValue | Ulimit] = Field(default_factory=dict)
    environment: Environment = Field(default_factory=dict)
    volumes: list[Volume] = Field(default_factory=list)
    unsafe_mounts: list[UnsafeMount] = Field(
        default_factory=list,
        description="mounts outside the project or of sensitive host paths, each allowed with a reason",
    )
    stop_grace_period: Annotated[StrictStr, Field(pattern=DURATION_RE.pattern)] = "120s"
    startup_timeout: Annotated[StrictInt, Field(ge=1, le=86400)] = Field(
        default=1800, description="seconds"
    )
    restart: Literal["no", "on-failure", "unless-stopped", "always"] = "no"
    memory_guard: MemoryGuard = Field(default_factory=lambda: MemoryGuard.model_validate({}))
    hf_online: StrictBool = Field(
        False,
        description="keep the engine online: no HF_HUB_OFFLINE=1 even when `up` finds the weights complete",
    )

    def ulimits_plain(self) -> dict[str, int | dict[str, int]]:
        """Ulimits as compose writes them: a number, or {soft, hard}."""
        return {
            k: (v if isinstance(v, int) else v.model_dump())
            for k, v in sorted(self.ulimits.items())
        }

    @field_validator("ulimits")
    @classmethod
    def _ulimit_names(cls, ulimits: dict) -> dict:
        for name in ulimits:
            if name not in ULIMIT_NAMES:
                raise ValueError(
                    f"{name!r} is not a Docker ulimit; known: {', '.join(sorted(ULIMIT_NAMES))}"
                )
        return ulimits

    @field_validator("stop_grace_period")
    @classmethod
    def _grace(cls, text: str) -> str:
        if float(parse_duration(text) or 0) > MAX_GRACE_S:  # a Go duration, e.g. `1m30s`
            raise ValueError(f"{text} is longer than {MAX_GRACE_S // 3600} hours")
        return text
