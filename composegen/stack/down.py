"""`down` of a deployment: the head first (a clean stop tells the workers to finish), then the
workers. Each node gets `docker compose down`, then whatever a run left there is found by label and
removed — the project's containers and networks (also when its containers were `docker rm -f`ed) and
probe containers an interrupted `up` of this profile left. Every node is tried; one that cannot be
reached or cleaned fails the command by name (exit 3)."""

from __future__ import annotations

from composegen.errors import ComposegenError, EngineError, Interrupted
from composegen.stack import engine
from composegen.stack.placement import Deployment, NodeRef
from composegen.stack.reports import DownReport, NodeDown
from composegen.stack.up import grace_seconds


def down(dep: Deployment, timeout: int | None = None) -> DownReport:
    grace = timeout if timeout is not None else grace_seconds(dep.r)
    entries, errors = [], []
    for n in dep.nodes:
        entry = NodeDown.of(n)
        try:
            _down_node(dep, n, grace, entry)
        except ComposegenError as exc:
            entry.error = exc.message
            errors.append((n, exc))
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted while removing {dep.name}; part of it may be left",
                hint=f"finish: `composegen down {dep.name}`",
            ) from None
        entries.append(entry)
    if errors and not dep.multi:
        first = errors[0][1]
        raise EngineError(f"{dep.name}: {first.message}", details=first.details, hint=first.hint)
    if errors:
        said = [f"{n.label}: {exc.message}" for n, exc in errors]
        cleaned = [e for e in entries if e.error is None]
        done = [f"{e.name}: removed {', '.join(e.removed) or 'nothing'}" for e in cleaned]
        failed = f"down failed on {len(errors)} of {len(entries)} node(s): {said[0]}"
        raise EngineError(f"{dep.name}: {failed}", details="\n".join(said[1:] + done) or None)
    return DownReport(
        name=dep.name,
        project=dep.head.project,
        removed=[c for e in entries for c in e.removed],
        networks=[x for e in entries for x in e.networks],
        nodes=entries if dep.multi else None,
    )


def _down_node(dep: Deployment, n: NodeRef, grace: int, entry: NodeDown) -> None:
    st = dep.stack(n)
    entry.removed = [c.name for c in engine.project_containers(st.project, st.target)]
    entry.networks = [x.name for x in engine.project_networks(st.project, st.target)]
    # without its compose file, the label sweep below does it all
    if all(f.is_file() for f in st.files):
        st.down(timeout=grace)
    probes = engine.probe_containers(n.project, n.target)
    for ctr in [*engine.project_containers(n.project, n.target), *probes]:
        engine.remove_container(ctr, grace)
        entry.removed += [] if ctr.name in entry.removed else [ctr.name]
    for net in engine.project_networks(n.project, n.target):
        engine.remove_network(net)
    left = [c.name for c in engine.project_containers(n.project, n.target)]
    left += [x.name for x in engine.project_networks(n.project, n.target)]
    if left:
        raise EngineError(f"still present after down: {', '.join(left)}")
    dep.override_path(n).unlink(missing_ok=True)
