"""Sleep that equality cannot judge is refused until a sleep qualification of the engine passed on
this host (composegen/edge/standbyplan.py): level 2 with a speculative config (its wake does not
reload the draft: vLLM issue 52487), and any standby on a unified-memory host (its wake has taken
the host down: vLLM issue 50011). The host is probed as composegen's host probe reads it — the
NVIDIA driver's /proc information files, constructed here as a GB10's and an H200's."""

from __future__ import annotations

import platform

import pytest

from composegen.edge import standbyplan
from composegen.errors import BadInput
from composegen.evidence import sleepcycles
from composegen.evidence.reports.sleep import SleepCycles
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import memguard
from tests.support.helpers import MINIMAL, make_project

SPEC = "  speculative-config: {method: ngram, num_speculative_tokens: 3}\n"
# the fields of /proc/driver/nvidia/gpus/<bus>/information the probe reads (the model name)
INFORMATION = (
    "Model: \t\t NVIDIA {}\nIRQ: \t\t 145\nVideo BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\n"
)


def _gpu(tmp_path, monkeypatch, model: str) -> None:
    info = tmp_path / "nvidia" / "0000:01:00.0" / "information"
    info.parent.mkdir(parents=True)
    info.write_text(INFORMATION.format(model), encoding="utf-8")
    monkeypatch.setattr(memguard, "NVIDIA_GPUS", str(tmp_path / "nvidia" / "*" / "information"))


def _project(tmp_path) -> Project:
    return Project(make_project(tmp_path, {
        "l1": MINIMAL + "standby: {level: 1}\n",
        "l2": MINIMAL + "standby: {level: 2}\n",
        "l1spec": MINIMAL + SPEC + "standby: {level: 1}\n",
        "l2spec": MINIMAL + SPEC + "standby: {level: 2}\n",
    }))  # fmt: skip


def _qualified(project: Project, name: str, host: str) -> None:
    r = resolve.load(project, name)
    passed = SleepCycles(profile=name, level=2, cycles=[], residue_growth_gib=0.0, passed=True,
                         reason=None, emulated=False, key=sleepcycles.key_of(r, False))  # fmt: skip
    with pytest.MonkeyPatch.context() as m:  # as if qualified on HOST
        m.setattr(platform, "node", lambda: host)
        sleepcycles._remember(project, r, passed)


def _check(project: Project, name: str) -> None:
    standbyplan.check_sleep(project, resolve.load(project, name), ctr=None)


def test_level_2_with_a_speculative_config_is_refused_until_qualified_on_this_host(
    tmp_path, monkeypatch
):
    _gpu(tmp_path, monkeypatch, "H200")
    project = _project(tmp_path)
    for fine in ("l1", "l2", "l1spec"):
        _check(project, fine)
    with pytest.raises(BadInput, match="vLLM issue 52487") as refused:
        _check(project, "l2spec")
    assert refused.value.exit_code == 2 and "--sleep-cycles" in (refused.value.hint or "")
    _qualified(project, "l2spec", "another-box")  # passed, but elsewhere
    with pytest.raises(BadInput, match=f"passed on this host \\({platform.node()}\\)"):
        _check(project, "l2spec")
    _qualified(project, "l2spec", platform.node())
    _check(project, "l2spec")


def test_standby_on_a_gb10_host_is_refused_at_every_level_until_qualified_on_it(
    tmp_path, monkeypatch
):
    _gpu(tmp_path, monkeypatch, "GB10")
    project = _project(tmp_path)
    for name in ("l1", "l2"):
        with pytest.raises(BadInput, match=r"unified-memory host .*\(vLLM issue 50011\)"):
            _check(project, name)
    _qualified(project, "l2", platform.node())
    _check(project, "l2")
    with pytest.raises(BadInput, match="vLLM issue 50011"):
        _check(project, "l1")  # another engine: its own qualification
