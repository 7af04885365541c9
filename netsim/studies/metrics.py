"""What a study's figures may plot, checked before anything runs.

A figure's metric must be produced by at least one of the variants it draws:

* ``series`` figures plot a time-series column (:data:`netsim.results.SERIES_COLUMNS`);
* the other kinds plot a trials column: a numeric engine column
  (:data:`netsim.results.TRIAL_COLUMNS`), a fault counter (``dropped_crashed`` ...) when the
  scenario has faults, or a column the variant's protocol declares in ``Protocol.columns``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from netsim import faults as F
from netsim.errors import InputError
from netsim.registry import protocols
from netsim.results import SERIES_COLUMNS, TRIAL_COLUMNS

if TYPE_CHECKING:
    from netsim.scenario import Scenario
    from netsim.studies.plan import StudyPlan

#: numeric engine columns of ``trials.csv``
ENGINE = tuple(c for c in TRIAL_COLUMNS if c not in ("scenario", "protocol", "status", "failure", "trial", "seed"))
SERIES = tuple(c for c in SERIES_COLUMNS if c not in ("trial", "time"))


def produced(scenario: Scenario) -> set[str]:
    """The numeric trials columns a run of ``scenario`` writes."""
    columns = set(ENGINE) | set(protocols.get(scenario.protocol["name"], key="protocol.name").columns)
    if F.kinds(scenario.faults):
        columns |= set(F.EXTRAS)
    return columns


def check_figures(plan: StudyPlan) -> None:
    """Refuse a figure whose metric no drawn variant produces (one line: file, figure, key)."""
    study = plan.study
    for figure in study.figures:
        drawn = [p for p in plan.points if not figure.variants or p.variant in figure.variants]
        metrics = list(figure.metrics) + ([figure.x] if figure.kind == "tradeoff" else [])
        for metric in metrics:
            if figure.kind == "series":
                ok, accepted = metric in SERIES, ", ".join(SERIES)
            else:
                ok = any(metric in produced(p.scenario) for p in drawn)
                accepted = ", ".join(sorted(set().union(*(produced(p.scenario) for p in drawn))))
            if not ok:
                variants = ", ".join(dict.fromkeys(p.variant for p in drawn))
                raise InputError(f"figure {figure.name!r}: metric {metric!r} is produced by none of its variants "
                                 f"({variants}); accepted: {accepted}", source=study.path)
