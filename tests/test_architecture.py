"""The house rules, checked on the source: layers run one way, no import circles (lazy imports and
TYPE_CHECKING-only imports count), presentation and docker libraries each stay in their own room."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "composegen"

# Lower ranks are imported by higher ones, never the other way; a package may import itself.
RANKS = {
    "errors": 0, "units": 0, "addresses": 0, "output": 0, "report": 0, "emulator": 0, "__init__": 0,
    "project": 1, "wire": 1, "safewrite": 1,
    "usercache": 2, "rendercache": 3,
    "vllm": 2,
    "profiles": 3,
    "render": 4, "shm": 4, "weights": 4,
    "k8s": 4.5,  # renders from render's node helpers; read back by diff (diff --targets compose,k8s)
    "diff": 5,
    "stack": 6,
    "evidence": 7, "monitor": 7, "provision": 7,
    "edge": 7.5,
    "campaign": 8,
    "cli": 9, "__main__": 10,
}  # fmt: skip
PRESENTATION = {"typer", "rich", "click"}
DOCKER_LIBRARIES = {"docker", "python_on_whales", "paramiko"}
DOCKER_MODULE = "composegen.stack.engine"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module this file imports, at any depth of the file (functions and TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    me = module_name(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = me.split(".")[: -node.level + (1 if path.name == "__init__.py" else 0) or None]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = {t for t in imports_of(path) if t in files and t != name}
        edges[name] = {t for t in targets if not name.startswith(t + ".")}  # a module's own package
    return edges


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_room_has_a_rank():
    unranked = sorted({room(m) for m in graph()} - RANKS.keys())
    assert not unranked, f"give these a rank in RANKS: {unranked}"


def test_layers_run_one_way():
    wrong = sorted(
        f"{src} -> {dst}"
        for src, targets in graph().items()
        for dst in targets
        if room(src) != room(dst) and RANKS[room(src)] <= RANKS[room(dst)]
    )
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_import_circles():
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert not cycles, f"import circles: {cycles}"


def _importers_of(libraries: set[str]) -> set[str]:
    return {
        module_name(path)
        for path in PACKAGE.rglob("*.py")
        if any(name.split(".")[0] in libraries for name in imports_of(path))
    }


def test_docker_libraries_are_imported_by_one_module():
    assert _importers_of(DOCKER_LIBRARIES) <= {DOCKER_MODULE}


def test_core_never_imports_presentation():
    assert {m for m in _importers_of(PRESENTATION) if room(m) not in ("cli", "__main__")} == set()
    core = {m: targets for m, targets in graph().items() if room(m) not in ("cli", "__main__")}
    assert {m for m, targets in core.items() for t in targets if room(t) == "cli"} == set()
