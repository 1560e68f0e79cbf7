"""Image-pull progress from a real registry on 127.0.0.1 (Debian's docker-registry, provision.d)."""

from __future__ import annotations

import io

import pytest

from composegen.cli.console import ConsoleSink
from composegen.stack import preflight
from composegen.stack.progress import PullEvent
from tests.support.registry import pushed_emulator, remove_local

pytestmark = pytest.mark.docker


def test_pull_progress_counts_the_bytes_the_engine_downloads_from_the_registry(tmp_path):
    ref = pushed_emulator(tmp_path, megabytes=24)
    try:
        out = io.StringIO()
        sink = ConsoleSink(stream=out, tty=False)
        events: list[tuple[str, int | None, int | None]] = []

        def on_pull(layer, status, current, total):
            events.append((status, current, total))
            sink.pull(PullEvent(None, ref, layer, status, current, total))

        check = preflight.image_check(ref, False, None, on_pull)
        assert (check.status, check.message) == ("ok", f"{ref} pulled")
        pull = sink.tracker.stages["pull"]
        # random bytes do not shrink
        assert pull.unit == "B" and pull.total is not None and pull.total >= 24 << 20
        assert pull.done == pull.total
        partial = [
            (c, t) for s, c, t in events if s == "Downloading" and c is not None and t and c < t
        ]
        assert partial, "the engine reported no partial download: nothing came from the registry"
        assert "pulling image" in out.getvalue()
    finally:
        remove_local(ref)


def test_up_pulls_the_emulator_image_from_the_registry_and_shows_the_pull(tmp_path):
    import os
    import subprocess
    import sys

    from tests.support.engine import emulated_project

    ref = pushed_emulator(tmp_path, megabytes=16)
    root, name, _ = emulated_project(tmp_path, load=1.0)
    env = {**os.environ, "COMPOSEGEN_EMULATOR_IMAGE": ref}
    cli = [sys.executable, "-m", "composegen", "--root", str(root)]
    try:
        proc = subprocess.run(
            [*cli, "up", name, "--emulate"], capture_output=True, text=True, timeout=300, env=env
        )
        assert proc.returncode == 0, proc.stderr
        assert f"preflight ok   image: {ref} pulled" in proc.stderr
        assert "] pulling image" in proc.stderr  # the stage line, before `creating`
        assert proc.stderr.index("] pulling image") < proc.stderr.index("] creating")
    finally:
        subprocess.run([*cli, "down", name], capture_output=True, timeout=120)
        remove_local(ref)
