"""bench/gcpause.py: during an open-loop level the cyclic collector runs only where the sender has room."""

from __future__ import annotations

import gc

import pytest

from composegen.bench import gcpause


def _cycles(n: int) -> list[object]:
    """n tracked container allocations, each a reference cycle only the collector can free."""
    made = []
    for _ in range(n):
        a: list[object] = []
        a.append(a)
        made.append(a)
    return made


def test_no_automatic_collection_inside_and_restored_after() -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with gcpause.between_sends():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > before  # what existed is frozen: never scanned in the level
        counts = []
        gc.callbacks.append(lambda phase, info: counts.append(phase))
        try:
            _cycles(5 * gcpause.YOUNG_EVERY)
        finally:
            gc.callbacks.pop()
        assert counts == []  # far past the threshold, and no collection ran by itself
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_collects_only_with_room_before_the_next_send() -> None:
    with gcpause.between_sends() as collector:
        _cycles(2 * gcpause.YOUNG_EVERY)
        collector.maybe_collect(gcpause.GAP_S / 2)  # a send is due too soon
        assert collector.collections == 0
        collector.maybe_collect(gcpause.GAP_S * 2)
        assert collector.collections == 1
        assert gc.get_count()[0] < gcpause.YOUNG_EVERY
        collector.maybe_collect(1.0)  # nothing allocated since: nothing to do
        assert collector.collections == 1


def test_a_level_too_dense_for_gaps_still_collects_past_the_ceiling() -> None:
    with gcpause.between_sends() as collector:
        _cycles(gcpause.YOUNG_EVERY * 2)
        collector.maybe_collect(0.0)
        assert collector.collections == 0
        _cycles(gcpause.CEILING)
        collector.maybe_collect(0.0)
        assert collector.collections == 1


def test_objects_frozen_before_the_level_stay_frozen_after_it() -> None:
    gc.freeze()  # e.g. a caller that froze its imports
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        # frozen objects that die leave the count (CI: 22 of 238,845), an unfreeze empties it
        with gcpause.between_sends():
            assert not gc.isenabled() and gc.get_freeze_count() > frozen * 0.9
        assert gc.isenabled() and gc.get_freeze_count() > frozen * 0.9
    finally:
        gc.unfreeze()


def test_on_an_incremental_collector_every_collection_is_a_full_one(monkeypatch) -> None:
    monkeypatch.setattr(gcpause, "INCREMENTAL", True)  # Python 3.14+
    with gcpause.between_sends() as collector:
        seen: list[int] = []
        gc.callbacks.append(
            lambda phase, info: phase == "start" and seen.append(info["generation"])
        )
        try:
            for _ in range(3):
                _cycles(2 * gcpause.YOUNG_EVERY)
                collector.maybe_collect(1.0)
        finally:
            gc.callbacks.pop()
        assert seen == [2, 2, 2] and collector.collections == 3


@pytest.mark.skipif(gcpause.INCREMENTAL, reason="3.14's collector has no middle generation")
def test_the_middle_generation_every_tenth_time() -> None:
    with gcpause.between_sends() as collector:
        seen: list[int] = []
        gc.callbacks.append(
            lambda phase, info: phase == "start" and seen.append(info["generation"])
        )
        try:
            for _ in range(gcpause.MIDDLE_EVERY + 1):
                _cycles(2 * gcpause.YOUNG_EVERY)
                collector.maybe_collect(1.0)
        finally:
            gc.callbacks.pop()
        assert seen == [0] * gcpause.MIDDLE_EVERY + [1]  # as CPython's own thresholds would
