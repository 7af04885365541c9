"""netsim.comm.sequencing against a plain reference model: a set of every number seen per pair."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.comm.sequencing import INCARNATION, WINDOW, ReplayWindow, Sequencer


def reference_accept(seen: set[int], seq: int) -> bool:
    """First copy, unless more than WINDOW - 1 below the highest number seen (stale)."""
    if seen and seq <= max(seen) - WINDOW:
        return False
    if seq in seen:
        return False
    seen.add(seq)
    return True


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 200)), max_size=300))
def test_accept_matches_the_reference(arrivals):
    window = ReplayWindow()
    seen: dict[tuple[int, int], set[int]] = {}
    for receiver, sender, seq in arrivals:
        expected = reference_accept(seen.setdefault((receiver, sender), set()), seq)
        assert window.accept(receiver, sender, seq) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 100), max_size=200))
def test_newest_accepts_only_increasing_numbers(arrivals):
    window = ReplayWindow()
    high = -1
    for seq in arrivals:
        assert window.newest(0, 1, seq) == (seq > high)
        high = max(high, seq)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 150)), max_size=200))
def test_newest_and_accept_share_one_window(calls):
    """newest (its newer-than-seen branch inline) leaves the window as accept would: mixed calls on one window
    against the reference set of numbers seen, newest accepting exactly the numbers above all seen."""
    window = ReplayWindow()
    seen: set[int] = set()
    for newest, seq in calls:
        if newest:
            fresh = not seen or seq > max(seen)
            assert window.newest(0, 1, seq) == fresh
            if fresh:
                seen.add(seq)
        else:
            assert window.accept(0, 1, seq) == reference_accept(seen, seq)


def test_duplicates_and_reordering_within_the_window():
    window = ReplayWindow()
    assert [window.accept(0, 1, s) for s in (5, 3, 5, 4, 3, 70, 7)] == [True, True, False, True, False, True, True]
    assert not window.accept(0, 1, 6)         # 70 - 6 >= 64: stale, treated as seen
    assert window.accept(1, 1, 5)             # another receiver has its own window


def test_sequencer_numbers_and_incarnations():
    seq = Sequencer()
    assert [seq.next(3) for _ in range(3)] == [0, 1, 2]
    assert seq.next(4) == 0
    seq.restart(3)
    first = seq.next(3)
    assert first == INCARNATION
    window = ReplayWindow()
    assert window.accept(0, 3, 2)
    assert window.accept(0, 3, first)         # the new incarnation is news, not a duplicate
    seq.restart(3)
    assert seq.next(3) == 2 * INCARNATION


def test_forget_clears_one_receiver_only():
    window = ReplayWindow()
    window.accept(0, 1, 7)
    window.accept(2, 1, 7)
    window.forget(0)
    assert window.accept(0, 1, 7)
    assert not window.accept(2, 1, 7)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2),
                          st.lists(st.tuples(st.integers(0, 3), st.integers(0, 150)), max_size=6)), max_size=60))
def test_accept_each_and_newest_each_match_the_reference(calls):
    """accept_each (many senders to one receiver, a sender possibly named twice) and newest_each (one sender to
    many receivers) mixed on one window, against the reference set of numbers seen per pair: accept_each answers
    reference_accept message after message, newest_each accepts exactly the numbers above all seen."""
    window = ReplayWindow()
    seen: dict[tuple[int, int], set[int]] = {}
    for gather, node, messages in calls:
        if gather:  # messages: (sender, seq) to receiver ``node``
            expected = [reference_accept(seen.setdefault((node, sender), set()), seq) for sender, seq in messages]
            assert window.accept_each(node, [m[0] for m in messages], [m[1] for m in messages]) == expected
        elif messages:  # one number from sender ``node`` to the receivers named in messages
            seq = messages[0][1]
            expected = []
            for receiver, _ in messages:
                pair = seen.setdefault((receiver, node), set())
                if not pair or seq > max(pair):
                    pair.add(seq)
                    expected.append(receiver)
            assert window.newest_each([m[0] for m in messages], node, seq) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 5), max_size=6), st.integers(0, 3), st.integers(0, 80)),
                max_size=60))
def test_newest_each_is_newest_in_turn(sends):
    """newest_each (one number to many receivers) against newest called receiver after receiver on a twin window,
    a receiver possibly named twice; both windows then answer alike."""
    each, plain = ReplayWindow(), ReplayWindow()
    for receivers, sender, seq in sends:
        assert each.newest_each(receivers, sender, seq) == [r for r in receivers if plain.newest(r, sender, seq)]
    for receiver in range(6):
        for sender in range(4):
            assert [each.accept(receiver, sender, s) for s in range(0, 90, 7)] == \
                [plain.accept(receiver, sender, s) for s in range(0, 90, 7)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), max_size=20), st.integers(0, 4))
def test_next_each_is_next_in_turn(batches, lost):
    each, plain = Sequencer(), Sequencer()
    each.restart(lost)
    plain.restart(lost)
    for senders in batches:
        assert each.next_each(senders) == [plain.next(s) for s in senders]
