"""Arguments and inputs that used to end in an internal error, unbounded work, or raw control text on the
terminal: each is one line and exit 2 now (or, for what is printed, inert text)."""

from __future__ import annotations

import json
import shutil
import time

import pytest
import yaml

from tests.support.cli import assert_bad_input, run_inproc
from tests.support.helpers import REPO
from tests.support.profiles import edited, project

LOG = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    shutil.copytree(REPO / "profiles", root / "profiles")
    return root


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "http://h:99999",
        "http://h:-1",
        "http://h:1/\x1b[2J",
        "http:// h:1",
        "ftp://h:1",
        "",
    ],
)
def test_top_url_that_is_not_host_and_port_is_bad_input(url):
    assert_bad_input(run_inproc("top", "--url", url, "--once"), "--url")


@pytest.mark.parametrize("gib", ["nan", "inf", "-inf", "-1", "0", "1e309"])
def test_plan_gpu_gib_must_be_a_finite_positive_number(shipped, gib):
    res = run_inproc(
        "--root", str(shipped), "plan", "4096-131k", "--from-log", str(LOG), f"--gpu-gib={gib}"
    )
    assert_bad_input(res, "--gpu-gib")


@pytest.mark.parametrize("html", ["", ".", "DIR", "DIR/", ".."])
def test_report_html_must_name_a_file(shipped, tmp_path, html):
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
    run = json.loads(made.stdout)["path"]
    (tmp_path / "DIR").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    res = run_inproc(
        "--root", str(shipped), "report", run, "--html", html.replace("DIR", str(tmp_path / "DIR"))
    )
    assert_bad_input(res, "--html")
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not any(
        (tmp_path / "DIR").iterdir()
    )


@pytest.mark.parametrize("command", ["evidence", "plan"])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_from_log_of_an_endless_device_is_refused_at_once(shipped, command, device):
    args = (
        ["--from-log", device, "--profile", "4096-131k"]
        if command == "evidence"
        else ["4096-131k", "--from-log", device]
    )
    started = time.monotonic()
    res = run_inproc("--root", str(shipped), command, *args)
    assert time.monotonic() - started < 10
    assert_bad_input(res, "not a regular file")


def test_init_refuses_a_file_as_its_directory(tmp_path):
    (tmp_path / "f").write_text("mine\n")
    assert_bad_input(run_inproc("init", str(tmp_path / "f")), "not a directory")
    assert (tmp_path / "f").read_text() == "mine\n"


@pytest.mark.parametrize("name", ["ｆｕｌｌ", "x²", "a" * 200, "Big", "a.b", "-x", "ab\u202e"])
def test_init_name_uses_the_profile_name_grammar(tmp_path, name):
    assert_bad_input(run_inproc("init", str(tmp_path), "--name", name), "is not a profile name")
    assert not (tmp_path / "profiles").exists()


ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m"


def test_profile_descriptions_reach_the_terminal_inert(tmp_path):
    root = project(tmp_path, edited((("description",), f"evil {ESCAPES} \u202eend")))
    for args in (["list"], ["show", "p"]):
        res = run_inproc("--root", str(root), *args)
        assert res.returncode == 0, res.stderr
        assert not any(c in res.stdout for c in "\x1b\x07\x9b\u202e"), res.stdout
        assert "\\x1b]52;c;ZXZpbA==\\x07" in res.stdout or args == ["show", "p"]


def test_bidi_overrides_show_escaped_in_diff_output(tmp_path):
    a = edited((("service", "environment"), {"NOTE": "abc"}))
    b = edited((("service", "environment"), {"NOTE": "\u202eabc\u2066x\u2069"}))
    root = project(tmp_path, a, name="a", extra={"b": yaml.safe_dump(b, allow_unicode=True)})
    for extra in ([], ["--unified"]):
        res = run_inproc("--root", str(root), "diff", "a", "b", *extra)
        assert res.returncode == 1, res.stderr
        assert "\u202e" not in res.stdout and "\u2066" not in res.stdout
        assert "\\u202e" in res.stdout


def test_compare_json_is_valid_json_when_figures_overflow(shipped, tmp_path):
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
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    doc = json.loads((copy / "evidence.json").read_text())
    doc["startup"]["kv_cache_gib_min"] = 1.7e308
    doc["startup"]["weights_gib"] = -1.7e308
    (copy / "evidence.json").write_text(json.dumps(doc))
    res = run_inproc("--root", str(shipped), "compare", str(run), str(copy), "--json")
    assert res.returncode in (0, 1, 2), res.stderr
    if res.returncode != 2:
        assert "Infinity" not in res.stdout and "NaN" not in res.stdout
        json.loads(res.stdout)


def test_names_reach_matplotlib_as_plain_text_not_mathtext():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from composegen.evidence import plots

    fig, ax = plt.subplots()
    try:
        for name in ("$", "a$b", "$\\frac{1}{2}$", "$" * 7):
            ax.set_title(plots._text(name))
            # an unescaped "$" is a mathtext parse error here; "$…$" would be typeset
            fig.canvas.draw()
            shown, math = ax.title._preprocess_math(ax.title.get_text())
            assert math is False and shown == name  # drawn as written
    finally:
        plt.close(fig)


def test_progress_notes_quoting_the_container_reach_the_terminal_inert():
    import io

    from composegen.cli import console

    out = io.StringIO()
    sink = console.ConsoleSink(timeout_s=900, stream=out, tty=False)
    sink.note(f"\x1b[32mINFO\x1b[0m loaded {ESCAPES} \u202eend")
    text = out.getvalue()
    assert "INFO loaded" in text and "\\x1b]52;c;ZXZpbA==\\x07" in text
    assert not any(c in text for c in "\x1b\x07\x9b\u202e")
