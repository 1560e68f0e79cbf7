"""The campaign's pure parts: what a container holds of the GPUs, the sanitizer's patterns, the state's
refusals; and `compare PROFILE` naming the bundle it picked and refusing unlike runs."""

from __future__ import annotations

import json
import shutil

import pytest

from composegen.campaign import arm, exclusive, runner, state
from composegen.campaign.reports import CampaignOptions
from composegen.campaign.sanitize import Scrubber
from composegen.errors import BadInput
from composegen.profiles import resolve as profile
from composegen.project import Project
from tests.support.campaigns import DATA, PRIVATE
from tests.support.cli import run_cli
from tests.support.helpers import REPO, make_project


def _claim(name="x", labels=None, requests=(), env=None, runtime="runc"):
    return {"id": "0" * 64, "name": name, "labels": labels or {}, "device_requests": list(requests), "env": env,
            "runtime": runtime}  # fmt: skip


@pytest.mark.parametrize(
    ("claim", "held"),
    [
        (
            _claim(requests=[{"driver": "nvidia", "count": None, "device_ids": ["1", "3"]}]),
            {"1", "3"},
        ),
        (_claim(requests=[{"driver": "", "count": 2, "device_ids": None}]), {"0", "1"}),
        (_claim(requests=[{"driver": "nvidia", "count": -1, "device_ids": None}]), exclusive.ALL),
        (_claim(env="all", runtime="nvidia"), exclusive.ALL),
        (_claim(env="2,3", runtime="nvidia"), {"2", "3"}),
        (_claim(env="all"), set()),  # without the nvidia runtime the variable holds nothing
        (
            _claim(labels={"io.composegen.emulated": "true", "io.composegen.gpus": "ids:0,1"}),
            {"0", "1"},
        ),
        (_claim(labels={"io.composegen.emulated": "true", "io.composegen.gpus": "count:1"}), {"0"}),
        (_claim(), set()),
    ],
)
def test_what_a_container_holds(claim, held):
    assert exclusive.held(claim) == held


EMULATED_ON_1 = {"io.composegen.emulated": "true", "io.composegen.gpus": "ids:1"}


def test_holders_name_the_stack_or_container_and_skip_the_profiles_own():
    r = profile.load(Project(REPO), "8192-131k")  # device_ids 0,1
    claims = [
        _claim(
            "mine",
            labels={"com.docker.compose.project": "composegen-8192-131k"},
            env="all",
            runtime="nvidia",
        ),
        _claim("other-ctr", labels={"io.composegen.profile": "r33", **EMULATED_ON_1}),
        _claim("trainer", requests=[{"driver": "nvidia", "count": -1, "device_ids": None}]),
        _claim("elsewhere", requests=[{"driver": "nvidia", "count": None, "device_ids": ["5"]}]),
    ]
    assert exclusive.holders(r, claims, "composegen-8192-131k") == [
        "composegen stack r33 (container other-ctr) holds GPU 1",
        "container trainer holds every GPU",
    ]
    asleep = [  # r33 asleep: its stack here does not count, another copy's (scope alice) does
        _claim(
            n,
            labels={
                "io.composegen.profile": "r33",
                "com.docker.compose.project": p,
                **EMULATED_ON_1,
            },
        )
        for n, p in (("r33-here", "composegen-r33"), ("r33-there", "alice-r33"))
    ]
    assert exclusive.holders(r, asleep, "composegen-8192-131k", asleep=["r33"]) == [
        "composegen stack r33 (container r33-there) holds GPU 1"
    ]


def test_the_scrubber_replaces_each_kind_and_keeps_hashes():
    s = Scrubber(extra=["secret-rack-9"])
    text = (f"{PRIVATE['fqdn']} {PRIVATE['ipv4']} [{PRIVATE['ipv6']}] {PRIVATE['home']}/x /root/y "
            f"{PRIVATE['gpu_uuid']} S/N {PRIVATE['serial']} {PRIVATE['container_id']} secret-rack-9")  # fmt: skip
    clean = s.text(text)
    assert clean == "<host> <ip> [<ip>] ~/x ~/y <gpu-uuid> serial <serial> <container-id> <private>"
    doc = s.json(
        {"sha256": "a" * 64, "path": "services.vllm.environment.X", "after": "/home/bob/models"}
    )
    assert doc == {"sha256": "a" * 64, "path": "services.vllm.environment.X", "after": "~/models"}
    assert s.text("0.33.0+composegen-emulator at 131,072 tokens, 15.99 GiB") == (
        "0.33.0+composegen-emulator at 131,072 tokens, 15.99 GiB"
    )


def test_a_campaign_name_and_its_options_are_checked(tmp_path):
    root = make_project(tmp_path, {}, copy_shipped=True)
    project = Project(root)
    for bad in ("../x", "A", "a/b", ""):
        with pytest.raises(BadInput):
            runner.create(project, "8192-131k", "4096-131k", CampaignOptions(), bad or "-")
    with pytest.raises(BadInput, match="same profile"):
        runner.create(project, "8192-131k", "8192-131k", CampaignOptions(), None)
    with pytest.raises(BadInput):
        runner.create(project, "8192-131k", "nope", CampaignOptions(), None)
    assert not (root / "runs" / "campaigns").exists() or not any(
        (root / "runs" / "campaigns").iterdir()
    )
    first = runner.create(project, "8192-131k", "4096-131k", CampaignOptions(bracket=True), None)
    assert (
        runner.create(project, "8192-131k", "4096-131k", CampaignOptions(bracket=True), None)
        == first
    )
    with pytest.raises(BadInput, match="other profiles or options"):
        runner.create(project, "8192-131k", "4096-131k", CampaignOptions(), None)
    assert [a.key for a in state.load(first).arms] == ["control", "candidate", "bracket"]


def _log_bundle(root, name, log, *extra):
    res = run_cli(
        "--root", str(root), "evidence", "--from-log", str(log), "--profile", name, "--json", *extra
    )
    return res


def test_compare_names_the_bundles_it_picked_and_refuses_unlike_runs(tmp_path):
    root = make_project(tmp_path, {}, copy_shipped=True)
    assert _log_bundle(root, "8192-131k", DATA / "vllm-0.33.0-r33-8192-arm.log").returncode == 0
    made = _log_bundle(root, "4096-131k", DATA / "vllm-0.33.0-r33-4096-arm.log")
    assert made.returncode == 0, made.stderr
    res = run_cli("--root", str(root), "compare", "8192-131k", "4096-131k")
    assert res.returncode == 0, res.stderr
    bundle = json.loads(made.stdout)["path"]
    assert f"note: 4096-131k: picked its newest run, {bundle} (created " in res.stdout
    # A log of a 393K serve kept as 393k-gpu's run: another max_model_len than the 131K control.
    text = (
        (DATA / "vllm-0.33.0-r33-4096-arm.log")
        .read_text()
        .replace("131072", "393216")
        .replace("131,072", "393,216")
    )
    long_log = tmp_path / "393k.log"
    long_log.write_text(text)
    refused = _log_bundle(root, "4096-131k", long_log)  # contradicts the 131K profile: refused
    assert (
        refused.returncode == 2
        and "max_model_len" in refused.stderr
        and "--force" in refused.stderr
    )
    assert refused.stderr.startswith(f"{long_log}:") and "Traceback" not in refused.stderr
    assert _log_bundle(root, "393k-gpu", long_log).returncode == 0
    res = run_cli("--root", str(root), "compare", "8192-131k", "393k-gpu")
    assert res.returncode == 2 and "max_model_len differs" in res.stderr and "--force" in res.stderr
    assert (
        run_cli("--root", str(root), "compare", "8192-131k", "393k-gpu", "--force").returncode == 0
    )
    shutil.rmtree(root / "runs")


def test_leftover_shm_files_are_counted_from_the_scan_or_every_node(tmp_path):
    from composegen.shm import scan as shm
    from composegen.stack.reports import NodeShm, NodesShm, ShmProbe, ShmProbeEntry

    for name in ("psm_deadbeef", "nccl-03v824", "mine.bin"):
        (tmp_path / name).write_bytes(b"x")
    # two leftover names, one unknown
    scan = shm.scan(str(tmp_path), container_labels=lambda cid: None)
    assert arm.reclaimable(scan) == 2
    assert arm.reclaimable(None) is None  # a private /dev/shm: removed with its container
    probe = ShmProbe(
        free_bytes=1,
        total_bytes=2,
        entries=[
            ShmProbeEntry(name="psm_x", bytes=4096, pattern="vllm-psm"),
            ShmProbeEntry(name="a", bytes=1, pattern=None),
        ],
    )
    node = {"rank": 0, "role": "head", "engine": "local", "project": "p"}
    nodes = NodesShm(
        profile="p",
        nodes=[
            NodeShm(name="n0", **node, local=True, scan=scan),
            NodeShm(name="n1", **node, probe=probe),
        ],
    )
    assert arm.reclaimable(nodes) == 3


def test_a_profiles_qualify_fallback_names_the_fallback_arm(tmp_path):
    from composegen.campaign import qualifyarm

    root = make_project(tmp_path, {}, copy_shipped=True)
    gpu = root / "profiles" / "393k-gpu.yaml"
    gpu.write_text(gpu.read_text().replace("qualify:\n", "qualify:\n  fallback: 393k-offload\n", 1))
    project = Project(root)
    directory = qualifyarm.create(project, "393k-gpu", None, True, None)
    assert [(a.key, a.profile) for a in state.load(directory).arms] == [
        ("primary", "393k-gpu"),
        ("fallback", "393k-offload"),  # inherits qualify.fallback naming itself: no third arm
    ]
    gpu.write_text(gpu.read_text().replace("fallback: 393k-offload", "fallback: ../etc"))
    res = run_cli("--root", str(root), "validate", "393k-gpu")
    assert res.returncode == 2 and "qualify.fallback" in res.stderr
