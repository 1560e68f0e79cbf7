"""Whether two runs can be compared (issue 50 item 4, in part), on the seed's recorded r33 arms: the
seeded campaign's pair is not comparable while its candidate fails a gate (and, planted, differs in four
functional settings); EMULATED against real, or another image digest, is never comparable; `compare` and
campaign.md say so beside the figures."""

from __future__ import annotations

import json

from composegen.bench import spec
from composegen.bench.reports import BenchResult
from composegen.evidence import bundle, comparability
from tests.support.campaigns import seeded_campaign
from tests.support.cli import run_cli
from tests.support.helpers import REPO

FAILED_CHECK = "a check failed (not ready, or a failed gate)"


def test_the_seeded_pair_is_not_comparable_and_says_why(tmp_path):
    project, directory = seeded_campaign(tmp_path / "one", plant_config=False)
    said = json.loads((directory / "comparison.json").read_text())["comparability"]
    assert said == f"not comparable: {FAILED_CHECK}"
    assert f"**not comparable: {FAILED_CHECK}**" in (directory / "campaign.md").read_text()
    res = run_cli("--root", str(project.root), "compare", directory.name)
    assert res.returncode == 0 and f"not comparable: {FAILED_CHECK}" in res.stdout
    _, planted = seeded_campaign(tmp_path / "two")
    said = json.loads((planted / "comparison.json").read_text())["comparability"]
    assert "4 functional settings differ, not one" in said


def test_emulated_against_real_or_another_image_is_not_comparable(tmp_path):
    _, directory = seeded_campaign(tmp_path, plant_config=False)
    control, replay = bundle.load_run(directory / "control"), bundle.load_run(directory / "bracket")
    assert comparability.label(control, replay, 0) is None  # the same configuration, twice
    emulated = replay.model_copy(update={"emulated": True})
    assert comparability.label(control, emulated, 0) == (
        "not comparable: one ran the EMULATED vLLM, the other a real engine"
    )
    other = replay.model_copy(update={"image_digest": "sha256:" + "e" * 64})
    assert comparability.label(control, other, 1) == "not comparable: their image digests differ"


def test_the_client_hosts_governor_is_read_or_said_unknown(tmp_path):
    for n, governor in enumerate(("performance", "powersave", "performance")):
        (tmp_path / f"cpu{n}" / "cpufreq").mkdir(parents=True)
        (tmp_path / f"cpu{n}" / "cpufreq" / "scaling_governor").write_text(governor + "\n")
    (tmp_path / "cpufreq").mkdir()  # the policy directory is not a CPU
    assert spec.governor(tmp_path) == "performance, powersave"
    assert spec.governor(tmp_path / "cpu9") == "unknown"


def test_the_server_histograms_cross_check_the_clients_figures():
    recorded = BenchResult.model_validate_json(
        (REPO / "tests/data/bench/closed-emulated.json").read_text()
    )
    assert spec.server_check(recorded.levels) == "unreachable: no /metrics request histograms"
    c4 = recorded.levels[2]  # TTFT mean 155.025 ms, E2EL mean 350.486 ms at the client
    near = c4.model_copy(update={"server_ttft_mean_ms": 150.0, "server_e2el_mean_ms": 340.0})
    assert spec.server_check([*recorded.levels[:2], near]) == "agrees"
    # vllm#54101's kind of gap: one side leaves a queue out
    far = near.model_copy(update={"server_e2el_mean_ms": 52.3})
    assert spec.server_check([far]) == (
        "gap: c4 E2EL mean 350.5 ms at the client, 52.3 ms at the server"
    )
