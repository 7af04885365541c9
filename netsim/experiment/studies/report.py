"""``report.html``: one self-contained, interactive page per study folder.

In reading order: what ran (study, scale, trials per point, units), then **this run's numbers**:
every figure drawn with Plotly (:mod:`.interactive`: hover a point for its mean, 95 % interval and
n; click a legend entry to hide that curve; drag to zoom, double-click to reset), with its caption,
what it cannot separate and links to its PNG, SVG and CSV; the summary table; the parameters that
differ between the variants; then **the paper's context** (the study's description, the scale's
note and the notes comparing netsim with the paper), the data files and the study file.

The page needs no other file and no network: Plotly's JavaScript is embedded once. The figures'
PNG and SVG stay beside it, for papers. No absolute path of the machine that ran the study
appears (a file is named relative to the folder, a scenario's data file by its name).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.experiment.studies.spec import Study
from netsim.experiment.studies.stats import CONFIDENCE

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 80rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
figure { margin: 1.5rem 0; } .plot { width: 100%; min-height: 400px; }
figcaption { font-size: 0.9rem; color: #444; } .apart { color: #8a4b00; }
table { border-collapse: collapse; font-size: 0.85rem; } td, th { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; }
.note { background: #fffbe6; border-left: 4px solid #e6c200; padding: 0.5rem 1rem; }
"""


def _escape(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _paragraphs(text: str) -> str:
    return "".join(f"<p>{_escape(part.strip())}</p>" for part in text.split("\n\n") if part.strip())


def number(value: float) -> str:
    """A number for a table: thousands separated, 4 significant digits below 10,000, no exponent above."""
    if pd.isna(value):
        return ""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:,.4g}"


def _number(value: Any) -> str:
    return number(value) if isinstance(value, float) else _escape(value)


def table_html(frame: pd.DataFrame, headers: Mapping[str, str] | None = None) -> str:
    """A DataFrame as a plain HTML table (numbers right-aligned, 4 significant digits; ``headers``:
    what each column's header shows, its name when absent)."""
    headers = headers or {}
    head = "".join(f"<th>{_escape(headers.get(c, c))}</th>" for c in frame.columns)
    body = []
    for _, row in frame.iterrows():
        cells = "".join(f'<td class="num">{_number(v)}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
                        else f"<td>{_escape(v)}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _headers(columns: list[str]) -> dict[str, str]:
    """Table headers: each metric and parameter by its label and unit (``x ±``: the interval's half-width)."""
    from netsim.experiment.catalog import title

    out = {}
    for column in columns:
        base, _, tail = column.partition(" ")
        if column in ("variant", "protocol", "trials", "unfinished", "failed"):
            continue
        out[column] = f"{title(base)} {tail}".strip() if tail in ("±", "n") else title(column)
    return out


def _shown(value: Any) -> Any:
    """A parameter value as the page shows it: a file by its name only (no path of this machine)."""
    if isinstance(value, str) and ("/" in value or "\\" in value):
        return Path(value).name
    return value


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted not in ("network.delay", "network.server_delay",
                                                         "adversary.distribution", "faults.reorder_delay"):
            out.update(_flat(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def variant_parameters(meta: Mapping[str, Any]) -> pd.DataFrame:
    """Per variant: the scenario keys whose values differ between the variants (or its grid points),
    from the resolved scenarios in ``meta.json`` (empty for a folder written before they were kept)."""
    from netsim.experiment.catalog import toml_value

    skip = {"name", "description", "source", "scaled", "run.trials", "run.seed"}
    rows: dict[str, dict[str, set]] = {}
    for point in meta.get("points", []):
        resolved = point.get("resolved")
        if not resolved:
            return pd.DataFrame()
        values = rows.setdefault(point["variant"], {})
        for key, value in _flat(resolved).items():
            if key not in skip:
                values.setdefault(key, set()).add(toml_value(_shown(value)))
    keys = sorted({k for v in rows.values() for k in v})
    differ = [k for k in keys if len({frozenset(v.get(k, {"(absent)"})) for v in rows.values()}) > 1
              or any(len(v.get(k, ())) > 1 for v in rows.values())]
    return pd.DataFrame([{"variant": name, **{k: " / ".join(sorted(v.get(k, {"(absent)"}))) for k in differ}}
                         for name, v in rows.items()])


def render(folder: Path, study: Study, meta: Mapping[str, Any], summary: pd.DataFrame,
           figures: Mapping[str, tuple[dict[str, Any], str]] | None = None) -> str:
    """The page of a study folder whose figures are in ``folder/figures``; ``figures``: per figure
    name, its Plotly spec (:func:`netsim.experiment.studies.interactive.spec`) and what it cannot separate."""
    from netsim.experiment.catalog import title as label
    from netsim.experiment.studies.interactive import plotly_js, script

    figures = figures or {}
    plan = meta.get("study", {})
    scale = study.scales.get(plan.get("scale", ""), None)
    name = _escape(study.title or study.name)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{name}</title>"
             f"<style>{STYLE}</style><script>{plotly_js()}</script></head><body><h1>{name}</h1>"]
    facts = [("study", f"{study.name} ({Path(plan.get('file', study.path)).name})"),
             ("scale", plan.get("scale", "")), ("trials per variant and point", plan.get("trials", "")),
             ("units", meta.get("units", "")),
             ("run now / found in the store", f"{meta.get('units_run', '')} / {meta.get('units_reused', '')}"),
             ("executor", meta.get("executor", "")), ("finished", meta.get("finished", ""))]
    rows = "".join(f"<tr><th>{_escape(k)}</th><td>{_escape(v)}</td></tr>" for k, v in facts if v != "")
    parts.append(f"<table>{rows}</table>")
    parts.append("<h2>This run</h2>")
    parts.append(f"<p>Each point or curve is a mean over trials with its {CONFIDENCE:.0%} Student-t confidence "
                 "interval (mean ± t(0.975, n − 1) s / √n); failed trials are left out and counted, a trial that "
                 "ended before its algorithm finished is marked unfinished. Hover a point for its mean, interval and "
                 "n; click a legend entry to hide a curve; drag to zoom, double-click to reset. A hollow marker's "
                 "interval overlaps another curve's at the same x: the run does not separate them.</p>")
    for figure in study.figures:
        if not (folder / "figures" / f"{figure.name}.png").is_file():
            continue
        element = f"plot-{figure.name}"
        plotly, apart = figures.get(figure.name, (None, ""))
        body = (f"<div class='plot' id='{_escape(element)}'></div><script>{script(element, plotly)}</script>"
                if plotly is not None else
                f"<img alt='{_escape(figure.name)}' src='figures/{_escape(figure.name)}.png'>")
        links = " · ".join(f"<a href='figures/{_escape(figure.name)}.{ext}'>{ext.upper()}</a>"
                           for ext in ("svg", "png", "csv"))
        note = figure.notes.get(plan.get("scale", ""), "")
        caption = "".join([_escape(figure.caption) + " " if figure.caption else "",
                           f"<span class='apart'>{_escape(apart)}.</span> " if apart else "",
                           f"<em>{_escape(plan.get('scale', ''))} scale: {_escape(note)}</em> " if note else "",
                           f"Files: {links}."])
        parts.append(f"<figure id='{_escape(figure.name)}'><h3>{_escape(figure.title or figure.name)}</h3>{body}"
                     f"<figcaption>{caption}</figcaption></figure>")
    parts.append("<h2>Summary</h2>" + table_html(summary, _headers(list(summary.columns))))
    params = variant_parameters(meta)
    if len(params.columns) > 1:
        oracles = set(sum((f.oracles for f in study.figures), ()))
        params.insert(1, "oracle", ["yes" if v in oracles else "" for v in params["variant"]])
        parts.append("<h2>What differs between the variants</h2><p>The scenario keys whose values differ between "
                     "the variants (or between a variant's grid points); every other key is the same for all "
                     "(<code>netsim show SCENARIO</code> prints them).</p>"
                     + table_html(params, {c: f"{label(c)} [{c}]" for c in params.columns[2:]}))
    parts.append("<h2>The paper and netsim</h2>")
    if study.source:
        parts.append(f"<p><strong>Source:</strong> {_escape(study.source)}</p>")
    if study.description:
        parts.append(_paragraphs(study.description))
    if scale is not None and scale.note:
        parts.append(f"<div class='note'><strong>Scale {_escape(scale.name)}:</strong> {_escape(scale.note)}</div>")
    if study.notes:
        parts.append(_paragraphs(study.notes))
    files = ["study.csv", "study_agents.csv", "study_timeseries.csv", "meta.json"]
    parts.append("<h2>Files</h2><p>" + " · ".join(f"<a href='{f}'>{f}</a>" for f in files if (folder / f).is_file())
                 + "</p><details><summary>Study file</summary><pre>" + _escape(study.text) + "</pre></details>")
    parts.append("</body></html>\n")
    return "".join(parts)
