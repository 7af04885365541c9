"""The Python API (``import netsim``): run, sweep, Results, Scenario.load / with_.

The API's tables are checked against the files ``netsim run`` / ``netsim sweep`` write for the
same seed (the command line runs in a separate process), and the figures against the tables.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import netsim

SMALL = {"run.horizon": 200, "run.checkpoints": 10}
SMALL_FLAGS = ["--set", "run.horizon=200", "--set", "run.checkpoints=10", "--quiet"]
RUN_FILES = ("trials", "agents", "timeseries")
SWEEP_FILES = {"trials": "sweep", "agents": "sweep_agents", "timeseries": "sweep_timeseries"}


def cli(*argv: str) -> None:
    done = subprocess.run([sys.executable, "-m", "netsim", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def assert_same(frame: pd.DataFrame, file: pd.DataFrame) -> None:
    """``frame`` holds the columns of ``file`` (parameters named for pandas), with the same values, in the same rows."""
    file = file.rename(columns=lambda c: c.replace(".", "_"))
    missing = [c for c in file.columns if c not in frame.columns]
    assert not missing
    pd.testing.assert_frame_equal(frame[list(file.columns)].reset_index(drop=True), file, check_dtype=False,
                                  check_exact=True)


def test_import_netsim_loads_no_heavy_module():
    code = ("import sys, netsim; heavy = ('pandas', 'matplotlib', 'scipy', 'seaborn', 'protocols', 'simpy', 'numpy');"
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)), netsim.__version__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", netsim.__version__]
    assert {"run", "sweep", "Results", "Scenario", "load_plugin"} <= set(dir(netsim))
    with pytest.raises(AttributeError):
        netsim.not_a_name  # noqa: B018


def test_registering_the_protocols_loads_no_compiler():
    """Every protocol registered (what a run does before its first trial) without numba or scipy: the
    compiled loops are private modules imported on first use (protocols/__init__.py)."""
    code = ("import sys; from netsim.engine import registry; registry.load_plugins(); import protocols;"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'llvmlite', 'scipy'}),"
            " 'feducb' in registry.protocols.names())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "True"]


def test_run_tables_are_the_cli_files_with_labels(tmp_path):
    results = netsim.run("quickstart", trials=2, seed=5, set=SMALL)
    cli("run", "quickstart", "--trials", "2", "--seed", "5", *SMALL_FLAGS, "--no-plots", "--out", str(tmp_path / "cli"))
    files = {name: pd.read_csv(tmp_path / "cli" / f"{name}.csv") for name in RUN_FILES}

    assert list(results.trials.columns) == list(files["trials"].columns)
    assert list(results.trials["trial"]) == [0, 1] and set(results.trials["seed"]) == {5}
    for name in RUN_FILES:
        frame = getattr(results, name)
        assert list(frame.columns[:2]) == ["scenario", "protocol"]
        assert set(frame["scenario"]) == {"quickstart"} and set(frame["protocol"]) == {"ucb1"}
        assert_same(frame, files[name])

    # the same files, to the byte, and read back into the same tables
    results.save(tmp_path / "api", plots=False)
    for name in (*RUN_FILES, "timings"):
        if name != "timings":
            assert (tmp_path / "api" / f"{name}.csv").read_bytes() == (tmp_path / "cli" / f"{name}.csv").read_bytes()
    meta = json.loads((tmp_path / "cli" / "meta.json").read_text())
    assert meta["scenario"] == results.meta["scenario"] and meta["seed"] == results.meta["seed"] == 5
    loaded = netsim.Results.load(tmp_path / "cli")
    assert loaded.kind == "run" and loaded.params == {}
    for name in RUN_FILES:
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(results, name), check_dtype=False,
                                      check_exact=True)


def test_sweep_tables_are_the_cli_files_with_labels(tmp_path):
    grid = {"network.agents": [3, 4], "protocol.name": ["ucb1", "central-ucb"]}
    results = netsim.sweep("quickstart", grid, trials=2, seed=3, set=SMALL)
    cli("sweep", "quickstart", "--grid", "network.agents=3,4", "--grid", "protocol.name=ucb1,central-ucb",
        "--trials", "2", "--seed", "3", *SMALL_FLAGS, "--no-plots", "--out", str(tmp_path / "cli"))
    files = {name: pd.read_csv(tmp_path / "cli" / f"{file}.csv") for name, file in SWEEP_FILES.items()}

    params = {"network_agents": "network.agents", "protocol_name": "protocol.name"}
    assert results.kind == "sweep" and results.params == params
    # the files keep the dotted keys; the DataFrames name them for pandas, the keys in attrs
    assert list(files["trials"].columns[:2]) == list(grid)
    assert list(results.trials.columns) == [c.replace(".", "_") for c in files["trials"].columns]
    for name in SWEEP_FILES:
        frame = getattr(results, name)
        assert list(frame.columns[:5]) == ["network_agents", "protocol_name", "point", "scenario", "protocol"]
        assert frame.attrs["params"] == params
        assert (frame["protocol"] == frame["protocol_name"]).all()  # the label follows the grid point
        assert_same(frame, files[name])
    assert sorted(results.trials.groupby(list(params)).size().items()) == [
        ((3, "central-ucb"), 2), ((3, "ucb1"), 2), ((4, "central-ucb"), 2), ((4, "ucb1"), 2)]
    per_point = results.agents.groupby("point")
    assert (per_point.size() == per_point["network_agents"].first() * 2).all()  # agents x trials rows

    results.save(tmp_path / "api", plots=False)
    for file in SWEEP_FILES.values():
        assert (tmp_path / "api" / f"{file}.csv").read_bytes() == (tmp_path / "cli" / f"{file}.csv").read_bytes()
    loaded = netsim.Results.load(tmp_path / "cli")
    assert loaded.kind == "sweep" and loaded.params == params
    for name in SWEEP_FILES:
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(results, name), check_dtype=False,
                                      check_exact=True)


def test_plot_draws_one_line_per_value_ending_at_the_trials_mean(tmp_path):
    results = netsim.sweep("quickstart", {"protocol.name": ["ucb1", "central-ucb"]}, trials=3, set=SMALL)
    figure = results.plot()
    ax = figure.axes[0]
    lines = {text.get_text(): line for text, line in zip(ax.get_legend().get_texts(), ax.get_lines(), strict=False)}
    assert set(lines) == {"ucb1", "central-ucb"}
    final = results.trials.groupby("protocol_name")["group_regret"].mean()
    for name, line in lines.items():
        assert line.get_xdata()[-1] == 200.0
        assert line.get_ydata()[-1] == pytest.approx(final[name], rel=1e-12)
    assert final["central-ucb"] != final["ucb1"]
    assert len(netsim.run("quickstart", set=SMALL).plot("comm_cost").axes[0].get_lines()) == 1
    written = results.save(tmp_path, plots=True)
    assert {"regret_by_protocol.name.png", "meta.json", "sweep.csv"} <= set(written)
    with pytest.raises(netsim.InputError, match="by='nope'"):
        results.plot(by="nope")
    # by= takes the column or the dotted key
    by_key = results.plot(by="protocol.name").axes[0]
    assert [t.get_text() for t in by_key.get_legend().get_texts()] == ["ucb1", "central-ucb"]


def test_with_is_the_same_as_set_and_a_table_replaces_a_section():
    base = netsim.Scenario.load("quickstart")
    before = json.dumps(base.document)
    changed = base.with_(**{"network.agents": 4}, run__horizon=50)
    assert changed == netsim.Scenario.load("quickstart", ["network.agents=4", "run.horizon=50"])
    assert (changed.network["agents"], changed.run["horizon"]) == (4, 50.0)
    assert base.network["agents"] == 10 and json.dumps(base.document) == before  # base unchanged
    assert changed.with_(**{"network.agents": 10, "run.horizon": base.run["horizon"]}) == base

    # (ucb1 sends nothing, so it takes the default delay: it refuses the GIS per-stage delay it would ignore)
    switched = netsim.Scenario.load("li2022-fig10-ring").with_(protocol={"name": "ucb1"},
                                                               network__delay={"model": "constant", "value": 1.0})
    assert dict(switched.protocol) == {"name": "ucb1"}
    with pytest.raises(netsim.InputError, match="li2022-fig10-ring.toml: protocol"):
        netsim.Scenario.load("li2022-fig10-ring").with_(**{"protocol.name": "ucb1"})  # li2022 keys remain
    with pytest.raises(netsim.InputError, match=r"quickstart.toml: network.agnets: unknown key \(did you mean"):
        base.with_(network__agnets=3)


def test_with_takes_python_values_as_toml_would_hold_them():
    import numpy as np

    base = netsim.Scenario.load("quickstart")
    means = np.linspace(0.9, 0.1, 10)
    from_numpy = base.with_(bandit__means=means, network__agents=np.int64(6))
    assert from_numpy == base.with_(bandit__means=tuple(float(m) for m in means), network__agents=6)
    assert from_numpy.bandit["means"] == tuple(means.tolist()) and from_numpy.network["agents"] == 6
    assert netsim.Scenario.load("quickstart", "network.agents=6") == base.with_(network__agents=6)


def test_with_keeps_relative_files_working_from_another_folder(tmp_path, monkeypatch):
    (tmp_path / "edges.txt").write_text("0 1\n1 2\n2 3\n")
    (tmp_path / "path.toml").write_text(
        '[bandit]\nkind = "bernoulli"\narms = 2\nmeans = [0.9, 0.1]\n[network]\ntopology = "edgelist"\nagents = 4\n'
        'file = "edges.txt"\n[protocol]\nname = "ucb1"\n')
    monkeypatch.chdir(tmp_path)
    scenario = netsim.Scenario.load("path.toml")  # a relative path, and a file relative to it
    monkeypatch.chdir(tmp_path.parent)
    assert scenario.with_(run__seed=7).network["file"] == str(tmp_path / "edges.txt")


def test_bad_input_is_an_input_error_before_anything_runs(tmp_path):
    with pytest.raises(netsim.InputError, match="no scenario file or bundled scenario named 'nope'"):
        netsim.run("nope")
    with pytest.raises(netsim.InputError, match="grid 'network.agents'.*accepted: a non-empty list"):
        netsim.sweep("quickstart", {"network.agents": 5})
    with pytest.raises(netsim.InputError, match="cannot be a scenario value"):
        netsim.sweep("quickstart", {"network.agents": [None]})
    with pytest.raises(netsim.InputError, match="--trials 0"):
        netsim.run("quickstart", trials=0)
    with pytest.raises(netsim.InputError, match="no trials table"):
        netsim.Results.load(tmp_path)


def test_sweep_takes_a_scenario_object_and_numpy_values_and_resumes_from_out(tmp_path):
    import numpy as np

    scenario = netsim.Scenario.load("quickstart").with_(**SMALL)
    first = netsim.sweep(scenario, {"network.agents": np.array([3, 5])}, trials=2, out=tmp_path)
    assert first.meta["units_run"] == 4 and first.title == "quickstart"
    again = netsim.sweep(scenario, {"network.agents": [3, 5]}, trials=2, out=tmp_path)
    assert again.meta["units_run"] == 0 and again.meta["units_reused"] == 4
    pd.testing.assert_frame_equal(again.trials, first.trials)
    assert (Path(tmp_path) / "units").is_dir()


# ---------------------------------------------------------------------- pandas habits
def test_sweep_trials_answer_query_by_parameter_column():
    results = netsim.sweep("quickstart", {"network.agents": [3, 5]}, trials=2, set=SMALL)
    five = results.trials.query("network_agents == 5")
    assert len(five) == 2 and set(five["agents"]) == {5} and set(five["trial"]) == {0, 1}
    assert five.attrs["params"] == {"network_agents": "network.agents"}  # the dotted key, kept
    assert list(results.trials.network_agents) == [3, 3, 5, 5]
    assert len(results.agents.query("network_agents == 5")) == 5 * 2
    assert results.timeseries.query("network_agents == 3 and time == 200")["group_regret"].tolist() == \
        results.trials.query("network_agents == 3")["group_regret"].tolist()


def _expected(values: list[float]) -> tuple[float, float, float, float]:
    """mean, sample std, and the 95 % t interval, by scipy (independent of netsim.experiment.studies.stats)."""
    import numpy as np
    import scipy.stats as sps

    data = np.asarray(values, dtype=float)
    lo, hi = sps.t.interval(0.95, len(data) - 1, loc=data.mean(), scale=sps.sem(data))
    return float(data.mean()), float(data.std(ddof=1)), float(lo), float(hi)


def test_summary_has_one_shape_for_run_sweep_and_study(tmp_path):
    from netsim.experiment.resultset import SUMMARY_STATS

    run = netsim.run("quickstart", trials=3, set=SMALL)
    sweep = netsim.sweep("quickstart", {"network.agents": [3, 5]}, trials=3, set=SMALL)
    (tmp_path / "s.toml").write_text(
        'title = "two"\n'
        'scale.quick = { trials = 3, note = "tiny", set = { "run.horizon" = 200, "run.checkpoints" = 10 } }\n'
        'scale.paper = { trials = 3, note = "tiny" }\n'
        'grid = { "network.agents" = [3, 5] }\n'
        'variant = [{ name = "alone", scenario = "quickstart" }]\n'
        'figure = [{ name = "final", kind = "final", x = "network.agents", y = "group_regret" }]\n')
    study = netsim.study(tmp_path / "s.toml")
    tail = ["metric", *SUMMARY_STATS]
    shapes = {"run": ["scenario", "protocol", *tail], "sweep": ["network_agents", "scenario", "protocol", *tail],
              "study": ["variant", "network_agents", "scenario", "protocol", *tail]}
    for kind, results in (("run", run), ("sweep", sweep), ("study", study)):
        table = results.summary(["group_regret", "comm_cost"])
        assert list(table.columns) == shapes[kind], kind
        assert list(table["metric"]) == ["group_regret", "comm_cost"] * (1 if kind == "run" else 2)
        for _, row in table.iterrows():
            rows = results.trials if kind == "run" else results.trials.query(
                f"network_agents == {row['network_agents']}")
            assert (row["trials"], row["n"], row["failed"]) == (3, 3, 0)
            if row["metric"] == "comm_cost":  # ucb1 never communicates: no spread
                assert (row["mean"], row["std"]) == (0, 0)
                continue
            mean, std, lo, hi = _expected(rows[row["metric"]].tolist())
            assert [row["mean"], row["std"], row["lo"], row["hi"]] == pytest.approx([mean, std, lo, hi], rel=1e-9)
    assert run.summary().query("metric == 'rounds'")["n"].item() == 3
    with pytest.raises(netsim.InputError, match="summary metrics"):
        run.summary(["nope"])
