"""The shipped edge example (examples/team-edge/): its out/ is fresh, every compose file in it is accepted
by the real `docker compose`, its profiles are the shipped ones, and it pins one local content-derived edge
image (composegen/edge/image.py). That tag hashes the machine's caddy and CA bundle, and a CA bundle holds
the machine's own CAs too (a sandbox's egress CA, a company's proxy CA), so the engine tests re-pin a copy
to this machine's tag, as the refusal's hint tells a user to, and a pin it cannot make is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from composegen.edge import image
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "team-edge"
STACKS = ("8192-131k", "4096-131k")


def test_the_example_out_is_fresh():
    res = run_cli("--root", str(EXAMPLE), "render", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "out/ is fresh" in res.stdout
    for rel in (
        "edge/compose.yaml",
        "edge/Caddyfile",
        "edge/gatekeeper.py",
        *(f"edge/stacks/{s}.yaml" for s in STACKS),
    ):
        assert (EXAMPLE / "out" / rel).is_file(), rel


def test_the_example_profiles_are_the_shipped_ones():
    # and its standby pair (sb-*): the shipped A/B pair, resident (examples/team-edge/README.md)
    profiles = sorted(p for p in (EXAMPLE / "profiles").iterdir() if not p.name.startswith("sb-"))
    assert profiles, "the example has no profiles: the loop below would prove nothing"
    for path in profiles:
        assert path.read_bytes() == (REPO / "profiles" / path.name).read_bytes(), (
            f"{path.name} drifted"
        )


def _pin(text: str) -> str:
    (pin,) = set(image.LOCAL_RE.findall(text))  # proxy and gate: one image
    return pin


def test_the_example_pins_one_local_edge_image_by_content():
    text = (EXAMPLE / "edge.yaml").read_text()
    pin = _pin(text)
    assert f"proxy: {pin}\n" in text and f"gate: {pin}\n" in text
    compose = (EXAMPLE / "out" / "edge" / "compose.yaml").read_text()
    # the proxy, the door (the same Caddy) and the gate
    assert compose.count(f'image: "{pin}"') == 3


# what edge.yaml's comment names
PINNED_PACKAGES = {"caddy": "2.6.2-5", "ca-certificates": "20250419~deb12u2"}


def _installed() -> dict[str, str | None]:
    found = {}
    for package in PINNED_PACKAGES:
        proc = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True
        )
        found[package] = proc.stdout.strip() if proc.returncode == 0 else None
    return found


# a mark, decided at collection: the pin holds for a machine with exactly these packages
@pytest.mark.skipif(_installed() != PINNED_PACKAGES, reason=f"the pin is for {PINNED_PACKAGES}")
def test_the_example_pin_is_what_a_machine_with_the_named_packages_makes():
    assert _pin((EXAMPLE / "edge.yaml").read_text()) == image.local_tag()


def test_the_image_carries_the_packaged_roots_not_the_hosts_own_additions(tmp_path):
    roots = tmp_path / "mozilla"
    roots.mkdir()
    (roots / "B.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----")
    (roots / "A.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n")
    host = tmp_path / "host.crt"
    host.write_bytes(b"the host bundle, with a company's proxy CA\n")
    bundle = image.packaged_bundle(roots, host)
    assert (
        bundle
        == b"-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n"
        + (roots / "B.crt").read_bytes()
        + b"\n"
    )
    # no package directory: the host's
    assert image.packaged_bundle(tmp_path / "none", host) == host.read_bytes()


def _copy_pinned(tmp_path: Path, pin: str, name: str) -> Path:
    """The example copied with its edge image pinned to PIN and its edge named NAME."""
    root = tmp_path / "team-edge"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("out", "runs", ".composegen"))
    text = (root / "edge.yaml").read_text()
    (root / "edge.yaml").write_text(
        text.replace(_pin(text), pin).replace("name: edge\n", f"name: {name}\n")
    )
    return root


@pytest.mark.skipif(not shutil.which("docker"), reason="docker CLI needed")
def test_every_compose_file_of_the_example_passes_compose_config():
    out = EXAMPLE / "out"
    composes = sorted(out.glob("*/compose.yaml"))
    assert {c.parent.name for c in composes} >= {*STACKS, "edge"}, composes  # never an empty loop
    for compose in composes:
        check = subprocess.run(
            ["docker", "compose", "-f", str(compose), "config", "-q"],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, f"{compose}: {check.stderr}"
    # the stack as `up` starts it behind the edge: no host port, the edge's network
    for name in STACKS:
        argv = [
            "-f",
            str(out / name / "compose.yaml"),
            "-f",
            str(out / "edge" / "stacks" / f"{name}.yaml"),
        ]
        merged = subprocess.run(
            ["docker", "compose", *argv, "config", "--format", "json"],
            capture_output=True,
            text=True,
        )
        assert merged.returncode == 0, merged.stderr
        vllm = json.loads(merged.stdout)["services"]["vllm"]
        assert not vllm.get("ports") and vllm["networks"]["edge"]["aliases"] == [f"stack-{name}"]
    caddyfile = (out / "edge" / "Caddyfile").read_text()
    assert "tls internal" in caddyfile
    edge = (EXAMPLE / "edge.yaml").read_text()
    assert "aliases: {ds4-flash: 4096-131k}" in edge


@pytest.mark.docker
def test_a_local_pin_this_machine_cannot_build_is_refused(tmp_path):
    wrong = f"{image.LOCAL_REPO}:{'0' * 16}"
    root = _copy_pinned(tmp_path, wrong, "e-pin")
    assert run_cli("--root", str(root), "render").returncode == 0
    res = run_cli("--root", str(root), "edge", "up")
    assert res.returncode == 1, res.stderr
    assert (
        f"edge.yaml pins {wrong}, but this machine's caddy and CA bundle make {image.local_tag()}"
        in res.stderr
    )
    assert "Traceback" not in res.stderr
    listed = subprocess.run(["docker", "image", "inspect", wrong], capture_output=True)
    assert listed.returncode != 0  # nothing was built under the wrong name
