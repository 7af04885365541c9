"""What travels on the network: messages, multicast records, queue entries, and the adversary's rules.

An entry of the delivery queue of :class:`netsim.engine.network.Network` (:mod:`netsim.engine.delivery`) is a
tuple ``(due, sequence, kind, src, dst, payload, sent_at, due, size, count)`` (so that ``entry[2:9]``
are the fields of its :class:`Message`): ``dst`` is an int for
one message, a list of ints for a multicast of one payload (constant-delay ``send_many`` /
``broadcast``), a :class:`Multicast` for a ``broadcast_chunks`` flush, or a ``_GatherRecord`` (a
:class:`Multicast` whose messages carry one payload object each) for a constant-delay ``send_each`` of
many senders to one node; ``count`` is the number of messages it carries. The helpers below turn entries
into what each kind of reader receives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from netsim.engine.distributions import Distribution


class Message(NamedTuple):
    """One message in flight. ``due_at - sent_at`` is the sampled link delay.

    ``kind`` names the message type (handlers subscribe to it); ``src`` and ``dst`` are node ids;
    ``payload`` is whatever the sender passed (never copied: a receiver must not change it);
    ``sent_at`` and ``due_at`` are simulated times; ``size`` is the number of records it
    carries (``records`` in the counters, one by default).
    """

    kind: str
    src: int
    dst: int
    payload: object  # ``object`` rather than ``Any``: the generated __new__ cannot resolve the name ``Any``
    sent_at: float
    due_at: float
    size: int = 1


# functional syntax on purpose: the fields get real (not string) annotations, which documentation
# tools can resolve (the module uses postponed annotations)
_MulticastFields = NamedTuple("_MulticastFields", [  # noqa: UP014
    ("kind", str), ("src", np.ndarray), ("dst", np.ndarray), ("start", np.ndarray), ("stop", np.ndarray),
    ("payload", Any), ("sent_at", float), ("due_at", float)])


class Multicast(_MulticastFields):
    """Several messages of one kind sent at one instant and delivered at one instant, as arrays.

    Message ``i`` goes from ``src[i]`` to ``dst[i]`` and carries the rows
    ``payload[start[i]:stop[i]]`` (``size = stop - start``). What :meth:`Network.subscribe_records`
    handlers receive; one engine entry per sender and flush (or per whole flush). Fields:
    ``kind, src, dst, start, stop, payload, sent_at, due_at``. ``due_at`` is one time, or, in the
    records a deferred reader collects (``Network.collect``), an array of one due time per message
    (sorted, ties in send order).
    """

    __slots__ = ()

    #: whether every message carries the whole ``payload`` object (a multicast of one payload), not rows of it
    same_payload = False

    def messages(self) -> list[Message]:
        """The same messages one by one (payloads are row slices: views, not copies)."""
        payload, kind, sent, due = self.payload, self.kind, self.sent_at, self.due_at
        dues = due.tolist() if isinstance(due, np.ndarray) else [due] * len(self.dst)
        return [_new(Message, (kind, s, d, payload[a:b], sent, t, b - a)) for s, d, a, b, t in
                zip(self.src.tolist(), self.dst.tolist(), self.start.tolist(), self.stop.tolist(), dues, strict=True)]

    def payloads(self) -> list[Any]:
        """The payload of each message, in order (what :meth:`messages` carry), without a Message each."""
        payload = self.payload
        return [payload[a:b] for a, b in zip(self.start.tolist(), self.stop.tolist(), strict=True)]


_new = tuple.__new__  # builds a Message from a 7-tuple without the NamedTuple __new__ frame

Handler = Callable[[Message], None]
BatchHandler = Callable[[list[Message]], None]
RecordHandler = Callable[[list[Multicast]], None]


class Corruptor:
    """Protocol-supplied rule that rewrites a payload of one kind the way a liar would.

    ``__call__(payload, sender=, rng=, probability=, q=, relay=)`` returns
    ``(new_payload, records_corrupted)``; each record is corrupted independently with
    ``probability`` by replacing its reported value with a draw of ``q``. Records that
    ``sender`` only relays are left alone unless ``relay`` is true.

    The engine calls it once per send for a byzantine sender (every destination of that send
    gets the same corrupted copy: corruption at the source) and once per link for in-transit
    link corruption. A rule may also offer ``chunks(payload, starts, stops, senders, *, rng,
    probability, q, relay)``: the source corruption of many sender chunks of one array at once,
    rewriting ``payload`` in place and returning the records corrupted per chunk, with exactly the
    draws of one call per chunk in order (``broadcast_chunks`` uses it).
    """

    def __call__(self, payload: Any, *, sender: int, rng: np.random.Generator, probability: float,
                 q: Distribution, relay: bool) -> tuple[Any, int]:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Adversary:
    """Byzantine nodes (corrupt at the source) and in-transit link corruption."""

    byzantine: frozenset[int]
    probability: float
    q: Distribution
    relay: bool
    link_probability: float


class _FanoutRecord(Multicast):
    """One payload object sent from one node to several: every message carries the whole payload."""

    __slots__ = ()
    same_payload = True

    def messages(self) -> list[Message]:
        payload, kind, sent, due, size = self.payload, self.kind, self.sent_at, self.due_at, int(self.stop[0])
        src = int(self.src[0])
        return [_new(Message, (kind, src, d, payload, sent, due, size)) for d in self.dst.tolist()]

    def payloads(self) -> list[Any]:
        return [self.payload] * len(self.dst)


class _GatherRecord(Multicast):
    """Payload objects of several senders to one node (``Network.send_each``), as one record.

    ``payload`` is the list of the payload objects of the send; message ``i`` goes from ``src[i]`` to
    ``dst[i]`` (every ``dst[i]`` the one receiver) and carries the object ``payload[start[i]]`` (not rows of
    it), counting ``stop[i] - start[i]`` records (the send's ``size``). ``start`` indexes ``payload`` in
    increasing order (a record whose crashed receivers were removed keeps the payload list whole).
    """

    __slots__ = ()

    def messages(self) -> list[Message]:
        payload, kind, sent, due = self.payload, self.kind, self.sent_at, self.due_at
        return [_new(Message, (kind, s, d, payload[a], sent, due, b - a)) for s, d, a, b in
                zip(self.src.tolist(), self.dst.tolist(), self.start.tolist(), self.stop.tolist(), strict=True)]

    def payloads(self) -> list[Any]:
        """The payload object of each message, in order (the send's list itself when the record is whole)."""
        if len(self.start) == len(self.payload):
            return self.payload
        payload = self.payload
        return [payload[a] for a in self.start.tolist()]


def _gather(kind: str, srcs: Any, dst: int, payloads: list[Any], size: int, sent: float, due: float) -> _GatherRecord:
    """The record of ``payloads[j]`` from ``srcs[j]`` to ``dst`` for every j, each counting ``size`` records."""
    count = len(payloads)
    start = np.arange(count, dtype=np.int64)
    return tuple.__new__(_GatherRecord, (kind, np.array(srcs, dtype=np.int64), np.full(count, dst, dtype=np.int64),
                                        start, start + size, payloads, sent, due))


def _fanout(entry: tuple) -> Multicast:
    """A multicast entry (one payload, destinations in a list) as a :class:`Multicast`."""
    dst = np.array(entry[4], dtype=np.int64)
    n = len(dst)
    return tuple.__new__(_FanoutRecord, (entry[2], np.full(n, entry[3], dtype=np.int64), dst, np.zeros(n, np.int64),
                                         np.full(n, entry[8], dtype=np.int64), entry[5], entry[6], entry[0]))


def _subset(record: Multicast, mask: np.ndarray) -> Multicast:
    return tuple.__new__(type(record), (record.kind, record.src[mask], record.dst[mask], record.start[mask],
                                        record.stop[mask], record.payload, record.sent_at, record.due_at))


def _messages(entry: tuple) -> list[Message]:
    """Every message of an entry, one by one."""
    dst = entry[4]
    if type(dst) is list:
        kind, src, payload, sent, due, size = entry[2], entry[3], entry[5], entry[6], entry[0], entry[8]
        return [_new(Message, (kind, src, d, payload, sent, due, size)) for d in dst]
    if isinstance(dst, tuple):
        return dst.messages()
    return [_new(Message, entry[2:9])]


def _record(entry: tuple) -> Multicast | Message:
    """What a record reader gets for an entry: the :class:`Multicast` itself, or the single Message.

    A multicast of an array payload (``size`` rows, one per record) becomes a :class:`Multicast`
    whose messages all carry rows ``0:size``; any other multicast payload is handed as Messages.
    """
    dst = entry[4]
    if isinstance(dst, tuple):
        return dst
    if type(dst) is list:
        payload = entry[5]
        if isinstance(payload, np.ndarray) and len(payload) == entry[8]:
            dst = np.array(dst, dtype=np.int64)
            n = len(dst)
            return Multicast(entry[2], np.full(n, entry[3], dtype=np.int64), dst, np.zeros(n, np.int64),
                             np.full(n, entry[8], dtype=np.int64), payload, entry[6], entry[0])
        return _fanout(entry)
    return _new(Message, entry[2:9])


class _Columns(NamedTuple):
    """Single messages as arrays, one per field: what the delivery queue's *run* holds (sorted by
    ``(due, seq)``) and what a ``broadcast_each`` call with sampled delays queues (in send order).

    ``kind`` holds codes into the network's list of kind names; ``payload`` is an object array of the
    very objects sent. Only messages whose times are floats and whose nodes and size are ints are held
    this way (the arrays give the same objects back); the network queues others as entries.
    """

    due: np.ndarray
    seq: np.ndarray
    kind: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    payload: np.ndarray
    sent: np.ndarray
    size: np.ndarray

    def messages(self, start: int, stop: int, names: list[str], kind: str | None = None) -> tuple[Iterator[Message],
                                                                                                 Iterator[int]]:
        """Messages ``start:stop``, each built in C when taken (the arrays as lists, zipped: one Message alive
        at a time, so no garbage collection is triggered), and the iterator of their sources: those not
        taken yet are its ``length_hint``. ``kind``: theirs, if they share one."""
        kinds = repeat(kind) if kind is not None else map(names.__getitem__, self.kind[start:stop].tolist())
        sources = iter(self.src[start:stop].tolist())
        return map(_new, repeat(Message), zip(kinds, sources, self.dst[start:stop].tolist(),
                                              self.payload[start:stop].tolist(), self.sent[start:stop].tolist(),
                                              self.due[start:stop].tolist(), self.size[start:stop].tolist())), sources

    def entries(self, start: int, stop: int, names: list[str]) -> list[tuple]:
        """Queue entries (``(due, seq, *fields, 1)``, module docstring) of messages ``start:stop``."""
        due = self.due[start:stop].tolist()
        return list(zip(due, self.seq[start:stop].tolist(), map(names.__getitem__, self.kind[start:stop].tolist()),
                        self.src[start:stop].tolist(), self.dst[start:stop].tolist(), self.payload[start:stop].tolist(),
                        self.sent[start:stop].tolist(), due, self.size[start:stop].tolist(), repeat(1)))

    def take(self, order: np.ndarray) -> _Columns:
        return _Columns(*(column[order] for column in self))


def _columnar(entry: tuple) -> bool:
    """Whether a single-message entry can be held as :class:`_Columns` (float times, int nodes and size)."""
    return type(entry[0]) is float and type(entry[6]) is float and type(entry[3]) is int and \
        type(entry[4]) is int and type(entry[8]) is int


def _objects(values: Sequence[Any]) -> np.ndarray:
    """``values`` as a 1-d object array (a tuple or list value stays one element)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _columns(entries: list[tuple], code: Callable[[str], int]) -> _Columns:
    """Single-message entries (:func:`_columnar`) as :class:`_Columns`, in their order; ``code``: a kind's code."""
    due, seq, kind, src, dst, payload, sent, _, size, _ = zip(*entries, strict=True)
    kinds = set(kind)
    codes = np.full(len(kind), code(kind[0])) if len(kinds) == 1 else np.array(list(map(code, kind)), dtype=np.int64)
    return _Columns(np.array(due, dtype=np.float64), np.array(seq, dtype=np.int64), codes,
                   np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), _objects(payload),
                   np.array(sent, dtype=np.float64), np.array(size, dtype=np.int64))


def _concat(parts: list[_Columns]) -> _Columns:
    return parts[0] if len(parts) == 1 else _Columns(*map(np.concatenate, zip(*parts, strict=True)))


_NO_COLUMNS = _Columns(np.empty(0), *(np.empty(0, np.int64) for _ in range(4)), np.empty(0, object), np.empty(0),
                     np.empty(0, np.int64))


def _entry(message: Message) -> tuple:
    return (message.due_at, 0, *message, 1)


def _first_dst(entry: tuple) -> int:
    dst = entry[4]
    if isinstance(dst, tuple):
        return int(dst.dst[0])
    if type(dst) is list:
        return dst[0]
    return dst
