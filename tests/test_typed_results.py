"""Results travel typed (issue 24): a function hands back a report model, a dataclass or a typed mapping,
not a bare `dict` / `dict[str, Any]` that every reader must know the keys of.

Left out, each for a reason: the emulator (a test double: its payloads are the wire's own dicts), the JSON
edge itself (`to_json`, `json_schema`: a model turned into what is written), and the modules whose values
are another tool's documents, kept as the plain mappings those tools read and write (compose files,
Kubernetes manifests, JSON Schema, the OpenAI wire) — typing them would restate someone else's schema.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "composegen"

DOCUMENT_MODULES = {
    "emulator": "a labelled test double: the wire's payloads as they are",
    "diff": "compose files and manifests compared as the documents they are",
    "k8s": "Kubernetes manifests",
    "render.py": "the compose document and its template context",
    "profiles/schema.py": "the profile's JSON Schema and the raw mappings its validators see",
    "profiles/service.py": "the raw mappings the service validators see (moved from profiles/schema.py)",
    "wire": "OpenAI wire payloads",
}
JSON_EDGE = {"to_json", "json_schema", "schema"}
BARE = re.compile(r"\bdict\b(?!\[)|\bdict\[str, Any\]")
BARE_DICT_BUDGET = 14  # issue 24 asked for at most 30


def _exempt(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return any(rel == key or rel.startswith(key + "/") for key in DOCUMENT_MODULES)


def bare_dict_returns() -> list[str]:
    """file:line function -> annotation, for every function outside the exemptions returning a bare dict."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _exempt(path):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.returns is None:
                continue
            annotation = ast.unparse(node.returns)
            if node.name not in JSON_EDGE and BARE.search(annotation):
                found.append(
                    f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} -> {annotation}"
                )
    return found


def test_results_travel_typed():
    found = bare_dict_returns()
    assert len(found) <= BARE_DICT_BUDGET, (
        f"{len(found)} functions return a bare dict (budget {BARE_DICT_BUDGET}): return the report model, a "
        "dataclass or a TypedDict instead\n" + "\n".join(found)
    )


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
