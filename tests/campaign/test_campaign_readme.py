"""The README's campaign on the real engine with the emulated vLLM (issue 50, done-when 1): `init`'s
starter and a 4,096-token variant, `campaign run … --bracket --gate --emulate`, ends green with every gate
passed (the equivalence gate among them: a flag-only change gives the control's answers); a candidate
whose tool stream breaks (the emulator's fault switch) is named as it fails, the run
exits 1 and `decide --promote` refuses it without `--despite-gates`."""

from __future__ import annotations

import uuid

import pytest

from tests.support.campaigns import own_gpu_ids
from tests.support.cli import run_cli
from tests.support.engine import force_remove, free_port

pytestmark = pytest.mark.docker

VARIANT = """\
extends: {tag}
model:
  served_name: {tag}-b4096
service:
  port: {{host: {port}}}
  container_name: {tag}-b4096-ctr
vllm:
  max-num-batched-tokens: 4096
{extra}"""


def _project(tmp_path, extra: str = ""):
    """The starter under a name of its own (`init --name`), and its variant TAG-b4096: tests run side by
    side on one engine, and a compose project is named after its profile."""
    tag = f"readme-{uuid.uuid4().hex[:6]}"
    assert run_cli("init", str(tmp_path), "--name", tag).returncode == 0
    starter = tmp_path / "profiles" / f"{tag}.yaml"
    # its own port, container and GPU ids: exclusive mode would refuse a GPU another test's stack holds
    text = starter.read_text().replace("host: 8000", f"host: {free_port()}")
    text = text.replace("container_name: qwen3-small", f"container_name: {tag}-ctr")
    text = text.replace("{count: 1}", "{device_ids: [" + f'"{own_gpu_ids(1)[0]}"' + "]}")
    starter.write_text(text)
    variant = VARIANT.format(tag=tag, port=free_port(), extra=extra)
    (tmp_path / "profiles" / f"{tag}-b4096.yaml").write_text(variant)
    cli = lambda *args: run_cli("--root", str(tmp_path), *args, timeout=600)  # noqa: E731
    return cli, tag, f"{tag}-b4096"


def _run(cli, control: str, candidate: str, *flags: str):
    try:
        return cli("campaign", "run", control, candidate, "--gate", "--emulate", *flags)
    finally:
        for name in (control, candidate):
            force_remove(f"composegen-{name}")


def test_the_readmes_campaign_ends_green_for_the_right_reasons(tmp_path):
    cli, control, candidate = _project(tmp_path)
    res = _run(cli, control, candidate, "--bracket")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("done; gates 7/7 passed") == 3 and "FAIL" not in res.stderr
    assert "Every functional gate passed on every arm." in res.stdout
    assert (
        f'decide: composegen campaign decide {control}-vs-{candidate} --promote --why "…"'
        in res.stdout
    )


def test_a_candidate_that_fails_gates_is_named_fails_the_run_and_is_not_promoted(tmp_path):
    cli, control, candidate = _project(
        tmp_path, 'emulate:\n  env:\n    EMU_FAULT: "broken_tool_stream"\n'
    )
    res = _run(cli, control, candidate)
    assert res.returncode == 1, res.stderr
    assert f"arm 2/2: candidate {candidate} · FAIL gate stream_tools: " in res.stderr
    assert (
        f"campaign: candidate ({candidate}): done; gates 6/7 passed; FAILED: stream_tools"
        in res.stderr
    )
    assert "failed gates the control passed: stream_tools" in res.stderr
    assert "Functional gates FAILED: candidate failed stream_tools" in res.stdout
    assert "--no-promotion" in res.stdout
    refused = cli(
        "campaign", "decide", f"{control}-vs-{candidate}", "--promote", "--why", "more KV"
    )
    assert refused.returncode == 1 and "failed gates: stream_tools" in refused.stderr
