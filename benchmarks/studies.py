"""Run time of every bundled study: quick scale measured, paper scale estimated from measured trials.

``python -m benchmarks.studies [--only NAME ...] [--no-paper] [--jobs 2] [--set KEY=VALUE ...]`` writes
``benchmarks/studies.json`` and the table of bundled studies in ``docs/studies.md`` (``--only`` keeps the
other studies' rows of the JSON file; ``--set`` applies to every variant, as ``netsim study --set``, e.g.
``--set bandit.file=/path/to/diabetic_data.csv`` for ``zhu2021-fig2c``).

* **quick**: ``netsim study NAME --scale quick --jobs 2`` in a child process, wall seconds of the
  whole command (start-up, every unit, tables, figures, report), all studies one after the other.
* **paper**: one trial of every variant and grid point at the paper scale, in this process, CPU
  seconds each; where the runner runs a point's trials in lockstep groups (docs/engine.md, "Several
  trials in lockstep"), one group of the size it forms with ``--jobs`` is run instead and its CPU
  divided by its size. A point whose trial would take long is measured at a fraction f of its horizon H
  (``run.horizon / 10``, or ``/ 100`` from 10^6 slots) and its cost extrapolated linearly in the horizon
  (the scaling benchmark shows slopes close to 1 in the horizon for every family): the trial's fixed
  cost c0 (building the network, bandit and protocol, collecting the results) is measured on its own,
  with a horizon of ``f / 1000``, and only the rest is scaled: c0 + (c(f) - c0) H / f. Before the
  timed runs of a point, one untimed short trial pays the imports and caches of its first use
  (scaling those by H / f would inflate the estimate). Runs that end before their horizon (rio2023's
  identification runs) are always measured whole. The study's paper-scale time with ``--jobs 2`` is
  then sum over points of trials x CPU s per trial / 2, marked *extrapolated* when any point was
  scaled from a fraction of its horizon.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchmarks  # noqa: F401  (pins BLAS threads before numpy is imported)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "studies.md"
BEGIN = "<!-- studies table: written by `python -m benchmarks.studies` -->"
END = "<!-- end of the studies table -->"
FULL_BUDGET = 20.0  # CPU s: a point whose estimated full trial (or lockstep group) costs more is extrapolated


def quick(name: str, jobs: int, sets: list[str]) -> dict:
    """``netsim study NAME --scale quick --jobs JOBS [--set KEY=VALUE ...]`` in a child process."""
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "netsim", "study", name, "--scale", "quick", "--jobs", str(jobs), "--quiet",
                "--out", out, *(f"--set={item}" for item in sets)]
        env = {**os.environ, "NETSIM_NO_PROGRESS": "1"}
        wall = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - wall
        figures = sorted(p.name for p in (Path(out) / "figures").glob("*.png")) if done.returncode == 0 else []
    error = "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1][:300]
    return {"wall_s": round(wall, 1), "exit": done.returncode, "figures": figures, "error": error}


def _trial_cpu(scenario, horizon: float | None, together: int = 1) -> tuple[float, dict]:
    """CPU s per trial and trial 0's row: ``together`` trials run as one lockstep group of the runner
    (:func:`netsim.engine.sim.run_trials`; 1: one trial alone)."""
    from netsim.engine.sim import run_trials
    from netsim.engine.streams import trial_sequence

    if horizon is not None:
        from netsim.engine import scenario as S

        scenario = S.load(scenario, {"run.horizon": horizon, "run.checkpoints": 1})
    units = [(scenario, trial_sequence(scenario.run["seed"], trial), trial) for trial in range(together)]
    start = time.process_time()
    row = run_trials(units)[0].row
    return (time.process_time() - start) / together, row


def _fixed_cpu(scenario, horizon: float, together: int = 1) -> float:
    """CPU s per trial of ``horizon`` (the fixed cost of a trial), 0 when the scenario refuses so short a run."""
    try:
        return _trial_cpu(scenario, horizon, together)[0]
    except Exception:  # a protocol that needs a longer run: no fixed cost is subtracted (an over-estimate)
        return 0.0


def _group_sizes(plan, jobs: int) -> dict[int, int]:
    """Per point, the size of the runner's first lockstep group of its trials with ``jobs`` processes."""
    from netsim.experiment import runner

    units = plan.units()
    groups = runner.lockstep_groups([u.unit() for u in units], jobs)
    sizes: dict[int, int] = {}
    for group in groups:
        sizes.setdefault(units[group[0]].point.index, len(group))
    return sizes


def paper(name: str, jobs: int, sets: list[str]) -> dict:
    """The paper scale's time with ``jobs`` processes, from one measured trial per point."""
    from netsim.experiment import studies

    plan = studies.plan(studies.load(name), "paper", overrides=studies.set_options(sets))
    sizes = _group_sizes(plan, jobs)
    points, total, extrapolated = [], 0.0, False
    for point in plan.points:
        horizon = float(point.scenario.run["horizon"])
        fraction = horizon / (100 if horizon >= 1e6 else 10)
        together = sizes.get(point.index, 1)
        _fixed_cpu(point.scenario, fraction / 1000, together)  # untimed: imports and caches of the first such trial
        fixed = _fixed_cpu(point.scenario, fraction / 1000, together)
        cpu, row = _trial_cpu(point.scenario, fraction, together)
        finished_early = row["end_time"] < fraction
        if finished_early or cpu * together * horizon / fraction <= FULL_BUDGET:   # the whole group's CPU
            cpu, row = _trial_cpu(point.scenario, None, together)
            per_trial, scaled = cpu, False
        else:
            fixed = min(fixed, cpu)
            per_trial, scaled = fixed + (cpu - fixed) * horizon / fraction, True
        extrapolated |= scaled
        total += plan.trials * per_trial
        points.append({"variant": point.variant, "point": point.index, "horizon": horizon, "lockstep": together,
                       "trial_cpu_s": round(per_trial, 3), "from_fraction": scaled,
                       **({"fraction": fraction, "fraction_cpu_s": round(cpu, 3), "fixed_cpu_s": round(fixed, 3)}
                          if scaled else {})})
    return {"trials": plan.trials, "points": len(plan.points), "units": len(plan.points) * plan.trials,
            "cpu_s": round(total, 1), "wall_min": round(total / jobs / 60, 2), "extrapolated": extrapolated,
            "by_point": points}


def _reason(error: str) -> str:
    """An error line for the table, without this machine's paths and the ``netsim: error:`` prefix."""
    return error.replace(str(ROOT) + "/", "").removeprefix("netsim: error: ")


def table(results: dict) -> str:
    from netsim.experiment import studies

    lines = ["| study | source | variants x points x trials (paper) | quick: wall s, --jobs 2 | "
             "paper: minutes with --jobs 2 | how the paper time was obtained |", "|---|---|---|---|---|---|"]
    quick_total = 0.0
    for name, row in results["studies"].items():
        study = studies.load(name)
        q = row.get("quick", {})
        quick_total += q.get("wall_s", 0.0)
        quick_cell = f"{q['wall_s']:g}" if q.get("exit") == 0 else f"not run: {_reason(q.get('error', ''))}"
        p = row.get("paper")
        if p is None:
            paper_cell, how, size = "-", "not measured", "-"
        elif "error" in p:
            paper_cell, how, size = "-", f"not measured: {_reason(p['error'])}", "-"
        else:
            size = f"{len(study.variants)} x {p['points'] // len(study.variants)} x {p['trials']}"
            paper_cell = f"{p['wall_min']:,.1f}"
            group = max((point.get("lockstep", 1) for point in p["by_point"]), default=1)
            measured = f"one lockstep group of {group} trials per point" if group > 1 else "one trial per point"
            how = (f"extrapolated from a fraction of the horizon ({measured})" if p["extrapolated"]
                   else f"{measured} measured in full, times the trials")
        lines.append(f"| `{name}` | {study.source or '-'} | {size} | {quick_cell} | {paper_cell} | {how} |")
    lines.append("")
    lines.append(f"All quick-scale studies one after the other: **{quick_total / 60:.1f} minutes** wall with "
                 f"--jobs 2 (measured {results['finished']}, machine: {results['cpus']} CPUs).")
    return "\n".join(lines)


def write_page(results: dict) -> None:
    text = PAGE.read_text()
    head = text.split(BEGIN)[0].rstrip("\n")
    tail = text.split(END, 1)[1] if END in text else "\n"
    PAGE.write_text(f"{head}\n\n{BEGIN}\n\n{table(results)}\n\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    from netsim.experiment import studies

    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies", description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="this study only (repeatable)")
    parser.add_argument("--no-paper", action="store_true", help="skip the paper-scale estimates")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "studies.json"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of every variant (as netsim study --set)")
    args = parser.parse_args(argv)
    path = Path(args.json)
    results = json.loads(path.read_text()) if path.exists() else {"studies": {}}
    for name in args.only or sorted(studies.bundled()):
        print(f"[studies] {name} ...", file=sys.stderr, flush=True)
        row = results["studies"].setdefault(name, {})
        row["quick"] = quick(name, args.jobs, args.set)
        if not args.no_paper:
            try:
                row["paper"] = paper(name, args.jobs, args.set)
            except Exception as exc:  # a study that cannot run here (a missing data file) is listed as such
                row["paper"] = {"error": str(exc).splitlines()[0][:300]}
        print(f"[studies] {name}: {json.dumps({k: v for k, v in row.items() if k != 'paper'})}", file=sys.stderr)
    results["studies"] = {k: results["studies"][k] for k in sorted(results["studies"]) if k in studies.bundled()}
    results["finished"] = time.strftime("%Y-%m-%d")
    results["cpus"] = os.cpu_count()
    path.write_text(json.dumps(results, indent=1) + "\n")
    write_page(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
