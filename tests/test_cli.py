"""The command line end to end: files, reproducibility across --jobs, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from netsim.experiment.cli import main

SMALL = ["--set", "run.horizon=300", "--set", "run.checkpoints=10", "--quiet"]
CONTRACT_FILES = {"trials.csv", "agents.csv", "timeseries.csv", "meta.json"}


def test_run_default_scenario_writes_every_contract_file(tmp_path, capsys):
    out = tmp_path / "q"
    assert main(["run", "--out", str(out), "--trials", "2", *SMALL]) == 0
    assert CONTRACT_FILES <= {p.name for p in out.iterdir()}
    printed = capsys.readouterr().out
    assert "group_regret" in printed and str(out) in printed
    trials = pd.read_csv(out / "trials.csv")
    assert list(trials["trial"]) == [0, 1]
    agents = pd.read_csv(out / "agents.csv")
    assert len(agents) == 2 * 10
    # per-agent regrets add up to the group regret of each trial
    sums = agents.groupby("trial")["regret"].sum().to_numpy()
    assert sums == pytest.approx(trials["group_regret"].to_numpy())
    series = pd.read_csv(out / "timeseries.csv")
    assert series.groupby("trial")["time"].max().tolist() == [300.0, 300.0]
    last = series[series["time"] == 300.0]["group_regret"].to_numpy()
    assert last == pytest.approx(trials["group_regret"].to_numpy())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["scenario"]["name"] == "quickstart" and meta["seed"] == 1
    assert {"numpy", "simpy", "networkx"} <= set(meta["versions"])


def _tables(folder):
    return {name: (folder / name).read_bytes() for name in ("trials.csv", "agents.csv", "timeseries.csv")}


def test_same_seed_same_bytes_for_any_jobs_different_seed_differs(tmp_path):
    args = ["run", "quickstart", "--trials", "3", "--no-plots", *SMALL]
    assert main([*args, "--out", str(tmp_path / "a"), "--jobs", "1"]) == 0
    assert main([*args, "--out", str(tmp_path / "b"), "--jobs", "2"]) == 0
    assert main([*args, "--out", str(tmp_path / "c"), "--jobs", "1", "--seed", "2"]) == 0
    a, b, c = (_tables(tmp_path / x) for x in "abc")
    assert a == b
    assert a["agents.csv"] != c["agents.csv"]


@pytest.mark.parametrize("argv,fragment", [
    (["run", "nope-not-a-scenario"], "no scenario file or bundled scenario"),
    (["run", "--set", "network.agnets=3"], "did you mean 'agents'"),
    (["run", "--set", "protocol.name=ucb9"], "accepted:"),
    (["run", "--trials", "0"], "--trials 0"),
    (["run", "--jobs", "0"], "--jobs 0"),
    (["run", "--executor", "cluster"], "invalid choice"),
    (["show", "quickstart", "--set", "bandit.arms=1"], "bandit.arms"),
    (["plot", "/definitely/not/here"], "not found"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exit_code_2_one_line(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("netsim: error:")
    assert fragment in err


def test_console_script_no_traceback_on_bad_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[bandit\n")
    done = subprocess.run([sys.executable, "-m", "netsim", "run", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and str(bad) in done.stderr


def test_list_and_show(capsys):
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "quickstart" in listed and "ucb1" in listed and "central-ucb" in listed
    assert main(["show", "quickstart", "--set", "run.horizon=77"]) == 0
    shown = capsys.readouterr().out
    assert "horizon = 77.0" in shown and "[network]" in shown


def test_plot_redraws(tmp_path):
    out = tmp_path / "p"
    assert main(["run", "--out", str(out), *SMALL]) == 0
    assert not (out / "regret.png").exists()  # figures only when asked
    assert main(["plot", str(out)]) == 0
    assert (out / "regret.png").stat().st_size > 1000


def test_run_draws_figures_with_plots(tmp_path):
    out = tmp_path / "f"
    assert main(["run", "--out", str(out), "--plots", *SMALL]) == 0
    assert (out / "regret.png").stat().st_size > 1000
    assert main(["run", "--out", str(out), *SMALL]) == 0
    assert not (out / "regret.png").exists()  # a figure never outlives the tables it was drawn from


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("run", "list", "show", "plot"):
        assert command in text
