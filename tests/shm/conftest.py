"""The shm tests' actors: python processes holding files the way the race tests need."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.shmactors import Actor


@pytest.fixture
def actors():
    started: list[Actor] = []

    def start(code: str, directory: Path) -> Actor:
        started.append(Actor(code, directory))
        return started[-1]

    yield start
    for actor in started:
        actor.close()
