"""The house rules, checked on the source: layers run one way, no import circles (lazy imports and
TYPE_CHECKING-only imports count), presentation and docker libraries each stay in their own room."""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "composegen"

# Lower ranks are imported by higher ones, never the other way; a package may import itself.
RANKS = {
    "errors": 0, "units": 0, "addresses": 0, "interrupts": 0, "output": 0, "report": 0, "sizing": 0, "__init__": 0,
    # the test double: imports only sizing (and itself); nothing imports it
    "emulator": 0.5,
    "project": 1, "wire": 1, "safewrite": 1, "buildcontext": 1, "privatestate": 1.5,
    "usercache": 2, "rendercache": 3, "ledger": 3.6,
    "vllm": 2,
    "profiles": 3,
    # the Jinja environment and the escapes: render, k8s and stack/emulate use them
    "templating": 3.5,
    "render": 4, "shm": 4, "weights": 4,
    # renders from render's node helpers; read back by diff (diff --targets compose,k8s)
    "k8s": 4.5,
    "diff": 5,
    "stack": 6,
    "bench": 6.5,
    "evidence": 7, "monitor": 7, "provision": 7,
    "edge": 7.5,
    "campaign": 8,
    "cli": 9, "__main__": 10,
}  # fmt: skip
PRESENTATION = {"typer", "rich", "click"}
DOCKER_LIBRARIES = {"docker", "python_on_whales", "paramiko"}
DOCKER_MODULE = "composegen.stack.engine"
SDK_MODULES = {DOCKER_MODULE, "composegen.stack.engineclient"}  # engine re-exports its client
# What runs docker: the SDK (engine) and the docker CLI as a process (compose: `docker compose`, `docker
# context inspect`). provision installs and starts the engine itself, before either can answer.
DOCKER_RUNNERS = {DOCKER_MODULE, "composegen.stack.compose"}
DOCKER_CLI_ROOMS = {"provision"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names taken from it) of every import, at any depth of the file (functions and TYPE_CHECKING
    blocks too); relative imports resolved. `import a.b` is ("a.b", [])."""
    found: list[tuple[str, list[str]]] = []
    me = module_name(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = me.split(".")[
                    : -node.level + (1 if path.name == "__init__.py" else 0) or None
                ]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names]))
    return found


def imports_of(path: Path) -> set[str]:
    """Every module this file imports (a `from pkg import name` counts pkg.name too: it may be a module)."""
    found: set[str] = set()
    for base, names in import_statements(path):
        found.add(base)
        found.update(f"{base}.{name}" for name in names)  # `from pkg import module`
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
    assert _importers_of(DOCKER_LIBRARIES) <= SDK_MODULES


def _runs_the_docker_cli(path: Path) -> bool:
    """An argv literal that starts with "docker" (`["docker", "compose", ...]`) anywhere in the file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value == "docker":
                return True
    return False


def test_only_engine_and_compose_run_docker():
    runners = {module_name(p) for p in PACKAGE.rglob("*.py") if _runs_the_docker_cli(p)}
    assert {m for m in runners if room(m) not in DOCKER_CLI_ROOMS} <= DOCKER_RUNNERS - {
        DOCKER_MODULE
    }
    assert "composegen.stack.compose" in runners  # the rule sees what it is about


def test_core_never_imports_presentation():
    assert {m for m in _importers_of(PRESENTATION) if room(m) not in ("cli", "__main__")} == set()
    core = {m: targets for m, targets in graph().items() if room(m) not in ("cli", "__main__")}
    assert {m for m, targets in core.items() for t in targets if room(t) == "cli"} == set()


# Function-level imports of composegen's own modules. Each one says why it is not at the top of its file,
# in a comment on the import's own line (for a parenthesised import, its first line), e.g.
#     from composegen.stack import driver  # why: the docker libraries load only when a stack is driven
# Any comment counts as the reason except lint pragmas (noqa, type: ignore, isort, fmt, pragma); a comment
# on the line above does not. Imports under `if TYPE_CHECKING:` are not counted (they never run).
FUNCTION_IMPORT_BUDGET = 21  # issue 24 asked for at most 30
UNEXPLAINED_FUNCTION_IMPORT_BUDGET = 0  # a reason on every one
_PRAGMAS = ("noqa", "type:", "isort:", "fmt:", "pragma")


def _reasons_by_line(source: str) -> dict[int, str]:
    """The comment text of each line, lint pragmas removed."""
    reasons: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            parts = [p.strip() for p in token.string.split("#")]
            reasons[token.start[0]] = " ".join(p for p in parts if p and not p.startswith(_PRAGMAS))
    return reasons


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith(
        "TYPE_CHECKING"
    )


def _function_imports(
    node: ast.AST, in_function: bool = False
) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside functions below `node`, outside `if TYPE_CHECKING:` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if _is_type_checking(child):
            continue
        if in_function and isinstance(child, ast.Import | ast.ImportFrom):
            found.append(child)
        found += _function_imports(
            child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        )
    return found


def _is_internal(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom) and node.level > 0:
        return True
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(n == "composegen" or n.startswith("composegen.") for n in names)


def internal_function_imports() -> list[tuple[str, str]]:
    """(file:line, reason or "") for every import of a composegen module inside a function."""
    found: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        reasons = _reasons_by_line(source)
        where = path.relative_to(PACKAGE.parent)
        for node in _function_imports(ast.parse(source, str(path))):
            if _is_internal(node):
                # the reason on the import's line, or a comment line right above it
                reason = reasons.get(node.lineno) or reasons.get(node.lineno - 1, "")
                found.append((f"{where}:{node.lineno}", reason))
    return found


def test_function_level_imports_are_few_and_say_why():
    imports = internal_function_imports()
    unexplained = [where for where, reason in imports if len(reason.split()) < 2]
    assert len(imports) <= FUNCTION_IMPORT_BUDGET, (
        f"{len(imports)} function-level imports of composegen modules (budget {FUNCTION_IMPORT_BUDGET}): move "
        "them to the top of their files unless start-up time needs them there"
    )
    assert len(unexplained) <= UNEXPLAINED_FUNCTION_IMPORT_BUDGET, (
        f"{len(unexplained)} function-level imports without a reason on their line "
        f"(budget {UNEXPLAINED_FUNCTION_IMPORT_BUDGET}):\n" + "\n".join(unexplained)
    )


# ---- doors: every room (a subpackage) says in its __init__'s `__all__` what other rooms may import -------

# (importer, module) pairs allowed past a door, each with its reason.
DOOR_EXCEPTIONS = {
    (
        "composegen.cli.fastpath",
        "composegen.stack.engine",
    ): "`shm` resolves container labels without importing "
    "the driver and what it loads (start-up time): engine.label_lookup only",
}


def rooms_with_doors() -> dict[str, Path]:
    return {init.parent.name: init for init in sorted(PACKAGE.glob("*/__init__.py"))}


def declared_door(init: Path) -> list[str] | None:
    """The room's `__all__` (a list of strings in its __init__), or None when it declares none."""
    for node in ast.parse(init.read_text(), str(init)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
    return None


def door_entries() -> list[tuple[str, str, str]]:
    """(importer, room, entry) of every import from another room: the room's module imported (or imported
    from), or a name taken from the room's __init__; "" when the package itself is imported."""
    entries = []
    doors = rooms_with_doors()
    for path in PACKAGE.rglob("*.py"):
        me = module_name(path)
        for base, names in import_statements(path):
            parts = base.split(".")
            if (
                parts[0] != "composegen"
                or len(parts) < 2
                or parts[1] not in doors
                or parts[1] == room(me)
            ):
                continue
            if len(parts) > 2:
                entries.append((me, parts[1], parts[2]))
            else:
                entries += [(me, parts[1], name) for name in names] or [(me, parts[1], "")]
    return entries


def test_every_room_declares_its_door():
    doors = rooms_with_doors()
    missing = sorted(name for name, init in doors.items() if declared_door(init) is None)
    assert not missing, (
        f"declare `__all__` (what other rooms may import) in the __init__ of: {missing}"
    )
    for name, init in doors.items():
        defined = {p.stem for p in init.parent.glob("*.py")} | {
            p.name for p in init.parent.iterdir() if p.is_dir()
        }
        tree = ast.parse(init.read_text(), str(init))
        defined |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        defined |= {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        unknown = sorted(set(declared_door(init) or []) - defined)
        assert not unknown, f"{name}/__init__.py declares what it does not have: {unknown}"


def test_rooms_are_entered_by_their_door_only():
    doors = {name: set(declared_door(init) or []) for name, init in rooms_with_doors().items()}
    wrong = sorted(
        f"{src} -> composegen.{dst}{'.' + entry if entry else ''}"
        for src, dst, entry in door_entries()
        if entry
        and entry not in doors[dst]
        and (src, f"composegen.{dst}.{entry}") not in DOOR_EXCEPTIONS
    )
    assert not wrong, "imports past a room's door (its __init__'s __all__):\n" + "\n".join(wrong)


def test_the_stack_room_is_entered_by_five_files_at_most():
    """The stack room's door (driver, reports, progress, readiness) plus the fast path's engine."""
    entered = {entry for _, dst, entry in door_entries() if dst == "stack" and entry}
    assert (
        entered <= {"driver", "reports", "progress", "readiness", "engine"} and len(entered) <= 5
    ), entered


def test_the_door_exceptions_are_still_needed():
    used = {(src, f"composegen.{dst}.{entry}") for src, dst, entry in door_entries()}
    assert set(DOOR_EXCEPTIONS) <= used, set(DOOR_EXCEPTIONS) - used


def test_the_gatekeeper_is_one_stdlib_file():
    """The edge mounts gatekeeper.py alone into a bare python image (python3 -I): its parts import only the
    stdlib and each other (render joins them into one file), or it would fail there, at the first request."""
    parts = sorted((PACKAGE / "edge").glob("gate*.py"))
    assert parts  # never an empty loop
    for path in parts:
        bases = {base for base, _ in import_statements(path)}
        parts = {b for b in bases if b.startswith("composegen.edge.gate_")}
        outside = {b.split(".")[0] for b in bases - parts} - set(sys.stdlib_module_names)
        assert not outside, f"{path.name} imports {sorted(outside)}"


def test_no_product_room_imports_the_emulator():
    """The emulator is a test double: what the product shares with it (the GPU ledger, model sizes) is in
    composegen/sizing/, and its image is built from its files (stack/emulatorimage.py), not imported."""
    wrong = sorted(
        f"{src} -> {dst}"
        for src, targets in graph().items()
        for dst in targets
        if room(dst) == "emulator" and room(src) != "emulator"
    )
    assert not wrong, "product code imports the emulator:\n" + "\n".join(wrong)


def test_the_emulator_image_holds_all_it_imports():
    """The image ships composegen/emulator and composegen/sizing (stack/emulatorimage.py), on a bare python:
    they may import the standard library and each other, nothing else."""
    from composegen.stack.emulatorimage import context_files

    shipped = {f.path for f in context_files()}
    for path in [
        *PACKAGE.joinpath("emulator").glob("*.py"),
        *PACKAGE.joinpath("sizing").glob("*.py"),
    ]:
        assert str(path.relative_to(PACKAGE.parent)) in shipped, path
        outside = {
            base
            for base, _ in import_statements(path)
            if base.split(".")[0] not in sys.stdlib_module_names
            and room(base) not in ("emulator", "sizing")
            and base != "__future__"
        }
        assert not outside, f"{path.name} imports {sorted(outside)}"
