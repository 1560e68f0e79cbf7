"""The profile's `kubernetes:` section: what `render --target k8s` needs that a compose stack never
says.

The engine never sees it: it is outside the profile hash (resolved.py), so setting it leaves
out/NAME/compose.yaml as it is."""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


# a DNS-1123 label: Secret and PVC names
K8S_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
# a size as profiles write them (32gb, 512Gi is not one: composegen's units, binary)
SIZE = r"^\d+(?:\.\d+)?\s*(?:b|k|kb|m|mb|g|gb|t|tb)?$"
# CPU as Kubernetes counts it: cores (2, 0.5) or millicores (500m)
CPU = r"^(?:\d+(?:\.\d{1,3})?|\d+m)$"


class KubernetesCache(_Strict):
    """The Hugging Face cache of the Kubernetes pods: a PersistentVolumeClaim or a node
    directory."""

    claim: Annotated[StrictStr, Field(pattern=K8S_NAME_RE.pattern)] | None = Field(
        None,
        description="name of an existing PersistentVolumeClaim (ReadWriteMany/ReadOnlyMany for `nodes:`)",
    )
    host_path: Annotated[StrictStr, Field(pattern=r"^/[^\x00-\x1f\x7f]*$")] | None = Field(
        None, description="absolute directory on every node (a hostPath volume)"
    )
    size: Annotated[StrictStr, Field(pattern=SIZE, max_length=24)] | None = Field(
        None,
        description="with claim: composegen renders that claim (pvc.yaml) of this size; without: it exists",
    )

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.claim is None) == (self.host_path is None):
            raise ValueError("give exactly one of claim or host_path")
        if self.size is not None and self.claim is None:
            raise ValueError("size is the size of a claim composegen renders: give claim too")
        return self


class KubernetesRequests(_Strict):
    """What the scheduler must find free on a node for one pod (resources.requests)."""

    cpu: Annotated[StrictStr, Field(pattern=CPU, max_length=12)] | None = Field(
        None, description="cores (2, 0.5) or millicores (500m); default: one per GPU, plus one"
    )
    memory: Annotated[StrictStr, Field(pattern=SIZE, max_length=24)] | None = Field(
        None,
        description="default: /dev/shm's size + CPU KV offload + 8gb for the engine's processes",
    )


class Kubernetes(_Strict):
    """`render --target k8s` settings (docs/kubernetes.md); compose never reads them."""

    hf_cache: KubernetesCache | None = Field(
        None,
        description="default: the nodes' hf_cache directory when absolute, else the claim `hf-cache`",
    )
    requests: KubernetesRequests = Field(
        default_factory=lambda: KubernetesRequests.model_validate({}),
        description="each pod's cpu and memory requests; default: estimated from the profile",
    )
    secret: Annotated[StrictStr, Field(pattern=K8S_NAME_RE.pattern)] = Field(
        "hf-token",
        description="Secret holding the secret environment variables (HF_TOKEN), one key each",
    )
