"""Whole-process measurements: one ``netsim run`` in a child process, its CPU seconds and peak memory.

What a user pays is the whole process: interpreter start, imports, scenario loading and checks,
the trials, and writing the result files. :func:`run` starts ``python -m netsim run SCENARIO
--quiet`` (tables only, as ``netsim run`` writes by default) and reads that child's own CPU time
(user + system) and peak resident set from ``os.wait4`` (the resource use of that one child:
``RUSAGE_CHILDREN`` would give the largest child so far as the peak, not this one's).
:func:`command` does the same for any command line (a peer code).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(scenario: str, overrides: list[str] = (), *, trials: int | None = None, cpu_limit: float | None = None,
        memory_limit_mib: float | None = None) -> dict:
    """One ``netsim run`` of ``scenario`` (bundled name) in a child process.

    ``cpu_limit`` / ``memory_limit_mib`` cap the child (RLIMIT_CPU, RLIMIT_AS): a run that hits
    them raises :class:`RuntimeError` naming the limit, so a sweep goes on.
    """
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "netsim", "run", scenario, "--quiet", "--out", out]
        for item in overrides:
            argv += ["--set", item]
        if trials is not None:
            argv += ["--trials", str(trials)]
        used = command(argv, cpu_limit=cpu_limit, memory_limit_mib=memory_limit_mib)
        row = _first_row(Path(out) / "trials.csv")
    return {**used, "group_regret": float(row["group_regret"]), "agents": int(row["agents"]),
            "horizon": float(row["horizon"]), "messages_sent": int(row["messages_sent"])}


def command(argv: list[str], *, cwd: Path = ROOT, cpu_limit: float | None = None,
            memory_limit_mib: float | None = None) -> dict:
    """Run ``argv`` in a child process; its own CPU seconds (user + system), wall seconds and peak RSS (MiB)."""
    env = {**os.environ, "NETSIM_NO_PROGRESS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryFile() as err:
        wall = time.perf_counter()
        child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                 preexec_fn=lambda: _limit(cpu_limit, memory_limit_mib))
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        wall = time.perf_counter() - wall
        cpu = usage.ru_utime + usage.ru_stime
        if child.returncode != 0:
            err.seek(0)
            tail = (err.read().decode(errors="replace").strip().splitlines() or ["killed"])[-1]
            raise RuntimeError(f"stopped after {cpu:.1f} CPU s (limits: {cpu_limit} CPU s, {memory_limit_mib} MiB): "
                               f"{tail[:200]}")
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "maxrss_mib": round(usage.ru_maxrss / 1024, 1)}


def _limit(cpu: float | None, memory_mib: float | None) -> None:
    if cpu is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu) + 1, int(cpu) + 2))
    if memory_mib is not None:
        size = int(memory_mib * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))


def _first_row(path: Path) -> dict[str, str]:
    header, first = path.read_text().splitlines()[:2]
    return dict(zip(header.split(","), first.split(","), strict=False))


#: What ``netsim run`` does before its first trial: imports (CLI, runner, results, every registered
#: protocol), loading and checking the scenario (a dry build of trial 0's network) and the executor.
STARTUP = """
import time
from netsim.experiment import cli, results, runner
from netsim.engine import scenario as S
scenario = runner.with_run_options(S.load("quickstart", []), trials=1)
executor = runner.make_executor(None)
heavy = [m for m in ("pandas", "scipy.stats", "matplotlib") if m in __import__("sys").modules]
print(time.process_time(), " ".join(heavy))
"""


def startup() -> dict:
    """CPU seconds a ``netsim run`` spends before its first trial (interpreter start included)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", STARTUP], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    cpu, *heavy = done.stdout.split()
    return {"cpu_s": round(float(cpu), 3), "heavy_modules_loaded": heavy}
