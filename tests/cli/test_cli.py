"""CLI contract: version, exit codes, no docker imports on the render/diff/validate paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.cli import run_cli
from tests.support.helpers import REPO

PROBE = """
import sys
sys.argv = ["composegen", *{argv!r}]
from composegen.cli.main import main
try:
    main()
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("docker", "python_on_whales", "openai", "httpx"))
print("HEAVY", heavy, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv",
    [
        *[
            ["render", "--check"],
            ["validate"],
            ["diff", "8192-131k", "4096-131k"],
            ["show", "r33"],
            ["list"],
        ],
        *[
            ["schema"],
            ["render", "--check", "--target", "k8s"],
            ["diff", "dspark-2x", "--targets", "compose,k8s"],
        ],
    ],
)
def test_fast_paths_never_import_docker_libraries(argv):
    res = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)], cwd=REPO, capture_output=True, text=True
    )
    assert "HEAVY []" in res.stderr, res.stderr[-500:]


def test_version():
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("composegen ")


def test_usage_error_is_exit_2():
    res = run_cli("render", "--no-such-option")
    assert res.returncode == 2 and "No such option" in res.stderr


def test_show_json_shape():
    res = run_cli("show", "4096-131k", "--json")
    doc = json.loads(res.stdout)
    assert set(doc) == {
        *("name", "path", "extends", "hash", "profile", "flags", "argv", "warnings"),
        "caches",  # where its start's compiled artifacts are kept (docs/caches.md)
    }
    assert doc["extends"] == ["8192-131k", "r33"]
    assert doc["argv"][:3] == ["vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash-0731"]
    assert doc["flags"]["max-num-batched-tokens"] == 4096


def test_list_and_validate_json():
    names = [p["name"] for p in json.loads(run_cli("list", "--json").stdout)["profiles"]]
    assert names == ["393k-gpu", "393k-offload", "4096-131k", "8192-131k", "dspark-2x", "r33"]
    report = json.loads(run_cli("validate", "--json").stdout)
    offload = next(p for p in report["profiles"] if p["name"] == "393k-offload")
    # up checks it
    assert any("host's /dev/shm" in n for n in offload["notes"]) and offload["warnings"] == []


def test_validate_strict_fails_on_warnings(tmp_path):
    from tests.support.profiles import edited, project

    published = edited((("service", "port"), {"host": 39999, "bind": "0.0.0.0"}))
    res = run_cli("--root", str(project(tmp_path, published)), "validate", "--strict", "p")
    assert (
        res.returncode == 1
        and "--strict" in res.stderr
        and "reachable beyond this host" in res.stdout
    )


def test_root_from_environment(tmp_path):
    res = run_cli("list", cwd=tmp_path, env={"COMPOSEGEN_ROOT": str(REPO)})
    assert res.returncode == 0 and "4096-131k" in res.stdout
    res = run_cli("list", cwd=tmp_path, env={"COMPOSEGEN_ROOT": ""})
    assert res.returncode == 2 and "no profiles/ directory" in res.stderr


MY_REPORTS = ["list", "validate", "show", "render", "render-check", "diff", "evidence", "compare"]


@pytest.mark.parametrize("report", MY_REPORTS)
def test_report_schemas_of_profile_diff_and_evidence_commands(report):
    from tests.support.cli import run_inproc

    res = run_inproc("schema", "--report", report)
    assert res.returncode == 0, res.stderr
    schema = json.loads(res.stdout)
    assert schema["$id"] == f"composegen:report/{report}" and schema["properties"]


def test_version_names_the_catalogs_the_catalog_module_reads():
    from composegen.cli.fastpath import version_line
    from composegen.vllm.catalog import DATA_DIR

    shipped = sorted(p.name.split("-")[1] for p in DATA_DIR.glob("vllm-*-serve-flags.json"))
    assert shipped and version_line().endswith(
        f"({'vLLM flag catalog' if len(shipped) == 1 else 'vLLM flag catalogs'} {', '.join(shipped)})"
    )
