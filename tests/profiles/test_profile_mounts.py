"""Mounts that would change the stack's security, and secret references outside environment values
(composegen/profiles/mounts.py): refused by `validate --strict` with file:line, unless a reviewed
`service.unsafe_mounts` entry allows the mount — which `diff` reports as functional and `status` shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import assert_bad_input, run_inproc
from tests.support.profiles import edited, project, rendered

HF = {"source": "${HF_HOME:-~/.cache/huggingface}", "target": "/root/.cache/huggingface"}

# (source, what the refusal says): host root, the engine socket, credentials, outside the project, grammar
REFUSED = [
    ("/", "host's root"),
    ("/var/run/docker.sock", "socket"),
    ("/run/docker.sock", "socket"),
    ("/srv/engine/containerd.sock", "socket"),
    ("/var/run", "/var/run"),
    ("/var/lib/docker/volumes", "/var/lib/docker"),
    ("~/.ssh", "~/.ssh (credentials)"),
    ("~/.docker", "~/.docker (credentials)"),
    ("~/.aws/credentials", "~/.aws (credentials)"),
    ("~/.kube", "~/.kube (credentials)"),
    ("~", "home directory"),
    ("/root", "/root"),
    ("/etc", "/etc"),
    ("/etc/shadow", "/etc"),
    ("/home/alice", "home directories"),
    ("/home/alice/.ssh/id_ed25519", ".ssh directory (credentials)"),
    ("/data/elsewhere", "outside the project"),
    ("${SOMEWHERE}/x", "outside the project"),
    ("${UNSET:-/}", "host's root"),
    ("${UNSET:-~/.ssh}", "~/.ssh"),
    ("./../..", "'..' component"),
    ("./a/../../..", "'..' component"),
    ("${UNSET:-/:/hostroot}", "a reference is"),
    ("${UNSET:-/tmp}:/hostroot", "cannot contain ':'"),
    ("/a/${B}/c", "holds ':', '$'"),
    ("${A}b", "after ${A} comes '/'"),
    ("~bob/x", "must start with"),
    ("${HF_TOKEN}", "secret reference"),
    ("/${HF_TOKEN}", "secret reference"),
    ("/srv/$VLLM_API_KEY", "secret reference"),
]


def _doc(volumes: list[dict], **service) -> dict:
    return edited(
        (("service", "volumes"), volumes), *((("service", k), v) for k, v in service.items())
    )


@pytest.mark.parametrize(("source", "said"), REFUSED, ids=[s for s, _ in REFUSED])
def test_a_mount_that_changes_the_stacks_security_is_refused(tmp_path, source, said):
    root = project(tmp_path, _doc([HF, {"source": source, "target": "/x"}]))
    res = run_inproc("--root", str(root), "validate", "--strict", "p")
    assert_bad_input(res, said)
    assert res.stderr.startswith("profiles/p.yaml:") and "service.volumes.1.source" in res.stderr, (
        res.stderr
    )
    assert not (root / "out").exists()


def test_the_model_cache_and_the_project_need_no_opt_in(tmp_path):
    doc = _doc(
        [
            HF,
            {"source": "./data", "target": "/data"},
            {"source": "/srv/models", "target": "/models"},
        ]
    )
    doc["model"]["path"] = "/models/tiny"
    root = project(tmp_path, doc)
    res = run_inproc("--root", str(root), "validate", "--strict", "p")
    assert res.returncode == 0, res.stderr
    assert run_inproc("--root", str(root), "render", "p").returncode == 0


def test_a_node_hf_cache_is_judged_too(tmp_path):
    doc = edited(
        (
            ("nodes",),
            {
                "master_addr": "10.0.0.1",
                "members": [
                    {
                        "name": "a",
                        "rank": 0,
                        "docker_host": "unix:///var/run/docker.sock",
                        "hf_cache": "/",
                    },
                    {"name": "b", "rank": 1, "docker_host": "unix:///var/run/docker.sock"},
                ],
            },
        ),
        (("vllm", "tensor-parallel-size"), 1),
        (("vllm", "pipeline-parallel-size"), 2),
    )
    res = run_inproc("--root", str(project(tmp_path, doc)), "validate", "p")
    assert_bad_input(res, "nodes.members.0.hf_cache")


def _opted(reason: str = "the monitoring agent reads the engine's events") -> dict:
    sock = {"source": "/var/run/docker.sock", "target": "/var/run/docker.sock", "read_only": True}
    return _doc([HF, sock], unsafe_mounts=[{"source": "/var/run/docker.sock", "reason": reason}])


def test_an_explicit_reviewed_opt_in_allows_it_and_diff_calls_it_functional(tmp_path):
    root = project(tmp_path, _opted(), extra={"q": json.dumps(_doc([HF]))})
    res = run_inproc("--root", str(root), "validate", "--strict", "p")
    assert res.returncode == 0, res.stderr
    assert run_inproc("--root", str(root), "render", "p").returncode == 0
    labels = rendered(root)["services"]["vllm"]["labels"]
    assert json.loads(labels["io.composegen.unsafe-mounts"]) == [
        {
            "source": "/var/run/docker.sock",
            "reason": "the monitoring agent reads the engine's events",
        }
    ]
    # Same mounts, another reason: only the opt-in differs, and that is a functional change.
    other = project(tmp_path / "b", _opted("a different reason, reviewed again"))
    assert run_inproc("--root", str(other), "render", "p").returncode == 0
    a, b = root / "out/p/compose.yaml", other / "out/p/compose.yaml"
    res = run_inproc("--root", str(root), "diff", str(a), str(b), "--functional-only", "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    changes = json.loads(res.stdout)
    assert [c["class"] for c in changes if c["path"].endswith("io.composegen.unsafe-mounts")] == [
        "functional"
    ]


@pytest.mark.parametrize(
    "unsafe",
    [
        [{"source": "/nowhere", "reason": "not a mount of this profile"}],
        [{"source": "/var/run/docker.sock", "reason": ""}],
        [{"source": "/var/run/docker.sock"}],
        [{"source": "/var/run/docker.sock", "reason": "line\nbreak in it"}],
    ],
)
def test_an_opt_in_must_name_a_mount_and_say_why(tmp_path, unsafe):
    doc = _opted()
    doc["service"]["unsafe_mounts"] = unsafe
    assert_bad_input(
        run_inproc("--root", str(project(tmp_path, doc)), "validate", "p"), "unsafe_mounts"
    )


def test_grammar_violations_cannot_be_opted_in(tmp_path):
    bad = "${UNSET:-/:/hostroot}"
    doc = _doc(
        [HF, {"source": bad, "target": "/x"}],
        unsafe_mounts=[{"source": bad, "reason": "please allow"}],
    )
    assert_bad_input(
        run_inproc("--root", str(project(tmp_path, doc)), "validate", "p"), "a reference is"
    )


@pytest.mark.parametrize(
    ("keys", "value"),
    [
        (("vllm", "tokenizer"), "org/${HF_TOKEN}"),
        (("model", "served_name"), "${VLLM_API_KEY}"),
        (("description",), "uses $HF_TOKEN"),
        (("vllm", "chat-template"), "/templates/${MY_SECRET}.jinja"),
    ],
)
def test_secret_references_outside_environment_values_are_refused_with_their_line(
    tmp_path, keys, value
):
    res = run_inproc("--root", str(project(tmp_path, edited((keys, value)))), "validate", "p")
    assert_bad_input(res, "secret reference")
    assert res.stderr.startswith("profiles/p.yaml:") and ".".join(keys) in res.stderr


def test_secret_references_in_environment_values_are_fine(tmp_path):
    doc = edited(
        (
            ("service", "environment"),
            {"HF_TOKEN": "${HF_TOKEN}", "VLLM_API_KEY": "${VLLM_API_KEY:-}"},
        )
    )
    assert (
        run_inproc("--root", str(project(tmp_path, doc)), "validate", "--strict", "p").returncode
        == 0
    )


def test_status_text_names_the_unsafe_mounts():
    from composegen.stack import status
    from composegen.stack.reports import Drift, EndpointStatus, StackStatus, StatusReport

    stack = StackStatus(
        profile="p",
        project="composegen-p",
        containers=[],
        endpoint=EndpointStatus.model_validate({"url": None, "healthy": False}),
        drift=Drift(state="unknown", running=None, out=None, profile="x"),
        unsafe_mounts=["/var/run/docker.sock: the monitoring agent reads the engine's events"],
    )
    text = status.format_text(StatusReport(stacks=[stack]))
    assert (
        "p: unsafe mount (service.unsafe_mounts) /var/run/docker.sock: the monitoring agent" in text
    )


def test_shipped_profiles_still_validate():
    repo = Path(__file__).resolve().parents[2]
    res = run_inproc("--root", str(repo), "validate")
    assert res.returncode == 0, res.stderr
