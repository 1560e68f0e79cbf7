"""The profile model: what a profile may say beyond vLLM flags, typed and range-checked.

Strict types throughout: YAML's `yes` is not a boolean-as-int, `4096.5` is not an integer.
Unknown keys are errors (extra="forbid"). `composegen schema` prints the JSON Schema of `Profile`.

Multi-node (`nodes:`): the image, the model and its revision and every vLLM flag are profile-level, so
they are the same on every node by construction; only endpoints, environment, GPUs and the HF cache
path are per node. (The driver still checks that the image each engine holds has the same digest.)
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from composegen.output import SECRET_RE as SECRET_RE  # one definition: what output masks
from composegen.profiles.kubernetes import Kubernetes
from composegen.units import DURATION_PATTERN, parse_duration

DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9._-]+)*@sha256:[0-9a-f]{64}$")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$")
# A secret may only come from the environment: `${VAR}`, `${VAR:-}` (empty when unset) or `${VAR:?why}`;
# a non-empty default (`${VAR:-hunter2}`) would put the value itself into a committed file.
REF_RE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-|:?\?[^}]*)?\}$")
SIZE_RE = re.compile(r"^\d+(?:\.\d+)?\s*(?:b|k|kb|m|mb|g|gb|t|tb)?$", re.I)
DURATION_RE = re.compile(rf"^{DURATION_PATTERN}$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
# Names that become part of a compose project name (`composegen-PROFILE-NODE`): compose's own grammar, no
# '.' (it would be folded to '-', so `a.b` and `a-b` would share a project).
PROJECT_PART_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # what a shell (and compose's .env) calls a variable
# Docker's ulimit names (`docker run --ulimit`); anything else is refused by the engine, or worse, pasted.
ULIMIT_NAMES = frozenset(
    {"core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio"}
    | {"rttime", "sigpending", "stack"}
)
ULIMIT_MAX = 2**63 - 1
VOLUME_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # docker volume names
GPU_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._-]*$")  # an index, or a GPU-/MIG- UUID
HF_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9._-]+)?$")  # org/name, or a plain name
VERSION_RE = re.compile(r"^[0-9]+(?:\.[0-9]+)*(?:[A-Za-z0-9.+-]*)$")  # names a catalog file: no path parts
# Printable, no spaces, no leading '-': a value that becomes a command-line word stays that one word.
WORD_PATTERN = r"^[!-,.-~][!-~]*$"
CONTEXT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
MAX_GRACE_S = 86400
SHM_MIN_BYTES = 2**30  # below this a private /dev/shm cannot hold vLLM's message queues

Port = Annotated[StrictInt, Field(ge=1, le=65535)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _no_control(text: str, what: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError(f"{what} cannot contain control characters (newline, tab, NUL…), got {text!r}")
    return text


MAX_ENV_STRING = 128 * 1024  # MAX_ARG_STRLEN: one NAME=value string, its NUL included, must be shorter


def _env_names(env: dict) -> dict:
    for key in env:
        if not ENV_NAME_RE.fullmatch(key):
            raise ValueError(f"{key!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    for key, value in env.items():
        if isinstance(value, str):
            _no_control(value.replace("\t", " "), key)
            if len(f"{key}={value}".encode()) >= MAX_ENV_STRING:
                raise ValueError(
                    f"{key}: {len(value.encode())} bytes; the kernel refuses an environment string over "
                    f"{MAX_ENV_STRING // 1024} KiB (the container would not start)"
                )
    return env


def _grace_seconds(text: str) -> float:
    """Seconds of a Go duration such as `1m30s` (the schema's pattern has checked the form)."""
    return float(parse_duration(text) or 0)


class Model(Strict):
    id: Annotated[StrictStr, Field(pattern=HF_ID_RE.pattern)] = Field(
        description="Hugging Face model id, e.g. deepseek-ai/DeepSeek-V4-Flash-0731"
    )
    revision: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}$", description="40-hex commit")]
    served_name: Annotated[StrictStr, Field(pattern=WORD_PATTERN, max_length=256, description="--served-model-name")]
    path: Annotated[StrictStr, Field(pattern=r"^/[!-~]*$")] | None = Field(
        None, description="absolute model path inside the container (default: id)"
    )


class Published(Strict):
    host: Port = Field(description="host port")
    container: Port = Field(8000, description="port vLLM listens on inside the container")
    bind: StrictStr = Field("127.0.0.1", description="host address; 0.0.0.0 exposes the API to the network")

    @field_validator("bind")
    @classmethod
    def _ip(cls, bind: str) -> str:
        try:
            ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(f"must be an IP address (compose publishes ports on addresses), got {bind!r}") from None
        if "%" in bind:
            raise ValueError(f"compose cannot publish on a scoped address (%zone), got {bind!r}")
        return bind


class Gpus(Strict):
    count: Annotated[StrictInt, Field(ge=1, le=1024)] | None = None
    device_ids: Annotated[list[Annotated[StrictStr, Field(pattern=GPU_ID_RE.pattern)]], Field(min_length=1)] | None = (
        None
    )
    driver: Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")] = "nvidia"
    spelling: Literal["deploy", "gpus"] = Field(
        "deploy", description="deploy.resources.reservations.devices, or the service-level gpus: attribute"
    )

    @model_validator(mode="after")
    def _one_of(self):
        if (self.count is None) == (self.device_ids is None):
            raise ValueError("give exactly one of count or device_ids (compose forbids both)")
        if self.device_ids is not None and len(set(self.device_ids)) != len(self.device_ids):
            raise ValueError(f"device_ids must be unique (compose refuses repeats), got {self.device_ids}")
        return self

    @property
    def n(self) -> int:
        return self.count if self.count is not None else len(self.device_ids or [])


UlimitValue = Annotated[StrictInt, Field(ge=-1, le=ULIMIT_MAX, description="-1: unlimited")]


class Ulimit(Strict):
    soft: UlimitValue
    hard: UlimitValue

    @model_validator(mode="after")
    def _order(self):
        if self.hard != -1 and (self.soft == -1 or self.soft > self.hard):
            raise ValueError(f"soft {self.soft} exceeds hard {self.hard}")
        return self


class Volume(Strict):
    source: StrictStr = Field(description="host path (absolute, ./relative or ${VAR}) or a named volume")
    # The short syntax splits on ':' and ',' separates mount options: neither may hide in the target.
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
        raise ValueError(f"{what} is neither a path (/, ./, ~, ${{VAR}}) nor a volume name, got {source!r}")
    return source


def _secrets_by_reference(env: dict) -> dict:
    for key, value in env.items():
        if SECRET_RE.search(key) and not (isinstance(value, str) and REF_RE.fullmatch(value)):
            raise ValueError(f"{key}: secrets must be a ${{VAR}} reference, never a value (write {key}: ${{{key}}})")
    return env


class UnsafeMount(Strict):
    """A reviewed exception to the mount rules (composegen/profiles/mounts.py): `diff` reports it as a
    functional change and `status` shows it."""

    source: StrictStr = Field(description="exactly the `source` of the volume (or a node's hf_cache) it allows")
    reason: Annotated[StrictStr, Field(min_length=8, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")] = Field(
        description="why this stack needs it (read by whoever reviews the profile)"
    )


class MemoryGuard(Strict):
    """Host-memory floor (composegen/stack/memguard.py): on a unified-memory host (DGX Spark: the GPU uses system
    memory) running out during the load hard-resets the machine instead of failing with an out-of-memory error."""

    min_available: Annotated[StrictStr, Field(pattern=SIZE_RE.pattern, max_length=24)] = Field(
        "8gb", description="MemAvailable below this refuses `up`, and stops a loading stack (exit 3)"
    )
    unified: StrictBool | None = Field(
        None, description="declare the hosts unified-memory (true) or not (false); default: detected (GB10, Tegra)"
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
    environment: dict[StrictStr, StrictStr | StrictInt] = Field(default_factory=dict)
    volumes: list[Volume] = Field(default_factory=list)
    unsafe_mounts: list[UnsafeMount] = Field(
        default_factory=list,
        description="mounts outside the project or of sensitive host paths, each allowed with a reason",
    )
    stop_grace_period: Annotated[StrictStr, Field(pattern=DURATION_RE.pattern)] = "120s"
    startup_timeout: Annotated[StrictInt, Field(ge=1, le=86400)] = Field(1800, description="seconds")
    restart: Literal["no", "on-failure", "unless-stopped", "always"] = "no"
    memory_guard: MemoryGuard = Field(default_factory=lambda: MemoryGuard.model_validate({}))
    hf_online: StrictBool = Field(
        False, description="keep the engine online: no HF_HUB_OFFLINE=1 even when `up` finds the weights complete"
    )

    def ulimits_plain(self) -> dict[str, int | dict[str, int]]:
        """Ulimits as compose writes them: a number, or {soft, hard}."""
        return {k: (v if isinstance(v, int) else v.model_dump()) for k, v in sorted(self.ulimits.items())}

    @field_validator("environment")
    @classmethod
    def _secrets(cls, env: dict) -> dict:
        return _secrets_by_reference(_env_names(env))

    @field_validator("ulimits")
    @classmethod
    def _ulimit_names(cls, ulimits: dict) -> dict:
        for name in ulimits:
            if name not in ULIMIT_NAMES:
                raise ValueError(f"{name!r} is not a Docker ulimit; known: {', '.join(sorted(ULIMIT_NAMES))}")
        return ulimits

    @field_validator("stop_grace_period")
    @classmethod
    def _grace(cls, text: str) -> str:
        if _grace_seconds(text) > MAX_GRACE_S:
            raise ValueError(f"{text} is longer than {MAX_GRACE_S // 3600} hours")
        return text


Rate = Annotated[float, Field(gt=0)]


class QualifyBench(Strict):
    """A load benchmark the stack must pass: `composegen bench` at one concurrency, then floors on its
    throughput and ceilings on its latency (vllm bench serve's names; unset ones are not judged)."""

    concurrency: Annotated[StrictInt, Field(ge=1)] = 4
    requests: Annotated[StrictInt, Field(ge=1)] = 32
    input_tokens: Annotated[StrictInt, Field(ge=1)] = 1000
    output_tokens: Annotated[StrictInt, Field(ge=1)] = 128
    min_request_throughput: Rate | None = Field(None, description="requests/s at least")
    min_output_throughput: Rate | None = Field(None, description="output tokens/s at least")
    max_median_ttft_ms: Rate | None = Field(None, description="median time to first token, ms, at most")
    max_p99_ttft_ms: Rate | None = Field(None, description="p99 time to first token, ms, at most")
    max_median_tpot_ms: Rate | None = Field(None, description="median time per output token, ms, at most")
    max_p99_e2el_ms: Rate | None = Field(None, description="p99 end-to-end latency, ms, at most")


class Qualify(Strict):
    bench: QualifyBench | None = Field(None, description="throughput floors / latency ceilings under load")
    min_kv_tokens: Annotated[StrictInt, Field(ge=1)] | None = Field(None, description="default: max-model-len")
    min_prompt_tokens: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None, description="largest API-reported prompt that must be processed"
    )
    ladder_targets: list[Annotated[StrictInt, Field(ge=1)]] = Field(default_factory=list)
    gates: list[Literal["smoke", "json", "tools", "stream_tools", "continuation", "responses"]] = Field(
        default_factory=list
    )
    tools: Annotated[StrictInt, Field(ge=1)] = 20
    fallback: Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")] | None = Field(
        None, description="the profile `campaign qualify` judges by the same criteria when this one fails"
    )


HOSTNAME_RE = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
ENDPOINT_RE = re.compile(r"^(?:unix|tcp|ssh|npipe)://\S+$")


class Node(Strict):
    name: Annotated[StrictStr, Field(pattern=PROJECT_PART_RE.pattern)]
    rank: Annotated[StrictInt, Field(ge=0, le=4096)]
    docker_host: Annotated[StrictStr, Field(pattern=ENDPOINT_RE.pattern)] | None = Field(
        None, description="DOCKER_HOST URL of this node's engine, e.g. ssh://spark-2 (default: local)"
    )
    context: Annotated[StrictStr, Field(pattern=CONTEXT_RE.pattern)] | None = Field(
        None, description="docker context name, instead of docker_host"
    )
    environment: dict[StrictStr, StrictStr | StrictInt] = Field(
        default_factory=dict, description="per-node settings: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, VLLM_HOST_IP, …"
    )
    gpus: Gpus | None = Field(None, description="default: service.gpus")
    hf_cache: StrictStr | None = Field(None, description="host path of the Hugging Face cache on this node")

    @field_validator("environment")
    @classmethod
    def _secrets(cls, env: dict) -> dict:
        return _secrets_by_reference(_env_names(env))

    @field_validator("hf_cache")
    @classmethod
    def _hf_cache(cls, path: str | None) -> str | None:
        if path is not None and not path.startswith(("/", ".", "~", "$")):
            raise ValueError(f"must be a host path (/, ./, ~ or ${{VAR}}), not a volume name: {path!r}")
        return None if path is None else host_path_problem(path, "hf_cache")

    @model_validator(mode="after")
    def _one_endpoint(self):
        if self.docker_host and self.context:
            raise ValueError("give docker_host or context, not both")
        return self


class Nodes(Strict):
    master_addr: StrictStr = Field(description="the head's address on the fabric (--master-addr)")
    master_port: Port = Field(29501, description="--master-port")
    rdma: StrictBool = Field(False, description="pass /dev/infiniband and IPC_LOCK to every node")
    members: Annotated[list[Node], Field(min_length=2)]

    @field_validator("master_addr")
    @classmethod
    def _addr(cls, addr: str) -> str:
        problem = master_addr_problem(addr)
        if problem:
            raise ValueError(problem)
        return addr

    @property
    def head(self) -> Node:
        return next(m for m in self.members if m.rank == 0)


def master_addr_problem(addr: str) -> str | None:
    """Why `addr` cannot be the head's --master-addr (None when it can): an IP address or a host name
    that workers can connect to; all-digit dotted text must be a real IPv4 address."""
    text = addr[1:-1] if addr.startswith("[") and addr.endswith("]") else addr
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        if all(label.isdigit() for label in text.split(".")):
            return f"not an IPv4 address: {addr!r}"
        if not HOSTNAME_RE.fullmatch(text):
            return f"not an IP address or host name: {addr!r}"
        return None
    if ip.is_unspecified:
        return f"{addr} is the wildcard address; workers need the head's own address on the fabric"
    return None


# prom/prometheus v3.5.0 (a long-term-support release), pinned by its multi-arch index digest.
PROMETHEUS_IMAGE = "prom/prometheus@sha256:63805ebb8d2b3920190daf1cb14a60871b16fd38bed42b857a3182bc621f4996"


class Monitoring(Strict):
    prometheus: StrictBool = Field(False, description="render Prometheus and a Grafana dashboard (docs/monitoring.md)")
    port: Port = Field(9090, description="host port of Prometheus' UI and API, bound to 127.0.0.1")
    scrape_interval: Annotated[StrictStr, Field(pattern=DURATION_RE.pattern)] = "5s"
    image: StrictStr = Field(PROMETHEUS_IMAGE, description="Prometheus image, repo@sha256:<64 hex>")

    @field_validator("image")
    @classmethod
    def _pinned(cls, image: str) -> str:
        if not DIGEST_RE.fullmatch(image):
            raise ValueError(f"{image!r} is not pinned: write repo@sha256:<64 lowercase hex>")
        return image


class Emulate(Strict):
    env: dict[StrictStr, StrictStr | StrictInt] = Field(
        default_factory=dict, description="emulator memory-model settings for `up --emulate` (EMU_*)"
    )

    @field_validator("env")
    @classmethod
    def _names(cls, env: dict) -> dict:
        for key in _env_names(env):  # the emulator's settings; a secret here would be written as text
            if SECRET_RE.search(key) and not key.startswith("EMU_"):
                raise ValueError(
                    f"{key}: emulate.env holds emulator settings (EMU_*), never a secret or a key; set "
                    f"service.environment.{key}: ${{{key}}} instead (composegen then sends it)"
                )
        return env


class Profile(Strict):
    description: StrictStr = ""
    extends: StrictStr | None = None
    vllm_version: Annotated[StrictStr, Field(pattern=VERSION_RE.pattern)] = "0.33.0"
    image: StrictStr = Field(description="repo@sha256:<64 hex>")
    image_unpinned_reason: StrictStr | None = Field(
        None, description="why a tag-only image is accepted (validate --strict still fails)"
    )
    model: Model
    service: Service
    vllm: dict[StrictStr, Any] = Field(default_factory=dict, description="vLLM flag name → value")
    identity: list[StrictStr] = Field(default_factory=list, description="extra diff paths that are identity-only")
    qualify: Qualify | None = None
    nodes: Nodes | None = Field(None, description="one profile across several hosts (vLLM multi-node, mp backend)")
    emulate: Emulate = Field(default_factory=Emulate)
    monitoring: Monitoring = Field(default_factory=lambda: Monitoring.model_validate({}))
    kubernetes: Kubernetes = Field(default_factory=lambda: Kubernetes.model_validate({}))

    @field_validator("image")
    @classmethod
    def _image(cls, image: str) -> str:
        if "@" in image and not DIGEST_RE.fullmatch(image):
            raise ValueError(f"{image!r} is not pinned: the digest must be sha256:<64 lowercase hex>")
        if not (DIGEST_RE.fullmatch(image) or TAG_RE.fullmatch(image)):
            raise ValueError(f"not an image reference: {image!r}")
        return image

    @field_validator("identity")
    @classmethod
    def _identity(cls, paths: list[str]) -> list[str]:
        from composegen.profiles import identity

        for path in paths:
            if why := identity.problem(path):
                raise ValueError(why)
        return paths

    @property
    def pinned(self) -> bool:
        return bool(DIGEST_RE.fullmatch(self.image))


def json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "composegen profile"
    return schema
