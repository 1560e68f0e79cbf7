"""`up --emulate`: run the real rendered stack with the emulated vLLM image swapped in.

The override keeps everything else of out/NAME/compose.yaml (argv, env, ports, ipc, labels,
healthcheck): it swaps the image, removes GPU reservations (compose `!reset`), clamps ulimits the
engine cannot grant (with a warning), adds the profile's `emulate.env` (the emulator's memory model)
and names the compile cache's volume KEY-emulated (a real start never loads it). A multi-node
profile's node override also drops the RDMA device (no /dev/infiniband without the fabric), one per
node at .composegen/NAME/NODE/emulate.override.yaml.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from composegen import privatestate
from composegen.profiles import caches
from composegen.profiles.resolved import Resolved
from composegen.profiles.schema import Node
from composegen.project import Project
from composegen.templating import literal, yaml_key

EMULATED_LABEL = "io.composegen.emulated"
# The GPUs the profile declares, kept as a label once the reservation is removed: exclusive mode
# (campaigns) treats an emulated stack as holding them. "ids:0,1" for device_ids, "count:N" for a
# count.
GPUS_LABEL = "io.composegen.gpus"
Ulimits = dict[str, int | dict[str, int]]  # compose's `ulimits`: name -> a number, or {soft, hard}


def declared_gpus(r: Resolved, node: Node | None = None) -> str:
    gpus = (node.gpus if node is not None else None) or r.profile.service.gpus
    return f"count:{gpus.count}" if gpus.device_ids is None else f"ids:{','.join(gpus.device_ids)}"


def clamp_ulimits(
    requested: Mapping[str, Any], ceiling: dict[str, int]
) -> tuple[Ulimits, list[str]]:
    """Requested ulimits (n, or {soft, hard}) cut to the engine's hard limits (-1 = unlimited)."""
    out: Ulimits = {}  # every value a {soft, hard} here
    warnings = []
    for name, value in requested.items():
        soft, hard = (value, value) if isinstance(value, int) else (value["soft"], value["hard"])
        cap = ceiling.get(name)
        if cap is None or cap == -1:
            out[name] = {"soft": soft, "hard": hard}
            continue
        new_hard = cap if hard == -1 or hard > cap else hard
        new_soft = new_hard if soft == -1 or soft > new_hard else soft
        if (new_soft, new_hard) != (soft, hard):
            above = f"{hard} is above what this engine grants ({cap})"
            warnings.append(f"ulimit {name} {above}; emulating with {new_hard}")
        out[name] = {"soft": new_soft, "hard": new_hard}
    return out, warnings


LEDGER_DIR = "emulated-gpus"  # under .composegen/: the emulated GPUs' shared ledger
LEDGER_MOUNT = "/run/composegen/emulated-gpus"


def ledger_env(r: Resolved) -> dict[str, str]:
    """What the emulated engine needs to share its GPUs with the project's other emulated engines
    (composegen/sizing/ledger.py); the profile's emulate.env may override any of it."""
    ids = ",".join(r.profile.service.gpus.ids())
    return {"EMU_GPU_LEDGER": LEDGER_MOUNT, "EMU_GPU_IDS": ids, "EMU_GPU_ENGINE": r.name}


def override_text(
    r: Resolved, image: str, ulimits: Ulimits, node: Node | None = None, ledger: Path | None = None
) -> str:
    """YAML (as JSON-style flow values, which YAML reads) with compose merge tags. LEDGER: the host
    directory of the emulated GPUs' ledger (a local engine, one node), mounted read-write."""
    shared = ledger_env(r) if ledger is not None else {}
    env = {k: str(v) for k, v in sorted({**shared, **r.profile.emulate.env}.items())}
    rdma = node is not None and r.profile.nodes is not None and r.profile.nodes.rdma
    lines = [
        f"# composegen emulated override for {r.name}: not a real vLLM; GPUs removed.",
        "services:",
        "  vllm:",
        f"    image: {json.dumps(image)}",
        "    deploy: !reset null",
        "    gpus: !reset []",
        *(["    devices: !reset []"] if rdma else []),
        f'    labels: {{{json.dumps(EMULATED_LABEL)}: "true", {json.dumps(GPUS_LABEL)}: '
        f"{json.dumps(declared_gpus(r, node))}}}",
    ]
    if ledger is not None:  # EMULATED GPU memory, shared by the project's emulated engines
        lines.append(f"    volumes: [{json.dumps(f'{ledger}:{LEDGER_MOUNT}')}]")
    if ulimits:
        lines.append("    ulimits: !override")
        lines += [f"      {yaml_key(k)}: {json.dumps(v)}" for k, v in sorted(ulimits.items())]
    if env:
        lines.append("    environment:")
        # Keys through the YAML key writer, values as compose literals: nothing here can add a key
        # or be interpolated, whatever the profile's emulate.env holds.
        lines += [f"      {yaml_key(k)}: {json.dumps(literal(v))}" for k, v in env.items()]
    if volume := caches.volume(r, emulated=True):  # a real start never loads what it wrote
        lines.append(f"volumes: {{{caches.MOUNTED}: {{name: {json.dumps(volume)}}}}}")
    return "\n".join(lines) + "\n"


def override_path(project: Project, name: str, node: str | None = None) -> Path:
    # Runtime state, not a generated artifact: kept out of out/ (which CI checks for freshness).
    base = project.root / privatestate.STATE_DIR / name
    return (base / node if node else base) / "emulate.override.yaml"


def ledger_dir(project: Project) -> Path:
    return privatestate.state_dir(project, LEDGER_DIR)


def write_override(
    project: Project,
    r: Resolved,
    image: str,
    ulimits: Ulimits,
    node: Node | None = None,
    local: bool = True,
) -> Path:
    """Write the override (0600 under 0700 directories; see composegen/privatestate.py). A local
    single-node stack shares the project's emulated GPUs (a remote engine cannot mount this
    host's directory; multi-node stacks are not standby stacks)."""
    nodes = [node.name] if node is not None else []
    path = privatestate.state_dir(project, r.name, *nodes) / "emulate.override.yaml"
    ledger = ledger_dir(project) if local and node is None else None
    privatestate.write(path, override_text(r, image, ulimits, node, ledger))
    return path
