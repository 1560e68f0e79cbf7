"""Results travel typed (issue 24, issue 41): a function hands back a report model, a dataclass or a
typed mapping, not a bare `dict` / `dict[str, Any]` (or its alias `JsonObject`) that every reader must
know the keys of; and a function takes one too, so data read from disk is parsed into its model once.

Left out, each for a reason: the emulator (a test double: its payloads are the wire's own dicts), the JSON
edge itself (`to_json`, `json_schema`, `as_read`: a model turned into what is written), and the modules
whose values are another tool's documents, kept as the plain mappings those tools read and write
(compose files, Kubernetes manifests, JSON Schema, the OpenAI wire) — typing them would restate someone
else's schema.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "composegen"

DOCUMENT_MODULES = {
    "emulator": "a labelled test double: the wire's payloads as they are",
    "sizing": "shipped into the emulator's image (moved from emulator/): config.json and ledger entries as read",
    "stack/emulatorimage.py": "the emulator image's build context described (moved from emulator/image.py)",
    "diff": "compose files and manifests compared as the documents they are",
    "k8s": "Kubernetes manifests",
    "render.py": "the compose document and its template context",
    "profiles/schema.py": "the profile's JSON Schema and the raw mappings its validators see",
    "profiles/service.py": "the raw mappings the service validators see (moved from profiles/schema.py)",
    "wire": "OpenAI wire payloads",
    "evidence/gate_tools.py": "the tools gate's JSON Schemas (OpenAI tool parameters)",
    "stack/facts.py": "the Docker Engine API's inspect answers, parsed into frozen facts here",
}
JSON_EDGE = {"to_json", "json_schema", "schema", "as_read"}
# a bare dict (also inside an annotation: `dict | None`, `list[dict]`), dict[str, Any], the alias
BARE = re.compile(r"\bdict\b(?!\[)|\bdict\[str, Any\]|\bJsonObject\b")
BARE_DICT_BUDGET = 11  # returns; issue 41: 25 counting the alias (14 when it landed)
BARE_PARAMETER_BUDGET = 16  # issue 41: 70 (80 when it landed; 25 untyped plan calibration)


def _exempt(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return any(rel == key or rel.startswith(key + "/") for key in DOCUMENT_MODULES)


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(file, function) for every function outside the exemptions and the JSON edge."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _exempt(path):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            functional = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if functional and node.name not in JSON_EDGE:
                found.append((str(path.relative_to(PACKAGE.parent)), node))
    return found


def bare_dict_returns() -> list[str]:
    """file:line function -> annotation, for every function returning a bare dict."""
    return [
        f"{where}:{node.lineno} {node.name} -> {ast.unparse(node.returns)}"
        for where, node in _functions()
        if node.returns is not None and BARE.search(ast.unparse(node.returns))
    ]


def bare_dict_parameters() -> list[str]:
    """file:line function(parameter: annotation), one entry per parameter taking a bare dict."""
    found = []
    for where, node in _functions():
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None and arg.annotation is not None:
                annotation = ast.unparse(arg.annotation)
                if BARE.search(annotation):
                    found.append(f"{where}:{node.lineno} {node.name}({arg.arg}: {annotation})")
    return found


def test_results_travel_typed():
    found = bare_dict_returns()
    assert len(found) <= BARE_DICT_BUDGET, (
        f"{len(found)} functions return a bare dict (budget {BARE_DICT_BUDGET}): return the report model, a "
        "dataclass or a TypedDict instead\n" + "\n".join(found)
    )


def test_parameters_take_typed_data():
    found = bare_dict_parameters()
    assert len(found) <= BARE_PARAMETER_BUDGET, (
        f"{len(found)} parameters take a bare dict (budget {BARE_PARAMETER_BUDGET}): take the report "
        "model, a dataclass or a TypedDict (or Mapping[str, object] for JSON checked where it is read)\n"
        + "\n".join(found)
    )


def test_the_counts_see_what_they_count(tmp_path, monkeypatch):
    """Each pattern the budgets count is found, and the typed spellings are not."""
    sample = tmp_path / "composegen"
    sample.mkdir()
    (sample / "sample.py").write_text(
        "def a(x: dict, y: JsonObject, z: list[dict[str, Any]] | None, ok: dict[str, int]) -> dict:\n"
        "    pass\n"
        "def b(ok: Mapping[str, object]) -> JsonObject | None:\n"
        "    pass\n"
        "def to_json(x: dict) -> dict:\n"
        "    pass\n"
    )
    monkeypatch.setitem(globals(), "PACKAGE", sample)
    assert [f.split(" ", 1)[1] for f in bare_dict_returns()] == [
        "a -> dict",
        "b -> JsonObject | None",
    ]
    assert [f.split(" ", 1)[1] for f in bare_dict_parameters()] == [
        "a(x: dict)",
        "a(y: JsonObject)",
        "a(z: list[dict[str, Any]] | None)",
    ]


def test_the_exemptions_name_real_modules():
    for key in DOCUMENT_MODULES:
        assert (PACKAGE / key).exists(), key


def test_report_shapes_live_in_their_rooms_reports_module():
    """One place per room for its JSON shapes: every Report subclass is defined in a `reports.py` (or a
    `reports/` package), so a reader looking for a shape finds it without knowing which step makes it."""
    misplaced = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "reports.py" or path.parent.name == "reports" or path.name == "report.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b) == "Report" for b in node.bases
            ):
                misplaced.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert misplaced == []
