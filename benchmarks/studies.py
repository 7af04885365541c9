"""Run time of every bundled study: quick scale measured, paper scale estimated from measured trials.

``python -m benchmarks.studies [--only NAME ...] [--no-paper] [--jobs 2] [--set KEY=VALUE ...]`` writes
``benchmarks/studies.json`` and the table of bundled studies in ``docs/studies.md`` (``--only`` keeps the
other studies' rows of the JSON file; ``--set`` applies to every variant, as ``netsim study --set``, e.g.
``--set bandit.file=/path/to/diabetic_data.csv`` for ``zhu2021-fig2c``).

* **quick**: ``netsim study NAME --scale quick --jobs 2`` in a child process, wall seconds of the
  whole command (start-up, every unit, tables, figures, report), all studies one after the other.
* **paper**: one trial of every variant and grid point at the paper scale, in this process, CPU
  seconds each. Where the runner runs units in lockstep groups (docs/engine.md, "Several trials in
  lockstep"), the group that holds a point's trial 0 in a run with ``--jobs`` (the trials of one point for
  zhu2021, the variants of one seed for FedUCB) is run as one group and its CPU divided by its size.
  A group estimated (from its fraction below) to take more than ``FULL_BUDGET`` (60 CPU s) is measured
  at a fraction f of their horizon H
  (``run.horizon / 10``, or ``/ 100`` from 10^6 slots) and its cost extrapolated linearly in the horizon
  (the scaling benchmark shows slopes close to 1 in the horizon for every family): the trial's fixed
  cost c0 (building the network, bandit and protocol, collecting the results) is measured on its own,
  with a horizon of ``f / 1000``, and only the rest is scaled: c0 + (c(f) - c0) H / f. Before the
  timed runs of a point, one untimed short trial pays the imports and caches of its first use
  (scaling those by H / f would inflate the estimate). Runs that end before their horizon (rio2023's
  identification runs) are always measured whole. The study's paper-scale time with ``--jobs 2`` is
  then sum over points of trials x CPU s per trial / 2, marked *extrapolated* when any point was
  scaled from a fraction of its horizon. (The budget was 20 CPU s until 2026-11-27; it was raised so
  that a FedUCB group of about 20-40 CPU s is measured whole rather than extrapolated.)
* **paper, --end-to-end**: the paper scale run whole, ``netsim study NAME --scale paper --jobs 2`` in a
  child process: its wall minutes (every unit, tables, figures, report), marked *measured end to end*.
  What a figure's run time rests on when the estimate is close to a limit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
FULL_BUDGET = 60.0  # CPU s: a point whose estimated full trial (or whole lockstep group) costs more is extrapolated


def _command(name: str, scale: str, jobs: int, sets: list[str]) -> tuple[subprocess.CompletedProcess, float, float,
                                                                      list[str]]:
    """``netsim study NAME --scale SCALE --jobs JOBS [--set KEY=VALUE ...]`` in a child process: the finished
    process, its wall and CPU seconds (the child and its workers) and the figures it drew."""
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "netsim", "study", name, "--scale", scale, "--jobs", str(jobs), "--quiet",
                "--out", out, *(f"--set={item}" for item in sets)]
        env = {**os.environ, "NETSIM_NO_PROGRESS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        figures = sorted(p.name for p in (Path(out) / "figures").glob("*.png")) if done.returncode == 0 else []
    return done, wall, cpu, figures


def _error(done: subprocess.CompletedProcess) -> str:
    return "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1][:300]


def quick(name: str, jobs: int, sets: list[str]) -> dict:
    """``netsim study NAME --scale quick --jobs JOBS [--set KEY=VALUE ...]`` in a child process."""
    done, wall, _, figures = _command(name, "quick", jobs, sets)
    return {"wall_s": round(wall, 1), "exit": done.returncode, "figures": figures, "error": _error(done)}


def end_to_end(name: str, jobs: int, sets: list[str]) -> dict:
    """The paper scale run whole: ``netsim study NAME --scale paper --jobs JOBS`` in a child process, its wall
    minutes (every unit, tables, figures and report) and CPU seconds."""
    from netsim.experiment import studies

    plan = studies.plan(studies.load(name), "paper", overrides=studies.set_options(sets))
    done, wall, cpu, _ = _command(name, "paper", jobs, sets)
    if done.returncode:
        return {"error": _error(done)}
    return {"trials": plan.trials, "points": len(plan.points), "units": len(plan.points) * plan.trials,
            "cpu_s": round(cpu, 1), "wall_min": round(wall / 60, 2), "extrapolated": False, "end_to_end": True,
            "measured": time.strftime("%Y-%m-%d"), "by_point": []}


def _group_cpu(units, factor: float | None) -> tuple[float, list[dict]]:
    """CPU s of running ``units`` as one lockstep group (``run_trials``, as a worker runs a group), each at
    ``horizon / factor`` (``None``: the whole horizon), and their rows."""
    from netsim.engine import scenario as S
    from netsim.engine.sim import run_trials

    work = []
    for unit in units:
        scenario = unit.scenario
        if factor is not None:
            scenario = S.load(scenario, {"run.horizon": float(scenario.run["horizon"]) / factor, "run.checkpoints": 1})
        work.append((scenario, unit.seed_sequence(), unit.trial))
    start = time.process_time()
    rows = [result.row for result in run_trials(work)]
    return time.process_time() - start, rows


def _fixed_cpu(units, factor: float) -> float:
    """CPU s of a group run at ``horizon / factor`` (the fixed cost), 0 when a scenario refuses so short a run."""
    try:
        return _group_cpu(units, factor)[0]
    except Exception:  # a protocol that needs a longer run: no fixed cost is subtracted (an over-estimate)
        return 0.0


def _first_groups(plan, jobs: int) -> list[list[int]]:
    """The runner's lockstep groups (with ``jobs`` processes) that hold a point's trial 0, as unit indices."""
    from netsim.experiment import runner

    units = plan.units()
    groups = runner.lockstep_groups([u.unit() for u in units], jobs)
    return [group for group in groups if any(units[i].trial == 0 for i in group)]


def paper(name: str, jobs: int, sets: list[str]) -> dict:
    """The paper scale's time with ``jobs`` processes, from the measured lockstep group of every point's trial 0."""
    from netsim.experiment import studies

    plan = studies.plan(studies.load(name), "paper", overrides=studies.set_options(sets))
    units = plan.units()
    points, total, extrapolated = [], 0.0, False
    for group in _first_groups(plan, jobs):
        members = [units[i].unit() for i in group]
        horizon = max(float(unit.scenario.run["horizon"]) for unit in members)
        factor = 100.0 if horizon >= 1e6 else 10.0
        _fixed_cpu(members, factor * 1000)  # untimed: imports and caches of the first such trial
        fixed = _fixed_cpu(members, factor * 1000)
        cpu, rows = _group_cpu(members, factor)
        finished_early = any(row["end_time"] < row["horizon"] for row in rows)
        if finished_early or cpu * factor <= FULL_BUDGET:   # the whole group's estimated CPU
            cpu, rows = _group_cpu(members, None)
            per_unit, scaled = cpu / len(members), False
        else:
            fixed = min(fixed, cpu)
            per_unit, scaled = (fixed + (cpu - fixed) * factor) / len(members), True
        extrapolated |= scaled
        for i in group:
            if units[i].trial != 0:
                continue
            point = units[i].point
            total += plan.trials * per_unit
            points.append({"variant": point.variant, "point": point.index,
                           "horizon": float(point.scenario.run["horizon"]), "lockstep": len(group),
                           "trial_cpu_s": round(per_unit, 3), "from_fraction": scaled,
                           **({"fraction": 1.0 / factor, "group_fraction_cpu_s": round(cpu, 3),
                               "group_fixed_cpu_s": round(fixed, 3)} if scaled else {})})
    return {"trials": plan.trials, "points": len(plan.points), "units": len(plan.points) * plan.trials,
            "cpu_s": round(total, 1), "wall_min": round(total / jobs / 60, 2), "extrapolated": extrapolated,
            "by_point": sorted(points, key=lambda p: p["point"])}


def _reason(error: str) -> str:
    """An error line for the table, without this machine's paths and the ``netsim: error:`` prefix."""
    return error.replace(str(ROOT) + "/", "").removeprefix("netsim: error: ")


def table(results: dict) -> str:
    from netsim.experiment import studies

    lines = ["| study | source | variants / points (variant x grid value) / trials per point (paper) | "
             "quick: wall s, --jobs 2 | paper: minutes with --jobs 2 | how the paper time was obtained |",
             "|---|---|---|---|---|---|"]
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
        elif p.get("end_to_end"):
            size = f"{len(study.variants)} / {p['points']} / {p['trials']}"
            paper_cell = f"{p['wall_min']:,.1f}"
            how = (f"measured end to end ({p['measured']}): the whole `netsim study {name} --scale paper --jobs 2`, "
                   "wall minutes")
        else:
            size = f"{len(study.variants)} / {p['points']} / {p['trials']}"
            paper_cell = f"{p['wall_min']:,.1f}"
            group = max((point.get("lockstep", 1) for point in p["by_point"]), default=1)
            measured = (f"the runner's lockstep group holding each point's trial 0 (up to {group} units), CPU per unit"
                        if group > 1 else "one trial per point")
            how = (f"extrapolated from a fraction of the horizon ({measured})" if p["extrapolated"]
                   else f"{measured}, measured in full, times the trials")
        if row.get("set"):
            how += "; run with " + ", ".join(f"--set {item}" for item in row["set"])
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
    parser.add_argument("--end-to-end", action="store_true",
                        help="run the paper scale whole (netsim study NAME --scale paper) and report its wall "
                             "minutes, instead of estimating them from one trial per point")
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
        row.pop("set", None)
        if args.set:  # shown in the table; a file is named without its directory (machine-specific)
            row["set"] = [f"{key}={Path(value).name if '/' in value else value}"
                          for key, _, value in (item.partition("=") for item in args.set)]
        if not args.no_paper:
            try:
                row["paper"] = (end_to_end if args.end_to_end else paper)(name, args.jobs, args.set)
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
