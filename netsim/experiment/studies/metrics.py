"""What a study's figures may plot, checked before anything runs.

A figure's metric must be produced by at least one of the variants it draws:

* ``series`` figures plot a time-series column (:data:`netsim.experiment.results.SERIES_COLUMNS`);
* the other kinds plot a trials column: a numeric engine column
  (:data:`netsim.experiment.results.TRIAL_COLUMNS`), a fault counter (``dropped_crashed`` ...) when the
  scenario has faults, or a column the variant's protocol declares in ``Protocol.columns``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netsim.engine import faults as F
from netsim.engine.registry import protocols
from netsim.experiment.results import SERIES_COLUMNS, TRIAL_COLUMNS

if TYPE_CHECKING:
    from netsim.engine.scenario import Scenario

#: numeric engine columns of ``trials.csv``
ENGINE = tuple(c for c in TRIAL_COLUMNS if c not in ("scenario", "protocol", "status", "failure", "trial", "seed"))
SERIES = tuple(c for c in SERIES_COLUMNS if c not in ("trial", "time"))


def produced(scenario: Scenario) -> set[str]:
    """The numeric trials columns a run of ``scenario`` writes."""
    columns = set(ENGINE) | set(protocols.get(scenario.protocol["name"], key="protocol.name").columns)
    if F.kinds(scenario.faults):
        columns |= set(F.EXTRAS)
    return columns
