"""The protocol toolkit: the one import surface for protocol authors.

A protocol package imports netsim only from here (``tests/test_house.py`` checks it for
``protocols/``); an audit that runs whole trials may also use :mod:`netsim.experiment.testing`::

    from netsim.comm import Protocol, register_protocol, Flooding, Transport, params as P

What a protocol is built from:

- :class:`Protocol`, :class:`Ticking` (:mod:`~netsim.comm.protocol`): the base classes, and
  :func:`register_protocol` to make one available as ``[protocol] name``;
- the :class:`Simulation` a protocol receives, its :class:`Message`, the scenario module
  (:mod:`~netsim.engine.scenario`), the key declarations (:mod:`params <netsim.engine.params>`),
  faults (:mod:`faults <netsim.engine.faults>`), :func:`trial_sequence`, the draw helpers
  :class:`GroupedDraws`, :class:`SharedDraws` and :func:`standard_normal` (compiled, NumPy's values) and the errors
  :class:`InputError`, :class:`ProtocolError`, all from the engine;
- LOCAL flooding (:class:`Flooding`, :mod:`~netsim.comm.flooding`, :mod:`~netsim.comm.hops`,
  :mod:`~netsim.comm.heard`), the reliable transport (:class:`Transport`, :class:`RetransmitTimer`,
  :mod:`~netsim.comm.transport`), atomic exchanges (:class:`Exchanges`), the incarnation handshake
  (:class:`Handshake`), sequence numbers and replay windows (:class:`Sequencer`,
  :class:`ReplayWindow`), the corruptor (:class:`Lie`, :func:`rewriting`) and gossip clocks
  (:func:`uniform_edge_clock`, :func:`poisson_edge_clocks`);
- :data:`audit_targets`, the table of privacy-audit targets.

The modules themselves keep their paths (``netsim.comm.transport`` and so on) for the docs and the
tests; the old flat paths (``netsim.transport``, ``netsim.registry``, ...) are gone.
"""

from netsim.comm.corruption import Lie, rewriting
from netsim.comm.exchanges import Exchanges
from netsim.comm.flooding import Flooding
from netsim.comm.handshake import Handshake, bits, ids
from netsim.comm.protocol import Protocol, Ticking
from netsim.comm.sequencing import INCARNATION, ReplayWindow, Sequencer
from netsim.comm.transport import (
    TIMER_FIELDS,
    Fanin,
    Fanout,
    RetransmitTimer,
    Transport,
    can_lose,
    check_timer,
    timer_from,
)
from netsim.engine import faults, params, scenario
from netsim.engine.activation import poisson_edge_clocks, uniform_edge_clock
from netsim.engine.errors import InputError, ProtocolError
from netsim.engine.messages import Message
from netsim.engine.normals import standard_normal
from netsim.engine.registry import audit_targets, register_protocol
from netsim.engine.sim import Simulation
from netsim.engine.streams import GroupedDraws, SharedDraws, trial_sequence

__all__ = [
    "INCARNATION",
    "TIMER_FIELDS",
    "Exchanges",
    "Fanin",
    "Fanout",
    "Flooding",
    "GroupedDraws",
    "Handshake",
    "InputError",
    "Lie",
    "Message",
    "Protocol",
    "ProtocolError",
    "ReplayWindow",
    "RetransmitTimer",
    "Sequencer",
    "SharedDraws",
    "Simulation",
    "Ticking",
    "Transport",
    "audit_targets",
    "bits",
    "can_lose",
    "check_timer",
    "faults",
    "ids",
    "params",
    "poisson_edge_clocks",
    "register_protocol",
    "rewriting",
    "scenario",
    "standard_normal",
    "timer_from",
    "trial_sequence",
    "uniform_edge_clock",
]
