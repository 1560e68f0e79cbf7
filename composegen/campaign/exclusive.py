"""Exclusive mode (the seed's "exclusive TP=2"): an arm starts only when no other container holds
any of the profile's GPUs. What a running container holds, from what the engine says:

  an emulated composegen stack   the GPUs its profile declares (label io.composegen.gpus; the emulator
                                 removes the reservation, so the declaration stands in for it)
  a GPU device request           its device_ids; count N the first N GPUs; count -1 every GPU
  the nvidia runtime             NVIDIA_VISIBLE_DEVICES (all, or a list)

A count holds the first N device indices, as the NVIDIA container toolkit assigns them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from composegen.errors import EngineError
from composegen.profiles.resolved import Resolved
from composegen.project import compose_project
from composegen.stack import driver

ALL = "all"
GPUS_LABEL = "io.composegen.gpus"
EMULATED_LABEL = "io.composegen.emulated"


def declared(spec: str) -> set[str] | str:
    """`ids:0,1` -> {"0", "1"}; `count:2` -> {"0", "1"}; `count:-1` -> ALL."""
    kind, _, value = spec.partition(":")
    if kind == "ids":
        return {v for v in value.split(",") if v}
    if kind == "count":
        try:
            n = int(value)
        except ValueError:
            return set()
        return ALL if n < 0 else {str(i) for i in range(n)}
    return set()


def profile_gpus(r: Resolved, member: Any = None) -> set[str] | str:
    """The GPUs the profile (or one node of it, MEMBER) declares."""
    gpus = (member.gpus if member is not None else None) or r.profile.service.gpus
    return set(gpus.device_ids) if gpus.device_ids is not None else declared(f"count:{gpus.count}")


def held(claim: dict) -> set[str] | str:
    """The GPUs one running container holds (see the module's table)."""
    labels = claim.get("labels") or {}
    if labels.get(EMULATED_LABEL) == "true" and GPUS_LABEL in labels:
        return declared(labels[GPUS_LABEL])
    out: set[str] = set()
    for req in claim.get("device_requests") or []:
        if req.get("device_ids"):
            out |= {str(d) for d in req["device_ids"]}
        elif isinstance(req.get("count"), int) and req["count"] != 0:
            found = declared(f"count:{req['count']}")
            if found == ALL:
                return ALL
            out |= found if isinstance(found, set) else set()
    env = claim.get("env")
    if claim.get("runtime") == "nvidia" and env and env not in ("none", "void"):
        if env == ALL:
            return ALL
        out |= {v.strip() for v in env.split(",") if v.strip()}
    return out


def _overlap(a: set[str] | str, b: set[str] | str) -> set[str] | str:
    if a == ALL or b == ALL:
        return ALL if (a == ALL and b) or (b == ALL and a) else set()
    assert isinstance(a, set) and isinstance(b, set)
    return a & b


def holders(
    r: Resolved,
    claims: list[dict],
    own_project: str,
    member: Any = None,
    asleep: Collection[str] = (),
) -> list[str]:
    """Who holds any of the profile's GPUs (on one node: MEMBER's), in words (the profile's own
    stack does not count, nor the stacks of ASLEEP: profiles this campaign put to sleep, whose
    residue the memory plan and the engine's own memory check judge)."""
    mine = profile_gpus(r, member)
    where = f" on node {member.name}" if member is not None else ""
    found, slept = [], {compose_project(a, member and member.name, r.prefix) for a in asleep}
    for claim in claims:
        labels = claim.get("labels") or {}
        if labels.get("com.docker.compose.project") in {own_project, *slept}:
            continue  # not another copy's (composegen.yaml's scope) stack of the same name
        both = _overlap(mine, held(claim))
        if not both:
            continue
        gpus = (
            "every GPU"
            if both == ALL
            else "GPU " + ",".join(sorted(both, key=lambda g: (len(g), g)))
        )
        profile = labels.get("io.composegen.profile")
        what = (
            f"composegen stack {profile} (container {claim['name']})"
            if profile
            else f"container {claim['name']}"
        )
        found.append(f"{what} holds {gpus}{where}")
    return found


def check(r: Resolved, asleep: Collection[str] = ()) -> None:
    """EngineError (exit 3) naming every holder when the profile's GPUs (on any of its nodes) are
    not free (ASLEEP: profiles whose sleeping stacks do not count)."""
    busy = [
        who
        for n, claims in driver.gpu_claims(r)
        for who in holders(r, claims, n.project, n.member, asleep)
    ]
    if busy:
        raise EngineError(
            f"{r.name}: exclusive mode: the profile's GPUs are held: {'; '.join(busy)}",
            hint="stop it first (`composegen down NAME` for a composegen stack); a campaign runs one stack at a time",
        )
