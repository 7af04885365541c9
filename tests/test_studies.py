"""Studies: the file format, its refusals, the statistics, each figure kind's data and drawing,
the CLI and the Python API, resumption, common random numbers and unfinished trials.

Figure contents are checked against an independent computation from ``study.csv`` (pandas
group-bys and scipy's Student-t interval), not against the module that draws them.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import netsim
from netsim.experiment import studies
from netsim.experiment.cli import main
from netsim.experiment.results import SERIES_COLUMNS, TRIAL_COLUMNS
from netsim.experiment.studies import figures as SF
from netsim.experiment.studies.stats import interval, pareto, slope

STUDY = """
title = "tiny"
seed = 3

[scale.quick]
trials = 3
set = { "run.horizon" = 120, "run.checkpoints" = 6 }
note = "tiny"

[scale.paper]
trials = 5
note = "less tiny"

[grid]
"network.agents" = [3, 6]

[[variant]]
name = "isolated"
scenario = "quickstart"

[[variant]]
name = "pooled"
scenario = "quickstart"
set = { "protocol.name" = "central-ucb" }

[[variant]]
name = "flooding"
scenario = "quickstart"
set = { "protocol.name" = "dubey2020a-private", "protocol.epsilon" = inf, "protocol.gamma" = 1 }

[[figure]]
name = "over-time"
kind = "series"
y = "group_regret"
facet = "network.agents"

[[figure]]
name = "final"
kind = "final"
x = "network.agents"
y = "group_regret"

[[figure]]
name = "side-by-side"
kind = "final"
x = "variant"
y = ["group_regret", "messages_sent"]

[[figure]]
name = "tradeoff"
kind = "tradeoff"

[[figure]]
name = "loglog"
kind = "loglog"
x = "network.agents"
y = "messages_sent"
variants = ["flooding"]
"""


def write(tmp_path: Path, text: str = STUDY, name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny study run once through the command line; returns its folder."""
    folder = tmp_path_factory.mktemp("study")
    path = write(folder)
    assert main(["study", str(path), "--out", str(folder / "out"), "--quiet"]) == 0
    return folder / "out"


def figure_csv(folder: Path, name: str) -> pd.DataFrame:
    """A figure's plotted data (its group labels are strings, as the legends show them)."""
    return pd.read_csv(folder / "figures" / f"{name}.csv", dtype={"facet": str, "hue": str})


def expected_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % t interval from scipy (independent of netsim.experiment.studies.stats)."""
    values = values[~np.isnan(values)]
    mean = float(values.mean())
    if len(values) == 1 or np.all(values == values[0]):  # scipy's interval of a zero spread is NaN
        return mean, mean, mean
    lo, hi = sps.t.interval(0.95, len(values) - 1, loc=mean, scale=sps.sem(values))
    return mean, float(lo), float(hi)


# ---------------------------------------------------------------------- statistics, by hand
def test_interval_matches_hand_computation():
    # [1, 2, 3, 4]: mean 2.5, s = sqrt(5/3) = 1.29099, t(0.975, 3) = 3.182446, half = 3.182446 * 1.29099 / 2
    mean, lo, hi, n = interval([1.0, 2.0, 3.0, 4.0, math.nan])
    assert (mean, n) == (2.5, 4)
    assert hi - mean == pytest.approx(3.182446305 * math.sqrt(5 / 3) / 2, rel=1e-9)
    assert mean - lo == pytest.approx(hi - mean)
    assert interval([7.0]) == (7.0, 7.0, 7.0, 1)
    assert interval([math.nan])[3] == 0


def test_pareto_front_by_hand():
    x = [1.0, 2.0, 3.0, 2.0, 0.5, math.nan]
    y = [5.0, 3.0, 4.0, 3.0, 6.0, 0.0]
    # (3, 4) is beaten by (2, 3); the two (2, 3) do not beat each other; NaN is never on the front
    assert list(pareto(x, y)) == [True, True, False, True, True, False]


def test_slope_of_a_power_law():
    x = np.array([2.0, 4.0, 8.0, 16.0])
    assert slope(x, 3 * x ** 1.5) == pytest.approx(1.5)
    assert math.isnan(slope([1.0], [1.0]))


# ---------------------------------------------------------------------- the files a study writes
def test_study_folder_holds_tables_figures_and_report(tiny):
    for name in ("study.csv", "study_agents.csv", "study_timeseries.csv", "meta.json", "report.html"):
        assert (tiny / name).is_file(), name
    for figure in ("over-time", "final", "side-by-side", "tradeoff", "loglog"):
        for ext in ("png", "svg", "csv"):
            assert (tiny / "figures" / f"{figure}.{ext}").stat().st_size > 0
    table = pd.read_csv(tiny / "study.csv")
    assert list(table.columns[:6]) == ["study", "variant", "network.agents", "point", "scenario", "protocol"]
    assert list(table.columns[4:4 + len(TRIAL_COLUMNS)]) == TRIAL_COLUMNS
    assert len(table) == 3 * 2 * 3  # variants x grid points x trials
    assert set(table["protocol"]) == {"ucb1", "central-ucb", "dubey2020a-private"}
    assert sorted(set(table["network.agents"])) == [3, 6]
    assert (table["agents"] == table["network.agents"]).all()
    series = pd.read_csv(tiny / "study_timeseries.csv")
    assert list(series.columns[:5]) == ["study", "variant", "network.agents", "point", "trial"]
    meta = json.loads((tiny / "meta.json").read_text())
    assert meta["study"]["scale"] == "quick" and meta["units"] == 18 and "[[variant]]" in meta["study_text"]


def test_series_data_matches_an_independent_computation(tiny):
    data = figure_csv(tiny, "over-time")
    series = pd.read_csv(tiny / "study_timeseries.csv")
    assert set(data["facet"]) == {"3", "6"} and set(data["hue"]) == {"isolated", "pooled", "flooding"}
    for (agents, variant, time), group in series.groupby(["network.agents", "variant", "time"]):
        row = data[(data["facet"] == str(agents)) & (data["hue"] == variant) & (data["time"] == time)]
        assert len(row) == 1
        mean, lo, hi = expected_interval(group["group_regret"].to_numpy())
        assert row[["mean", "lo", "hi"]].to_numpy()[0] == pytest.approx([mean, lo, hi])
        assert row["n"].item() == 3
    assert len(data) == 2 * 3 * series["time"].nunique()


def test_final_and_panels_data_match_an_independent_computation(tiny):
    table = pd.read_csv(tiny / "study.csv")
    data = figure_csv(tiny, "final")
    assert list(data["x"]) == [3, 6] * 3  # sorted by x within each curve
    for (variant, agents), group in table.groupby(["variant", "network.agents"]):
        row = data[(data["hue"] == variant) & (data["x"] == agents)]
        assert row[["mean", "lo", "hi"]].to_numpy()[0] == pytest.approx(expected_interval(
            group["group_regret"].to_numpy()))
        assert row["unfinished"].item() == 0 and row["failed"].item() == 0
    panels = figure_csv(tiny, "side-by-side")
    assert set(panels["facet"]) == {"group_regret", "messages_sent"}
    # x = variant pools the two grid points (6 trials per variant)
    for (metric, variant), row in panels.set_index(["facet", "x"]).iterrows():
        values = table.loc[table["variant"] == variant, metric].to_numpy(dtype=float)
        assert [row["mean"], row["lo"], row["hi"]] == pytest.approx(expected_interval(values))
        assert row["n"] == 6


def test_tradeoff_points_and_pareto_front(tiny):
    table = pd.read_csv(tiny / "study.csv")
    data = figure_csv(tiny, "tradeoff")
    assert len(data) == 6  # one point per variant and grid point
    for _, row in data.iterrows():
        group = table[table["point"] == row["point"]]
        assert row["label"] == f"{group['variant'].iloc[0]} (network.agents={group['network.agents'].iloc[0]})"
        assert [row["x_mean"], row["x_lo"], row["x_hi"]] == pytest.approx(expected_interval(
            group["comm_cost"].to_numpy(dtype=float)))
        assert [row["y_mean"], row["y_lo"], row["y_hi"]] == pytest.approx(expected_interval(
            group["group_regret"].to_numpy(dtype=float)))
    # independent front: a point is on it when no other point is at most as costly and as regretful
    xs, ys = data["x_mean"].to_numpy(), data["y_mean"].to_numpy()
    for i in range(len(data)):
        beaten = any(xs[j] <= xs[i] and ys[j] <= ys[i] and (xs[j] < xs[i] or ys[j] < ys[i]) for j in range(len(data)))
        assert data["pareto"].iloc[i] == (not beaten)
    # among the points that send nothing, the one of lowest regret is on the front
    free = data[data["x_mean"] == data["x_mean"].min()]
    assert data.loc[free["y_mean"].idxmin(), "pareto"]


def test_loglog_slope_and_selected_variants(tiny):
    data = figure_csv(tiny, "loglog")
    assert set(data["hue"]) == {"flooding"} and list(data["x"]) == [3, 6]
    assert data["slope"].iloc[0] == pytest.approx(math.log(data["mean"].iloc[1] / data["mean"].iloc[0]) / math.log(2))


def test_drawn_axes_show_the_data(tiny):
    study = studies.load(json.loads((tiny / "meta.json").read_text())["study"]["file"])
    tables = netsim.Results.load(tiny).tables()
    drawn = {}
    for figure in study.figures:
        data = SF.figure_data(figure, tables)
        drawn[figure.name] = (data, SF.draw(figure, data, study, trials=3))
    data, canvas = drawn["over-time"]
    axes = [ax for ax in canvas.axes if ax.get_visible()]
    # titles and axes speak the catalog's labels and units, never a dotted key
    assert len(axes) == 2 and [ax.get_title() for ax in axes] == ["agents M = 3", "agents M = 6"]
    assert [len(ax.get_lines()) for ax in axes] == [3, 3]
    assert axes[0].get_xlabel() == "time (slots)" and axes[0].get_ylabel() == "group pseudo-regret"
    line = axes[0].get_lines()[0]
    curve = data[(data["facet"] == "3") & (data["hue"] == line.get_label())].sort_values("time")
    assert np.allclose(line.get_ydata(), curve["mean"])
    _, canvas = drawn["side-by-side"]
    assert [ax.get_ylabel() for ax in canvas.axes if ax.get_visible()] == ["group pseudo-regret", "messages sent"]
    assert [t.get_text() for t in canvas.axes[0].get_xticklabels()] == ["isolated", "pooled", "flooding"]
    _, canvas = drawn["loglog"]
    ax = canvas.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "slope" in ax.get_legend().get_texts()[0].get_text()
    _, canvas = drawn["tradeoff"]
    labels = [t.get_text() for t in canvas.axes[0].get_legend().get_texts()]
    assert "Pareto front (lower is better)" in labels
    # the legend names the variants; each point is annotated with the grid value that tells it apart,
    # and the legend's title says what those values are
    assert sorted(t.get_text() for t in canvas.axes[0].texts) == sorted(
        f"{m}" for _ in ("isolated", "pooled", "flooding") for m in (3, 6))
    assert canvas.axes[0].get_legend().get_title().get_text() == "point labels: agents M"


def test_an_axis_starts_at_zero_only_where_no_trial_value_is_negative(tiny):
    """A t interval over few trials can reach below 0 for a regret or a count: the axis is cut at 0
    then (and the figure says so), never when a trial value is negative or for paired differences."""
    from dataclasses import replace

    from matplotlib.figure import Figure as MplFigure

    study = studies.load(json.loads((tiny / "meta.json").read_text())["study"]["file"])
    figure = replace(next(f for f in study.figures if f.kind == "final"), logy=False, baseline="")

    def bottom(smallest: float, fig=figure) -> tuple[bool, float]:
        ax = MplFigure().subplots()
        ax.plot([0, 1], [-1.0, 2.0])                       # an interval reaching below 0
        cut = SF._floor_at_zero(ax, fig, pd.DataFrame({"min": [smallest, 3.0]}))
        return cut, ax.get_ylim()[0]

    assert bottom(0.0) == (True, 0.0)
    cut, low = bottom(-0.5)
    assert not cut and low < 0
    cut, low = bottom(0.0, replace(figure, baseline="isolated"))
    assert not cut and low < 0


# ---------------------------------------------------------------------- running, resuming, API
def test_rerun_reuses_every_unit_and_gives_the_same_tables(tiny, tmp_path, capsys):
    before = (tiny / "study.csv").read_bytes()
    meta = json.loads((tiny / "meta.json").read_text())
    assert main(["study", meta["study"]["file"], "--out", str(tiny), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "18 unit(s) found in the store, 0 run now" in err
    assert (tiny / "study.csv").read_bytes() == before


def test_python_api_gives_the_command_line_tables(tiny):
    meta = json.loads((tiny / "meta.json").read_text())
    results = netsim.study(meta["study"]["file"], scale="quick")
    assert results.kind == "study" and results.params == {"network_agents": "network.agents"}
    cli = netsim.Results.load(tiny)
    for name, frame in results.tables().items():
        assert frame.to_csv(index=False) == cli.tables()[name].to_csv(index=False), name
    assert {"study", "variant", "scenario", "protocol", "network_agents"} <= set(results.timeseries.columns)
    summary = results.summary().query("metric == 'group_regret'")
    assert list(summary["variant"]) == ["isolated"] * 2 + ["pooled"] * 2 + ["flooding"] * 2
    assert {"mean", "lo", "hi", "unfinished", "failed"} <= set(summary.columns)


def test_plot_redraws_a_study_folder(tiny, capsys):
    (tiny / "figures" / "final.png").unlink()
    (tiny / "report.html").unlink()
    assert main(["plot", str(tiny)]) == 0
    assert (tiny / "figures" / "final.png").is_file() and (tiny / "report.html").is_file()


def test_variants_at_one_grid_point_share_reward_draws(tmp_path):
    """Common random numbers: the same protocol at a shorter horizon sees the same run up to it."""
    path = write(tmp_path, """
        [scale.quick]
        trials = 2
        [scale.paper]
        trials = 2
        [[variant]]
        name = "long"
        scenario = "quickstart"
        set = { "run.horizon" = 400, "run.checkpoints" = 4 }
        [[variant]]
        name = "short"
        scenario = "quickstart"
        set = { "run.horizon" = 200, "run.checkpoints" = 2 }
        """)
    series = netsim.study(path).timeseries
    long = series[(series["variant"] == "long") & (series["time"] <= 200)].set_index(["trial", "time"])
    short = series[series["variant"] == "short"].set_index(["trial", "time"])
    assert np.array_equal(long["group_regret"].to_numpy(), short["group_regret"].to_numpy())
    assert series.groupby("trial")["group_regret"].max().nunique() == 2  # two trials, two different runs


# ---------------------------------------------------------------------- unfinished trials
def test_unfinished_trials_are_counted_not_averaged(tmp_path, capsys):
    out = tmp_path / "run"
    # li2022 Fig. 8's CDP-MAB needs about 3,000 slots to reach its last epoch: 300 is too short
    assert main(["run", "li2022-fig8-homogeneous", "--set", "run.horizon=300", "--trials", "2", "--out", str(out),
                 "--no-plots", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "trials: 2 (2 unfinished)" in printed and "before the last epoch identified an arm" in printed
    table = pd.read_csv(out / "trials.csv")
    assert (table["status"] == "unfinished").all() and table["correct"].isna().all()
    summary = netsim.Results.load(out).summary().set_index("metric")
    assert summary.loc["correct", "n"] == 0 and summary.loc["group_regret", "n"] == 2


def test_rio2023_unfinished_run_has_no_sample_complexity():
    results = netsim.run("rio2023-fig2-problem1", trials=1, set={"run.horizon": 50})
    row = results.trials.iloc[0]
    assert row["status"] == "unfinished" and math.isnan(row["sample_complexity"]) and math.isnan(row["correct"])


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("change,needles", [
    (('name = "pooled"', 'name = "pooled"\nscenaro = "x"'), ["tiny.toml", "variant 'pooled'.scenaro", "did you mean"]),
    (('"protocol.name" = "central-ucb"', '"protocol.name" = "central-ucb", "protocol.epsilon" = 1'),
     ["tiny.toml", "variant 'pooled'", "protocol.epsilon"]),
    (('y = "messages_sent"\nvariants', 'y = "sample_complexity"\nvariants'),
     ["tiny.toml", "figure 'loglog'", "sample_complexity", "none of its variants"]),
    (('"network.agents" = [3, 6]', '"network.agents" = [3, 6]\n"protocol.gamma" = [1, 2]'),
     ["tiny.toml", "variant 'isolated'", "protocol.gamma"]),
    (('kind = "tradeoff"', 'kind = "scatter"'), ["tiny.toml", "figure 4.kind", "series"]),
    (('set = { "protocol.name" = "central-ucb" }', 'set = { protocol = { name = "central-ucb" } }'),
     ["tiny.toml", "variant 'pooled'.set", "quoted dotted keys"]),
    (('x = "network.agents"\ny = "group_regret"', 'x = "protocol.epsilon"\ny = "group_regret"'),
     ["tiny.toml", "variant 'isolated'", "protocol.epsilon"]),
])
def test_bad_study_is_one_line_exit_2_and_keeps_units(tiny, tmp_path, capsys, change, needles):
    meta = json.loads((tiny / "meta.json").read_text())
    stored = sorted((tiny / "units").iterdir())
    bad = write(tmp_path, Path(meta["study"]["file"]).read_text().replace(*change))
    assert main(["study", str(bad), "--out", str(tiny), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("netsim: error:"), err
    for needle in needles:
        assert needle in err, (needle, err)
    assert sorted((tiny / "units").iterdir()) == stored


def test_unknown_study_and_scale(capsys):
    assert main(["study", "li2022-fig1O"]) == 2
    assert "no study file or bundled study named 'li2022-fig1O'" in capsys.readouterr().err
    assert main(["study", "quickstart", "--scale", "huge"]) == 2


# ---------------------------------------------------------------------- bundled studies and protocols
#: bundled studies that need a data file netsim does not ship (their docs say where to get it)
NEEDS_DATA = {"zhu2021-fig2c": "diabetic_data.csv"}


@pytest.mark.parametrize("name", sorted(studies.bundled()))
def test_every_bundled_study_plans_at_both_scales(name):
    study = studies.load(name)
    assert study.title and study.source and study.figures
    for scale in ("quick", "paper"):
        assert study.scales[scale].note, f"{name}: scale {scale} says nothing about its size"
        if name in NEEDS_DATA and not (Path(studies.__file__).parents[2] / "scenarios" / "data" /
                                       NEEDS_DATA[name]).is_file():
            with pytest.raises(netsim.InputError, match=NEEDS_DATA[name]):
                studies.plan(study, scale)
            continue
        plan = studies.plan(study, scale)
        assert plan.trials == study.scales[scale].trials
        grid = math.prod(len(v) for v in study.grid.values())  # a variant with grid = false runs once
        assert len(plan.points) == sum(grid if v.grid else 1 for v in study.variants)
        assert len(plan.units()) == len(plan.points) * plan.trials
    # a study's text is finished: no placeholder (an upper-case word with an underscore such as
    # PAPER_RESULTS, or MEASURED, TODO, TBD, XXX) left in its notes or scale notes
    texts = [study.notes, study.description] + [study.scales[s].note for s in ("quick", "paper")]
    assert not re.findall(r"\b(?:[A-Z]{3,}_[A-Z0-9_]+|MEASURED|TODO|TBD|XXX)\b", " ".join(texts)), name


def test_protocol_columns_declare_what_results_return():
    """Every bundled protocol's results() keys are among its declared ``columns`` (studies check
    figure metrics against the declaration before running)."""
    from benchmarks.reliability import BASES, _load
    from netsim.engine.registry import protocols
    from netsim.engine.sim import run_trial
    from netsim.engine.streams import trial_sequence

    bundled = {name: cls for name, cls in protocols.items() if cls.__module__.startswith("protocols.")}
    assert set(bundled) == set(BASES)
    for name, cls in bundled.items():
        scenario = _load(name, ["run.horizon=200"] if name not in {"mase", "dp-mase", "corrupted-elimination",
                                                                    "feraud2019", "central-se",
                                                                    "independent-se"} else [])
        row = run_trial(scenario, trial_sequence(1, 0), 0).row
        extras = {k for k in row if k not in TRIAL_COLUMNS and not k.startswith("sent_")} - {
            "dropped_link_down", "dropped_crashed", "duplicated", "reordered"}
        assert extras <= set(cls.columns), (name, extras - set(cls.columns))
    assert set(SERIES_COLUMNS) >= {"group_regret", "comm_cost"}


# ---------------------------------------------------------------------- the report, in a real browser
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"]


def test_report_opens_in_headless_chromium_hovers_and_hides_a_curve(tiny):
    """Debian's chromium (``.ci/run`` installs it) driven by Playwright, offline: no console error, no
    page error, no request leaving the page; every figure drawn by the embedded Plotly; the mouse
    over a point shows its mean, interval and n; a click on a legend entry hides that curve."""
    import shutil

    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        pytest.skip("no chromium on this machine: install Debian's chromium package (apt-get install chromium), "
                    "as .ci/run does")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:", "about:"))
                    else problems.append(f"request to the network: {r.url}"))
            page.goto((tiny / "report.html").resolve().as_uri())
            page.wait_for_load_state("load")
            drawn = page.evaluate("Array.from(document.querySelectorAll('.plot')).map(d => [d.id, "
                                  "d.querySelectorAll('.main-svg').length, (d.data || []).length])")
            headings = page.evaluate("Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
            title = page.title()
            # the first point of the first curve of the 'final' figure, in page pixels
            plot = page.locator("#plot-final")
            plot.scroll_into_view_if_needed()
            where = page.evaluate("""() => { const gd = document.getElementById('plot-final');
                const L = gd._fullLayout, box = gd.getBoundingClientRect(), t = gd.data[0];
                return [box.left + L._size.l + L.xaxis.l2p(t.x[0]), box.top + L._size.t + L.yaxis.l2p(t.y[0]),
                        t.name, t.y[0]]; }""")
            page.mouse.move(where[0], where[1])
            page.wait_for_selector("#plot-final .hoverlayer .hovertext", timeout=5000)
            tooltip = page.locator("#plot-final .hoverlayer .hovertext").first.text_content()
            visible = "() => document.getElementById('plot-final').data.filter(t => t.visible !== 'legendonly').length"
            before = page.evaluate(visible)
            page.mouse.move(0, 0)
            page.locator("#plot-final g.traces").filter(has_text=where[2]).locator("rect.legendtoggle").first.click()
            page.wait_for_function("() => document.getElementById('plot-final').data[0].visible === 'legendonly'",
                                   timeout=5000)  # Plotly waits out a double-click before it toggles
            after = page.evaluate(visible)
            hidden = page.evaluate("() => document.getElementById('plot-final').data[0].visible")
        finally:
            browser.close()
    assert problems == []
    assert sorted(name for name, _, _ in drawn) == sorted(
        f"plot-{n}" for n in ["over-time", "final", "side-by-side", "tradeoff", "loglog"])
    assert all(svgs > 0 and traces > 0 for _, svgs, traces in drawn), drawn
    assert headings == ["This run", "Summary", "What differs between the variants", "The paper and netsim", "Files"]
    assert title == "tiny"
    # the tooltip names the curve and gives the mean, the 95 % interval and n of the point under the mouse
    data = figure_csv(tiny, "final")
    row = data[(data["hue"] == where[2])].sort_values("x").iloc[0]
    assert where[2] in tooltip and "interval" in tooltip and f"n = {int(row['n'])}" in tooltip
    assert f"mean {row['mean']:.4g}" in tooltip and f"[{row['lo']:.4g}, {row['hi']:.4g}]" in tooltip
    assert hidden == "legendonly" and after < before


def test_report_names_no_absolute_path(tiny):
    page = (tiny / "report.html").read_text()
    assert str(tiny) not in page and str(Path.cwd()) not in page and str(Path(__file__).parent) not in page


# ---------------------------------------------------------------------- references, baselines, pairing
REFERENCE = """
title = "references"
paired = "all"
[scale.quick]
trials = 3
set = { "run.horizon" = 100, "run.checkpoints" = 4 }
note = "tiny"
[scale.paper]
trials = 3
note = "tiny"
[grid]
"network.agents" = [3, 5]
[[variant]]
name = "isolated"
scenario = "quickstart"
[[variant]]
name = "flooding"
scenario = "quickstart"
set = { "protocol.name" = "dubey2020a-private", "protocol.epsilon" = inf, "protocol.gamma" = 1 }
[[variant]]
name = "pooled"
scenario = "quickstart"
set = { "protocol.name" = "central-ucb", "network.agents" = 4 }
grid = false
[[figure]]
name = "against-agents"
kind = "final"
x = "network.agents"
logx = true
[[figure]]
name = "difference"
kind = "final"
x = "network.agents"
baseline = "isolated"
[[figure]]
name = "difference-over-time"
kind = "series"
baseline = "pooled"
facet = "network.agents"
"""


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    folder = tmp_path_factory.mktemp("references")
    results = netsim.study(write(folder, REFERENCE))
    results.save(folder / "out")
    return folder / "out", results


def test_a_variant_off_the_grid_runs_once_and_is_drawn_as_a_reference(references):
    folder, results = references
    trials = results.trials
    assert len(trials) == (2 + 2 + 1) * 3
    pooled = trials[trials["variant"] == "pooled"]
    assert pooled["network_agents"].isna().all() and (pooled["agents"] == 4).all()
    data = figure_csv(folder, "against-agents")
    line = data[data["hue"] == "pooled"]
    assert len(line) == 1 and math.isnan(line["x"].item())
    assert line["mean"].item() == pytest.approx(pooled["group_regret"].mean())
    study = studies.study_from_meta(results.meta)
    figure = study.figures[0]
    canvas = SF.draw(figure, SF.figure_data(figure, results.tables()), study, 3)
    ax = canvas.axes[0]
    assert ax.get_xscale() == "log"  # logx is honoured on a final figure
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "pooled (reference, no grid)" in texts
    dotted = [drawn for drawn in ax.get_lines() if drawn.get_linestyle() == ":"]
    assert len(dotted) == 1 and np.allclose(dotted[0].get_ydata(), line["mean"].item())


def test_paired_differences_from_a_baseline_match_an_independent_computation(references):
    folder, results = references
    trials = results.trials
    data = figure_csv(folder, "difference")
    # the baseline itself is not drawn, nor the off-grid variant (no partner at its empty grid value)
    assert set(data["hue"]) == {"flooding"}
    base = trials[trials["variant"] == "isolated"].set_index(["network_agents", "trial"])["group_regret"]
    for agents in (3, 5):
        mine = trials[(trials["variant"] == "flooding") & (trials["network_agents"] == agents)]
        diff = mine["group_regret"].to_numpy() - base.loc[[(agents, t) for t in mine["trial"]]].to_numpy()
        row = data[(data["hue"] == "flooding") & (data["x"] == agents)]
        assert [row["mean"].item(), row["lo"].item(), row["hi"].item()] == pytest.approx(expected_interval(diff))
    # a baseline off the grid pairs with every grid point, trial by trial, time by time
    series = results.timeseries
    over = figure_csv(folder, "difference-over-time")
    base = series[series["variant"] == "pooled"].set_index(["trial", "time"])["group_regret"]
    mine = series[(series["variant"] == "isolated") & (series["network_agents"] == 5)]
    last = mine["time"].max()
    at = mine[mine["time"] == last]
    diff = at["group_regret"].to_numpy() - base.loc[[(t, last) for t in at["trial"]]].to_numpy()
    row = over[(over["facet"] == "5") & (over["hue"] == "isolated") & (over["time"] == last)]
    assert [row["mean"].item(), row["lo"].item(), row["hi"].item()] == pytest.approx(expected_interval(diff))


def test_paired_all_shares_trial_seeds_across_grid_points(references):
    _, results = references
    keys = {tuple(p["seed_key"]) for p in results.meta["points"]}
    assert len(keys) == 1  # paired = "all": one seed per trial for the whole study
    tiny_plan = studies.plan(studies.parse(__import__("tomllib").loads(STUDY), path=Path("t.toml")), "quick")
    by_grid = {}
    for point in tiny_plan.points:
        by_grid.setdefault(point.assignments["network.agents"], set()).add(point.key)
    assert all(len(k) == 1 for k in by_grid.values()) and len(set().union(*by_grid.values())) == 2


def test_a_hue_keeps_its_colour_in_every_figure(tiny):
    study = studies.load(json.loads((tiny / "meta.json").read_text())["study"]["file"])
    final, tradeoff = study.figures[1], study.figures[3]
    a = SF.colours(final, study, ["flooding", "isolated"])
    b = SF.colours(tradeoff, study, ["pooled", "flooding"])
    assert a["flooding"] == b["flooding"] and a["isolated"] != a["flooding"]


def test_a_scale_may_narrow_the_grid_and_set_applies_to_every_variant(tmp_path):
    text = STUDY.replace('[scale.paper]\ntrials = 5', '[scale.paper]\ntrials = 5\ngrid = { "network.agents" = [4] }')
    study = studies.parse(__import__("tomllib").loads(text), path=tmp_path / "t.toml", text=text)
    assert {p.assignments["network.agents"] for p in studies.plan(study, "paper").points} == {4}
    assert {p.assignments["network.agents"] for p in studies.plan(study, "quick").points} == {3, 6}
    plan = studies.plan(study, "quick", overrides=studies.set_options(["bandit.arms=3", "run.horizon=50"]))
    assert all(p.scenario.bandit["arms"] == 3 and p.scenario.run["horizon"] == 50 for p in plan.points)
    bad = text.replace('grid = { "network.agents" = [4] }', 'grid = { "network.topology" = ["ring"] }')
    with pytest.raises(netsim.InputError, match="scale.paper.grid.*not a key of \\[grid\\]"):
        studies.parse(__import__("tomllib").loads(bad), path=tmp_path / "t.toml")


def test_study_set_option_on_the_command_line(tmp_path, capsys):
    path = write(tmp_path)
    assert main(["study", str(path), "--set", "protocol.nope=1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "variant 'isolated'" in err and "protocol.nope" in err
