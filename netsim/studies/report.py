"""``report.html``: one self-contained page per study folder.

The page holds the study's title, source and notes, the scale it ran at and what that scale
changes, every figure (PNG embedded as a data URI, so the page needs no other file, with its
caption and the statistics used), the summary table, the study file and ``meta.json``. It has
no script and loads nothing from the network.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.studies.spec import Study
from netsim.studies.stats import CONFIDENCE

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
figure { margin: 1.5rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #444; }
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


def table_html(frame: pd.DataFrame) -> str:
    """A DataFrame as a plain HTML table (numbers right-aligned, 4 significant digits)."""
    head = "".join(f"<th>{_escape(c)}</th>" for c in frame.columns)
    body = []
    for _, row in frame.iterrows():
        cells = "".join(f'<td class="num">{_number(v)}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
                        else f"<td>{_escape(v)}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render(folder: Path, study: Study, meta: Mapping[str, Any], summary: pd.DataFrame) -> str:
    """The page of a study folder whose figures are in ``folder/figures``."""
    plan = meta.get("study", {})
    scale = study.scales.get(plan.get("scale", ""), None)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_escape(study.title or study.name)}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>{_escape(study.title or study.name)}</h1>"]
    facts = [("study", study.name), ("source", study.source), ("scale", plan.get("scale", "")),
             ("trials per variant and point", plan.get("trials", "")), ("units", meta.get("units", "")),
             ("run now / found in the store", f"{meta.get('units_run', '')} / {meta.get('units_reused', '')}"),
             ("executor", meta.get("executor", "")), ("started", meta.get("started", "")),
             ("finished", meta.get("finished", ""))]
    rows = "".join(f"<tr><th>{_escape(k)}</th><td>{_escape(v)}</td></tr>" for k, v in facts if v != "")
    parts.append(f"<table>{rows}</table>")
    if study.description:
        parts.append(_paragraphs(study.description))
    if scale is not None and scale.note:
        parts.append(f"<div class='note'><strong>Scale {_escape(scale.name)}:</strong> {_escape(scale.note)}</div>")
    if study.notes:
        parts.append("<h2>Paper and netsim</h2>" + _paragraphs(study.notes))
    parts.append("<h2>Figures</h2>")
    parts.append(f"<p>Each point or curve is a mean over trials with its {CONFIDENCE:.0%} Student-t confidence "
                 "interval (mean ± t(0.975, n − 1) s / √n); failed trials are left out and counted, and a trial "
                 "that ended before its algorithm finished is marked unfinished.</p>")
    for figure in study.figures:
        png = folder / "figures" / f"{figure.name}.png"
        if not png.is_file():
            continue
        data = base64.b64encode(png.read_bytes()).decode()
        caption = _escape(figure.caption) + " " if figure.caption else ""
        parts.append(f"<figure id='{_escape(figure.name)}'><img alt='{_escape(figure.name)}' "
                     f"src='data:image/png;base64,{data}'><figcaption>{caption}<code>figures/{_escape(figure.name)}"
                     ".svg</code>, data: <code>figures/" + _escape(figure.name) + ".csv</code></figcaption></figure>")
    parts.append("<h2>Summary</h2>" + table_html(summary))
    parts.append(f"<h2>Study file</h2><pre>{_escape(study.text)}</pre>")
    parts.append(f"<h2>meta.json</h2><pre>{_escape(json.dumps(meta, indent=2))}</pre>")
    parts.append("</body></html>\n")
    return "".join(parts)
