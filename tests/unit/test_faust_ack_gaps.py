"""Faust never commits past a delivered, unacknowledged record (livehost.faustutil._patch_faust_ack_gaps):
the hooks processor acknowledges comments out of order, and stock Faust skipped held ones when the
partition had no committed offset yet, or when the held one sat right at the committed offset."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from faust.transport.consumer import Consumer
from faust.types import TP as FaustTP
from intervaltree import IntervalTree

from livehost.faustutil import _patch_faust_ack_gaps, _patch_faust_untracked_acks

TP = FaustTP("live.room.events", 0)


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


def acking_consumer() -> Any:
    return SimpleNamespace(
        app=SimpleNamespace(topics=SimpleNamespace(acks_enabled_for=lambda topic: True)),
        _acked=defaultdict(list), _acked_index=defaultdict(set), _committed_offset=defaultdict(lambda: None),
        _unacked_messages=set(), _n_acked=0, _waiting_for_ack=None)


@dataclass(eq=False)  # hashable by identity, like Faust's messages
class Msg:
    offset: int
    tracked: bool
    acked: bool = False
    tp: FaustTP = TP
    topic: str = TP.topic


def message(offset: int, tracked: bool) -> Any:
    return Msg(offset, tracked)


def test_a_message_no_stream_took_is_acknowledged_without_counting_for_a_commit() -> None:
    # What Faust's stream does with a message it pulls during a rebalance (flow control suspended or
    # an older generation): it skips it, acknowledges it, and the partition is sought back. Stock Faust
    # recorded that offset, so a later commit could jump over records no agent handled.
    _patch_faust_untracked_acks()
    c = acking_consumer()
    skipped = message(296, tracked=False)
    assert Consumer.ack(c, skipped) is False
    assert skipped.acked and c._acked[TP] == []  # done with, but no commit past it
    handled = message(295, tracked=True)
    assert Consumer.ack(c, handled) is True
    assert c._acked[TP] == [295]
