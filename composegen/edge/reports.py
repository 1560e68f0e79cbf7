"""The edge's JSON shapes (`schema --report NAME`)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import Field

from composegen import privatestate
from composegen.edge.keys import Client
from composegen.edge.routes import Proof, Switching
from composegen.evidence.reports.qualify import QualifyResult
from composegen.report import Report


class ClientRow(Report):
    name: str
    state: str  # active | expired | revoked | invalid (a record edited by hand: see problem)
    created: str
    expires: str | None
    revoked: str | None
    problem: str | None = None


class ClientsReport(Report):
    clients: list[ClientRow]


def client_rows(clients: list[Client]) -> list[ClientRow]:
    now = privatestate.now()
    return [ClientRow(state=c.state(now), **dataclasses.asdict(c)) for c in clients]


class StepTime(Report):
    step: str
    seconds: float
    # when it began, in seconds from the command's start (the process's own start time)
    at: float | None = None


class SwitchReport(Report):
    alias: str
    previous: str | None
    profile: str
    by: str  # promote | rollback
    evidence: Proof | None  # what allowed the switch
    stages: list[str]  # what the edge told clients while it ran (503 + Retry-After + this)
    seconds: float
    # standby: by sleep mode (docs/standby.md); cold: down, then up; unchanged: the alias already
    # served it
    path: Literal["standby", "cold", "unchanged"] = "cold"
    path_reason: str | None = None  # why that path ran
    # each step told to clients, with its seconds
    steps: list[StepTime] = Field(default_factory=list)
    # what ran before the first step (`start`: the process's start, imports included, to the
    # command's; `proof`, `state`, `plan`, `journal`), and when the alias moved, in seconds from
    # the command's start
    before: list[StepTime] = Field(default_factory=list)
    moved_at: float | None = None


class RecoverReport(Report):
    alias: str | None  # None: there was no interrupted switch
    action: str
    profile: str | None  # where the alias points now
    stages: list[str]  # what clients were told while the recovery ran
    seconds: float


class AliasRow(Report):
    alias: str
    profile: str | None
    switching: Switching | None  # while a promote/rollback runs
    evidence: Proof | None  # of the current assignment
    interrupted: bool = False  # the switch's composegen is gone: `composegen edge recover`
    target: str | None = None  # the stack it points at: ready | asleep | starting | down


class EdgeStatusReport(Report):
    name: str
    url: str
    tls: str  # internal | acme | off
    containers: dict[str, str]  # proxy / gate -> state (absent: not created)
    stacks: list[str]
    aliases: list[AliasRow]
    clients: list[ClientRow]


class ExposureRow(Report):
    path: str
    method: str
    allowed: bool  # on the edge's allowlist
    without_key: int  # HTTP status through the edge (-1: no answer)
    with_key: int
    passed: bool
    reason: str | None


class ExposureReport(Report):
    edge: str
    url: str
    tls: str
    routes_from: str
    rows: list[ExposureRow]
    passed: bool
    failed: int
    run: str | None = None  # the evidence bundle holding exposure.json


class ProofReport(Report):
    """`qualify NAME --alias ALIAS`: NAME qualified in the place of the alias's serving stack."""

    alias: str
    profile: str  # the profile qualified
    serving_before: str
    serving_after: str  # where the alias points now: the same, or PROFILE (--then promote)
    then: Literal["restore", "promote"]
    qualified: bool
    qualify: QualifyResult  # the verdict and its bundle, as `qualify --json`
    evidence: Proof | None  # --then promote: what the new assignment records
    # standby: the serving engine slept, not downed; cold: down, up; unchanged: it served already
    path: Literal["standby", "cold", "unchanged"]
    path_reason: str
    stages: list[str]  # what clients were told meanwhile (503 + Retry-After + this)
    steps: list[StepTime]  # each step with its seconds
    seconds: float
    # bringing the serving stack back after the qualification failed (exit 3): why; the verdict
    # and its bundle above still stand
    restore_failed: str | None = None
