"""Input fuzzing of the command line: ``python -m benchmarks.fuzz [--inputs 1200] [--seed 0] [--jobs 2] [--out PAGE]``.

Seeded mutations of the bundled scenario files (changed, removed and misspelt keys; values of
every TOML type, out-of-range, nan, inf, huge, long, path-like; broken TOML) and of command lines
(every command with random flags and values). Each input runs as its own ``netsim`` process with
a time limit and is classified:

* **accepted** (exit 0), **refused** (exit 2 with exactly one ``netsim: error:`` line, the last;
  only netsim's own progress lines may come before it),
* **untidy refusal** (exit 2 otherwise: a usage block, several lines), **traceback** (any other exit, or a Python
  traceback on stderr), **hang** (no exit within ``--timeout`` seconds).

The acceptance of issue 18 is 0 tracebacks, 0 hangs and every refusal one line. Runs are capped:
``run`` gets ``--set run.wall_budget=5 --trials 1``, so an accepted scenario with a huge horizon
ends by its wall budget instead of looking like a hang, and ``audit`` without ``--trials`` gets
``--trials 2000`` (the default 100,000 takes minutes: long, not stuck). The time limit is wall
clock: on a machine loaded by other work, raise ``--timeout`` with the load. The figures go to the block between
``<!-- fuzz:begin -->`` and ``<!-- fuzz:end -->`` of ``docs/reliability.md``.
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tomli_w

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted(p for p in (ROOT / "scenarios").glob("*.toml"))
BEGIN, END = "<!-- fuzz:begin -->", "<!-- fuzz:end -->"

SECTIONS = {
    "bandit": ["kind", "arms", "means", "low", "high", "sigma", "noise", "local_means", "dimension", "contexts"],
    "network": ["topology", "agents", "servers", "components", "delay", "server_delay", "loss", "cost", "p",
                "degree", "m", "k", "rows", "file", "links", "sampler"],
    "protocol": ["name", "epsilon", "gamma", "mode", "delta", "eta", "xi", "threshold", "simulation", "rounds"],
    "adversary": ["byzantine", "agents", "corruption", "distribution", "relay"],
    "faults": ["links", "crashes", "crash_rate", "restart_rate", "state", "duplication", "reorder", "reorder_delay",
               "link_down_rate"],
    "clock": ["period", "jitter"],
    "run": ["horizon", "trials", "seed", "checkpoints", "watchdog", "wall_budget", "horizn"],
}
VALUES: list[object] = [
    -1, 0, 1, 2, 3, 7, 64, 10**7, 2**63, 0.5, -0.5, 1e-300, 1e300, float("nan"), float("inf"), float("-inf"),
    True, False, "", "nonsense", "ring", "complete", "erdos_renyi", "constant", "exponential", "kept", "lost",
    "../../escape", "/etc/passwd", "/proc/self/environ", "x" * 5000, [], [1, 2], [0.1, 0.9], ["a"], [[1]],
    {}, {"model": "constant", "value": 3}, {"model": "exponential"}, {"model": "lognormal", "mean": -1},
    {"node": 1, "start": 5, "end": 2}, [{"u": 0, "v": 999, "start": 0, "end": 1}], [{"node": 0, "start": 1}],
]
COMMANDS = ["run", "show", "sweep", "trace", "plot", "audit", "list", "bogus"]
FLAGS = {
    "--trials": ["-1", "0", "1", "x", "1e9", "2"], "--seed": ["-1", "0", "nan", "99999999999999999999"],
    "--jobs": ["0", "-2", "1", "2", "100000"], "--out": ["/", "/proc/netsim-x", "", "~", "results/../../..", "OUT"],
    "--executor": ["serial", "process", "dask", "bogus"], "--scheduler": ["tcp://127.0.0.1:1", "nonsense"],
    "--scheduler-timeout": ["nan", "-1", "0", "inf", "1"], "--format": ["csv", "parquet", "xml"],
    "--until": ["nan", "-5", "0", "inf", "10"], "--epsilon": ["0", "-1", "nan", "inf", "0.5"],
    "--grid": ["network.agents=3,4", "network.agents=", "=1", "bogus.key=1,2", "run.trials=1,2",
               "network.agents=1e300,2", "protocol.name=ucb1,central-ucb"],
    "--set": ["network.agents=1e300", "run.horizon=nan", "bogus=1", "network.delay.value=3", "=", "x",
              "network.agents=100000", "faults.duplication=2", "protocol.name='nonsense'", "run.horizon=40"],
    "--kinds": ["", ",", "nonsense"], "--agents": ["-1", "x", "0,1"], "--plugin": ["/nonexistent.py", "/etc/passwd"],
    "--confidence": ["0", "1", "nan", "0.9"],
}


def mutate_file(rng: np.random.Generator, folder: Path, index: int) -> list[str]:
    """A mutated copy of a bundled scenario; returns the command line that loads it."""
    source = SCENARIOS[rng.integers(len(SCENARIOS))]
    path = folder / f"fuzz{index}.toml"
    if rng.random() < 0.1:  # broken TOML: a random cut of the file, or garbage appended
        text = source.read_text()
        text = text[: rng.integers(len(text))] + ("\n[[[" if rng.random() < 0.5 else "")
        path.write_text(text)
    else:
        doc = tomllib.loads(source.read_text())
        for _ in range(rng.integers(1, 4)):
            section = list(SECTIONS)[rng.integers(len(SECTIONS))]
            key = SECTIONS[section][rng.integers(len(SECTIONS[section]))]
            table = doc.setdefault(section, {})
            if not isinstance(table, dict):
                continue
            if rng.random() < 0.15:
                table.pop(key, None)
            else:
                table[key] = copy.deepcopy(VALUES[rng.integers(len(VALUES))])
        try:
            path.write_text(tomli_w.dumps(doc))
        except (TypeError, ValueError):  # not representable in TOML (nan is): keep the file as it was
            path.write_text(source.read_text())
    command = ["show", str(path)] if rng.random() < 0.4 else ["run", str(path)]
    return command


def mutate_command(rng: np.random.Generator) -> list[str]:
    command = COMMANDS[rng.integers(len(COMMANDS))]
    argv = [command]
    if command in ("run", "show", "sweep", "trace"):
        argv.append(["quickstart", "li2022-gis-path5", "nonsense", "/etc/passwd", ""][rng.integers(5)])
    elif command == "audit":
        argv.append(["laplace", "interval", "nonsense", "--all"][rng.integers(4)])
    elif command == "plot":
        argv.append(["OUT", "/nonexistent", "/"][rng.integers(3)])
    flags = list(FLAGS)
    for _ in range(rng.integers(0, 4)):
        flag = flags[rng.integers(len(flags))]
        choices = FLAGS[flag]
        argv += [flag, choices[rng.integers(len(choices))]]
    return argv


def classify(argv: list[str], workdir: Path, timeout: float) -> tuple[str, str]:
    out = str(workdir / f"out{abs(hash(tuple(argv))) % 10**9}")
    argv = [out if a == "OUT" else a for a in argv]
    if argv[0] == "run":
        argv += ["--trials", "1", "--set", "run.wall_budget=5", "--quiet", "--no-plots"]
        if "--out" not in argv:
            argv += ["--out", out]
    if argv[0] == "audit" and "--trials" not in argv:  # a long audit is not a hang: 2,000 trials, not 100,000
        argv += ["--trials", "2000"]
    if argv[0] in ("sweep", "trace") and "--out" not in argv:
        argv += ["--out", out + (".jsonl" if argv[0] == "trace" else "")]
    try:
        done = subprocess.run([sys.executable, "-m", "netsim", *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=workdir, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "hang", " ".join(argv)[:200]
    err = done.stderr.strip()
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("netsim: running")]
    if "Traceback (most recent call last)" in err or done.returncode not in (0, 2):
        last = err.splitlines()[-1] if err else f"exit {done.returncode}"
        return "traceback", f"{' '.join(argv)[:160]} -> {last[:200]}"
    if done.returncode == 2:
        # exactly one error line, last; anything before it is netsim's own progress lines (a sweep's plan)
        errors = [line for line in lines if "error" in line.lower() or not line.startswith("netsim: ")]
        if errors == lines[-1:] and lines[-1].startswith("netsim: error: "):
            return "refused", lines[-1][:200]
        return "untidy refusal", f"{' '.join(argv)[:160]} -> {err[:200]!r}"
    return "accepted", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1200, help="number of inputs (default 1200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="inputs run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before an input counts as a hang")
    parser.add_argument("--out", default=str(ROOT / "docs" / "reliability.md"), help="page holding the fuzz block")
    args = parser.parse_args(argv)
    if not 1 <= args.inputs <= 100_000 or not 1 <= args.jobs <= 64 or not args.timeout > 0:
        parser.error("accepted: --inputs 1 .. 100000, --jobs 1 .. 64, --timeout > 0")
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="netsim-fuzz-") as tmp:
        workdir = Path(tmp)
        inputs = [mutate_file(rng, workdir, i) if rng.random() < 0.7 else mutate_command(rng)
                  for i in range(args.inputs)]
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda a: classify(a, workdir, args.timeout), inputs))
    seconds = time.perf_counter() - started
    counts = Counter(kind for kind, _ in outcomes)
    files = sum(1 for a in inputs if a[1:2] and a[1].endswith(".toml"))
    lines = [BEGIN, "", "## Input fuzzing", "",
             f"`python -m benchmarks.fuzz --inputs {args.inputs} --seed {args.seed}"
             f"{'' if args.timeout == 60.0 else f' --timeout {args.timeout:g}'}` (issue 18): {args.inputs} inputs, "
             f"{files} mutated bundled scenario files and {args.inputs - files} command lines, each its own `netsim` "
             f"process with a {args.timeout:g} s limit; {seconds:.0f} s wall with {args.jobs} at a time.", "",
             "| outcome | inputs |", "|---|---|"]
    for kind in ("accepted", "refused", "untidy refusal", "traceback", "hang"):
        lines.append(f"| {kind} | {counts.get(kind, 0)} |")
    bad = [(kind, detail) for kind, detail in outcomes if kind in ("untidy refusal", "traceback", "hang")]
    lines += ["", "Every refusal is one `netsim: error:` line with exit code 2 (a sweep may print its plan's "
              "progress lines above it)." if not bad else "Inputs to fix:", ""]
    lines += [f"* {kind}: `{detail}`" for kind, detail in bad[:30]]
    lines += ["", END]
    block = "\n".join(lines)
    page = Path(args.out)
    text = page.read_text() if page.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    page.write_text(text)
    print(block)
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
