"""The standby memory plan's arithmetic (composegen/edge/standbyplan.py), on the shipped profiles'
figures: 8192-131k and 4096-131k at --gpu-memory-utilization 0.975 of a 95.01 GiB GPU fit on GPUs 0,1
only with one asleep (0.87 GiB residue, as recorded on the H200)."""

from __future__ import annotations

from composegen.edge import standbyplan
from composegen.edge.standbyplan import Holder
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import driver, emulate
from tests.support.helpers import REPO

SIZE = 95.0125
SHARE = 0.975 * SIZE  # 92.64 GiB


def _pair(second: Holder) -> list[str]:
    awake = Holder("4096-131k", ("0", "1"), SHARE, "awake: 0.975 x 95.01 GiB")
    return standbyplan.gpu_problems([awake, second], SIZE)


def test_two_awake_engines_do_not_fit_and_the_refusal_names_every_figure():
    problems = _pair(Holder("8192-131k", ("0", "1"), SHARE, "starting: 0.975 x 95.01 GiB"))
    assert problems == [
        f"GPU {gpu}: 4096-131k 92.64 GiB (awake: 0.975 x 95.01 GiB) + 8192-131k 92.64 GiB "
        "(starting: 0.975 x 95.01 GiB) = 185.27 GiB > 95.01 GiB"
        for gpu in ("0", "1")
    ]


def test_one_awake_beside_one_asleep_fits_with_the_recorded_residue_and_the_estimate():
    assert _pair(Holder("8192-131k", ("0", "1"), 0.87, "asleep: its own log line")) == []
    estimated = standbyplan.ESTIMATED_RESIDUE_GIB
    assert _pair(Holder("8192-131k", ("0", "1"), estimated, "asleep: estimated")) == []
    # 2.38 GiB is all the GPU has left beside the awake one: a residue grown past it no longer fits
    assert _pair(Holder("8192-131k", ("0", "1"), 2.5, "asleep: its own log line"))


def test_engines_on_other_gpus_do_not_count():
    assert _pair(Holder("other", ("2", "3"), SHARE, "awake: 0.975 x 95.01 GiB")) == []
    only_one = _pair(Holder("other", ("1", "2"), SHARE, "awake: 0.975 x 95.01 GiB"))
    assert [p.split(":")[0] for p in only_one] == ["GPU 1"]


def test_level_1_host_memory_holds_the_weights_of_every_rank_beside_the_guards_floor():
    # the shipped profile: 75.51 GiB per rank x 2 ranks = 151.02 GiB of pinned host memory
    assert standbyplan.host_problem("8192-131k", 75.51, 2, 200.0, 8.0) is None
    assert standbyplan.host_problem("8192-131k", 75.51, 2, 150.0, 8.0) == (
        "host memory: 8192-131k's level-1 sleep keeps its weights in host memory, 75.51 GiB x 2 "
        "rank(s) = 151.02 GiB; MemAvailable 150.00 GiB - the guard's floor 8.00 GiB leaves 142.00 GiB"
    )


def test_the_shipped_profiles_share_gpus_0_and_1_and_their_share_and_ranks_are_read():
    project = Project(REPO / "examples/team-edge")
    for name in ("8192-131k", "4096-131k"):
        r = resolve.load(project, name)
        assert r.profile.service.gpus.ids() == ["0", "1"]
        assert driver.share(r) == 0.975 and standbyplan.ranks(r) == 2
        # the emulated engine is told the same GPUs, through the ledger the project's engines share
        env = emulate.ledger_env(r)
        assert env["EMU_GPU_IDS"] == "0,1" and env["EMU_GPU_ENGINE"] == name


def test_the_emulated_override_mounts_the_projects_gpu_ledger_and_emulate_env_can_turn_it_off(
    tmp_path,
):
    import yaml

    project = Project(REPO / "examples/team-edge")
    r = resolve.load(project, "8192-131k")
    ledger = tmp_path / "emulated-gpus"

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: f"<{suffix}>")
    doc = yaml.load(emulate.override_text(r, "img", {}, ledger=ledger), Loader=Loader)["services"][
        "vllm"
    ]
    assert doc["volumes"] == [f"{ledger}:{emulate.LEDGER_MOUNT}"]
    assert doc["environment"]["EMU_GPU_LEDGER"] == emulate.LEDGER_MOUNT
    # a remote engine (no ledger given): neither the mount nor the variables
    plain = yaml.load(emulate.override_text(r, "img", {}), Loader=Loader)["services"]["vllm"]
    assert "volumes" not in plain and "EMU_GPU_LEDGER" not in plain.get("environment", {})
