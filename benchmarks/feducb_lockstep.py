"""Paired CPU of a FedUCB study's trials run one by one and in lockstep (issue 25).

``python -m benchmarks.feducb_lockstep [STUDY] [--rounds N] [--trial I]`` runs trial I of every variant
of STUDY at the paper scale (as ``benchmarks.studies`` does, one full trial per point), first each alone
(``run_trial``, the path before the lockstep groups) and then all together (``run_trials``, what a
lockstep group of the runner does), alternating for N rounds, and prints CPU seconds and the estimated
minutes of the paper scale with --jobs 2 (trials x CPU / 2 / 60) for both.
"""

from __future__ import annotations

import argparse
import time

import benchmarks  # noqa: F401  (pins BLAS threads before numpy is imported)


def main() -> None:
    from netsim.engine.sim import run_trial, run_trials
    from netsim.experiment import studies

    parser = argparse.ArgumentParser(prog="python -m benchmarks.feducb_lockstep")
    parser.add_argument("study", nargs="?", default="dubey2020b-fig1a")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trial", type=int, default=0)
    args = parser.parse_args()
    plan = studies.plan(studies.load(args.study), "paper")
    units = [u.unit() for u in plan.units() if u.trial == args.trial]
    work = [(u.scenario, u.seed_sequence(), u.trial) for u in units]
    run_trials(work[:2])  # untimed: imports and caches
    for r in range(args.rounds):
        for name, run in (("alone", lambda: [run_trial(*w) for w in work]), ("lockstep", lambda: run_trials(work))):
            start = time.process_time()
            results = run()
            cpu = time.process_time() - start
            print(f"round {r} {name:8s} {len(units)} units: {cpu:7.1f} CPU s -> paper scale "
                  f"{plan.trials * cpu / 2 / 60:5.1f} min with --jobs 2 "
                  f"(regret of the first: {results[0].row['mean_agent_regret']:.4f})", flush=True)


if __name__ == "__main__":
    main()
