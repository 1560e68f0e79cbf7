"""The profile's `kubernetes:` section: what `render --target k8s` needs that a compose stack never
says.

The engine never sees it: it is outside the profile hash (resolved.py), so setting it leaves
out/NAME/compose.yaml as it is.
"""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


# a DNS-1123 label: Secret and PVC names
K8S_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


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

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.claim is None) == (self.host_path is None):
            raise ValueError("give exactly one of claim or host_path")
        return self


class Kubernetes(_Strict):
    """`render --target k8s` settings (docs/kubernetes.md); compose never reads them."""

    hf_cache: KubernetesCache | None = Field(
        None,
        description="default: the nodes' hf_cache directory when absolute, else the claim `hf-cache`",
    )
    secret: Annotated[StrictStr, Field(pattern=K8S_NAME_RE.pattern)] = Field(
        "hf-token",
        description="Secret holding the secret environment variables (HF_TOKEN), one key each",
    )
