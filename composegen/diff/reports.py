"""The diff room's JSON shapes (`schema --report diff`, `schema --report diff-targets`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from composegen.report import Report


class DiffChange(Report):
    """One change of `composegen diff --json` (which prints a list of these, functional first, then
    by path)."""

    path: str = Field(description="e.g. services.vllm.command.--max-num-batched-tokens")
    change_class: Literal["functional", "identity"] = Field(alias="class")
    before: Any = Field(description="JSON value; null when absent on side a")
    after: Any = Field(description="JSON value; null when absent on side b")


class Fact(Report):
    node: str = Field(description="node name (rank) of a multi-node stack, `-` for one node")
    fact: str = Field(description="argv, image, environment, gpus or shm")
    equal: bool
    compose: Any
    k8s: Any


class TargetOnly(Report):
    node: str
    setting: str = Field(
        description="the compose setting (or argv flag) whose Kubernetes form differs"
    )
    compose: Any
    k8s: Any


class TargetsDiffReport(Report):
    """`composegen diff NAME --targets compose,k8s --json` (exit 1 unless `equal`)."""

    compose: str = Field(description="what the compose side was read from")
    k8s: str
    equal: bool = Field(
        description="every node's argv, image, environment, GPU count and shm size are equal"
    )
    facts: list[Fact]
    target_only: list[TargetOnly]
