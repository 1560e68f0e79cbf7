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

DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9._-]+)*@sha256:[0-9a-f]{64}$")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$")
SECRET_RE = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
# A secret may only come from the environment: `${VAR}`, `${VAR:-}` (empty when unset) or `${VAR:?why}`;
# a non-empty default (`${VAR:-hunter2}`) would put the value itself into a committed file.
REF_RE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-|:?\?[^}]*)?\}$")
SIZE_RE = re.compile(r"^\d+(?:\.\d+)?\s*(?:b|k|kb|m|mb|g|gb|t|tb)?$", re.I)
DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|ms|s|m|h))+$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")

Port = Annotated[StrictInt, Field(ge=1, le=65535)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Model(Strict):
    id: StrictStr = Field(description="Hugging Face model id, e.g. deepseek-ai/DeepSeek-V4-Flash-0731")
    revision: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}$", description="40-hex commit")]
    served_name: Annotated[StrictStr, Field(min_length=1, description="--served-model-name")]
    path: StrictStr | None = Field(None, description="model path inside the container (default: id)")


class Published(Strict):
    host: Port = Field(description="host port")
    container: Port = Field(8000, description="port vLLM listens on inside the container")
    bind: StrictStr = Field("127.0.0.1", description="host address; 0.0.0.0 exposes the API to the network")

    @field_validator("bind")
    @classmethod
    def _ip(cls, bind: str) -> str:
        import ipaddress

        try:
            ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(f"must be an IP address (compose publishes ports on addresses), got {bind!r}") from None
        return bind


class Gpus(Strict):
    count: Annotated[StrictInt, Field(ge=1)] | None = None
    device_ids: list[StrictStr] | None = None
    driver: StrictStr = "nvidia"
    spelling: Literal["deploy", "gpus"] = Field(
        "deploy", description="deploy.resources.reservations.devices, or the service-level gpus: attribute"
    )

    @model_validator(mode="after")
    def _one_of(self):
        if (self.count is None) == (self.device_ids is None):
            raise ValueError("give exactly one of count or device_ids (compose forbids both)")
        return self

    @property
    def n(self) -> int:
        return self.count if self.count is not None else len(self.device_ids or [])


class Ulimit(Strict):
    soft: StrictInt
    hard: StrictInt


class Volume(Strict):
    source: StrictStr = Field(description="host path (absolute, ./relative or ${VAR}) or a named volume")
    target: Annotated[StrictStr, Field(pattern=r"^/")]
    read_only: StrictBool = False

    @field_validator("source")
    @classmethod
    def _no_colon(cls, source: str) -> str:
        # The short volume syntax splits on ':'; only a ${VAR:-default} may carry one.
        if ":" in re.sub(r"\$\{[^}]*\}", "", source) or not source:
            raise ValueError(f"a volume source cannot contain ':' (outside ${{VAR:-default}}), got {source!r}")
        return source

    @property
    def named(self) -> bool:
        return not self.source.startswith(("/", ".", "~", "$"))


def _secrets_by_reference(env: dict) -> dict:
    for key, value in env.items():
        if SECRET_RE.search(key) and not (isinstance(value, str) and REF_RE.match(value)):
            raise ValueError(f"{key}: secrets must be a ${{VAR}} reference, never a value (write {key}: ${{{key}}})")
    return env


class Service(Strict):
    port: Published
    container_name: Annotated[StrictStr, Field(pattern=NAME_RE.pattern)] | None = None
    gpus: Gpus
    ipc: Literal["host", "private", "shareable"] = "private"
    shm_size: Annotated[StrictStr, Field(pattern=SIZE_RE.pattern)] | None = Field(None, description="e.g. 32gb")
    init: StrictBool = True
    ulimits: dict[StrictStr, StrictInt | Ulimit] = Field(default_factory=dict)
    environment: dict[StrictStr, StrictStr | StrictInt] = Field(default_factory=dict)
    volumes: list[Volume] = Field(default_factory=list)
    stop_grace_period: Annotated[StrictStr, Field(pattern=DURATION_RE.pattern)] = "120s"
    startup_timeout: Annotated[StrictInt, Field(ge=1, le=86400)] = Field(1800, description="seconds")
    restart: Literal["no", "on-failure", "unless-stopped", "always"] = "no"

    def ulimits_plain(self) -> dict[str, int | dict[str, int]]:
        """Ulimits as compose writes them: a number, or {soft, hard}."""
        return {k: (v if isinstance(v, int) else v.model_dump()) for k, v in sorted(self.ulimits.items())}

    @field_validator("environment")
    @classmethod
    def _secrets(cls, env: dict) -> dict:
        return _secrets_by_reference(env)


class Qualify(Strict):
    min_kv_tokens: Annotated[StrictInt, Field(ge=1)] | None = Field(None, description="default: max-model-len")
    min_prompt_tokens: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None, description="largest API-reported prompt that must be processed"
    )
    ladder_targets: list[Annotated[StrictInt, Field(ge=1)]] = Field(default_factory=list)
    gates: list[Literal["smoke", "json", "tools", "stream_tools", "continuation", "responses"]] = Field(
        default_factory=list
    )
    tools: Annotated[StrictInt, Field(ge=1)] = 20


HOSTNAME_RE = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
ENDPOINT_RE = re.compile(r"^(?:unix|tcp|ssh|npipe)://\S+$")


class Node(Strict):
    name: Annotated[StrictStr, Field(pattern=NAME_RE.pattern)]
    rank: Annotated[StrictInt, Field(ge=0)]
    docker_host: Annotated[StrictStr, Field(pattern=ENDPOINT_RE.pattern)] | None = Field(
        None, description="DOCKER_HOST URL of this node's engine, e.g. ssh://spark-2 (default: local)"
    )
    context: StrictStr | None = Field(None, description="docker context name, instead of docker_host")
    environment: dict[StrictStr, StrictStr | StrictInt] = Field(
        default_factory=dict, description="per-node settings: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, VLLM_HOST_IP, …"
    )
    gpus: Gpus | None = Field(None, description="default: service.gpus")
    hf_cache: StrictStr | None = Field(None, description="host path of the Hugging Face cache on this node")

    @field_validator("environment")
    @classmethod
    def _secrets(cls, env: dict) -> dict:
        return _secrets_by_reference(env)

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
        if not HOSTNAME_RE.match(text):
            return f"not an IP address or host name: {addr!r}"
        return None
    if ip.is_unspecified:
        return f"{addr} is the wildcard address; workers need the head's own address on the fabric"
    return None


class Emulate(Strict):
    env: dict[StrictStr, StrictStr | StrictInt] = Field(
        default_factory=dict, description="emulator memory-model settings for `up --emulate` (EMU_*)"
    )


class Profile(Strict):
    description: StrictStr = ""
    extends: StrictStr | None = None
    vllm_version: StrictStr = "0.33.0"
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

    @field_validator("image")
    @classmethod
    def _image(cls, image: str) -> str:
        if "@" in image and not DIGEST_RE.match(image):
            raise ValueError(f"{image!r} is not pinned: the digest must be sha256:<64 lowercase hex>")
        if not (DIGEST_RE.match(image) or TAG_RE.match(image)):
            raise ValueError(f"not an image reference: {image!r}")
        return image

    @property
    def pinned(self) -> bool:
        return bool(DIGEST_RE.match(self.image))


def json_schema() -> dict[str, Any]:
    schema = Profile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "composegen profile"
    return schema
