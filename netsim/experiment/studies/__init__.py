"""Studies: several scenarios (variants) run side by side, a grid, scales, and the figures of a paper.

A study file (:mod:`.spec`) lists variants (a scenario plus overrides each; protocols and keys
may differ), an optional grid applied to every variant, two scales (``quick``: about a minute;
``paper``: the paper's own size where this machine allows) and figure specs. Running a study at
a scale (:func:`run`) validates every variant at every grid point and every figure first
(:mod:`.plan`), then runs the missing units through the sweep store (``OUT/units``: resumable,
any executor), and builds one tidy table (:mod:`.tables`). Saving the results
(:meth:`netsim.Results.save`) writes the tables, ``meta.json``, the figures (:mod:`.figures`:
PNG, SVG and the plotted data as CSV) and ``report.html`` (:mod:`.report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netsim.engine.errors import InputError
from netsim.experiment.studies.plan import StudyPlan, StudyPoint, StudyUnit, plan
from netsim.experiment.studies.spec import (
    DEFAULT_STUDY,
    KINDS,
    SCALES,
    Figure,
    Scale,
    Study,
    Variant,
    bundled,
    load,
    parse,
)
from netsim.experiment.studies.tables import HEADLINE

__all__ = ["DEFAULT_STUDY", "KINDS", "SCALES", "Figure", "Scale", "Study", "StudyPlan", "StudyPoint", "StudyUnit",
           "Variant", "bundled", "draw_folder", "load", "metrics", "parse", "plan", "set_options",
           "study_from_meta"]


def set_options(texts: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as a mapping of dotted keys to values (read as ``netsim run`` reads them)."""
    from netsim.engine.scenario import parse_override

    return {".".join(keys): value for keys, value in map(parse_override, texts)}


def metrics(study: Study) -> list[str]:
    """The summary's metrics: every figure's metrics, then the communication columns (and the group
    regret when no figure plots a metric)."""
    out: list[str] = []
    for figure in study.figures:
        for metric in (*figure.metrics, figure.x if figure.kind == "tradeoff" else ""):
            if metric and metric not in out:
                out.append(metric)
    for metric in HEADLINE:
        if metric not in out and (metric != "group_regret" or not out):
            out.append(metric)
    return out


def study_from_meta(meta: dict[str, Any]) -> Study:
    """The study a folder was run from, as it was then (``meta.json`` keeps the file's text)."""
    from netsim.engine.files import parse_toml
    from netsim.experiment.studies.spec import parse

    text = meta["study_text"]
    return parse(parse_toml(text, source="meta.json's study_text"), path=Path(meta["study"]["file"]), text=text)


def draw_folder(folder: Path, results: Any) -> list[Path]:
    """Draw the figures and ``report.html`` of a study's results into ``folder``."""
    from netsim.engine import files
    from netsim.experiment.studies import report
    from netsim.experiment.studies.figures import figure_data, not_separated, write_figures
    from netsim.experiment.studies.interactive import spec
    from netsim.experiment.studies.tables import report_table

    try:
        study = study_from_meta(results.meta)
    except InputError as exc:  # an edited meta.json is refused as the study file would be
        raise InputError(f"its study_text: {exc.detail}", source=str(folder / "meta.json"), key=exc.key) from None
    tables = results.tables()
    plan = results.meta["study"]
    written = write_figures(folder, study, tables, int(plan["trials"]), plan.get("scale", ""))
    interactive = {}
    for figure in study.figures:
        data = figure_data(figure, tables)
        interactive[figure.name] = (spec(figure, data, study), not_separated(figure, data))
    page = report.render(folder, study, results.meta, report_table(results.summary()), interactive)
    return [*written, files.write(folder, "report.html", page.encode())]
