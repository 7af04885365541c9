"""Benchmarks of the rio2023 family, printed as JSON.

Default: rounds simulated per second of CPU time at N = 1024 on Problem 1, exact-law event
simulation (full runs to |K| = 1) against the round-by-round reference (the same scenario
with ``protocol.simulation = "rounds"``, stopped at a horizon of ``--reference-rounds`` rounds),
for DP-MASE (eps = 0.1) and CORRUPTED ELIMINATION (xi = 0.05).

``--fig1``: run the whole Fig. 1 set (both panels and the two baselines, N in 64..1024,
10 runs each) with ``--jobs`` worker processes and report the wall time and, per curve and N,
the mean sample complexity with a 95% confidence interval (Student t) and the failure count.

``--failure SCENARIO --seeds S``: failure rate of a scenario over S seeds (e.g. the acceptance
check "failure rate at most delta on Problem 1").

Run from the repository root: ``python benchmarks/rio2023.py [--fig1 --jobs 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from netsim.engine import scenario as S
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence

FIG1 = ["rio2023-fig1-left-eps0.05", "rio2023-fig1-left-eps0.1", "rio2023-fig1-left-eps0.25",
        "rio2023-fig1-right-xi0", "rio2023-fig1-right-xi0.05", "rio2023-fig1-right-xi0.1",
        "rio2023-fig1-central", "rio2023-fig1-independent"]
SIZES = [64, 128, 256, 512, 1024]


def _path(name: str) -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios", f"{name}.toml")


def _timed(name: str, overrides: list[str], trial: int) -> tuple[dict, float, float]:
    sc = S.load(_path(name), overrides)
    wall, cpu = time.perf_counter(), time.process_time()
    row = run_trial(sc, trial_sequence(sc.run["seed"], trial), trial).row
    return row, time.process_time() - cpu, time.perf_counter() - wall


def throughput(args) -> dict:
    out = {"agents": args.agents, "reference_rounds": args.reference_rounds, "cases": {}}
    for name in ("rio2023-fig1-left-eps0.1", "rio2023-fig1-right-xi0.05"):
        n = [f"network.agents={args.agents}"]
        _timed(name, n + ['protocol.simulation="rounds"', "run.horizon=50"], 0)       # warm-up (imports)
        _timed(name, ["network.agents=16"], 0)          # and the event mode's (scipy.stats for DP-MASE's sums)
        rounds, cpu, wall = 0, 0.0, 0.0
        for trial in range(args.trials):
            row, c, w = _timed(name, n, trial)
            rounds, cpu, wall = rounds + row["rounds_simulated"], cpu + c, wall + w
        ref, ref_cpu, ref_wall = _timed(name, n + ['protocol.simulation="rounds"',
                                                  f"run.horizon={args.reference_rounds + 0.5}"], 0)
        fast = rounds / cpu
        slow = ref["rounds_simulated"] / ref_cpu
        out["cases"][name] = {
            "events_rounds": int(rounds), "events_cpu_s": round(cpu, 3), "events_wall_s": round(wall, 3),
            "events_rounds_per_cpu_s": round(fast), "events_rounds_per_wall_s": round(rounds / wall),
            "reference_rounds": int(ref["rounds_simulated"]), "reference_cpu_s": round(ref_cpu, 3),
            "reference_rounds_per_cpu_s": round(slow),
            "reference_rounds_per_wall_s": round(ref["rounds_simulated"] / ref_wall),
            "speedup_cpu": round(fast / slow, 1),
        }
    return out


def _unit(job: tuple[str, int, int]) -> tuple[str, int, int, dict, float]:
    name, agents, trial = job
    row, cpu, _ = _timed(name, [f"network.agents={agents}"], trial)
    keep = {k: row[k] for k in ("sample_complexity", "correct", "votes_sent", "votes_corrupted", "identified_arm")}
    return name, agents, trial, keep, cpu


def _ci95(values: np.ndarray) -> float:
    from scipy import stats

    if len(values) < 2:
        return 0.0
    return float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))


def fig1(args) -> dict:
    jobs = [(name, n, t) for name in FIG1 for n in SIZES for t in range(args.trials)]
    jobs.sort(key=lambda j: -j[1])                     # big ones first for load balance
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        done = list(pool.map(_unit, jobs, chunksize=1))
    wall = time.perf_counter() - started
    table: dict = {}
    cpu_total = 0.0
    for name, n, _, row, cpu in done:
        cpu_total += cpu
        table.setdefault(name, {}).setdefault(n, []).append(row)
    curves = {}
    for name in FIG1:
        curves[name] = {}
        for n in SIZES:
            sc = np.array([r["sample_complexity"] for r in table[name][n]], dtype=float)
            curves[name][n] = {"mean": round(float(sc.mean())), "ci95": round(_ci95(sc)),
                               "failures": int(sum(1 - r["correct"] for r in table[name][n]))}
    return {"wall_s": round(wall, 1), "cpu_s_in_trials": round(cpu_total, 1), "jobs": args.jobs,
            "trials": args.trials, "units": len(jobs), "sample_complexity": curves}


def plot(result: dict, path: str) -> None:
    """Fig. 1 as in the paper: sample complexity against N with 95% confidence intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    panels = {0: ("left", "DP-MASE"), 1: ("right", "CORRUPTED ELIMINATION")}
    for i, (tag, title) in panels.items():
        ax = axes[i]
        for name, curve in result["sample_complexity"].items():
            if tag not in name and not name.endswith(("central", "independent")):
                continue
            sizes = sorted(int(n) for n in curve)
            mean = np.array([curve[n]["mean"] if n in curve else curve[str(n)]["mean"] for n in sizes])
            ci = np.array([curve[n]["ci95"] if n in curve else curve[str(n)]["ci95"] for n in sizes])
            ax.errorbar(sizes, mean, yerr=ci, marker="o", capsize=3, label=name.replace("rio2023-fig1-", ""))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("number of agents N")
        ax.set_title(f"{title}, Problem 1")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("sample complexity (rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def failure(args) -> dict:
    overrides = [f"network.agents={args.agents}"]
    rows = [_timed(args.failure, overrides, t)[0] for t in range(args.seeds)]
    fails = sum(1 - r["correct"] for r in rows)
    return {"scenario": args.failure, "agents": args.agents, "seeds": args.seeds, "failures": int(fails),
            "failure_rate": fails / args.seeds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1024)
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--reference-rounds", type=int, default=20000)
    parser.add_argument("--fig1", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--plot", default=None, help="with --fig1: write the Fig. 1 plot (PNG) here")
    parser.add_argument("--from-json", default=None, help="with --plot: plot a saved --fig1 result")
    parser.add_argument("--failure", default=None)
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()
    if args.plot and args.from_json:
        with open(args.from_json) as handle:
            plot(json.load(handle), args.plot)
        return
    if args.fig1:
        args.trials = args.trials or 10
        result = fig1(args)
        if args.plot:
            plot(result, args.plot)
    elif args.failure:
        result = failure(args)
    else:
        args.trials = args.trials or 2
        result = throughput(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
