"""The memory guard's reads of a remote node's host, through that node's own engine (the second dockerd the
multi-node tests start): the one-shot preflight probe, and the streaming probe the watcher uses (one
long-lived container printing MemAvailable, removed when the watch ends). Both engines run on this machine,
so MemTotal must equal this host's."""

from __future__ import annotations

import time
import uuid

import pytest

from composegen.stack import memguard
from composegen.stack.targets import Target
from tests.support.second_engine import (  # noqa: F401 - the session fixture
    BASE_IMAGE,
    second_engine,
)

pytestmark = pytest.mark.docker


def test_remote_reads_through_the_nodes_engine(second_engine):  # noqa: F811
    owner, target = f"t-{uuid.uuid4().hex[:8]}", Target(second_engine.url)
    here = memguard.read_local()
    mem, unified = memguard.read_remote(BASE_IMAGE, owner, target)
    assert mem.total == here.total and 0 < mem.available <= mem.total and unified is False

    stream = memguard.RemoteMemory(BASE_IMAGE, owner, target, lifetime=120)
    try:
        deadline = time.monotonic() + 60
        while stream.latest is None:
            assert time.monotonic() < deadline, "the streaming probe never reported"
            time.sleep(0.1)
        first = stream.latest[1]
        while stream.latest[1] == first:  # it keeps reporting: a fresh line replaces the first
            assert time.monotonic() < deadline, "the streaming probe reported once only"
            time.sleep(0.1)
        mem = stream.read()
        assert mem.total == here.total and 0 < mem.available <= mem.total
    finally:
        stream.close()
    label = f"label=io.composegen.probe={owner}"
    assert second_engine.docker("ps", "-aq", "--filter", label).stdout.split() == []
