"""The engine: what one trial runs on, and knows nothing about any algorithm or any experiment.

The clock and the event loop (:mod:`~netsim.engine.sim`), the network and its message path
(:mod:`~netsim.engine.network`, :mod:`~netsim.engine.delivery`, :mod:`~netsim.engine.messages`,
:mod:`~netsim.engine.held`, :mod:`~netsim.engine.chunks`), delay and loss laws
(:mod:`~netsim.engine.distributions`), faults (:mod:`~netsim.engine.faults`), graphs
(:mod:`~netsim.engine.topology`), agent clocks (:mod:`~netsim.engine.activation`), random streams
(:mod:`~netsim.engine.streams`), metrics (:mod:`~netsim.engine.metrics`), and the scenario a trial is
built from (:mod:`~netsim.engine.scenario`, :mod:`~netsim.engine.budget`) with the pieces every room
shares: keys and their checks (:mod:`~netsim.engine.params`), input files (:mod:`~netsim.engine.files`),
errors (:mod:`~netsim.engine.errors`) and the plug-in tables (:mod:`~netsim.engine.registry`).

The engine imports neither :mod:`netsim.comm` nor :mod:`netsim.experiment`; the bandit environments
(:mod:`netsim.bandits`) stand beside it (``tests/test_house.py`` checks both).
"""

__version__ = "0.1.0"
