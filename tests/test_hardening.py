"""Reproducers of issue 18 (hardening): each bad input is one line with exit code 2, nothing is written
outside the output folder, overrides apply on top of the resolved defaults, files follow the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from netsim.engine import scenario as S
from netsim.experiment.cli import main

QUICK = ["--set", "run.horizon=50", "--set", "run.checkpoints=2", "--quiet", "--no-plots"]


def one_line_error(capsys, argv: list[str], *needles: str) -> str:
    """``argv`` exits with 2 and prints exactly one ``netsim: error:`` line holding every needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("netsim: error:"), err
    for needle in needles:
        assert needle in err, (needle, err)
    assert "None" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("argv,needles", [
    (["audit", "laplace", "--seed", "-1"], ["--seed"]),
    (["audit", "laplace", "--trials", "1000000000"], ["--trials", "10,000,000"]),
    (["trace", "quickstart", "--until", "nan"], ["--until"]),
    (["run", "quickstart", "--scheduler-timeout", "nan"], ["--scheduler-timeout"]),
    (["show", "quickstart", "--set", "network.agents=1e300"], ["network.agents", "1000000"]),
    (["show", "quickstart", "--set", "network.agents=10000000"], ["network.agents"]),
    (["show", "quickstart", "--set", "network.agents=100000", "--set", "network.topology='complete'"],
     ["links", "10,000,000"]),
    (["show", "quickstart", "--set", "network.agents=50000", "--set", "network.topology='erdos_renyi'",
      "--set", "network.p=0.0001"], ["network.sampler", "skip"]),
])
def test_bad_inputs_are_one_line_exit_2(capsys, argv, needles):
    one_line_error(capsys, argv, *needles)


@pytest.mark.parametrize("command", [["run", "quickstart", *QUICK], ["trace", "quickstart", "--until", "5"],
                                     ["sweep", "quickstart", "--grid", "network.agents=3,4", *QUICK]])
@pytest.mark.parametrize("out", ["/", "~"])
def test_output_to_a_root_or_home_is_refused(capsys, command, out):
    one_line_error(capsys, [*command, "--out", out], "--out")


def test_scenario_name_cannot_leave_results(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, ["run", "quickstart", "--set", "name='../../escaped'", *QUICK], "outside results/")
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "results").exists()


def test_set_into_a_defaulted_table_applies_on_top_of_the_defaults():
    """quickstart leaves [network.delay] to its default (constant 1): setting only its value keeps the model;
    setting the model starts the table afresh; a server delay starts from the agents' delay."""
    sends = "protocol.name='dubey2020a-private'"  # ucb1 sends nothing and refuses delays
    assert dict(S.load("quickstart", [sends, "network.delay.value=3"]).network["delay"]) == {"model": "constant",
                                                                                              "value": 3.0}
    exp = S.load("quickstart", [sends, "network.delay.model='exponential'", "network.delay.mean=2"]).network["delay"]
    assert dict(exp) == {"model": "exponential", "mean": 2.0}
    server = S.load("quickstart", ["protocol.name='cdp-mab'", "network.servers=1", "network.server_delay.value=5"])
    server = server.network["server_delay"]
    assert dict(server) == {"model": "constant", "value": 5.0}


def test_long_values_are_not_echoed_whole(capsys):
    err = one_line_error(capsys, ["show", "quickstart", "--set", "network.agents='" + "x" * 5000 + "'"],
                         "5002 characters")
    assert len(err) < 400


def test_edge_list_errors_do_not_echo_file_contents(capsys, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=abc123 not an edge\n")
    err = one_line_error(capsys, ["show", "quickstart", "--set", "network.topology='edgelist'",
                                  "--set", f"network.file='{secret}'"], "line 1")
    assert "abc123" not in err


def test_result_files_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        assert main(["run", "quickstart", "--out", str(tmp_path / "r"), *QUICK]) == 0
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "r").iterdir()}
    assert modes and set(modes.values()) == {0o644}, modes


def test_list_into_a_closed_pipe_is_quiet():
    """`netsim list | head -1`: the reader leaves early; no BrokenPipeError traceback, exit 0."""
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-m', 'netsim', 'list'], stdout=subprocess.PIPE, "
              "stderr=subprocess.PIPE)\n"
              "p.stdout.readline(); p.stdout.close()\n"
              "err = p.stderr.read().decode(); code = p.wait()\n"
              "print(code); print(err)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60).stdout
    code, _, err = out.partition("\n")
    assert code.strip() == "0" and "Traceback" not in err, out


SWEEP = ["sweep", "quickstart", "--grid", "network.agents=3,4,5,6", "--trials", "4", "--jobs", "2",
         "--set", "run.horizon=20000", "--quiet", "--no-plots"]


def _children(pid: int) -> list[int]:
    try:
        text = open(f"/proc/{pid}/task/{pid}/children").read()  # noqa: SIM115
    except OSError:
        return []
    return [int(c) for c in text.split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG (Linux)")
def test_sigkill_mid_sweep_then_rerun_resumes_to_identical_tables(tmp_path):
    """kill -9 of `netsim sweep --jobs 2` while units are being written: its pool workers die with it (no
    reparented worker keeps the folder's lock), and the same command then resumes without any clean-up and
    ends with tables identical to an uninterrupted run."""
    import signal
    import time

    killed, clean = tmp_path / "killed", tmp_path / "clean"
    command = [sys.executable, "-m", "netsim", *SWEEP]
    proc = subprocess.Popen([*command, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((killed / "units").glob("*.json"))) < 2:
        time.sleep(0.05)
    workers = _children(proc.pid)
    assert len(list((killed / "units").glob("*.json"))) >= 2 and proc.poll() is None, "the sweep ended too soon"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    stored = len(list((killed / "units").glob("*.json")))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{w}") and
                                                "zombie" not in open(f"/proc/{w}/status").read().lower()
                                                for w in workers):
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{w}/status") and "zombie" not in open(f"/proc/{w}/status").read().lower()
                   for w in workers), "a pool worker outlived its parent"
    assert stored < 16
    for out in (killed, clean):
        done = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    for name in ("sweep.csv", "sweep_agents.csv", "sweep_timeseries.csv"):
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name


def test_unwritable_output_is_refused_before_any_trial(capsys, monkeypatch):
    """`--out /proc/x` used to fail after the whole simulation (FileNotFoundError): now it is refused first."""
    import netsim.experiment.api as api

    ran = []
    monkeypatch.setattr(api, "run", lambda *a, **k: ran.append(1))
    one_line_error(capsys, ["run", "quickstart", "--out", "/proc/netsim-x", *QUICK], "cannot write there")
    assert not ran


def test_missing_parquet_writer_is_refused_before_any_trial(capsys, monkeypatch, tmp_path):
    import importlib.util

    import netsim.experiment.api as api

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    ran = []
    monkeypatch.setattr(api, "run", lambda *a, **k: ran.append(1))
    one_line_error(capsys, ["run", "quickstart", "--format", "parquet", "--out", str(tmp_path / "p"), *QUICK],
                   "pyarrow", "--format csv")
    assert not ran


def test_ctrl_c_while_drawing_figures_says_what_the_folder_holds(capsys, monkeypatch, tmp_path):
    """Ctrl-C during the figures: the new tables are complete, no figure of the previous run stays beside them,
    and the message says so (it used to say that nothing was written)."""
    import netsim.experiment.plots as plots

    out = tmp_path / "r"
    assert main(["run", "quickstart", "--out", str(out), "--set", "run.horizon=50", "--quiet", "--plots"]) == 0
    assert (out / "regret.png").is_file()
    before = (out / "trials.csv").read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "write_figures", interrupted)
    assert main(["run", "quickstart", "--out", str(out), "--set", "run.horizon=60", "--quiet", "--plots"]) == 130
    err = capsys.readouterr().err
    assert "tables are complete" in err and "netsim plot" in err
    assert (out / "trials.csv").read_bytes() != before
    assert not list(out.glob("*.png"))


def test_arm_count_times_agents_is_bounded(capsys):
    """A fuzzed li2022 scenario asked for 10,000,000 arms on 100 agents (8 GB per array): refused at once."""
    one_line_error(capsys, ["show", "li2022-fig11-case4", "--set", "bandit.arms=10000000"], "bandit.arms",
                   "20,000,000")


def test_wall_budget_stops_a_trial_of_slow_events(tmp_path):
    """The budget used to be looked at every 4096 events, so a trial of 1,000 slow steps (dubey2020a Fig. 1(c),
    byzantine, gamma = diameter: about 0.1 s each) ran to its end whatever the budget (a fuzzing 'hang')."""
    out = tmp_path / "b"
    argv = ["run", "dubey2020a-fig1c-byzantine-gammadiameter", "--trials", "1", "--set", "run.wall_budget=1",
            "--out", str(out), "--quiet", "--no-plots"]
    code = main(argv)
    import pandas as pd

    row = pd.read_csv(out / "trials.csv").iloc[0]
    reason = str(row["failure"])
    assert code == 0 and row["status"] == "failed" and "budget" in reason and row["end_time"] < 1000
