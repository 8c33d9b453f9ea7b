"""Faust never commits past a delivered, unacknowledged record (livehost.faustutil._patch_faust_ack_gaps):
the hooks processor acknowledges comments out of order, and stock Faust skipped held ones when the
partition had no committed offset yet, or when the held one sat right at the committed offset."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from faust.transport.consumer import Consumer
from intervaltree import IntervalTree

from livehost.faustutil import _patch_faust_ack_gaps

TP = ("live.room.events", 0)


def consumer(committed: int | None, acked: list[int], unacked: list[int]) -> Any:
    return SimpleNamespace(
        _acked=defaultdict(list, {TP: list(acked)}), _committed_offset=defaultdict(lambda: None, {TP: committed}),
        _gap=defaultdict(IntervalTree), _acked_index=defaultdict(set, {TP: set(acked)}),
        _unacked_messages=[SimpleNamespace(offset=o, tp=TP, acked=False) for o in unacked])


def test_a_held_record_blocks_the_commit_without_a_committed_offset() -> None:
    _patch_faust_ack_gaps()
    c = consumer(None, acked=[1, 2, 4, 5], unacked=[0, 3])  # stock Faust returned 3 here, skipping 0
    assert Consumer._new_offset(c, TP) is None
    c._unacked_messages = [m for m in c._unacked_messages if m.offset == 3]  # 0 acknowledged now
    c._acked[TP].insert(0, 0)
    assert Consumer._new_offset(c, TP) == 3  # up to the held 3, not past it
    c._unacked_messages = []
    c._acked[TP].append(3)
    c._acked[TP].sort()
    assert Consumer._new_offset(c, TP) == 6


def test_a_held_record_at_the_committed_offset_blocks_the_commit() -> None:
    _patch_faust_ack_gaps()
    c = consumer(10, acked=[11, 12], unacked=[10])  # stock Faust returned 13 here, skipping 10
    assert Consumer._new_offset(c, TP) is None
    assert sorted(c._acked[TP]) == [11, 12]  # kept for the next commit
