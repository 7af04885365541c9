"""``netsim sweep``: grid syntax, seeds and identities of units, the unit store, resume after
Ctrl-C and ``kill -9``, combined tables and figures, one-line errors."""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.engine.errors import InputError
from netsim.engine.streams import trial_sequence
from netsim.experiment import runner
from netsim.experiment import sweeps as W
from netsim.experiment.cli import main

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["run.horizon=120", "run.checkpoints=4"]
GRID = ["network.agents=3,5", "network.topology=ring,complete"]


@pytest.fixture(autouse=True)
def _no_progress(monkeypatch):
    monkeypatch.setenv("NETSIM_NO_PROGRESS", "1")


def cli_sweep(out: Path, *, grid=GRID, sets=SMALL, trials: int = 2, extra=()) -> int:
    argv = ["sweep", "quickstart", "--trials", str(trials), "--out", str(out), "--no-plots", "--quiet"]
    for g in grid:
        argv += ["--grid", g]
    for s in sets:
        argv += ["--set", s]
    return main([*argv, *extra])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


# ---------------------------------------------------------------------- grid syntax
@pytest.mark.parametrize("text, key, values", [
    ("protocol.epsilon=0.1,0.5,1", "protocol.epsilon", (0.1, 0.5, 1)),
    ("network.topology=ring,complete", "network.topology", ("ring", "complete")),
    ("network.topology = ring , star", "network.topology", ("ring", "star")),
    ('network.topology="ring","grid"', "network.topology", ("ring", "grid")),
    ("adversary.relay=true,false", "adversary.relay", (True, False)),
    ("bandit.means=[0.1, 0.9],[0.5,0.6]", "bandit.means", ([0.1, 0.9], [0.5, 0.6])),
    ('network.delay={model="constant", value=1},{model="uniform", low=0, high=2}', "network.delay",
     ({"model": "constant", "value": 1}, {"model": "uniform", "low": 0, "high": 2})),
    ("run.horizon=1e3,2_000", "run.horizon", (1000.0, 2000)),
    ('name="a,b",c', "name", ("a,b", "c")),
])
def test_grid_values_are_toml_like_set(text, key, values):
    axis = W.parse_axis(text)
    assert axis.key == key
    assert axis.values == values
    assert [type(v) for v in axis.values] == [type(v) for v in values]


@pytest.mark.parametrize("text, fragment", [
    ("protocol.epsilon", "no '='"),
    ("=1,2", "bad key"),
    ("protocol..epsilon=1", "bad key"),
    ("protocol.epsilon=", "empty value"),
    ("protocol.epsilon=1,,2", "empty value"),
    ("protocol.epsilon=1,", "empty value"),
    ("bandit.means=[0.1,0.2", "unbalanced"),
    ("bandit.means=0.1]", "unbalanced"),
    ('name="abc', "unbalanced"),
    ("name=a b", "neither a TOML value nor a bare word"),
    ("run.trials=1,2", "use --trials"),
])
def test_bad_grid_syntax_names_the_option_and_what_is_accepted(text, fragment):
    with pytest.raises(InputError) as info:
        W.parse_axis(text)
    message = str(info.value)
    assert fragment in message
    assert message.startswith(f"--grid {text!r}") and "accepted: KEY=V1,V2,..." in message
    assert "\n" not in message


def test_a_key_may_be_given_once():
    with pytest.raises(InputError, match="given twice"):
        W.parse_grid(["run.horizon=1,2", "run.horizon=3"])
    with pytest.raises(InputError, match="at least one --grid"):
        W.parse_grid([])


scalar = st.one_of(
    st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
    st.booleans(),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(scalar, st.lists(scalar, max_size=3)), min_size=1, max_size=5))
def test_toml_value_round_trips_through_grid_parsing(values):
    """Whatever ``toml_value`` writes (also how grid points become --set overrides) parses back."""
    axis = W.parse_axis("k=" + ",".join(W.toml_value(v) for v in values))
    assert len(axis.values) == len(values)
    for got, want in zip(axis.values, values):
        assert type(got) is type(want)
        assert got == want or (isinstance(want, float) and math.isnan(want))


# ---------------------------------------------------------------------- seeds and identities
def test_point_key_is_a_stable_hash_of_the_sorted_pairs():
    pairs = {"protocol.epsilon": 0.5, "network.agents": 10}
    text = '[["network.agents",10],["protocol.epsilon",0.5]]'
    digest = hashlib.sha256(text.encode()).digest()
    expected = (int.from_bytes(digest[:4], "big"), int.from_bytes(digest[4:8], "big"))
    assert W.point_key(pairs) == expected
    assert W.point_key(dict(reversed(list(pairs.items())))) == expected
    assert W.point_key({**pairs, "protocol.epsilon": 0.25}) != expected


def test_units_seed_from_scenario_seed_point_and_trial():
    plan = W.plan("quickstart", GRID, overrides=SMALL, trials=3, seed=7)
    units = plan.units()
    assert len(units) == 4 * 3 and len({u.id for u in units}) == 12
    for planned in units:
        unit = planned.unit()
        expected = trial_sequence(7, planned.trial, W.point_key(planned.point.assignments))
        got = unit.seed_sequence()
        assert (got.entropy, got.spawn_key) == (expected.entropy, expected.spawn_key) == (
            7, (*W.point_key(planned.point.assignments), planned.trial))
    # every unit draws from its own stream
    states = {tuple(u.unit().seed_sequence().generate_state(4)) for u in units}
    assert len(states) == len(units)


def test_grid_order_and_spelling_do_not_change_units():
    a = W.plan("quickstart", ["network.agents=3,5", "network.topology=ring,complete"], overrides=SMALL, trials=2)
    b = W.plan("quickstart", ["network.topology=complete,ring", "network.agents=5,3"], overrides=SMALL, trials=2)
    by_id = {u.id: u for u in b.units()}
    assert set(by_id) == {u.id for u in a.units()}
    for unit in a.units():
        assert by_id[unit.id].unit().seed_sequence().spawn_key == unit.unit().seed_sequence().spawn_key
    # run.horizon is a real: 100 and 100.0 are one point (identity uses the validated value)
    c = W.plan("quickstart", ["run.horizon=100,200"], trials=1)
    d = W.plan("quickstart", ["run.horizon=100.0,200.0"], trials=1)
    assert [u.id for u in c.units()] == [u.id for u in d.units()]
    with pytest.raises(InputError, match="are the same scenario"):
        W.plan("quickstart", ["run.horizon=100,100.0"], trials=1)


def test_changing_the_scenario_or_the_seed_changes_the_units_but_more_trials_do_not():
    base = {u.id for u in W.plan("quickstart", GRID, overrides=SMALL, trials=2).units()}
    more = [u.id for u in W.plan("quickstart", GRID, overrides=SMALL, trials=3).units()]
    assert base < set(more)
    assert not base & {u.id for u in W.plan("quickstart", GRID, overrides=SMALL, trials=2, seed=9).units()}
    longer = W.plan("quickstart", GRID, overrides=["run.horizon=121", "run.checkpoints=4"], trials=2)
    assert not base & {u.id for u in longer.units()}


def test_every_point_is_validated_up_front():
    with pytest.raises(InputError) as info:
        W.plan("quickstart", ["network.agents=4,0"], overrides=SMALL)
    assert str(info.value).startswith("--grid point network.agents=0: ") and "network.agents" in str(info.value)
    with pytest.raises(InputError, match="protocol.epsilonn: unknown key"):
        W.plan("quickstart", ["protocol.epsilonn=1,2"], overrides=SMALL)
    with pytest.raises(InputError, match="--seed and --grid run.seed"):
        W.plan("quickstart", ["run.seed=1,2"], seed=3)


# ---------------------------------------------------------------------- store
def test_store_round_trip_and_damaged_files(tmp_path):
    plan = W.plan("quickstart", ["network.agents=3"], overrides=SMALL, trials=1)
    [planned] = plan.units()
    result = planned.unit().run()
    store = W.UnitStore(tmp_path / "units")
    assert store.get(planned.id) is None
    store.put(planned.id, W.encode_result(planned, result))
    back = W.decode_result(store.get(planned.id))
    assert back.row == result.row
    for table in ("agents", "timeseries"):
        for column, values in getattr(result, table).items():
            restored = getattr(back, table)[column]
            assert restored.dtype == values.dtype and np.array_equal(restored, values)
    path = store.path(planned.id)
    good = path.read_bytes()
    for damaged in (good[: len(good) // 2], good.replace(b'"trial":0', b'"trial":1'), good + b"x\n", b""):
        path.write_bytes(damaged)
        assert store.get(planned.id) is None
    path.write_bytes(good)
    (store.folder / f".{planned.id}.json.0123456789abcdef.tmp").write_bytes(good[:10])  # a killed writer's staging file
    assert store.ids() == {planned.id}
    assert store.clean() == 1 and not list(store.folder.glob(".*"))


def test_a_second_sweep_cannot_write_the_same_folder(tmp_path):
    with W.locked(tmp_path), pytest.raises(InputError, match="another sweep is writing"), W.locked(tmp_path):
        pass
    with W.locked(tmp_path):  # released
        pass


# ---------------------------------------------------------------------- command line
def test_sweep_writes_combined_tables_and_figures(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["sweep", "quickstart", "--grid", "network.agents=3,5", "--grid", "network.topology=ring,complete",
                 "--trials", "2", "--set", "run.horizon=120", "--set", "run.checkpoints=4", "--out", str(out),
                 "--quiet"]) == 0
    stdout = capsys.readouterr().out
    assert "regret_by_network.agents.png" in stdout and "regret_by_network.topology.png" in stdout
    assert (out / "regret_by_network.agents.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for png in out.glob("*.png"):
        png.unlink()
    assert main(["plot", str(out)]) == 0  # redrawn from meta.json and sweep_timeseries.csv
    assert sorted(p.name for p in out.glob("*.png")) == ["regret_by_network.agents.png",
                                                          "regret_by_network.topology.png"]
    frame = pd.read_csv(out / "sweep.csv")
    assert list(frame.columns[:4]) == ["network.agents", "network.topology", "point", "scenario"]
    assert list(zip(frame["network.agents"], frame["network.topology"], frame["point"], frame["trial"])) == [
        (3, "ring", 0, 0), (3, "ring", 0, 1), (3, "complete", 1, 0), (3, "complete", 1, 1),
        (5, "ring", 2, 0), (5, "ring", 2, 1), (5, "complete", 3, 0), (5, "complete", 3, 1)]
    assert (frame["agents"] == frame["network.agents"]).all()
    agents = pd.read_csv(out / "sweep_agents.csv")
    assert len(agents) == 2 * (3 + 3 + 5 + 5)
    series = pd.read_csv(out / "sweep_timeseries.csv")
    assert len(series) == 8 * 5
    last = series.groupby(["point", "trial"]).last()["group_regret"].to_numpy()
    assert np.array_equal(last, frame["group_regret"].to_numpy())
    # The sweep's rows are those of the per-unit runs (same seeds, same code path).
    plan = W.plan("quickstart", GRID, overrides=SMALL, trials=2)
    unit = plan.units()[5]
    assert frame.loc[5, "group_regret"] == unit.unit().run().row["group_regret"]


def test_resume_runs_only_missing_units_and_gives_the_same_tables(tmp_path, capsys):
    fresh, grown = tmp_path / "fresh", tmp_path / "grown"
    assert cli_sweep(fresh, trials=3) == 0
    assert cli_sweep(grown, trials=1) == 0
    assert "0 unit(s) found in the store, 4 run now" in capsys.readouterr().err
    assert cli_sweep(grown, trials=3) == 0
    assert "4 unit(s) found in the store, 8 run now" in capsys.readouterr().err
    assert cli_sweep(grown, trials=3) == 0
    assert "12 unit(s) found in the store, 0 run now" in capsys.readouterr().err
    for table in ("sweep.csv", "sweep_agents.csv", "sweep_timeseries.csv"):
        assert (fresh / table).read_bytes() == (grown / table).read_bytes()


def test_errors_are_one_line_exit_2_and_keep_finished_units(tmp_path, capsys):
    out = tmp_path / "s"
    assert cli_sweep(out, trials=1) == 0
    units = snapshot(out / "units")
    assert len(units) == 4
    capsys.readouterr()
    for grid, fragment in (
        ([*GRID, "protocol.epsilon"], "no '='"),
        ([*GRID, "protocol.epsilon=1,,2"], "empty value"),
        ([*GRID, "protocol.epsilonn=1,2"], "protocol.epsilonn: unknown key"),
        ([*GRID, "network.topolgy=ring"], "network.topolgy"),
        (["network.agents=3,5", "network.agents=7"], "given twice"),
    ):
        assert cli_sweep(out, grid=grid, trials=2) == 2
        err = capsys.readouterr().err
        assert err.startswith("netsim: error: ") and fragment in err and err.count("\n") == 1, err
        assert snapshot(out / "units") == units
    assert main(["sweep", "quickstart", "--out", str(out)]) == 2
    assert "--grid" in capsys.readouterr().err


def test_ctrl_c_keeps_finished_units(tmp_path, monkeypatch, capsys):
    """KeyboardInterrupt after the second stored unit: exit 130, two units kept, rerun completes."""
    out = tmp_path / "s"
    original, calls = W.UnitStore.put, []

    def put_then_interrupt(self, uid, record):
        original(self, uid, record)
        calls.append(uid)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(W.UnitStore, "put", put_then_interrupt)
    assert cli_sweep(out) == 130
    assert "interrupted; 2 of 8 unit(s) are stored in" in capsys.readouterr().err
    assert not (out / "sweep.csv").exists()
    assert W.UnitStore(out / "units").ids() == set(calls)
    monkeypatch.setattr(W.UnitStore, "put", original)
    assert cli_sweep(out) == 0
    assert "2 unit(s) found in the store, 6 run now" in capsys.readouterr().err


def test_sigkill_mid_sweep_then_rerun_gives_every_unit_once(tmp_path):
    """SIGKILL a real sweep process once some units are stored; the rerun completes only the rest."""
    out, reference = tmp_path / "killed", tmp_path / "reference"
    argv = [sys.executable, "-m", "netsim", "sweep", "quickstart", "--grid", "network.topology=ring,complete",
            "--trials", "8", "--set", "run.horizon=1200", "--set", "run.checkpoints=3", "--out", str(out),
            "--no-plots", "--quiet"]
    env = {**os.environ, "NETSIM_NO_PROGRESS": "1"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    store = W.UnitStore(out / "units")
    deadline = time.monotonic() + 120
    try:
        while len(store.ids()) < 3:
            assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read()!r}"
            assert time.monotonic() < deadline, "no unit stored within 120 s"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    kept = store.ids()
    assert 3 <= len(kept) < 16
    assert all(store.get(uid) is not None for uid in kept)  # whole units only
    assert not (out / "sweep.csv").exists()

    rerun = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    found = re.search(r"(\d+) unit\(s\) found in the store, (\d+) run now", rerun.stderr)
    assert found and int(found[1]) == len(kept) and int(found[1]) + int(found[2]) == 16
    assert store.clean() == 0  # no temporary file left behind by either run

    frame = pd.read_csv(out / "sweep.csv")
    pairs = list(zip(frame["network.topology"], frame["trial"]))
    assert sorted(pairs) == sorted((t, i) for t in ("ring", "complete") for i in range(8))  # each unit once
    assert not frame.isna().any().any()  # no partial row
    assert len(store.ids()) == 16
    # and the tables are those of an uninterrupted sweep
    plan = W.plan("quickstart", ["network.topology=ring,complete"],
                  overrides=["run.horizon=1200", "run.checkpoints=3"], trials=8)
    outcome = W.run(plan, reference, executor=runner.ProcessExecutor(2), progress=False)
    W.write_tables(reference, W.tables(plan, outcome.results))
    for table in ("sweep.csv", "sweep_agents.csv", "sweep_timeseries.csv"):
        assert (out / table).read_bytes() == (reference / table).read_bytes()
