"""netsim: a discrete-event network simulator for multi-agent bandit algorithms.

The Python API (the ``netsim`` command line is a thin layer over it):

```python
import netsim

results = netsim.run("quickstart", trials=4, set={"network.agents": 20})
results.trials.groupby("protocol")["group_regret"].mean()
grid = netsim.sweep("quickstart", {"network.topology": ["ring", "complete"]})
grid.plot(by="network.topology")
grid.save("results/topology")
```

- :func:`run`, :func:`sweep`, :func:`study`: run a scenario, a grid of overrides, or a study
  (variants side by side and a paper's figures); all return :class:`Results` (``trials``,
  ``agents``, ``timeseries`` DataFrames, ``plot``, ``save``, ``load``);
- :class:`Scenario`: ``Scenario.load(name_or_path)`` and ``.with_(**dotted_overrides)``;
- :func:`load_plugin`: register the protocols of a ``.py`` file (``--plugin`` on the command line);
- :mod:`netsim.experiment.testing`: a one-call trial runner and a message spy for protocol authors;
- :class:`InputError` (bad input, one clear line) and :class:`ProtocolError` (a protocol misusing
  the engine).

Importing ``netsim`` is cheap: these names load their modules (and pandas, matplotlib, the
protocols) the first time they are used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from netsim.engine import __version__

# public name -> module defining it, imported on first use (PEP 562)
_LAZY = {
    "run": "netsim.experiment.api",
    "sweep": "netsim.experiment.api",
    "study": "netsim.experiment.api",
    "Results": "netsim.experiment.resultset",
    "Scenario": "netsim.engine.scenario",
    "load_plugin": "netsim.engine.registry",
    "InputError": "netsim.engine.errors",
    "ProtocolError": "netsim.engine.errors",
}
__all__ = ["InputError", "ProtocolError", "Results", "Scenario", "__version__", "load_plugin", "run", "study",
           "sweep"]

if TYPE_CHECKING:
    from netsim.engine.errors import InputError, ProtocolError
    from netsim.engine.registry import load_plugin
    from netsim.engine.scenario import Scenario
    from netsim.experiment.api import run, study, sweep
    from netsim.experiment.resultset import Results


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'netsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
