"""Issue 18 reproducers 6 (li2022 with a slot longer than the horizon) and 7 (random structures of
trials after the first): each is refused in one line, exit 2, before any trial runs."""

from __future__ import annotations

import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import Simulation
from netsim.engine.streams import Streams, trial_sequence
from netsim.experiment import sweeps as W
from netsim.experiment.cli import main
from netsim.experiment.sweeps.store import point_key
from tests.conftest import scenario_dict


def one_line_error(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("netsim: error:"), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.mark.parametrize("name", ["li2022-gis-path5", "li2022-fig8-homogeneous", "li2022-fig11-case5"])
def test_li2022_slot_longer_than_the_horizon_is_refused(capsys, tmp_path, name):
    """`--set clock.period=1e4` with a horizon of 100 used to end in a math domain error inside
    exploration_target (log of 8 K r^2 T with T = 0.01 slots) after the run had started."""
    one_line_error(capsys, ["run", name, "--set", "clock.period=1e4", "--set", "run.horizon=100", "--trials", "1",
                            "--out", str(tmp_path / "r"), "--quiet", "--no-plots"], "clock.period", "run.horizon")
    assert not (tmp_path / "r").exists()
    # one slot exactly still runs
    assert main(["run", name, "--set", "clock.period=100", "--set", "run.horizon=100", "--trials", "1",
                 "--out", str(tmp_path / "ok"), "--quiet", "--no-plots"]) == 0


def _er_document(seed: int, trials: int) -> dict:
    return scenario_dict(protocol={"name": "dubey2020a-private"},  # a protocol that sends: links act on it
                         network={"topology": "erdos_renyi", "agents": 6, "p": 0.5},
                         faults={"links": [{"u": 0, "v": 1, "start": 1.0, "end": 2.0}]},
                         run={"horizon": 20, "trials": trials, "seed": seed, "checkpoints": 2})


def _has_edge(document: dict, trial: int, point: tuple[int, ...] = ()) -> bool:
    """Whether trial ``trial``'s graph links agents 0 and 1 (the faults entry dropped to build it)."""
    plain = S.from_dict({**document, "faults": {}, "run": {**document["run"], "trials": 1}})
    graph, _ = S.trial_graph(plain, Streams(trial_sequence(plain.run["seed"], trial, point)))
    return graph.has_edge(0, 1)


def test_trial_graphs_are_the_graphs_the_trials_run_on():
    document = _er_document(seed=3, trials=1)
    plain = S.from_dict({**document, "faults": {}})
    for trial in range(4):
        graph, _ = S.trial_graph(plain, Streams(trial_sequence(3, trial)))
        sim = Simulation(plain, trial_sequence(3, trial), trial=trial)
        assert sorted(map(sorted, graph.edges)) == sorted(map(sorted, sim.network.graph.edges))


def test_a_link_missing_from_a_later_trials_random_graph_is_refused_at_load(capsys, tmp_path):
    """Only trial 0's graph used to be built when a scenario was validated: a `[faults] links` pair that is
    an edge there but not in a later trial's G(6, 0.5) passed `netsim show` and failed mid-run."""
    seed = next(s for s in range(200) if _has_edge(_er_document(s, 1), 0)
                and not all(_has_edge(_er_document(s, 1), t) for t in range(1, 8)))
    document = _er_document(seed, 8)
    bad = next(t for t in range(1, 8) if not _has_edge(document, t))
    with pytest.raises(InputError, match=rf"faults\.links\[0\]: in the erdos_renyi graph of trial {bad} "):
        S.from_dict(document)
    S.from_dict({**document, "run": {**document["run"], "trials": bad}})  # the trials before it are fine
    import tomli_w

    path = tmp_path / "er.toml"
    path.write_text(tomli_w.dumps(document))
    one_line_error(capsys, ["show", str(path)], f"trial {bad}", "faults.links[0]")
    one_line_error(capsys, ["run", str(path), "--out", str(tmp_path / "r"), "--quiet", "--no-plots"],
                   f"trial {bad}")
    assert not (tmp_path / "r").exists()


def test_a_sweep_checks_the_graphs_of_its_own_units():
    """A sweep's units seed their graphs with the grid point: those graphs are checked when the plan is made."""
    def unit_has_edge(seed: int, agents: int) -> bool:
        document = _er_document(seed, 1)
        document["network"]["agents"] = agents
        point = S.from_dict({**document, "faults": {}})
        graph, _ = S.trial_graph(point, Streams(trial_sequence(seed, 0, point_key({"network.agents": agents}))))
        return graph.has_edge(0, 1)

    # trial 0 of the plain run links 0 and 1 at both sizes, but trial 0 of one of the points does not
    seed = next(s for s in range(300) if all(_has_edge({**_er_document(s, 1), "network": {
        "topology": "erdos_renyi", "agents": n, "p": 0.5}}, 0) for n in (6, 7))
        and not all(unit_has_edge(s, n) for n in (6, 7)))
    document = _er_document(seed, 1)
    with pytest.raises(InputError, match=r"^--grid point network\.agents=\d: .*faults\.links\[0\]: in the "
                                         r"erdos_renyi graph of trial 0"):
        W.plan(S.from_dict(document), ["network.agents=6,7"])
