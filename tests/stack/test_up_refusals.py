"""`up` refuses before touching the engine when out/ does not match the profile."""

from __future__ import annotations

from tests.support.cli import run_cli
from tests.support.helpers import MINIMAL, make_project


def test_up_refuses_a_stale_out_file_and_says_how_to_fix_it(tmp_path):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    res = run_cli("--root", str(root), "up", "tiny", "--emulate")
    assert res.returncode == 1
    assert (
        "out/tiny/compose.yaml is missing for profiles/tiny.yaml" in res.stderr
        and "composegen render" in res.stderr
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    profile = root / "profiles/tiny.yaml"
    profile.write_text(profile.read_text().replace("max-num-seqs: 4", "max-num-seqs: 8"))
    res = run_cli("--root", str(root), "up", "tiny", "--emulate")
    assert res.returncode == 1 and "out/tiny/compose.yaml is stale" in res.stderr
