"""The benchmarks of ``python -m benchmarks``: one function per benchmark, returning a JSON-able dict.

Each benchmark reuses the workload of its family script (``benchmarks/<family>.py``) and measures
it with :func:`benchmarks.harness.run_case` against a baseline run in the same process, so the
ratios are comparable even when the machine is busy. ``quick`` selects tiny sizes (a smoke test:
the numbers then mean nothing).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import dubey2020a as dubey_bench
from benchmarks import engine as engine_bench
from benchmarks import feducb as feducb_bench
from benchmarks import peers as peers_bench
from benchmarks import process
from benchmarks import realistic as realistic_bench
from benchmarks import rio2023 as rio_bench
from benchmarks import scale as scale_bench
from benchmarks import zhu2021 as zhu_bench
from benchmarks.harness import loglog_slope, maxrss_mib, paired_ratio, run_case, run_cases, summary
from netsim.engine.distributions import Distribution
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence

ROOT = Path(__file__).resolve().parents[1]
PEER_COMMANDS = "NETSIM_PEER_COMMANDS"

#: Sizes of every benchmark: full run (the page) and --quick (smoke test).
SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "repeats": 3,
        "engine": {"agents": 200, "degree": 4, "ticks": 100},
        "engine_rounds": 9,
        "gossip": {"ticks": 5000},
        "local": {"agents": 200, "horizon": 100},
        "feducb": {"horizon": 1000},
        "bai": {"agents": 1024, "reference_rounds": 10000},
        "bai_repeats": 7,
        "scaling": {"agents": [50, 100, 200, 400, 800], "horizons": [1000, 10000, 100000]},
    },
    "quick": {
        "repeats": 1,
        "engine": {"agents": 20, "degree": 4, "ticks": 5},
        "engine_rounds": 2,
        "gossip": {"ticks": 100},
        "local": {"agents": 20, "horizon": 5, "extra": ["network.p=0.5"]},
        "feducb": {"horizon": 20},
        "bai": {"agents": 64, "reference_rounds": 200},
        "bai_repeats": 1,
        "scaling": {"agents": [10, 20], "horizons": [100, 200]},
    },
}


def scenario_path(name: str) -> str:
    """Path of a bundled scenario of this checkout (not of an installed copy)."""
    return str(ROOT / "scenarios" / f"{name}.toml")


def run_scenario(name: str, overrides: list[str], trial: int = 0) -> dict:
    """One trial of a bundled scenario (``KEY=`` removes KEY); returns its ``trials.csv`` row."""
    sc = zhu_bench.load(name, overrides)
    return run_trial(sc, trial_sequence(sc.run["seed"], trial), trial).row


# ----------------------------------------------------------------------------- engine
def engine(quick: bool) -> dict:
    """Engine message throughput against SimPy (a process per message; a timeout and callback per message)
    and a plain heapq loop: interleaved rounds, median of the per-round ratios (benchmarks/engine.py)."""
    size = SIZES["quick" if quick else "full"]
    e = size["engine"]
    rounds = size["engine_rounds"]
    cases, ratios, ranges = {}, {}, {}
    for label, delay in (("constant", Distribution("constant", {"value": 1.0})),
                         ("exponential", Distribution("exponential", {"mean": 1.0}))):
        peaks = {}
        for impl, fn in engine_bench.IMPLEMENTATIONS.items():  # the peak heap of one run, untimed
            tracemalloc.start()
            try:
                fn(delay, e["agents"], e["degree"], e["ticks"])
                peaks[impl] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
            finally:
                tracemalloc.stop()
        run = engine_bench.interleaved(delay, rounds, e["agents"], e["degree"], e["ticks"])
        for impl in engine_bench.IMPLEMENTATIONS:
            cpu, work = run["cpu_s"][impl], run["messages"][impl]
            cases[f"{impl}-{label}"] = {"repeats": rounds, "work": work, "wall_s": summary(run["wall_s"][impl]),
                                        "cpu_s": summary(cpu), "rate_per_cpu_s": summary([work / c for c in cpu]),
                                        "peak_heap_mib": peaks[impl], "maxrss_mib": maxrss_mib(), "info": {}}
        for name in ("engine", "engine-many"):  # one broadcast call per agent; one broadcast_each per tick
            for baseline in ("naive", "callbacks", "heapq"):
                key = f"{name}/{baseline} ({label} delays)"
                paired = summary(engine_bench.paired_ratios(run, name, baseline))
                ratios[key] = paired["median"]
                ranges[key] = [paired["min"], paired["max"]]
    return {
        "title": "Engine message throughput vs SimPy (a process per message; a timeout and callback per message) "
                 "and a plain heapq loop",
        "workload": f"{e['agents']} agents, {e['degree']}-regular graph, every agent broadcasts every tick for "
                    f"{e['ticks']} ticks (engine: one broadcast call per agent; engine-many: one broadcast_each "
                    "call per tick for all agents), one handler call per message (each implementation hands its "
                    "handler the same fields: kind, source, destination, payload, send and due times, size); unit: "
                    f"messages delivered. {rounds} rounds, one run of each implementation per round in an order "
                    "rotated per round; a ratio is the median over the rounds of the ratio of CPU times within "
                    "a round (paired runs under the same load), its rounds' range in brackets",
        "unit": "messages",
        "cases": cases,
        "ratios": ratios,
        "ratio_ranges": ranges,
        "targets": {"engine/naive (constant delays)": [">=", 5.0], "engine/naive (exponential delays)": [">=", 5.0],
                    "engine/callbacks (exponential delays)": [">=", 3.0],
                    "engine/heapq (exponential delays)": [">=", 0.7],
                    "engine-many/callbacks (exponential delays)": [">=", 3.0],
                    "engine-many/heapq (exponential delays)": [">=", 0.7]},
    }


def realistic(quick: bool) -> dict:
    """Realistic mode (sampled delays) against paper mode of the same trial, same run (benchmarks/realistic.py)."""
    out = realistic_bench.measure(quick)
    ratios, ranges, targets = {}, {}, {}
    for label, case in out["cases"].items():
        key = f"realistic/paper CPU, {label}"
        ratios[key] = case["ratio"]
        ranges[key] = case["ratio_range"]
        if case["target"]:
            targets[key] = ["<=", case["target"]]
    limits = {}
    big = out["big"].get("realistic", {})
    cpu, mib = realistic_bench.BIG_LIMITS
    limits["realistic dubey2020a-private M = 10,000, exponential delays: CPU s"] = ["<=", cpu, big.get("cpu_s")]
    limits["realistic dubey2020a-private M = 10,000, exponential delays: MiB"] = ["<=", mib, big.get("maxrss_mib")]
    return {
        "title": "Realistic mode against paper mode of the same trial",
        "workload": "one trial of each scenario as bundled (paper mode) and with sampled per-hop delays, same seed, "
                    "alternately in one process (CPU s; a ratio is the median of the per-pair ratios); the engine's "
                    "share is from a cProfile of one realistic trial; M = 10,000: two whole netsim run processes",
        "unit": "CPU s",
        "realistic": out,
        "ratios": ratios,
        "ratio_ranges": ranges,
        "targets": targets,
        "limits": limits,
    }


def startup(quick: bool) -> dict:
    """CPU seconds a ``netsim run`` spends before its first trial (benchmarks/process.py)."""
    process.startup()  # untimed: writes the bytecode of every module it imports (benchmarks/__init__.py)
    runs = [process.startup() for _ in range(1 if quick else 5)]
    cpu = sorted(r["cpu_s"] for r in runs)
    return {
        "title": "Start-up of netsim run (imports, scenario checks) before the first trial",
        "workload": "a child process imports the CLI, runner and results modules and every registered protocol, "
                    "loads and checks the quickstart scenario (dry build of its network) and makes the executor; "
                    "unit: CPU s of the whole child process, interpreter start included, bytecode already "
                    "compiled by one untimed run (as after an installed netsim's first run)",
        "unit": "CPU s",
        "runs": runs,
        "startup_cpu_s": cpu[len(cpu) // 2],
        "ratios": {},
        "targets": {},
        "limits": {"start-up CPU s (median)": ["<=", 0.4, cpu[len(cpu) // 2]]},
    }


def peers(quick: bool) -> dict:
    """Agent-steps per CPU s of the whole netsim run process on the two peer settings (benchmarks/peers.py).

    A ratio to a peer code only when it ran in this run: its command line from ``NETSIM_PEER_COMMANDS``
    (JSON, scenario -> command), measured the same way; otherwise its reported figure is shown as such.
    """
    overrides = ["run.horizon=20"] if quick else []
    commands = {k: shlex.split(v) for k, v in json.loads(os.environ.get(PEER_COMMANDS, "{}")).items()}
    out = peers_bench.measure(repeats=1 if quick else 3, overrides=overrides, peer_commands=commands)
    ratios = {f"agent-steps per CPU s / {v['peer']} ({k}), same run": v["times_peer"]
              for k, v in out.items() if "times_peer" in v}
    return {
        "title": "Whole netsim run process on the peer codes' settings: agent-steps per CPU second",
        "workload": "peer-mpucb-byzantine (M = 200, G(200, 0.1), K = 5, gamma = 1, byzantine, T = 200) and "
                    "peer-flooding-ucb (N = 100, G(100, 3/100), K = 50, gamma = 4, T = 300): one trial, tables "
                    "written, whole child process; a peer code is measured only when its command is given "
                    f"({PEER_COMMANDS}), else its figure reported for issue 16 is shown, labelled, in no ratio",
        "unit": "agent-steps",
        "peers": out,
        "ratios": ratios,
        "targets": {key: [">=", peers_bench.TARGET] for key in ratios},
    }


def scale(quick: bool) -> dict:
    """Cost against M for 100 -> 10,000 agents and the three scale settings (benchmarks/scale.py)."""
    out = scale_bench.measure(quick)
    limits = {}
    big = out["dubey2020a-private"][-1]
    limits[f"dubey2020a-private M = {big['agents']:,}: CPU s"] = ["<=", 60.0, big["cpu_s"]]
    limits[f"dubey2020a-private M = {big['agents']:,}: MiB"] = ["<=", 4096.0, big["maxrss_mib"]]
    for label, point in out["settings"].items():
        if "error" in point:
            limits[f"{label}: CPU s"] = ["<=", point["cpu_target_s"], None]
            continue
        limits[f"{label}: CPU s"] = ["<=", point["cpu_target_s"], point["cpu_s"]]
        if point["memory_target_mib"]:
            limits[f"{label}: MiB"] = ["<=", point["memory_target_mib"], point["maxrss_mib"]]
    return {
        "title": "Scale: one trial, whole process, against the number of agents",
        "workload": "dubey2020a-private, Erdos-Renyi mean degree 20, gamma = 2, T = 100, M = 100 ... 10,000; "
                    "gossip-ucb on a 10,000-agent ring, T = 1,000; ddp-mab on 1,000 agents, mean degree 10, "
                    "T = 1e5; CPU s (user + system) and peak RSS of the child process",
        "unit": "CPU s",
        "scale": out,
        "slope": loglog_slope([p["agents"] for p in out["dubey2020a-private"]],
                              [p["cpu_s"] for p in out["dubey2020a-private"]]),
        "ratios": {},
        "targets": {},
        "limits": limits,
    }


# ----------------------------------------------------------------------------- zhu2021
GOSSIP = ["protocol.name='gossip-ucb'", "protocol.epsilon="]


def gossip(quick: bool) -> dict:
    """Per-tick agent-steps of Gossip_UCB / Fed_UCB against the plain numpy loop (benchmarks/zhu2021.py)."""
    size = SIZES["quick" if quick else "full"]
    ticks = size["gossip"]["ticks"]
    runs = {
        "gossip-ucb (engine)": lambda: zhu_bench.engine_rate("zhu2021-fig2b-epsinf", ticks, GOSSIP),
        "plain numpy, eps = inf": lambda: zhu_bench.plain_loop(10, 10, ticks, math.inf),
        "fed-ucb eps = 1 (engine)": lambda: zhu_bench.engine_rate("zhu2021-fig2b-eps1", ticks, []),
        "plain numpy, eps = 1": lambda: zhu_bench.plain_loop(10, 10, ticks, 1.0),
    }

    def case(fn):
        def run():
            out = fn()
            return {"work": out["agents"] * out["ticks"], "mean_agent_regret": out["mean_agent_regret"]}
        return run

    cases = run_cases({name: case(fn) for name, fn in runs.items()}, repeats=size["repeats"])
    pairs = {"plain/engine, Gossip_UCB": ("plain numpy, eps = inf", "gossip-ucb (engine)"),
             "plain/engine, Fed_UCB eps = 1": ("plain numpy, eps = 1", "fed-ucb eps = 1 (engine)")}
    paired = {key: paired_ratio(cases[a], cases[b]) for key, (a, b) in pairs.items()}
    return {
        "title": "Gossip_UCB / Fed_UCB per-tick agent-steps vs a plain vectorised numpy loop",
        "workload": f"zhu2021 Fig. 2(b) setting: 10 agents on a path, 10 heterogeneous Gaussian arms, {ticks} ticks "
                    "(paper mode); unit: agent-steps. The four cases run interleaved, one run of each per round; a "
                    "ratio is the median of the per-round ratios, its rounds' range in brackets",
        "unit": "agent-steps",
        "cases": cases,
        "ratios": {key: p["median"] for key, p in paired.items()},
        "ratio_ranges": {key: [p["min"], p["max"]] for key, p in paired.items()},
        "targets": {"plain/engine, Gossip_UCB": ["<=", 3.0]},
    }


# ----------------------------------------------------------------------------- dubey2020a
def local(quick: bool) -> dict:
    """LOCAL-protocol records forwarded per second (benchmarks/dubey2020a.py, Fig. 1(a) setting)."""
    size = SIZES["quick" if quick else "full"]
    s = size["local"]
    overrides = [f"network.agents={s['agents']}", f"run.horizon={s['horizon']}", *s.get("extra", [])]
    cases = {}
    for name in ("dubey2020a-fig1a", "dubey2020a-fig1b"):
        def case(name=name):
            out = dubey_bench.measure(scenario_path(name), overrides, 2)
            return {"work": out["records_forwarded"], "messages": out["messages_sent"], "gamma": out["gamma"]}
        cases[name] = run_case(case, repeats=size["repeats"])
    return {
        "title": "LOCAL protocol (dubey2020a): records forwarded per second",
        "workload": f"M = {s['agents']} agents, G(M, 0.1), K = 5, gamma = half the diameter, {s['horizon']} steps "
                    "(private and byzantine-proof); unit: record-hops sent",
        "unit": "records",
        "cases": cases,
        "ratios": {},
        "targets": {},
    }


# ----------------------------------------------------------------------------- feducb
def feducb(quick: bool) -> dict:
    """FedUCB agent-steps per second, d = 10, K = 100, M = 10 (benchmarks/feducb.py)."""
    size = SIZES["quick" if quick else "full"]
    horizon = size["feducb"]["horizon"]
    configs = {"mlogt, private": ['protocol.communication="mlogt"'],
               "mt, private": ['protocol.communication="mt"'],
               "mt, non-private": ['protocol.communication="mt"', "protocol.epsilon=inf"]}
    cases = {}
    for name, overrides in configs.items():
        def case(overrides=overrides):
            out = feducb_bench.measure(horizon, overrides)
            return {"work": out["agents"] * out["trials"], "rounds": out["rounds"]}
        cases[name] = run_case(case, repeats=size["repeats"])
    return {
        "title": "FedUCB agent-steps per second (d = 10, K = 100)",
        "workload": f"centralized FedUCB, M = 10, gapped contexts, Bernoulli rewards, T = {horizon}; unit: agent-steps",
        "unit": "agent-steps",
        "cases": cases,
        "ratios": {},
        "targets": {},
    }


# ----------------------------------------------------------------------------- rio2023
def bai(quick: bool) -> dict:
    """BAI rounds simulated per second: exact-law epochs against round by round (benchmarks/rio2023.py)."""
    size = SIZES["quick" if quick else "full"]
    b = size["bai"]
    n = [f"network.agents={b['agents']}"]
    reference = n + ['protocol.simulation="rounds"', f"run.horizon={b['reference_rounds'] + 0.5}"]
    cases, ratios, ranges = {}, {}, {}
    for label, name in (("DP-MASE", "rio2023-fig1-left-eps0.1"),
                        ("CORRUPTED ELIMINATION", "rio2023-fig1-right-xi0.05")):
        trial = iter(range(10**6))

        def events(name=name, trial=trial):
            row, _, _ = rio_bench._timed(name, n, next(trial))
            return {"work": row["rounds_simulated"], "sample_complexity": row["sample_complexity"]}

        def rounds(name=name):
            row, _, _ = rio_bench._timed(name, reference, 0)
            return {"work": row["rounds_simulated"]}

        fast, slow = f"{label}: exact-law events", f"{label}: round by round"
        cases.update(run_cases({fast: events, slow: rounds}, repeats=size["bai_repeats"]))
        paired = paired_ratio(cases[fast], cases[slow])
        ratios[f"events/rounds, {label}"] = paired["median"]
        ranges[f"events/rounds, {label}"] = [paired["min"], paired["max"]]
    return {
        "title": "BAI rounds simulated per second: exact-law epochs vs round by round",
        "workload": f"rio2023 Problem 1 (K = 10), N = {b['agents']}: full event-mode runs to |K| = 1 (a new seed each "
                    f"repeat) against the same scenario simulated round by round, stopped after "
                    f"{b['reference_rounds']} rounds; unit: rounds simulated. The two run interleaved, one run of each "
                    "per round; a ratio is the median of the per-round ratios of rounds per CPU second, its rounds' "
                    "range in brackets",
        "unit": "rounds",
        "cases": cases,
        "ratios": ratios,
        "ratio_ranges": ranges,
        "targets": {"events/rounds, DP-MASE": [">=", 100.0], "events/rounds, CORRUPTED ELIMINATION": [">=", 100.0]},
    }


# ----------------------------------------------------------------------------- scaling
def _er_degree10(n: int) -> list[str]:
    return [f"network.agents={n}", f"network.p={min(1.0, 10.0 / (n - 1)):.6g}"]


#: One protocol per family: (family, protocol, scenario, base overrides, agents -> overrides,
#: horizon -> overrides, fixed size of the other axis in each sweep, largest horizon measured).
SCALING: list[dict[str, Any]] = [
    {"family": "li2022", "protocol": "cdp-mab", "scenario": "li2022-fig4-eps1", "base": [],
     "agents": lambda n: [f"network.agents={n}"], "agents_at": ["run.horizon=100000"], "agents_note": "T = 1e5",
     "horizon_at": ["network.agents=50"], "horizon_note": "M = 50", "max_horizon": 100000},
    {"family": "zhu2021", "protocol": "gossip-ucb", "scenario": "zhu2021-fig2b-epsinf",
     "base": GOSSIP + ["run.checkpoints=10"],
     "agents": lambda n: [f"network.agents={n}"], "agents_at": ["run.horizon=500"],
     "agents_note": "path graph, T = 500",
     "horizon_at": ["network.agents=10"], "horizon_note": "N = 10 path", "max_horizon": 100000},
    {"family": "dubey2020a", "protocol": "dubey2020a-private", "scenario": "dubey2020a-fig1a",
     "base": ["protocol.gamma=1", "run.checkpoints=10"],
     "agents": _er_degree10, "agents_at": ["run.horizon=20"], "agents_note": "G(M, 10/(M-1)), gamma = 1, T = 20",
     "horizon_at": _er_degree10(10), "horizon_note": "M = 10, G(10, 1), gamma = 1", "max_horizon": 10000},
    {"family": "dubey2020b (FedUCB)", "protocol": "feducb", "scenario": "dubey2020b-fig1a",
     "base": ["run.checkpoints=10"],
     "agents": lambda n: [f"network.agents={n}"], "agents_at": ["run.horizon=20"],
     "agents_note": "d = 10, K = 100, T = 20",
     "horizon_at": ["network.agents=2"], "horizon_note": "M = 2, d = 10, K = 100", "max_horizon": 100000},
    {"family": "rio2023", "protocol": "corrupted-elimination", "scenario": "rio2023-fig1-right-xi0.05", "base": [],
     "agents": lambda n: [f"network.agents={n}"], "agents_at": [], "agents_note": "full runs to |K| = 1",
     "horizon_at": ["network.agents=1024"], "horizon_note": "N = 1024, horizon = rounds cap", "max_horizon": 100000},
]


def scaling(quick: bool) -> dict:
    """Cost against agents and horizon, one protocol per family; log-log slope of CPU seconds."""
    size = SIZES["quick" if quick else "full"]["scaling"]
    families = {}
    for spec in SCALING:
        out: dict[str, Any] = {"protocol": spec["protocol"], "scenario": spec["scenario"]}
        for axis, values in (("agents", size["agents"]), ("horizon", size["horizons"])):
            if axis == "horizon":
                values = [h for h in values if h <= spec["max_horizon"]]
                settings = [spec["base"] + spec["horizon_at"] + [f"run.horizon={h}"] for h in values]
                note = spec["horizon_note"]
            else:
                at = spec["agents_at"] if not quick or not spec["agents_at"] else ["run.horizon=10"]
                settings = [spec["base"] + at + spec["agents"](n) for n in values]
                note = spec["agents_note"]
            run_scenario(spec["scenario"], settings[0])          # warm-up (imports, caches)
            points = []
            for value, overrides in zip(values, settings, strict=True):
                cpu, wall = time.process_time(), time.perf_counter()
                row = run_scenario(spec["scenario"], overrides)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                points.append({axis: value, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                               "messages": row.get("messages_sent"), "rounds_simulated": row.get("rounds_simulated")})
            out[axis] = {"at": note, "points": points,
                         "slope": loglog_slope(values, [p["cpu_s"] for p in points]) if len(points) > 1 else None}
        families[spec["family"]] = out
    return {
        "title": "Scaling of cost with agents and horizon (one protocol per family)",
        "workload": "one trial per point, CPU seconds including scenario set-up; slope = least-squares slope of "
                    "log(CPU s) on log(size), i.e. cost ~ size^slope",
        "unit": "CPU s",
        "families": families,
        "ratios": {},
        "targets": {},
    }


def fig1(quick: bool) -> dict:
    """dubey2020a Fig. 1(a), (b), (c) at the paper's size: per-trial CPU s from two whole processes per curve.

    Each curve runs as ``netsim run`` once with 1 trial and once with ``1 + extra`` trials; the
    difference over ``extra`` is the CPU of one trial and the rest of the 1-trial run is the fixed cost
    (interpreter, imports, checks, result files). A panel's minutes with ``--jobs 2`` are the sum over
    its curves of (fixed + 100 x per-trial) / 2 / 60: an extrapolation from a measured fraction (4 of
    the 100 trials), which still counts a fixed cost per curve where the study pays one per worker.
    """
    panels = {"a": ["dubey2020a-fig1a", "dubey2020a-fig1a-nonprivate", "dubey2020a-fig1a-dpucbint",
                    "dubey2020a-fig1a-ucb1"],
              "b": ["dubey2020a-fig1b", "dubey2020a-fig1b-clean", "dubey2020a-fig1b-ucb1"],
              "c": sorted(p.stem for p in (ROOT / "scenarios").glob("dubey2020a-fig1c-*.toml"))}
    horizon, extra, trials = (50, 1, 100) if quick else (1000, 3, 100)
    out, limits = {}, {}
    for panel, names in panels.items():
        curves = {}
        for name in names:
            one = process.run(name, [f"run.horizon={horizon}"], trials=1)
            more = process.run(name, [f"run.horizon={horizon}"], trials=1 + extra)
            per_trial = max(more["cpu_s"] - one["cpu_s"], 0.0) / extra
            fixed = max(one["cpu_s"] - per_trial, 0.0)
            curves[name] = {"fixed_cpu_s": round(fixed, 2), "trial_cpu_s": round(per_trial, 3),
                            "runs_cpu_s": [one["cpu_s"], more["cpu_s"]], "measured_trials": 1 + extra,
                            "measured_horizon": horizon, "maxrss_mib": max(one["maxrss_mib"], more["maxrss_mib"]),
                            "trials": trials}
        minutes = sum(c["fixed_cpu_s"] + c["trial_cpu_s"] * c["trials"] for c in curves.values()) / 2 / 60
        out[panel] = {"curves": curves, "minutes_2_jobs": round(minutes, 2)}
        limits[f"dubey2020a Fig. 1({panel}), M = 200, T = 1000, 100 trials per curve: minutes with --jobs 2 "
               "(extrapolated from 4 trials per curve)"] = ["<=", 15.0, round(minutes, 2)]
    return {
        "title": "dubey2020a Fig. 1 at the paper's size (M = 200, T = 1000, 100 trials per curve)",
        "workload": f"each curve at T = {horizon} as two whole netsim run processes, 1 and {1 + extra} trials; "
                    "CPU of one trial = the difference / "
                    f"{extra}, fixed cost (start-up, checks, result files) = the rest of the 1-trial run; minutes "
                    "with --jobs 2 = sum over curves of (fixed + 100 x per trial) / 2 / 60, assuming two free "
                    "cores: extrapolated from a measured fraction of the trials",
        "unit": "CPU s",
        "panels": out,
        "ratios": {},
        "targets": {},
        "limits": limits,
    }


BENCHMARKS: dict[str, Callable[[bool], dict]] = {
    "engine": engine,
    "realistic": realistic,
    "startup": startup,
    "peers": peers,
    "scale": scale,
    "fig1": fig1,
    "gossip": gossip,
    "local": local,
    "feducb": feducb,
    "bai": bai,
    "scaling": scaling,
}
