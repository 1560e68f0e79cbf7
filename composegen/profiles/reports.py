"""The JSON shapes of the profile commands (list, validate, show, render): `composegen schema
--report NAME`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from composegen.report import Report


class ListedProfile(Report):
    name: str
    extends: str | None = Field(description="the parent profile, if any")
    description: str
    hash: str | None = Field(description="null when the profile is invalid")
    error: str | None = Field(description="why the profile is invalid (one line), else null")


class ListReport(Report):
    """`composegen list --json` (exit 2 when any profile is invalid; the rows still list every
    profile)."""

    profiles: list[ListedProfile]


class ValidatedProfile(Report):
    name: str
    hash: str
    warnings: list[str]
    pinned: bool
    notes: list[str] = Field(
        default_factory=list, description="informational (up checks them); --strict passes"
    )
    image_policy: str = Field(
        default="pinned", description="the profile's image_policy (pinned or local-build)"
    )


class ValidateReport(Report):
    """`composegen validate --json`: `warnings` are the ones no single profile shows (shared ports,
    names)."""

    profiles: list[ValidatedProfile]
    warnings: list[str]


class ShowCaches(Report):
    """Where a stack keeps what its start compiles (docs/caches.md)."""

    kept: str = Field(description="volume, off, or the project directory")
    key: str | None = Field(description="16 hex of the image, model and compile flags")
    volume: str | None = Field(description="the named volume (caches: volume)")
    target: str | None = Field(description="where the container sees it")
    variables: dict[str, str] = Field(description="each cache's variable -> its directory")


class ShowReport(Report):
    """`composegen show NAME --json`: the resolved profile (secret values of this machine
    masked)."""

    name: str
    path: str
    extends: list[str] = Field(description="ancestors, nearest first")
    hash: str
    profile: dict[str, Any] = Field(description="the merged profile (`composegen schema`)")
    flags: dict[str, Any] = Field(description="vLLM flag name -> checked value")
    argv: list[str] = Field(description="the container's command line, `vllm serve ...`")
    warnings: list[str]
    caches: ShowCaches | None = None


class K8sNote(Report):
    setting: str = Field(description="the compose setting, e.g. ulimits.memlock")
    value: str = Field(description="its value in the compose stack")
    k8s: str = Field(description="what the manifests do instead")


class K8sRendered(Report):
    """One profile's out/NAME/k8s/ (docs/kubernetes.md): what Kubernetes could not say, never
    dropped silently."""

    profile: str
    kind: Literal["Deployment", "LeaderWorkerSet"]
    files: list[str]
    unmapped: list[K8sNote] = Field(
        description="compose settings without a Kubernetes equivalent: not rendered"
    )
    adapted: list[K8sNote] = Field(description="rendered another way than compose does")
    security: list[K8sNote] = Field(
        description="hostIPC, hostNetwork, capabilities, hostPath: as the stack has them"
    )


class RenderReport(Report):
    """`composegen render --json`."""

    written: list[str]
    removed: list[str] = Field(description="generated files of profiles that no longer exist")
    unchanged: int
    k8s: list[K8sRendered] = Field(
        default_factory=list, description="profiles rendered for Kubernetes"
    )


class Drift(Report):
    path: str
    reason: Literal["stale", "missing", "orphan"]


class RenderCheckReport(Report):
    """`composegen render --check --json` (exit 1 unless fresh)."""

    fresh: bool
    drift: list[Drift]
