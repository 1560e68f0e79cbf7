"""Round three's last hostile cases (issue 39): a finite but huge bench figure in a bundle, a failure whose
traceback has nowhere to go, a compose label far too long to be a profile name; and the password of a
DOCKER_HOST URL, which composegen used to print in `doctor`, `up` and their JSON."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from composegen.bench import stats
from composegen.bench.reports import BenchResult
from composegen.cli import exits
from composegen.output import mask
from tests.support.cli import assert_bad_input, run_inproc
from tests.support.helpers import REPO

LOG = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"
HUGE = 1.7e308  # finite: JSON carries it, a plot's tick maths overflows on it


@pytest.fixture
def shipped(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(REPO / "profiles", root / "profiles")
    shutil.copytree(REPO / "out", root / "out")
    return root


def test_a_huge_bench_figure_is_a_table_cell_not_a_crash(shipped, tmp_path):
    made = run_inproc(
        "--root",
        str(shipped),
        "evidence",
        "--from-log",
        str(LOG),
        "--profile",
        "4096-131k",
        "--json",
    )
    run = shipped / json.loads(made.stdout)["path"]
    level = stats.summarise(1, [], 1.0, cpu_s=0.0, distinct_prompts=1).model_copy(
        update={"request_throughput": HUGE, "output_throughput": HUGE, "median_ttft_ms": HUGE}
    )
    bench = BenchResult(model="m", input_tokens=100, input_tokens_exact=True, output_tokens=5, requests=1,
                        duration_s=None, seed=1, ok=True, levels=[level])  # fmt: skip
    doc = json.loads((run / "evidence.json").read_text())
    doc["bench"] = bench.to_json()
    (run / "evidence.json").write_text(json.dumps(doc))
    page = tmp_path / "report.html"
    res = run_inproc("--root", str(shipped), "report", str(run), "--html", str(page))
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""  # no numpy overflow warnings either
    html = page.read_text()
    assert (
        'data-missing-plot="bench">Throughput and latency under load: not drawn: a figure is too large to plot'
        in html
    )
    assert "169,999,999,999,999,993" in html  # the table still shows the figure
    # the PNG summary beside it says the plots are left out, and is still an image
    assert page.with_suffix(".png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_failure_with_nowhere_to_put_its_traceback_is_still_one_line(
    tmp_path, monkeypatch, capsys
):
    # root ignores modes: the cache "directory" is a file, and the temporary directory is gone (a full disk
    # refuses both the same way, with another errno)
    (tmp_path / "cache").write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "missing"))

    def bug() -> int:
        raise RuntimeError("a bug")

    assert exits.run(bug) == 3
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "composegen: internal error: RuntimeError: a bug (no traceback written: No such file or directory)"
    ]


def test_an_os_refusal_is_one_line_and_exit_3(capsys):
    def full() -> int:
        raise OSError(28, "No space left on device", "/x/out/a/compose.yaml")

    assert exits.run(full) == 3
    assert capsys.readouterr().err == "composegen: No space left on device: /x/out/a/compose.yaml\n"


def test_an_over_long_profile_label_is_bad_input(shipped):
    text = (shipped / "out/4096-131k/compose.yaml").read_text()
    label = re.search(r"io\.composegen\.profile: \"?([^\"\n]+)", text)
    assert label
    long = shipped / "long.yaml"
    long.write_text(
        text.replace(label.group(0), label.group(0).replace(label.group(1), "x" * 100_000))
    )
    assert_bad_input(run_inproc("--root", str(shipped), "diff", str(long), "4096-131k"),
                     "long.yaml: label io.composegen.profile is not a profile name (100,000 characters")  # fmt: skip


def test_the_password_of_a_docker_host_url_is_never_printed(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://admin:hunter22pw@127.0.0.9:1")
    for args in (["doctor"], ["doctor", "--json"]):
        res = run_inproc(*args)
        assert res.returncode in (1, 3), res.stderr
        assert "hunter22pw" not in res.stdout + res.stderr
        assert "tcp://admin:***@127.0.0.9:1" in res.stdout + res.stderr
    assert (
        mask("ssh://u:p4ss@h/x and https://k@h and http://a:b@c")
        == "ssh://u:***@h/x and https://k@h and http://a:***@c"
    )
    assert os.environ["DOCKER_HOST"].endswith("@127.0.0.9:1")
