"""What a study figure shows a reader: labels with units (never a raw dotted key), colours that stay
apart for colour-blind readers, legends that cover nothing, every trade-off point labelled, costs
that are true (central UCB pays its uploads and is drawn as an oracle), and what a figure cannot
separate.

The bundled studies' figures are drawn here from synthetic tables built from each study's plan
(every variant and grid point, two trials, random metric values): the drawing is what is checked,
not the simulation, so no study has to run.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from netsim.experiment import catalog, studies
from netsim.experiment.cli import main
from netsim.experiment.studies import figures as SF
from netsim.experiment.studies.tables import front

SVG = "{http://www.w3.org/2000/svg}"


def synthetic_tables(plan: studies.StudyPlan, trials: int = 2, seed: int = 0) -> dict[str, pd.DataFrame]:
    """The ``study`` and ``study_timeseries`` tables a run of ``plan`` would have, with random values."""
    rng = np.random.default_rng(seed)
    study = plan.study
    metrics = {m for f in study.figures for m in (*f.metrics, f.x if f.kind == "tradeoff" else "")} - {""}
    keys = study.parameters()
    rows, series = [], []
    for point in plan.points:
        lead = {"study": study.name, "variant": point.variant,
                **{k: (np.nan if point.params[k] is None else point.params[k]) for k in keys}, "point": point.index}
        for trial in range(trials):
            rows.append({**lead, "trial": trial, "status": "ok", **{m: float(rng.uniform(1, 100)) for m in metrics}})
            for time in (0.0, 5.0, 10.0):
                series.append({**lead, "trial": trial, "time": time,
                               **{m: float(rng.uniform(1, 100)) for m in ("group_regret", "mean_agent_regret",
                                                                          "comm_cost")}})
    assert front(plan)[-1] == "point"
    return {"study": pd.DataFrame(rows), "study_timeseries": pd.DataFrame(series)}


def svg_texts(canvas) -> list[str]:
    root = ET.fromstring(SF.render(canvas, "svg"))
    return ["".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")]


@pytest.fixture(scope="module")
def bundled_drawn():
    """Every figure of every bundled study (quick scale) drawn from synthetic tables: (study, figure, data, canvas)."""
    out = []
    for name in studies.bundled():
        study = studies.load(name)
        try:
            plan = studies.plan(study, "quick")
        except studies.spec.InputError:  # a study needing an unshipped data file (zhu2021-fig2c)
            continue
        tables = synthetic_tables(plan)
        for figure in study.figures:
            data = SF.figure_data(figure, tables)
            out.append((study, figure, data, SF.draw(figure, data, study, plan.trials, "quick")))
    return out


def test_no_bundled_figure_shows_a_raw_dotted_key(bundled_drawn):
    """Over the SVG text of every bundled figure: no scenario key in its dotted form (the figure shows
    the key's label and unit instead), and every axis title is the catalog's title of its column."""
    keys = {e.key for e in catalog.scenario_entries() if "." in e.key}
    dotted = re.compile(r"\b[a-z_]+\.[a-z_]+(\.[a-z_]+)?\b")
    assert len(bundled_drawn) > 60
    for study, figure, _, canvas in bundled_drawn:
        texts = svg_texts(canvas)
        found = {m.group(0) for text in texts for m in dotted.finditer(text)} & keys
        assert not found, (study.name, figure.name, found)
        for ax in canvas.axes:
            if ax.get_visible():
                assert ax.get_xlabel() in texts and ax.get_ylabel().split("\n")[0] in texts
                if "." in figure.x:
                    assert ax.get_xlabel() == catalog.title(figure.x)


def test_legends_cover_no_data(bundled_drawn):
    """Every legend lies outside its panel, so no point, interval or curve is under it; every point's
    marker is inside the figure."""
    for study, figure, _, canvas in bundled_drawn:
        renderer = canvas.canvas.get_renderer() if hasattr(canvas.canvas, "get_renderer") else None
        if renderer is None:
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            renderer = FigureCanvasAgg(canvas).get_renderer()
            canvas.draw_without_rendering()
        for ax in canvas.axes:
            legend = ax.get_legend()
            if legend is None or not ax.get_visible():
                continue
            box, panel = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert not box.overlaps(panel), (study.name, figure.name)
            assert canvas.bbox.contains(box.x0, box.y0) and canvas.bbox.contains(box.x1 - 1, box.y1 - 1), \
                (study.name, figure.name)


def test_trade_off_points_keep_readable_labels(bundled_drawn):
    """A trade-off with more than 12 points keeps a label on every point, and no two labels overlap."""
    many = [(s, f, d, c) for s, f, d, c in bundled_drawn if f.kind == "tradeoff" and len(d) > 12
            and any(SF.point_texts(d)[0])]
    assert many
    for study, figure, data, canvas in many:
        renderer = canvas.canvas.get_renderer()
        facets = SF.order(figure.facet, study, data["facet"]) if figure.facet else [SF.NONE]
        for ax, facet in zip(canvas.axes, facets):
            wanted = [t for t in SF.point_texts(data[data["facet"] == facet])[0] if t]
            texts = [t for t in ax.texts if t.get_text()]
            assert sorted(t.get_text() for t in texts) == sorted(wanted), (study.name, figure.name)
            boxes = [t.get_window_extent(renderer) for t in texts]
            for a, b in itertools.combinations(boxes, 2):  # no two share more than a pixel's worth
                shared = max(0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(0, min(a.y1, b.y1) - max(a.y0, b.y0))
                assert shared < 1.0, (study.name, figure.name, a, b)


# ---------------------------------------------------------------------- colours
# Machado, Oliveira & Fernandes 2009, severity 1: linear-RGB matrices of deutan, protan, tritan vision
CVD = {"deutan": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
       "protan": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
       "tritan": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
       "normal": np.eye(3).tolist()}


def _lab(hex_colour: str, vision: str) -> np.ndarray:
    """CIELAB (D65) of ``hex_colour`` as seen with ``vision``."""
    srgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    linear = np.clip(np.array(CVD[vision]) @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(xyz / [0.95047, 1.0, 1.08883])
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_neighbouring_curves_stay_apart_for_colour_blind_readers(bundled_drawn):
    """In every bundled figure, curves that are neighbours in the legend (and any two of the first
    four) differ by a CIELAB distance of at least 20 under normal, deutan, protan and tritan vision;
    past the palette, no two curves share both colour and marker. zhu2021's eps = 2 and eps = inf
    (orange and vermillion before) are among them."""
    for study, figure, data, _ in bundled_drawn:
        hues = SF.order(figure.hue, study, data["hue"]) if figure.hue else []
        look = SF.styles(figure, study, hues)
        every = list(look)
        pairs = {(every[i], every[i + 1]) for i in range(len(every) - 1)}
        pairs |= set(itertools.combinations(every[:4], 2))
        for a, b in pairs:
            if look[a]["color"] == look[b]["color"]:
                assert look[a]["marker"] != look[b]["marker"], (study.name, a, b)
                continue
            for vision in CVD:
                distance = np.linalg.norm(_lab(look[a]["color"], vision) - _lab(look[b]["color"], vision))
                assert distance >= 20, (study.name, figure.name, a, b, vision, distance)
        assert len({(s["color"], s["marker"]) for s in look.values()}) == len(look)


# ---------------------------------------------------------------------- the quickstart study: true costs
@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart") / "out"
    assert main(["study", "quickstart", "--trials", "2", "--set", "run.horizon=200", "--set", "run.checkpoints=4",
                 "--out", str(out), "--quiet"]) == 0
    return out


def test_central_ucb_pays_its_uploads_and_is_drawn_as_an_oracle(quickstart):
    trials = pd.read_csv(quickstart / "study.csv")
    central = trials[trials["variant"] == "central UCB"]
    # li2022 Eq. 2: c1 = 25 per upload, M = 10 agents, T = 200 slots, one upload per agent and slot
    assert (central["comm_cost"] == 25 * 10 * 200).all() and (central["links_server_agent"] == 10 * 200).all()
    data = pd.read_csv(quickstart / "figures" / "tradeoff.csv")
    oracle = data[data["hue"] == "central UCB"]
    assert oracle["oracle"].all() and not oracle["pareto"].any()
    assert not data.loc[data["hue"] != "central UCB", "oracle"].any() and data["pareto"].any()
    study = studies.study_from_meta(__import__("json").loads((quickstart / "meta.json").read_text()))
    figure = next(f for f in study.figures if f.kind == "tradeoff")
    tables = {"study": trials}
    canvas = SF.draw(figure, SF.figure_data(figure, tables), study, 2)
    labels = [t.get_text() for t in canvas.axes[0].get_legend().get_texts()]
    assert "central UCB (oracle)" in labels
    assert "kept off the Pareto front" in " ".join(canvas.get_suptitle().split())


def test_a_figure_says_what_it_cannot_separate():
    """The overlap marks against a hand-made case: intervals [0, 2], [1, 3] and [5, 6] at one x."""
    from netsim.experiment.studies.stats import overlapping

    hits = overlapping(["a", "b", "c"], [0.0, 1.0, 5.0], [2.0, 3.0, 6.0], [5, 5, 5])
    assert hits == [["b"], ["a"], []]
    # one trial has no interval: it separates nothing; a paired difference holding 0 is marked
    assert overlapping(["a", "b"], [4.0, 1.0], [4.0, 2.0], [1, 5]) == [["b"], ["a"]]
    assert overlapping(["a", "b"], [-1.0, 3.0], [1.0, 4.0], [5, 5], zero=True) == [["0"], []]
