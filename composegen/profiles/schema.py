"""The profile model: what a profile may say beyond vLLM flags, typed and range-checked.

Strict types throughout: YAML's `yes` is not a boolean-as-int, `4096.5` is not an integer. Unknown
keys are errors (extra="forbid"). `composegen schema` prints the JSON Schema of `Profile`. The
`model:` and `service:` parts, and the checks every part shares, are in profiles/service.py.

Multi-node (`nodes:`): the image, the model and its revision and every vLLM flag are profile-level,
so they are the same on every node by construction; only endpoints, environment, GPUs and the HF
cache path are per node. (The driver still checks that the image each engine holds has the same
digest.)"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal, Self

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from composegen.errors import BadInput
from composegen.output import SECRET_RE as SECRET_RE  # one definition: what output masks
from composegen.profiles import caches as compile_caches
from composegen.profiles import identity
from composegen.profiles.kubernetes import Kubernetes
from composegen.profiles.service import (
    DURATION_RE,
    Environment,
    Gpus,
    Model,
    Port,
    Service,
    Strict,
    env_names,
    host_path_problem,
)

DIGEST_RE = re.compile(
    r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9._-]+)*@sha256:[0-9a-f]{64}$"
)
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$")
# Names that become part of a compose project name (`SCOPE-PROFILE-NODE`, SCOPE composegen or
# composegen.yaml's): compose's own grammar, no '.' (folded to '-': `a.b` and `a-b` would collide).
PROJECT_PART_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# names a catalog file: no path parts
VERSION_RE = re.compile(r"^[0-9]+(?:\.[0-9]+)*(?:[A-Za-z0-9.+-]*)$")
CONTEXT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
SHM_MIN_BYTES = 2**30  # below this a private /dev/shm cannot hold vLLM's message queues

Rate = Annotated[float, Field(gt=0)]


class QualifyBench(Strict):
    """A load benchmark the stack must pass: `composegen bench` at one concurrency, then floors on
    its throughput and ceilings on its latency (vllm bench serve's names; unset ones are not
    judged)."""

    concurrency: Annotated[StrictInt, Field(ge=1)] = 4
    requests: Annotated[StrictInt, Field(ge=1)] = 32
    input_tokens: Annotated[StrictInt, Field(ge=1)] = 1000
    output_tokens: Annotated[StrictInt, Field(ge=1)] = 128
    min_request_throughput: Rate | None = Field(default=None, description="requests/s at least")
    min_output_throughput: Rate | None = Field(default=None, description="output tokens/s at least")
    max_median_ttft_ms: Rate | None = Field(
        default=None, description="median time to first token, ms, at most"
    )
    max_p99_ttft_ms: Rate | None = Field(
        default=None, description="p99 time to first token, ms, at most"
    )
    max_median_tpot_ms: Rate | None = Field(
        default=None, description="median time per output token, ms, at most"
    )
    max_p99_e2el_ms: Rate | None = Field(
        default=None, description="p99 end-to-end latency, ms, at most"
    )


class Qualify(Strict):
    bench: QualifyBench | None = Field(
        default=None, description="throughput floors / latency ceilings under load"
    )
    min_kv_tokens: Annotated[StrictInt, Field(ge=1)] | None = Field(
        default=None, description="default: max-model-len"
    )
    min_prompt_tokens: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None, description="largest API-reported prompt that must be processed"
    )
    ladder_targets: list[Annotated[StrictInt, Field(ge=1)]] = Field(default_factory=list)
    gates: list[Literal["smoke", "json", "tools", "stream_tools", "continuation", "responses"]] = (
        Field(default_factory=list)
    )
    tools: Annotated[StrictInt, Field(ge=1)] = 20
    fallback: Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")] | None = Field(
        None,
        description="the profile `campaign qualify` judges by the same criteria when this one fails",
    )


HOSTNAME_RE = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
ENDPOINT_RE = re.compile(r"^(?:unix|tcp|ssh|npipe)://\S+$")


class Node(Strict):
    name: Annotated[StrictStr, Field(pattern=PROJECT_PART_RE.pattern)]
    rank: Annotated[StrictInt, Field(ge=0, le=4096)]
    docker_host: Annotated[StrictStr, Field(pattern=ENDPOINT_RE.pattern)] | None = Field(
        None,
        description="DOCKER_HOST URL of this node's engine, e.g. ssh://spark-2 (default: local)",
    )
    context: Annotated[StrictStr, Field(pattern=CONTEXT_RE.pattern)] | None = Field(
        None, description="docker context name, instead of docker_host"
    )
    environment: Environment = Field(
        default_factory=dict,
        description="per-node settings: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, VLLM_HOST_IP, …",
    )
    gpus: Gpus | None = Field(default=None, description="default: service.gpus")
    hf_cache: StrictStr | None = Field(
        default=None, description="host path of the Hugging Face cache on this node"
    )

    @field_validator("hf_cache")
    @classmethod
    def _hf_cache(cls, path: str | None) -> str | None:
        if path is not None and not path.startswith(("/", ".", "~", "$")):
            raise ValueError(
                f"must be a host path (/, ./, ~ or ${{VAR}}), not a volume name: {path!r}"
            )
        return None if path is None else host_path_problem(path, "hf_cache")

    @model_validator(mode="after")
    def _one_endpoint(self) -> Self:
        if self.docker_host and self.context:
            raise ValueError("give docker_host or context, not both")
        return self


class Nodes(Strict):
    master_addr: StrictStr = Field(description="the head's address on the fabric (--master-addr)")
    master_port: Port = Field(default=29501, description="--master-port")
    rdma: StrictBool = Field(
        default=False, description="pass /dev/infiniband and IPC_LOCK to every node"
    )
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

    @property
    def by_rank(self) -> list[Node]:
        """The members by rank, head first: the one order every node algorithm walks."""
        return sorted(self.members, key=lambda m: m.rank)


def master_addr_problem(addr: str) -> str | None:
    """Why `addr` cannot be the head's --master-addr (None when it can): an IP address or a host
    name that workers can connect to; all-digit dotted text must be a real IPv4 address."""
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
PROMETHEUS_IMAGE = (
    "prom/prometheus@sha256:63805ebb8d2b3920190daf1cb14a60871b16fd38bed42b857a3182bc621f4996"
)


class Monitoring(Strict):
    prometheus: StrictBool = Field(
        default=False, description="render Prometheus and a Grafana dashboard (docs/monitoring.md)"
    )
    port: Port = Field(
        default=9090, description="host port of Prometheus' UI and API, bound to 127.0.0.1"
    )
    scrape_interval: Annotated[StrictStr, Field(pattern=DURATION_RE.pattern)] = "5s"
    image: StrictStr = Field(PROMETHEUS_IMAGE, description="Prometheus image, repo@sha256:<64 hex>")

    @field_validator("image")
    @classmethod
    def _pinned(cls, image: str) -> str:
        if not DIGEST_RE.fullmatch(image):
            raise ValueError(f"{image!r} is not pinned: write repo@sha256:<64 lowercase hex>")
        return image


class Standby(Strict):
    """Resident beside another stack, asleep when not serving (vLLM's sleep mode: docs/standby.md).
    The render adds --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1. The dev routes that opens
    answer any local process and any container on the stack's networks (vLLM listens on all
    interfaces); the edge, the door and the published ports never pass them."""

    level: Literal[1, 2] = Field(
        1,
        description="1: weights kept in host memory (fast wake); 2: weights discarded (wake reloads them)",
    )


class Emulate(Strict):
    env: dict[StrictStr, StrictStr | StrictInt] = Field(
        default_factory=dict,
        description="emulator memory-model settings for `up --emulate` (EMU_*)",
    )

    @field_validator("env")
    @classmethod
    def _names(cls, env: dict) -> dict:
        # the emulator's settings; a secret here would be written as text
        for key in env_names(env):
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
        None,
        description="why a tag-only image is accepted (validate --strict fails unless image_policy says why)",
    )
    image_policy: Literal["pinned", "local-build"] = Field(
        "pinned",
        description="local-build: the reviewed opt-in for an image built on the host (no registry, so no digest); "
        "needs image_unpinned_reason, is never pulled, and diff calls it functional",
    )
    model: Model
    service: Service
    vllm: dict[StrictStr, Any] = Field(default_factory=dict, description="vLLM flag name → value")
    identity: list[StrictStr] = Field(
        default_factory=list, description="extra diff paths that are identity-only"
    )
    qualify: Qualify | None = None
    nodes: Nodes | None = Field(
        default=None, description="one profile across several hosts (vLLM multi-node, mp backend)"
    )
    standby: Standby | None = Field(
        None, description="sleep mode: switch to this stack in seconds (docs/standby.md)"
    )
    emulate: Emulate = Field(default_factory=Emulate)
    monitoring: Monitoring = Field(default_factory=lambda: Monitoring.model_validate({}))
    kubernetes: Kubernetes = Field(default_factory=lambda: Kubernetes.model_validate({}))
    caches: StrictStr = Field(
        "volume",
        description="what a start compiles, kept (docs/caches.md): volume (a named volume keyed by the image, "
        "model and compile flags), off, or a directory inside the project",
    )

    @field_validator("image")
    @classmethod
    def _image(cls, image: str) -> str:
        if "@" in image and not DIGEST_RE.fullmatch(image):
            raise ValueError(
                f"{image!r} is not pinned: the digest must be sha256:<64 lowercase hex>"
            )
        if not (DIGEST_RE.fullmatch(image) or TAG_RE.fullmatch(image)):
            raise ValueError(f"not an image reference: {image!r}")
        return image

    @field_validator("caches", mode="before")
    @classmethod
    def _caches_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    @field_validator("caches")
    @classmethod
    def _caches(cls, value: str) -> str:
        if why := compile_caches.problem(value):
            raise ValueError(why)
        return value

    @field_validator("identity")
    @classmethod
    def _identity(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if why := identity.problem(path):
                raise ValueError(why)
        return paths

    @property
    def pinned(self) -> bool:
        return bool(DIGEST_RE.fullmatch(self.image))


class Scope(Strict):
    """composegen.yaml's `scope`: what makes a second copy of a project on one engine its own."""

    # for `composegen` in names: no '-' (a scope `a-b` and profile `foo` would be scope `a`'s `b-foo`)
    name: Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9_]{0,30}$")]
    port_offset: Annotated[StrictInt, Field(ge=-64511, le=64511)] = 0  # added to every host port
    _at: str = "composegen.yaml"  # its file:line, for a refusal (a private attribute)

    def port(self, port: int, what: str) -> int:
        """PORT moved by the offset; refused when that leaves 1024..65535."""
        if (off := self.port_offset) and not 1024 <= port + off <= 65535:
            msg = f"{self._at}: scope.port_offset: {off} moves {what} {port} to {port + off}, outside 1024..65535"
            raise BadInput(msg)
        return port + off


class ProjectFile(Strict):
    scope: Scope


def json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "composegen profile"
    return schema
