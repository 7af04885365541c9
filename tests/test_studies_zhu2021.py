"""The zhu2021 studies (scenarios/studies/zhu2021-fig2*.toml and tradeoff-zhu2021-*.toml).

Every study is planned at both scales (cheap: scenarios resolved and figures checked, nothing
runs), then run at its quick scale with 2 trials per point and a horizon shortened to keep this
file under a minute of CPU (about 35 s), and every figure is checked from the numbers it plots
(:func:`netsim.experiment.studies.figures.figure_data`): one curve per variant, the paper's time axis or the
study's grid as x, finite means inside their 95 % intervals, no unfinished or failed trial.

Fig. 2(c) needs the UCI file, which is not shipped: the bundled study must stop before running
anything with one line naming the file, and it runs on a small generated file of the schema.
No ordering of regrets is asserted (at these horizons the per-trial draws of mu_(i,k) decide it);
the invariants asserted hold by construction and say why.
"""

from __future__ import annotations

import math
import tomllib
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from netsim.engine.errors import InputError
from netsim.experiment import runner, studies
from netsim.experiment.api import run_study
from netsim.experiment.studies import spec
from netsim.experiment.studies.figures import figure_data
from tests.test_zhu2021_diabetes import ARM_MEDS, encounter, write

TRIALS = 2
EPS = ["eps=1", "eps=2", "eps=5", "eps=inf (Gossip_UCB)"]
EPS_VALUES = [1.0, 2.0, 5.0, math.inf]
TRADEOFF = ["Gossip_UCB", "Fed_UCB eps=10", "UCB1 (isolated)", "central UCB"]
TRADEOFF_GRID = {"tradeoff-zhu2021-delay": ("network.delay.mean", [0.01, 1.0, 2.0, 5.0, 10.0]),
                 "tradeoff-zhu2021-loss": ("network.loss", [0.0, 0.1, 0.2, 0.3])}
# fig2 study -> (agents, arms, topology, bandit kind)
FIG2 = {"zhu2021-fig2a": (3, 5, "complete", "heterogeneous"), "zhu2021-fig2b": (10, 10, "path", "heterogeneous"),
        "zhu2021-fig2c": (3, 5, "complete", "diabetes")}
UCI_FILE = Path(str(files("scenarios"))) / "data" / "diabetic_data.csv"   # where zhu2021-fig2c looks


@pytest.fixture(scope="module")
def diabetes_file(tmp_path_factory):
    """A small file of the UCI schema: 3 hospitals x 5 arms x 6 rows, different rates per hospital."""
    rows, i = [], 0
    for h in range(3):
        for k, meds in enumerate(ARM_MEDS):
            ones = (h + 2 * k) % 5 + 1
            for r in range(6):
                rows.append(encounter(i, ">30" if r < ones else ("NO" if r % 2 else "<30"), **meds))
                i += 1
    return write(tmp_path_factory.mktemp("uci") / "diabetic_data.csv", rows)


def load(name: str, *, quick: dict | None = None, every: dict | None = None) -> studies.Study:
    """The bundled study ``name``, with ``quick`` added to its quick scale's overrides and ``every``
    to every variant's (how the tests shorten a run or point Fig. 2(c) at a generated file)."""
    path = spec.locate(name)
    text = path.read_text()
    document = tomllib.loads(text)
    document["scale"]["quick"].setdefault("set", {}).update(quick or {})
    for variant in document["variant"]:
        variant.setdefault("set", {}).update(every or {})
    return spec.parse(document, path=path, text=text)


def run_quick(study: studies.Study, out: Path):
    with runner.SerialExecutor() as pool:
        results = run_study(studies.plan(study, "quick", trials=TRIALS), out, executor=pool)
    return results, results.tables()


def check_points(data, trials=TRIALS):
    assert np.isfinite(data["mean"]).all()
    assert (data["lo"] <= data["mean"]).all() and (data["mean"] <= data["hi"]).all()
    assert (data["n"] == trials).all()


# ---------------------------------------------------------------------- planning (nothing runs)
@pytest.mark.parametrize("scale", ["quick", "paper"])
@pytest.mark.parametrize("name", list(FIG2))
def test_fig2_plans_at_both_scales(name, scale, diabetes_file):
    agents, arms, topology, kind = FIG2[name]
    every = {"bandit.file": str(diabetes_file)} if kind == "diabetes" else None
    plan = studies.plan(load(name, every=every), scale)
    assert [p.variant for p in plan.points] == EPS
    assert [p.scenario.protocol["epsilon"] for p in plan.points] == EPS_VALUES
    for point in plan.points:
        sc = point.scenario
        assert (sc.network["agents"], sc.bandit.get("arms", 5), sc.network["topology"], sc.bandit["kind"]) == (
            agents, arms, topology, kind)
        assert sc.protocol["name"] == "fed-ucb" and sc.protocol["mode"] == "paper"
        assert sc.run["horizon"] == (1e6 if scale == "paper" else 1e4)   # the paper's T = 1e6
    assert plan.trials == (20 if scale == "paper" else 4)


@pytest.mark.parametrize("scale", ["quick", "paper"])
@pytest.mark.parametrize("name", list(TRADEOFF_GRID))
def test_tradeoff_plans_at_both_scales(name, scale):
    key, values = TRADEOFF_GRID[name]
    study = studies.load(name)
    assert study.grid == {key: tuple(values)}
    plan = studies.plan(study, scale)
    # the two baselines send nothing: they run once (grid = false), drawn as references
    assert len(plan.points) == 2 * len(values) + 2
    protocols = {p.variant: p.scenario.protocol for p in plan.points}
    assert {v: p["name"] for v, p in protocols.items()} == {"Gossip_UCB": "gossip-ucb", "Fed_UCB eps=10": "fed-ucb",
                                                            "UCB1 (isolated)": "ucb1", "central UCB": "central-ucb"}
    assert protocols["Gossip_UCB"]["mode"] == protocols["Fed_UCB eps=10"]["mode"] == "realistic"
    for point in plan.points:
        sc = point.scenario
        silent = sc.protocol["name"] in ("ucb1", "central-ucb")
        assert sc.network["delay"]["model"] == ("constant" if silent else "exponential")
        assert (sc.network["agents"], sc.network["topology"], sc.bandit["arms"]) == (3, "complete", 5)
        assert point.params[key] == (None if silent else point.assignments[key])


def test_fig2c_without_the_uci_file_is_one_line_naming_it():
    if UCI_FILE.exists():
        pytest.skip(f"{UCI_FILE} is present")
    for scale in ("quick", "paper"):
        with pytest.raises(InputError) as err:
            studies.plan(studies.load("zhu2021-fig2c"), scale)
        text = str(err.value)
        assert "\n" not in text
        assert "zhu2021-fig2c.toml" in text and "diabetic_data.csv" in text and "not found" in text
        assert "variant 'eps=1'" in text


# ---------------------------------------------------------------------- running at quick scale
@pytest.mark.parametrize("name", list(FIG2))
def test_fig2_series_of_regret_per_eps(name, tmp_path, diabetes_file):
    """Fig. 2 plots per-agent regret against time, one curve per eps, from 0 to the horizon
    (shortened from the quick scale's 1e4 ticks to 3,000)."""
    every = {"bandit.file": str(diabetes_file)} if FIG2[name][3] == "diabetes" else None
    study = load(name, quick={"run.horizon": 3000}, every=every)
    results, tables = run_quick(study, tmp_path)
    assert set(results.trials["status"]) == {"ok"}
    (figure,) = study.figures
    assert (figure.kind, figure.y, figure.x) == ("series", "mean_agent_regret", "time")
    data = figure_data(figure, tables)
    assert list(data["hue"].unique()) == EPS
    for _, curve in data.groupby("hue"):
        times = curve["time"].to_numpy()
        assert times[0] == 0 and times[-1] == 3000 and len(times) == 101   # checkpoints = 100
        assert np.all(np.diff(times) > 0)
        assert (np.diff(curve["mean"].to_numpy()) >= -1e-9).all()         # pseudo-regret never falls
    check_points(data)
    # eps = inf adds no noise; the finite eps draw Laplace noise (Alg. 3)
    noise = results.trials.groupby("variant")["noise_terms"].min()
    assert noise["eps=inf (Gossip_UCB)"] == 0 and (noise[EPS[:3]] > 0).all()


@pytest.fixture(scope="module")
def tradeoffs(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            study = load(name, quick={"run.horizon": 1500})
            cache[name] = (study, *run_quick(study, tmp_path_factory.mktemp(name)))
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(TRADEOFF_GRID))
def test_tradeoff_figures(tradeoffs, name):
    """Final figures (one panel per metric, one curve per protocol, x = the grid values) and the
    trade-off plot (one point per protocol and grid value, intervals on both axes, a Pareto front)."""
    study, results, tables = tradeoffs(name)
    key, values = TRADEOFF_GRID[name]
    assert set(results.trials["status"]) == {"ok"}
    kinds = [f.kind for f in study.figures]
    assert "final" in kinds and kinds.count("tradeoff") == 1
    for figure in study.figures:
        data = figure_data(figure, tables)
        if figure.kind == "final":
            assert figure.x == key
            drawn = list(figure.variants) or TRADEOFF
            for metric in figure.metrics:
                panel = data[data["facet"] == metric] if figure.panels else data
                assert sorted(panel["hue"].unique()) == sorted(drawn)
                for _, curve in panel.groupby("hue"):
                    # the baselines send nothing and run once: a reference (x NaN) drawn across the panel
                    assert list(curve["x"]) == values or (len(curve) == 1 and curve["x"].isna().all())
                check_points(panel)
            continue
        assert figure.y == "mean_agent_regret"
        assert len(data) == 2 * len(values) + 2  # two protocols on the grid, two references
        for axis in ("x_", "y_"):
            assert np.isfinite(data[f"{axis}mean"]).all()
            assert (data[f"{axis}lo"] <= data[f"{axis}mean"]).all() and (data[f"{axis}mean"] <= data[f"{axis}hi"]).all()
        assert data["pareto"].any()


@pytest.mark.parametrize("name", list(TRADEOFF_GRID))
def test_tradeoff_costs_by_construction(tradeoffs, name):
    """Invariants the notes rely on. In realistic mode every link of K3 carries the n-tilde counts
    every tick, so comm_cost (links used per tick, c2 = 1) is 3 per tick whatever the delay or loss;
    UCB1 and central UCB send nothing (central UCB pays c1 per upload all the same). Gossip_UCB and
    Fed_UCB send exactly the same messages in
    the same trial: which link fires and what is delayed or lost come from streams the rewards and
    the privacy noise never touch (common random numbers), so their comparison is paired."""
    _, results, _ = tradeoffs(name)
    trials = results.trials
    talk = trials["variant"].isin(["Gossip_UCB", "Fed_UCB eps=10"])
    assert (trials.loc[talk, "comm_cost"] == 3 * 1500).all()
    assert (trials.loc[~talk, "messages_sent"] == 0).all()
    # UCB1 pays nothing; central UCB pays c1 = 25 per upload, one per agent and tick (li2022 Eq. 2)
    central = trials["variant"] == "central UCB"
    assert (trials.loc[~talk & ~central, "comm_cost"] == 0).all()
    assert (trials.loc[central, "comm_cost"] == 25 * 3 * 1500).all()
    gossip = trials[trials["variant"] == "Gossip_UCB"].set_index(["point", "trial"])["messages_sent"]
    fed = trials[trials["variant"] == "Fed_UCB eps=10"]
    fed = fed.assign(point=fed["point"] - len(TRADEOFF_GRID[name][1])).set_index(["point", "trial"])["messages_sent"]
    assert gossip.to_dict() == fed.to_dict()


def test_fewer_gossip_exchanges_at_longer_delays(tradeoffs):
    """An agent with an exchange still open starts no other, so completed exchanges fall as the
    delay grows. Power: at 1,500 ticks the measured means are about 1,500, 640, 410, 200 and 110
    for mean delays 0.01, 1, 2, 5 and 10 (each step at least 1.8 times the next), while the count
    over a run varies by a few per cent between trials (links fire on Poisson clocks)."""
    study, _, tables = tradeoffs("tradeoff-zhu2021-delay")
    figure = next(f for f in study.figures if f.y == "gossip_exchanges")
    data = figure_data(figure, tables)
    for _, curve in data.groupby("hue"):
        assert (np.diff(curve["mean"].to_numpy()) < 0).all()
