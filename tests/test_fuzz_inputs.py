"""Fuzz: whatever profile, compose input or run bundle comes in, composegen ends with 0, 1 or 2 and a
message, never an internal error (traceback). In process, a fixed seed, a few hundred examples in all.
Hostile bundle strings reach no terminal, Markdown or plot raw; a hostile server on any path ends every
client with a result or one EngineError line (exit 3), within its deadline."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cli import assert_no_crash, run_inproc
from tests.support.helpers import MINIMAL, REPO
from tests.support.hostile_server import BEHAVIOURS as HOSTILE_BEHAVIOURS
from tests.support.hostile_server import HostileServer
from tests.support.profiles import BASE, edited, project

# COMPOSEGEN_FUZZ_EXAMPLES=2000 runs a longer, randomly seeded search (locally); CI runs the fixed 80.
LONG = int(os.environ.get("COMPOSEGEN_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=LONG or 80,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(
        ["$", "${X}", "--x", "-", "\n", "1e999", "nan", "0x10", "4k", "&a", "*a", "!!str", ".."]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))


PROFILE_PATHS = [p for p in _paths(BASE) if p] + [
    ("service", "environment"),
    ("service", "ulimits"),
    ("service", "volumes"),
    ("extends",),
    ("nodes",),
    ("emulate", "env"),
    ("vllm", "speculative-config"),
    ("vllm", "ignore-patterns"),
    ("vllm", "kv-offloading-size"),
    ("qualify",),
    ("identity",),
]


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(PROFILE_PATHS), VALUES), min_size=1, max_size=3))
def test_fuzzed_profile_values(tmp_path_factory, edits):
    root = project(tmp_path_factory.mktemp("fz"), edited(*edits))
    for args in (["validate"], ["render"], ["show", "p", "--json"], ["diff", "p", "p"]):
        assert_no_crash(run_inproc("--root", str(root), *args))


@FUZZ
@given(cut=st.integers(0, len(MINIMAL)), junk=st.text(max_size=12))
def test_fuzzed_profile_text(tmp_path_factory, cut, junk):
    root = project(tmp_path_factory.mktemp("fz"), MINIMAL[:cut] + junk + MINIMAL[cut:])
    for args in (["validate"], ["render"]):
        assert_no_crash(run_inproc("--root", str(root), *args))


SHIPPED = (REPO / "out" / "r33" / "compose.yaml").read_text(encoding="utf-8")
COMPOSE_PATHS = [("services",), ("services", "vllm"), ("name",), ("volumes",)] + [
    ("services", "vllm", key) for key in yaml.safe_load(SHIPPED)["services"]["vllm"]
]


@settings(FUZZ, max_examples=LONG or 50)
@given(
    edits=st.lists(st.tuples(st.sampled_from(COMPOSE_PATHS), VALUES), max_size=3),
    cut=st.integers(0, len(SHIPPED)),
    junk=st.text(max_size=8),
)
def test_fuzzed_compose_inputs_to_diff(tmp_path_factory, edits, cut, junk):
    tmp = tmp_path_factory.mktemp("fz")
    (tmp / "profiles").mkdir()
    doc = yaml.safe_load(SHIPPED)
    for keys, value in edits:
        node = doc
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node[keys[-1]] = value
    (tmp / "a.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    (tmp / "b.yaml").write_text(SHIPPED[:cut] + junk + SHIPPED[cut:], encoding="utf-8")
    for args in (["a.yaml", "b.yaml"], ["b.yaml", str(REPO / "out/r33/compose.yaml"), "--json"]):
        assert_no_crash(run_inproc("--root", str(tmp), "diff", *args, cwd=tmp))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    shutil.copytree(REPO / "profiles", root / "profiles")
    log = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"
    res = run_inproc(
        "--root", str(root), "evidence", "--from-log", str(log), "--profile", "4096-131k", "--json"
    )
    assert res.returncode == 0, res.stderr
    return root, root / json.loads(res.stdout)["path"]


EVIDENCE_PATHS = [
    ("profile",), ("profile", "name"), ("profile", "hash"), ("startup",), ("startup", "kv_cache_gib_min"),
    ("startup", "kv_cache_tokens"), ("startup", "max_model_len"), ("startup", "effective_args"),
    ("startup", "max_concurrency"), ("startup", "weights_gib"), ("gates",), ("ladder",), ("bench",), ("raw",),
    ("source",), ("unknown",), ("created_at",), ("schema",), ("container",),
]  # fmt: skip


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(EVIDENCE_PATHS), VALUES), min_size=1, max_size=3))
def test_fuzzed_bundles(bundle, tmp_path_factory, edits):
    root, run = bundle
    copy = tmp_path_factory.mktemp("fz") / run.name
    shutil.copytree(run, copy)
    doc = json.loads((copy / "evidence.json").read_text())
    for keys, value in edits:
        node = doc
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node[keys[-1]] = value
    try:
        text = json.dumps(doc)
    except ValueError:  # an int past Python's digit limit cannot even be written; nothing to load
        return
    (copy / "evidence.json").write_text(text)
    for args in (["compare", str(copy), str(run)], ["plan", "393k-gpu", "--from", str(copy)]):
        assert_no_crash(run_inproc("--root", str(root), *args))


LOGS = sorted((REPO / "tests" / "data" / "logs").glob("*.log")) + sorted(
    (REPO / "tests" / "data" / "real-0.26.0-h200").glob("*.log")
)
LOG_LINES = [
    line for path in LOGS for line in path.read_text(errors="replace").splitlines() if line.strip()
]


@FUZZ
@given(
    picked=st.lists(st.sampled_from(LOG_LINES), min_size=0, max_size=40),
    cuts=st.lists(
        st.tuples(st.integers(0, 39), st.integers(0, 200), st.text(max_size=30)), max_size=4
    ),
    profile=st.sampled_from([None, "4096-131k", "393k-offload"]),
)
def test_fuzzed_startup_logs(tmp_path_factory, picked, cuts, profile):
    """Real log lines from every recorded version, shuffled, cut mid-line and spliced with junk (a cut
    `non-default args:` dict, a half traceback, stray bytes): `startup --log` never crashes."""
    lines = list(picked)
    for index, at, junk in cuts:
        if lines:
            i = index % len(lines)
            lines[i] = lines[i][:at] + junk
    log = tmp_path_factory.mktemp("log") / "fuzzed.log"
    log.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    args = [
        "--root",
        str(REPO),
        "startup",
        "--log",
        str(log),
        *([profile] if profile else []),
        "--json",
    ]
    res = run_inproc(*args)
    assert_no_crash(res)
    if res.returncode == 0:
        json.loads(res.stdout)


# ---------------------------------------------------------------- hostile bundle strings

HOSTILE_STRINGS = [
    "$\\frac{1}{2}$",  # mathtext
    "$",  # an unbalanced mathtext delimiter
    "a|b\n| injected | row |",  # a Markdown table cell ended early
    "![pixel](http://203.0.113.1/t.png)",  # an image line
    "<img src=x onerror=alert(1)>",
    "\x1b]52;c;ZXZpbA==\x07\x1b[2J",  # clipboard write, screen clear
    "\u202egnp.exe",  # a bidi override
    "\ud800",  # a lone surrogate
    "n" * 100_000,  # a long name
]
STRING_PATHS = [
    ("profile", "name"),
    ("unknown",),
    ("created_at",),
    ("image_digest",),
    ("model_revision",),
]


@pytest.mark.parametrize("text", HOSTILE_STRINGS, ids=range(len(HOSTILE_STRINGS)))
@pytest.mark.parametrize("keys", STRING_PATHS, ids=lambda k: ".".join(k))
def test_hostile_bundle_strings_reach_no_terminal_markdown_or_plot_raw(
    bundle, tmp_path, keys, text
):
    import time

    root, run = bundle
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    doc = json.loads((copy / "evidence.json").read_text())
    node = doc
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = [text] if keys == ("unknown",) else text
    (copy / "evidence.json").write_text(json.dumps(doc))
    for args in (
        ["report", str(run), str(copy), "--markdown"],
        ["report", str(run), str(copy), "--html", str(tmp_path / "r.html")],
        ["compare", str(run), str(copy), "--json"],
        ["compare", str(run), str(copy), "--markdown"],
        ["compare", str(run), str(copy)],
    ):
        started = time.monotonic()
        res = run_inproc("--root", str(root), *args)
        assert time.monotonic() - started < 30, args
        assert_no_crash(res)
        printed = res.stdout + res.stderr
        assert not any(c in printed for c in "\x1b\x07\u202e\ud800"), (args, printed[:300])
        if res.returncode == 0 and "--json" in args:
            json.loads(res.stdout)
        if res.returncode == 0 and "--markdown" in args:
            import re

            assert not re.search(r"(?<!\\)!(?<!\\)\[|(?<!\\)<img|\n\| injected", res.stdout), (
                res.stdout[-500:]
            )


# ---------------------------------------------------------------- hostile servers

SERVER_PATHS = [
    "/health",
    "/v1/models",
    "/metrics",
    "/tokenize",
    "/v1/chat/completions",
    "/v1/responses",
]


@settings(max_examples=LONG or 10, deadline=None, derandomize=not LONG, database=None)
@given(target=st.sampled_from(SERVER_PATHS), behaviour=st.sampled_from(sorted(HOSTILE_BEHAVIOURS)))
def test_fuzzed_hostile_servers(target, behaviour):
    """A lie on any path, met by every client in turn: a result or one EngineError line, never another
    exception, never longer than the deadline allows."""
    import time

    from composegen.errors import EngineError
    from composegen.evidence import gates, ladder
    from composegen.monitor import watch
    from composegen.stack import readiness

    with HostileServer.start(target, behaviour) as srv:
        ep = readiness.Endpoint("127.0.0.1", srv.port)
        calls = [
            lambda: readiness.health_ok(ep),
            lambda: readiness.models_entry(ep, srv.model),
            lambda: watch.scrape(ep, timeout=1.0),
            lambda: ladder.Tokenizer(srv.base_url, srv.model, None, 1.0).count(
                [{"content": "a b"}]
            ),
            lambda: gates.run_gates(
                srv.base_url, srv.model, only="smoke,stream_tools,responses", timeout=1.0
            ),
            lambda: ladder.run_ladder(
                srv.base_url, srv.model, [40], max_model_len=4096, max_tokens=4, timeout=1.0
            ),
        ]
        for call in calls:
            started = time.monotonic()
            try:
                call()
            except EngineError as exc:
                assert "\n" not in exc.message, exc.message
            assert time.monotonic() - started < 8


def test_bundle_lists_and_strings_are_bounded(bundle, tmp_path):
    root, run = bundle
    for edit, said in (
        (lambda d: d.update(unknown=[f"u{i}" for i in range(100_001)]), "entries"),
        (lambda d: d["profile"].update(name="n" * 1000), "not a profile name"),
        (lambda d: d.update(created_at="x" * 70_000), "character string"),
    ):
        copy = tmp_path / f"c{said[:3]}"
        shutil.copytree(run, copy)
        doc = json.loads((copy / "evidence.json").read_text())
        edit(doc)
        (copy / "evidence.json").write_text(json.dumps(doc))
        res = run_inproc("--root", str(root), "report", str(run), str(copy), "--markdown")
        assert res.returncode == 2 and said in res.stderr, res.stderr


# ---- writes through links (issue 25): every writer x every kind of entry planted where it writes ----------

PLANTS = ["symlink", "dangling", "fifo", "dir", "socket"]
PLACES = ["target", "old temp name", "directory on the way"]


def _plant(path, kind: str, victim) -> None:
    import socket

    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "dangling":
        path.symlink_to(victim.parent / "nowhere" / "x")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    else:  # bound at a short name, then moved: a worker's tmp path can pass AF_UNIX's 108 bytes
        short = Path(tempfile.mkdtemp(prefix="cg-sock-", dir="/tmp")) / "s"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(short))
        short.rename(path)
        short.parent.rmdir()


def _writers(root):
    """(argv, the file it writes) for each CLI writer that needs no engine."""
    return [
        (["--root", str(root), "render", "p"], root / "out" / "p" / "compose.yaml"),
        (["init", str(root / "fresh")], root / "fresh" / "profiles" / "schema.json"),
    ]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", PLANTS)
def test_writers_never_write_through_what_was_planted(tmp_path, kind, place):
    import stat as stat_module

    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious\n")
    root = project(tmp_path / "proj", edited())
    for argv, target in _writers(root):
        if place == "target":
            planted = target
        # what the old writer opened: .NAME.tmp-PID (in process: our pid)
        elif place == "old temp name":
            planted = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        else:
            planted = target.parent
        if place == "directory on the way" and kind != "symlink":
            continue  # a FIFO or socket in place of the directory is only a failed mkdir
        _plant(planted, kind, victim if place != "directory on the way" else outside)
        before = os.lstat(planted)
        res = run_inproc(*argv)
        assert_no_crash(res)
        assert victim.read_text() == "precious\n" and sorted(p.name for p in outside.iterdir()) == [
            "victim"
        ]
        if place == "old temp name":
            # an unpredictable temp name: the plant is just a file
            assert res.returncode == 0, res.stderr
            assert stat_module.S_ISREG(os.lstat(target).st_mode)
        else:
            assert res.returncode == 2, (argv, kind, place, res.stderr)
            assert (os.lstat(planted).st_mode, os.lstat(planted).st_ino) == (
                before.st_mode,
                before.st_ino,
            )
