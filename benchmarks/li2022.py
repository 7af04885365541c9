"""Benchmarks of the li2022 family (JSON on stdout).

``python -m benchmarks.li2022 [--repeat N] [--all]`` times one trial of a few heavy bundled
scenarios (``--all``: every ``li2022-*`` scenario), in CPU seconds of this process.

``python -m benchmarks.li2022 --modes [--repeat N]`` runs one trial of ``scale-ddp-mab-1k`` (DDP-MAB, GIS,
1,000 agents, T = 1e5) in paper mode (constant stage delay 0.25) and in realistic mode (exponential
stage delays of mean 0.25), alternately in this process, and reports the CPU seconds of each (the
fastest of N) and their ratio: the cost of continuous-time delivery for the GIS handshake (issue 25).

``python -m benchmarks.li2022 --scale [--agents 100,200,400,1000] [--horizon 100000]`` measures
DDP-MAB at scale (issue 16): one trial of ``li2022-fig10-random`` on an Erdős–Rényi graph of mean
degree 10 (p = 10 / (M - 1)), each point a whole ``netsim run`` process (start-up and result
files included), reporting its CPU seconds (user + system) and peak resident memory from
``os.wait4``. The target is M = 1,000 and T = 1e5 in at most 60 CPU s and 1 GB. (Before GIS kept
one shared (M, K) table and an (M, M) mask, each round allocated an (M, M, K) array: 4.8 GB at
M = 800.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import benchmarks  # noqa: E402,F401  (pins BLAS threads before numpy is imported)
from netsim.engine import scenario as S  # noqa: E402
from netsim.engine.sim import run_trial  # noqa: E402
from netsim.engine.streams import trial_sequence  # noqa: E402

DEFAULT = ["li2022-fig10-ring", "li2022-fig10-ring-lossy", "li2022-fig10-complete", "li2022-fig11-case3",
           "li2022-fig12-ddp", "li2022-fig4-eps1"]
SCALE_SCENARIO = "li2022-fig10-random"
SCALE_LIMITS = {"agents": 1000, "horizon": 100000, "cpu_s": 60.0, "maxrss_mib": 1024.0}


def time_scenario(name: str, repeat: int) -> dict:
    sc = S.load(name)
    cpus = []
    row = {}
    for _ in range(repeat):
        started = time.process_time()
        row = run_trial(sc, trial_sequence(sc.run["seed"], 0), 0).row
        cpus.append(time.process_time() - started)
    cpu = min(cpus)
    slots = row["end_time"] / sc.clock["period"]
    return {
        "scenario": name,
        "protocol": row["protocol"],
        "agents": row["agents"],
        "slots": slots,
        "cpu_s": round(cpu, 4),
        "agent_slots_per_cpu_s": round(slots * row["agents"] / cpu, 1),
        "messages": row["messages_sent"],
        "messages_per_cpu_s": round(row["messages_sent"] / cpu, 1),
        "rounds": row["rounds_completed"],
        "t_delay_mean": row["t_delay_mean"],
        "group_regret": round(row["group_regret"], 2),
        "comm_cost": row["comm_cost"],
    }


MODES_SCENARIO = "scale-ddp-mab-1k"
REALISTIC_DELAY = {"model": "exponential", "mean": 0.25}


def modes(repeat: int) -> dict:
    """Paper mode against realistic mode on the same trial of :data:`MODES_SCENARIO`, same process."""
    paper = S.load(MODES_SCENARIO)
    cases = {"paper": paper, "realistic": paper.with_(**{"network.delay": REALISTIC_DELAY})}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    rows: dict[str, dict] = {}
    for _ in range(repeat):
        for name, sc in cases.items():
            started = time.process_time()
            rows[name] = run_trial(sc, trial_sequence(sc.run["seed"], 0), 0).row
            cpu[name].append(time.process_time() - started)
    best = {name: min(times) for name, times in cpu.items()}
    return {
        "benchmark": "li2022-modes",
        "workload": f"one trial of {MODES_SCENARIO}; realistic: network.delay = exponential, mean 0.25",
        "cases": {name: {"cpu_s": round(best[name], 2), "messages": rows[name]["messages_sent"],
                         "group_regret": round(rows[name]["group_regret"], 2), "comm_cost": rows[name]["comm_cost"]}
                  for name in cases},
        "realistic_over_paper": round(best["realistic"] / best["paper"], 2),
    }


def scale_point(agents: int, horizon: float) -> dict:
    """One whole ``netsim run`` process of DDP-MAB on G(M, 10/(M-1)): CPU seconds and peak memory."""
    p = min(1.0, 10.0 / (agents - 1))
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "netsim", "run", SCALE_SCENARIO, "--trials", "1", "--quiet", "--out", out,
                   "--set", f"network.agents={agents}", "--set", f"network.p={p:.6g}",
                   "--set", f"run.horizon={horizon:g}", "--set", "run.checkpoints=100"]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        wall = time.perf_counter()
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - wall
        if status != 0:
            raise RuntimeError(f"netsim run failed for M = {agents}: {child.stderr.read().decode()[-500:]}")
        import csv

        with open(Path(out) / "trials.csv") as handle:
            row = next(csv.DictReader(handle))
    return {
        "agents": agents,
        "horizon": horizon,
        "p": round(p, 6),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "wall_s": round(wall, 2),
        "maxrss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
        "messages": int(row["messages_sent"]),
        "rounds": int(row["rounds_completed"]),
        "t_delay_mean": float(row["t_delay_mean"]),
        "group_regret": round(float(row["group_regret"]), 1),
    }


def scale(agents: list[int], horizon: float) -> dict:
    points = [scale_point(m, horizon) for m in agents]
    target = [p for p in points if p["agents"] == SCALE_LIMITS["agents"] and p["horizon"] == SCALE_LIMITS["horizon"]]
    return {
        "benchmark": "li2022-scale",
        "workload": f"one trial of {SCALE_SCENARIO} (DDP-MAB, GIS, K = 100, eps = 1) on G(M, 10/(M-1)), whole "
                    "netsim run process",
        "limits": SCALE_LIMITS,
        "points": points,
        "meets_limits": bool(target) and all(p["cpu_s"] <= SCALE_LIMITS["cpu_s"]
                                             and p["maxrss_mib"] <= SCALE_LIMITS["maxrss_mib"] for p in target),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.li2022", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario (the fastest is reported)")
    parser.add_argument("--all", action="store_true", help="time every bundled li2022 scenario")
    parser.add_argument("--scale", action="store_true", help="DDP-MAB at scale, whole processes (issue 16)")
    parser.add_argument("--modes", action="store_true", help="DDP-MAB on 1,000 agents, paper against realistic mode")
    parser.add_argument("--agents", default="100,200,400,1000", help="--scale: comma-separated agent counts")
    parser.add_argument("--horizon", type=float, default=1e5, help="--scale: horizon T in slots")
    args = parser.parse_args(argv)
    if args.scale:
        try:
            agents = [int(a) for a in args.agents.split(",")]
        except ValueError:
            print(f"python -m benchmarks.li2022: --agents {args.agents!r}; accepted: integers >= 2 separated by "
                  "commas", file=sys.stderr)
            return 2
        if min(agents) < 2 or args.horizon <= 0:
            print("python -m benchmarks.li2022: --agents needs integers >= 2 and --horizon a number > 0",
                  file=sys.stderr)
            return 2
        out = scale(agents, args.horizon)
    elif args.modes:
        out = modes(args.repeat)
    else:
        names = sorted(n for n in S.bundled() if n.startswith("li2022-")) if args.all else DEFAULT
        results = [time_scenario(name, args.repeat) for name in names]
        out = {
            "benchmark": "li2022",
            "python": platform.python_version(),
            "machine": platform.machine(),
            "scenarios": results,
        }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
