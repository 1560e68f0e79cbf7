"""Every profile composegen accepts renders a file `docker compose config` accepts, and every profile it
refuses is one line with exit 2 — checked as a property over generated profiles (hypothesis), with hostile
keys and values mixed in. And `$` reaches a real container as written."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cli import assert_bad_input, run_inproc
from tests.support.profiles import BASE, edited, project

pytestmark = pytest.mark.docker

PRINTABLE = st.characters(codec="utf-8", exclude_categories=["C", "Z"], include_characters=" ")
TEXT = st.text(PRINTABLE, max_size=12)
WORDS = st.one_of(
    TEXT, st.sampled_from(["pa$word", "${HF_TOKEN}", "$${x}", "a: b", "x --api-key=y", "#", "*a"])
)
ENV = st.dictionaries(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.one_of(WORDS, st.integers(0, 9)),
)
LIMIT = st.integers(-1, 2**63 - 1)
ULIMITS = st.dictionaries(
    st.sampled_from(["nofile", "memlock", "stack", "core", "nproc", "rtprio"]),
    st.one_of(
        LIMIT,
        st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)).map(
            lambda p: dict(zip(("soft", "hard"), sorted(p), strict=True))
        ),
    ),
    max_size=3,
)
GPUS = st.one_of(
    st.fixed_dictionaries(
        {"count": st.just(1)}, optional={"spelling": st.sampled_from(["deploy", "gpus"])}
    ),
    st.fixed_dictionaries(
        {"device_ids": st.sampled_from([["0"], ["GPU-a1b2c3"], ["MIG-1:2"]])},
        optional={
            "spelling": st.sampled_from(["deploy", "gpus"]),
            "driver": st.sampled_from(["nvidia", "cdi"]),
        },
    ),
)
SOURCES = st.sampled_from(
    ["/data", "./rel", "~/hf", "${HF_HOME:-~/hf}", "named_vol", "/d/$x", "${A}/b"]
)
VOLUMES = st.lists(
    st.fixed_dictionaries(
        {
            "source": SOURCES,
            "target": st.from_regex(r"/[a-z0-9_.-]{1,8}(/[a-z0-9_$ ]{1,4})?", fullmatch=True),
        },
        optional={"read_only": st.booleans()},
    ),
    max_size=2,
    unique_by=lambda v: v["target"],
)
FLAGS = st.fixed_dictionaries(
    {},
    optional={
        "tokenizer": WORDS,
        "ignore-patterns": st.lists(
            WORDS.filter(lambda w: not w.startswith("-")), min_size=1, max_size=2
        ),
        "speculative-config": st.dictionaries(
            st.sampled_from(["method", "n"]), st.one_of(WORDS, st.integers()), max_size=2
        ),
        "seed": st.integers(1, 2**63 - 1),
        "gpu-memory-utilization": st.floats(0.01, 1.0),
    },
)
# One hostile edit, sometimes: what the classes are made of.
HOSTILE = st.one_of(
    st.tuples(
        st.just(("service", "environment")),
        st.dictionaries(st.text(max_size=8), TEXT, min_size=1, max_size=2),
    ),
    st.tuples(
        st.just(("service", "ulimits")),
        st.dictionaries(st.text(max_size=8), st.integers(), min_size=1, max_size=2),
    ),
    st.tuples(
        st.just(("service", "shm_size")),
        st.sampled_from(["1b", "512mb", "99999999999999999999tb", "4 gb"]),
    ),
    st.tuples(
        st.just(("service", "stop_grace_period")),
        st.sampled_from(["25h", "99999999h", "0.5ms", "1h1h"]),
    ),
    st.tuples(
        st.just(("service", "gpus")),
        st.sampled_from([{"device_ids": ["0", "0"]}, {"device_ids": ["0 1"]}]),
    ),
    st.tuples(st.just(("model", "served_name")), st.text(max_size=10)),
    st.tuples(st.just(("model", "path")), st.text(max_size=10)),
    st.tuples(st.just(("vllm", "kv-offloading-size")), st.floats()),
    st.tuples(
        st.just(("vllm", "ignore-patterns")), st.lists(st.text(max_size=6), min_size=1, max_size=2)
    ),
)


@st.composite
def profiles(draw) -> dict:
    ipc = draw(st.sampled_from(["private", "host", "shareable"]))
    service = {
        "port": {
            "host": draw(st.integers(1024, 65535)),
            "bind": draw(st.sampled_from(["127.0.0.1", "0.0.0.0", "::1", "::"])),
        },
        "gpus": draw(GPUS),
        "ipc": ipc,
        "shm_size": draw(st.sampled_from(["1gb", "4gb", "16g", "2.5gb", "1024m"])),
        "environment": draw(ENV),
        "ulimits": draw(ULIMITS),
        "volumes": draw(VOLUMES),
        "stop_grace_period": draw(st.sampled_from(["10s", "1m30s", "24h", "0s", "500ms", "1.5s"])),
        "restart": draw(st.sampled_from(["no", "always", "on-failure", "unless-stopped"])),
    }
    served = draw(
        st.one_of(st.just("tiny"), st.from_regex(r"[A-Za-z0-9][!-~]{0,10}", fullmatch=True))
    )
    doc = edited((("service",), service), (("model", "served_name"), served))
    doc["vllm"] = {**BASE["vllm"], **draw(FLAGS)}
    if draw(st.booleans()):  # two nodes, one GPU each: vLLM's multi-node launch
        members = [{"name": "n0", "rank": 0, "environment": draw(ENV)}, {"name": "n1", "rank": 1}]
        if draw(st.booleans()):
            members[1]["hf_cache"] = draw(SOURCES)
        doc["nodes"] = {
            "master_addr": draw(st.sampled_from(["10.0.0.1", "head.example", "fd00::1"])),
            "members": members,
        }
        doc["service"]["gpus"] = {"count": 1}
        doc["vllm"]["tensor-parallel-size"] = 2
    if draw(st.booleans()):
        keys, value = draw(HOSTILE)
        doc = edited((keys, value), base=doc)
    return doc


def test_accepted_profiles_render_files_compose_accepts(tmp_path_factory):
    accepted: list[str] = []
    refused = 0

    # a longer, randomly seeded search (locally)
    long = int(os.environ.get("COMPOSEGEN_FUZZ_EXAMPLES", "0"))

    @settings(
        max_examples=long or 60,
        deadline=None,
        derandomize=not long,  # the same examples on every CI run
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(profiles())
    def check(doc: dict) -> None:
        nonlocal refused
        root = project(tmp_path_factory.mktemp("prop"), doc)
        res = run_inproc("--root", str(root), "render", "p")
        if res.returncode == 2:
            assert_bad_input(res)
            assert not (root / "out").exists()
            refused += 1
            return
        assert res.returncode == 0, res.stderr
        accepted.extend(str(p) for p in sorted((root / "out" / "p").rglob("compose.yaml")))

    check()
    assert accepted and refused, (len(accepted), refused)  # the generator reaches both sides
    # One shell for all compose calls: a few dozen `config -q`, each reporting only a failure.
    script = 'for f in "$@"; do docker compose -f "$f" config -q >/dev/null 2>"$f.err" || echo "$f"; done'
    proc = subprocess.run(
        ["sh", "-c", script, "sh", *accepted], capture_output=True, text=True, timeout=300
    )
    failed = proc.stdout.split()
    details = [Path(f).read_text() + Path(f + ".err").read_text() for f in failed[:2]]
    assert not failed, details


def test_dollar_text_reaches_the_container_as_written(tmp_path):
    """`compose create` on a local image; the container's argv and environment as the engine holds them."""
    name = f"dollar{uuid.uuid4().hex[:8]}"
    doc = edited(
        (("image",), "composegen/base:py3"),
        (("image_unpinned_reason",), "a local test image"),
        # a secret reference here is refused (test_profile_mounts)
        (("model", "served_name"), "${SERVED}"),
        (("service", "environment"), {"PW": "pa$word", "HF_TOKEN": "${HF_TOKEN}"}),
        (("service", "gpus"), {"count": 1, "spelling": "gpus"}),
        (("vllm", "tokenizer"), "a$b${HOME}"),
    )
    root = project(tmp_path, doc, name=name)
    assert run_inproc("--root", str(root), "render", name).returncode == 0
    compose = ["docker", "compose", "-f", str(root / "out" / name / "compose.yaml")]
    # the caller's DOCKER_HOST/CONTEXT/CONFIG stay
    env = {**os.environ, "HF_TOKEN": "hf_secret_value"}
    try:
        created = subprocess.run(
            [*compose, "create"], capture_output=True, text=True, env=env, timeout=120
        )
        assert created.returncode == 0, created.stderr
        ids = subprocess.run(
            [*compose, "ps", "-aq"], capture_output=True, text=True, env=env, timeout=60
        ).stdout.split()
        assert ids, "compose created no container on the engine it was pointed at"
        info = json.loads(
            subprocess.run(["docker", "inspect", ids[0]], capture_output=True, env=env).stdout
        )
        config = info[0]["Config"]
        assert "PW=pa$word" in config["Env"] and "HF_TOKEN=hf_secret_value" in config["Env"]
        assert "${SERVED}" in config["Cmd"] and "--tokenizer=a$b${HOME}" in config["Cmd"]
        assert not any("hf_secret_value" in word for word in config["Cmd"])
    finally:
        subprocess.run(
            [*compose, "down", "-v", "--remove-orphans"], capture_output=True, env=env, timeout=120
        )
