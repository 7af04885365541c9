"""netsim: a discrete-event network simulator for multi-agent bandit algorithms."""

__version__ = "0.1.0"
