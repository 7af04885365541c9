"""Input fuzzing of the command line: ``python -m benchmarks.fuzz [--inputs 1500] [--seed 0] [--jobs 2] [--out PAGE]``.

Seeded inputs of six kinds (issue 27), each written to its own folder and run as its own process
(forked from one that has imported netsim, so that a run costs no start-up), with a wall-clock limit
and 4 GB of address space:

* **scenario** files: bundled scenarios with keys changed, removed and misspelt (values of every TOML
  type: out of range, nan, inf, 1e300, 5e-324, huge integers, long, path-like, NUL), or their bytes
  mutated (cut, flipped, invalid UTF-8, nested a thousand deep);
* **study** files: bundled studies with figure names (``../``, absolute, NUL, 300 characters), variants,
  scales and grids mutated, or their bytes;
* **edge lists** and **CSV data** files (random lines, odd digits, nan/inf, NUL, invalid UTF-8, quotes),
  loaded by a scenario (``show`` or ``run``);
* **command lines**: every verb (bare ``netsim`` too) with random flags and values;
* **results folders** for ``netsim plot``, written by a tiny run and then damaged.

Each input is classified: **accepted** (exit 0), **refused** (exit 2, exactly one ``netsim: error:``
line, the last; only netsim's own progress lines before it), **untidy refusal** (exit 2 otherwise),
**traceback** (any other exit, or a Python traceback on stderr), **hang** (no exit within
``--timeout``), **blow-up** (out of memory: a MemoryError, or killed, under the 4 GB limit). The peak
resident memory of the processes is measured (``RUSAGE_CHILDREN``). Runs are capped as a user would cap a test:
``run``/``sweep``/``study`` get ``--set run.wall_budget=5`` and few trials, so an accepted scenario
with a long horizon ends by its wall budget instead of looking like a hang. The figures go to the
block between ``<!-- fuzz:begin -->`` and ``<!-- fuzz:end -->`` of ``docs/reliability.md``.
``tests/test_fuzz.py`` runs a small sample of the same inputs in CI, in-process.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tomli_w

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
STUDIES = sorted((ROOT / "scenarios" / "studies").glob("*.toml"))
BEGIN, END = "<!-- fuzz:begin -->", "<!-- fuzz:end -->"
KINDS = ("scenario", "study", "edge list", "csv", "command", "results folder")
MEMORY_LIMIT = 4 << 30

SECTIONS = {
    "bandit": ["kind", "arms", "means", "low", "high", "sigma", "noise", "local_means", "dimension", "contexts",
               "file"],
    "network": ["topology", "agents", "servers", "components", "delay", "server_delay", "loss", "cost", "p",
                "degree", "m", "k", "rows", "file", "links", "sampler"],
    "protocol": ["name", "epsilon", "gamma", "mode", "delta", "eta", "xi", "threshold", "simulation", "rounds",
                 "gossip_rate", "L", "timeout"],
    "adversary": ["byzantine", "agents", "corruption", "distribution", "relay"],
    "faults": ["links", "crashes", "crash_rate", "restart_rate", "state", "duplication", "reorder", "reorder_delay",
               "link_down_rate"],
    "clock": ["period", "jitter"],
    "run": ["horizon", "trials", "seed", "checkpoints", "watchdog", "wall_budget", "max_events", "max_memory",
            "horizn"],
    "": ["name", "description"],
}
VALUES: list[object] = [
    -1, 0, 1, 2, 3, 7, 64, 10**7, 2**31, 2**62, 2**63, 0.5, -0.5, 1e-300, 5e-324, 1e300, 1e12, float("nan"),
    float("inf"), float("-inf"), True, False, "", "nonsense", "ring", "complete", "erdos_renyi", "edgelist", "csv",
    "constant", "exponential", "kept", "lost", "../../escape", "/etc/passwd", "/proc/self/environ", "/dev/zero",
    "a\x00b", "x" * 5000, [], [1, 2], [0.1, 0.9], ["a"], [[1]], {}, {"model": "constant", "value": 3},
    {"model": "exponential"}, {"model": "lognormal", "mean": 1, "sigma": 1e200}, {"node": 1, "start": 5, "end": 2},
    [{"u": 0, "v": 999, "start": 0, "end": 1}], [{"node": 0, "start": 1}],
]
FIGURE_NAMES = ["../../../escaped", "/tmp/netsim-fuzz-escape", "a/b", ".hidden", "x\x00y", "n" * 300, "ok-name",
                "", "..", "fig 1", "é"]
COMMANDS = ["run", "show", "sweep", "study", "trace", "plot", "audit", "list", "bogus", ""]
FLAGS = {
    "--trials": ["-1", "0", "1", "x", "1e9", "2", "100001"], "--seed": ["-1", "0", "nan", "99999999999999999999"],
    "--jobs": ["0", "-2", "1", "2", "100000"],
    "--out": ["/", "/proc/netsim-x", "", "~", "results/../../..", "OUT", "/dev/null", "x" * 300],
    "--executor": ["serial", "process", "bogus"], "--scheduler": ["nonsense"],
    "--scheduler-timeout": ["nan", "-1", "0", "inf", "1"], "--format": ["csv", "xml"],
    "--until": ["nan", "-5", "0", "inf", "10", "5e-324"], "--epsilon": ["0", "-1", "nan", "inf", "0.5", "1e-300"],
    "--grid": ["network.agents=3,4", "network.agents=", "=1", "bogus.key=1,2", "run.trials=1,2",
               "network.agents=1e300,2", "protocol.name=ucb1,central-ucb", "x=" + "[" * 500],
    "--set": ["network.agents=1e300", "run.horizon=nan", "bogus=1", "network.delay.value=3", "=", "x",
              "network.agents=100000", "faults.duplication=2", "protocol.name='nonsense'", "run.horizon=40",
              "run.horizon=1e12", "clock.period=1e-300", "name='../../x'", "name='a\x00b'", "v=" + "[" * 1000],
    "--kinds": ["", ",", "nonsense"], "--agents": ["-1", "x", "0,1"], "--plugin": ["/nonexistent.py", "/etc/passwd"],
    "--confidence": ["0", "1", "nan", "0.9"], "--scale": ["quick", "huge"],
}


def _pick(rng: np.random.Generator, items: list) -> object:
    return copy.deepcopy(items[int(rng.integers(len(items)))])


def _bytes_mutation(rng: np.random.Generator, data: bytes) -> bytes:
    """A byte-level change: a cut, flipped bytes, invalid UTF-8, a NUL, deep nesting, or garbage appended."""
    choice = int(rng.integers(6))
    if choice == 0:
        return data[: int(rng.integers(len(data) + 1))]
    if choice == 1:
        out = bytearray(data)
        for _ in range(int(rng.integers(1, 8))):
            out[int(rng.integers(len(out)))] = int(rng.integers(256))
        return bytes(out)
    if choice == 2:
        at = int(rng.integers(len(data) + 1))
        return data[:at] + bytes([0xFF, 0xFE, 0x80]) + data[at:]
    if choice == 3:
        at = int(rng.integers(len(data) + 1))
        return data[:at] + b"\x00" + data[at:]
    if choice == 4:
        depth = int(rng.integers(30, 1200))
        return data + b"\ndeep = " + b"[" * depth + b"]" * depth + b"\n"
    return data + bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8))


def _mutate_table(rng: np.random.Generator, doc: dict, sections: dict[str, list[str]]) -> None:
    for _ in range(int(rng.integers(1, 4))):
        section = _pick(rng, list(sections))
        key = _pick(rng, sections[section])
        table = doc if not section else doc.setdefault(section, {})
        if not isinstance(table, dict):
            continue
        if rng.random() < 0.15:
            table.pop(key, None)
        else:
            table[key] = _pick(rng, VALUES)


def _toml(doc: dict, fallback: bytes) -> bytes:
    try:
        return tomli_w.dumps(doc).encode()
    except (TypeError, ValueError):  # not representable in TOML: keep the original
        return fallback


def scenario_input(rng: np.random.Generator, folder: Path) -> list[str]:
    source = SCENARIOS[int(rng.integers(len(SCENARIOS)))]
    original = source.read_bytes()
    if rng.random() < 0.25:
        data = _bytes_mutation(rng, original)
    else:
        doc = tomllib.loads(original.decode())
        _mutate_table(rng, doc, SECTIONS)
        data = _toml(doc, original)
    path = folder / "fuzz.toml"
    path.write_bytes(data)
    return ["show", str(path)] if rng.random() < 0.5 else ["run", str(path)]


def study_input(rng: np.random.Generator, folder: Path) -> list[str]:
    source = STUDIES[int(rng.integers(len(STUDIES)))]
    original = source.read_bytes()
    if rng.random() < 0.25:
        data = _bytes_mutation(rng, original)
    else:
        doc = tomllib.loads(original.decode())
        for _ in range(int(rng.integers(1, 4))):
            what = int(rng.integers(5))
            if what == 0 and doc.get("figure"):
                doc["figure"][int(rng.integers(len(doc["figure"])))]["name"] = _pick(rng, FIGURE_NAMES)
            elif what == 1 and doc.get("variant"):
                variant = doc["variant"][int(rng.integers(len(doc["variant"])))]
                variant[_pick(rng, ["name", "scenario", "set", "grid", "scale", "bogus"])] = _pick(rng, VALUES)
            elif what == 2:
                doc.setdefault("scale", {}).setdefault("quick", {})[_pick(rng, ["trials", "set", "grid"])] = \
                    _pick(rng, VALUES)
            elif what == 3:
                doc.setdefault("grid", {})[_pick(rng, ["network.agents", "protocol.epsilon", "bogus"])] = \
                    _pick(rng, VALUES)
            elif doc.get("figure"):
                figure = doc["figure"][int(rng.integers(len(doc["figure"])))]
                figure[_pick(rng, ["kind", "x", "y", "hue", "facet", "baseline", "variants"])] = _pick(rng, VALUES)
        data = _toml(doc, original)
    path = folder / f"{source.stem}.toml"
    path.write_bytes(data)
    # the study's scenarios are bundled names or files beside the bundled study: run from a copy in its folder
    return ["study", str(path), "--trials", "1", "--set", "run.horizon=10", "--set", "run.checkpoints=2"]


def edge_list_input(rng: np.random.Generator, folder: Path) -> list[str]:
    pieces = ["0 1", "1 2", "2 3", "3 0", "1 \u00b2", "\u0661 0", "-1 2", "0 99999999999999999999", "0", "a b",
              "0 1 extra", "# comment", "", "\x00", "0\t3", "  2   1  "]
    lines = [_pick(rng, pieces) for _ in range(int(rng.integers(0, 12)))]
    data = "\n".join(lines).encode()
    if rng.random() < 0.2:
        data = _bytes_mutation(rng, data + b"\n")
    path = folder / "edges.txt"
    path.write_bytes(data)
    return ["show", "quickstart", "--set", "network.topology='edgelist'", "--set", f"network.file='{path}'",
            "--set", f"network.agents={int(rng.integers(1, 6))}"]


def csv_input(rng: np.random.Generator, folder: Path) -> list[str]:
    header = _pick(rng, ["agent,arm,reward", "agent,arm", "a,b,c", "", "agent;arm;reward", "agent,arm,reward,x"])
    values = ["1", "0", "0.5", "nan", "inf", "-inf", "1e400", "x", '"q', "", "\x00", "1,2"]
    rows = [f"{_pick(rng, ['a', 'b', 'c'])},{_pick(rng, ['x', 'y'])},{_pick(rng, values)}"
            for _ in range(int(rng.integers(0, 12)))]
    data = "\n".join([header, *rows]).encode()
    if rng.random() < 0.2:
        data = _bytes_mutation(rng, data + b"\n")
    path = folder / "data.csv"
    path.write_bytes(data)
    verb = "show" if rng.random() < 0.6 else "run"
    return [verb, "quickstart", "--set", f"bandit={{kind = 'csv', file = '{path}'}}", "--set",
            f"network.agents={int(rng.integers(1, 4))}"]


def command_input(rng: np.random.Generator, folder: Path) -> list[str]:
    command = _pick(rng, COMMANDS)
    argv = [command] if command else []
    if command in ("run", "show", "sweep", "trace"):
        argv.append(_pick(rng, ["quickstart", "li2022-gis-path5", "nonsense", "/etc/passwd", "", "x" * 300]))
    elif command == "study":
        argv.append(_pick(rng, ["quickstart", "nonsense", "/etc/passwd", "x" * 300]))
    elif command == "audit":
        argv.append(_pick(rng, ["laplace", "interval", "nonsense", "--all"]))
    elif command == "plot":
        argv.append(_pick(rng, ["OUT", "/nonexistent", "/", "x" * 300]))
    for _ in range(int(rng.integers(0, 4))):
        flag = _pick(rng, list(FLAGS))
        argv += [flag, _pick(rng, FLAGS[flag])]
    return argv


def results_input(rng: np.random.Generator, folder: Path) -> list[str]:
    """A tiny run's folder, damaged: a file removed, emptied, cut, garbled or replaced by a link or a folder."""
    out = folder / "results"
    template = Path(os.environ.get("NETSIM_FUZZ_RESULTS", ""))
    if template.is_dir():
        shutil.copytree(template, out)
    else:
        out.mkdir()
    names = sorted(p.name for p in out.iterdir()) or ["meta.json"]
    for _ in range(int(rng.integers(1, 3))):
        target = out / _pick(rng, names)
        action = int(rng.integers(5))
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        if action == 1:
            target.write_bytes(b"")
        elif action == 2:
            target.write_bytes(_bytes_mutation(rng, b'{"study": {"file": "x"}, "study_text": "[[figure]]"}'))
        elif action == 3:
            target.symlink_to(folder / "elsewhere")
        elif action == 4:
            target.mkdir(exist_ok=True)
    return ["plot", str(out)]


GENERATORS: dict[str, Callable[[np.random.Generator, Path], list[str]]] = {
    "scenario": scenario_input, "study": study_input, "edge list": edge_list_input, "csv": csv_input,
    "command": command_input, "results folder": results_input,
}
WEIGHTS = {"scenario": 0.3, "study": 0.15, "edge list": 0.1, "csv": 0.15, "command": 0.2, "results folder": 0.1}


def make_inputs(count: int, seed: int, workdir: Path) -> list[tuple[str, Path, list[str]]]:
    """``count`` inputs ``(kind, folder, argv)``, each with its own folder under ``workdir``."""
    rng = np.random.default_rng(seed)
    kinds = list(WEIGHTS)
    chosen = rng.choice(len(kinds), size=count, p=[WEIGHTS[k] for k in kinds])
    inputs = []
    for index, k in enumerate(chosen):
        folder = workdir / f"in{index}"
        folder.mkdir()
        inputs.append((kinds[k], folder, GENERATORS[kinds[k]](rng, folder)))
    return inputs


def capped(argv: list[str], folder: Path) -> list[str]:
    """``argv`` with the caps a test would use: few trials, a wall budget, an output folder of its own."""
    out = str(folder / "out")
    argv = [out if a == "OUT" else a for a in argv]
    verb = argv[0] if argv else ""
    if verb in ("run", "sweep", "study"):
        argv = argv + ["--set", "run.wall_budget=5", "--quiet", "--no-plots"]
        if "--trials" not in argv:
            argv += ["--trials", "1"]
    if verb in ("run", "sweep", "study", "trace") and "--out" not in argv:
        argv += ["--out", out + (".jsonl" if verb == "trace" else "")]
    if verb == "audit" and "--trials" not in argv:  # a long audit is not a hang: 2,000 trials, not 100,000
        argv += ["--trials", "2000"]
    return argv


def judge(code: int | None, err: str) -> tuple[str, str]:
    """The outcome of one input from its exit code (None: timed out) and stderr."""
    if code is None:
        return "hang", ""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    if "MemoryError" in err or code in (-9, 137):
        return "blow-up", lines[-1][:200] if lines else f"exit {code}"
    if "Traceback (most recent call last)" in err or code not in (0, 2):
        return "traceback", lines[-1][:200] if lines else f"exit {code}"
    if code == 2:
        # exactly one error line, last; anything before it is netsim's own progress lines (a sweep's plan)
        errors = [line for line in lines if "error" in line.lower() or not line.startswith("netsim: ")]
        if errors == lines[-1:] and lines[-1].startswith("netsim: error: "):
            return "refused", lines[-1][:200]
        return "untidy refusal", repr(err[:200])
    return "accepted", ""


def _child(argv: list[str], folder: Path) -> None:
    """In a forked process: run ``netsim argv`` in ``folder`` with 4 GB of address space, stderr to a file."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.chdir(folder)
    os.environ.update(HOME=str(folder), NETSIM_NO_PROGRESS="1")
    with open(folder / "stderr.txt", "wb", buffering=0) as err, open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(err.fileno(), 2)
    code = 1
    try:
        from netsim.experiment.cli import main as netsim

        code = netsim(argv)
    except BaseException:  # noqa: BLE001 - a traceback is what this run looks for
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def run_all(inputs: list[tuple[str, Path, list[str]]], jobs: int, timeout: float) -> list[tuple[str, str]]:
    """Every input in a process of its own, forked from this one (netsim already imported: no start-up cost),
    ``jobs`` at a time; (outcome, detail) each."""
    import multiprocessing

    fork = multiprocessing.get_context("fork")
    outcomes: list[tuple[str, str] | None] = [None] * len(inputs)
    pending = list(range(len(inputs)))[::-1]
    running: dict[int, tuple[object, float]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            index = pending.pop()
            _, folder, argv = inputs[index]
            process = fork.Process(target=_child, args=(capped(argv, folder), folder))
            process.start()
            running[index] = (process, time.monotonic())
        time.sleep(0.02)
        for index, (process, started) in list(running.items()):
            argv = capped(inputs[index][2], inputs[index][1])
            if process.exitcode is None and time.monotonic() - started < timeout:
                continue
            if process.exitcode is None:
                process.kill()
                process.join()
                outcomes[index] = ("hang", " ".join(argv)[:200])
            else:
                err = (inputs[index][1] / "stderr.txt").read_text(errors="replace")
                kind, detail = judge(process.exitcode, err)
                outcomes[index] = (kind, detail if kind == "refused" else f"{' '.join(argv)[:160]} -> {detail}")
            del running[index]
    return outcomes  # type: ignore[return-value]


def _preload() -> None:
    """Import what every command uses once, before the inputs are forked."""
    import netsim.experiment.api  # noqa: F401
    import netsim.experiment.plots  # noqa: F401
    import netsim.experiment.studies.figures  # noqa: F401
    import netsim.experiment.sweeps  # noqa: F401
    from netsim.engine import registry

    registry.load_plugins()


def tiny_results(workdir: Path) -> Path:
    """A tiny study folder (tables, meta.json, units, figures) that results-folder inputs start from."""
    out = workdir / "template"
    subprocess.run([sys.executable, "-m", "netsim", "study", "quickstart", "--trials", "1", "--set",
                    "run.horizon=20", "--set", "run.checkpoints=2", "--quiet", "--out", str(out)],
                   check=True, capture_output=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1500, help="number of inputs (default 1500)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="inputs run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before an input counts as a hang")
    parser.add_argument("--out", default=str(ROOT / "docs" / "reliability.md"), help="page holding the fuzz block")
    args = parser.parse_args(argv)
    if not 1 <= args.inputs <= 100_000 or not 1 <= args.jobs <= 64 or not args.timeout > 0:
        parser.error("accepted: --inputs 1 .. 100000, --jobs 1 .. 64, --timeout > 0")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="netsim-fuzz-") as tmp:
        workdir = Path(tmp)
        os.environ["NETSIM_FUZZ_RESULTS"] = str(tiny_results(workdir))
        inputs = make_inputs(args.inputs, args.seed, workdir)
        _preload()
        outcomes = run_all(inputs, args.jobs, args.timeout)
    seconds = time.perf_counter() - started
    # Linux: the largest resident set of any child process reaped (every input ran as one)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    block = report(args, inputs, outcomes, seconds, peak)
    page = Path(args.out)
    text = page.read_text() if page.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    page.write_text(text)
    print(block)
    return 0 if not any(kind in BAD for kind, _ in outcomes) else 1


BAD = ("untidy refusal", "traceback", "hang", "blow-up")
OUTCOMES = ("accepted", "refused", *BAD)


def report(args: argparse.Namespace, inputs: list, outcomes: list, seconds: float, peak: float) -> str:
    """The fuzz block of docs/reliability.md: outcomes per kind of input, the peak memory, what to fix."""
    table: dict[str, Counter] = {kind: Counter() for kind in KINDS}
    for (kind, _, _), (outcome, _) in zip(inputs, outcomes):
        table[kind][outcome] += 1
    lines = [BEGIN, "", "## Input fuzzing", "",
             f"`python -m benchmarks.fuzz --inputs {args.inputs} --seed {args.seed}"
             f"{'' if args.timeout == 120.0 else f' --timeout {args.timeout:g}'}` (issues 18, 27): {args.inputs} "
             f"inputs, each in a process of its own (forked after netsim was imported) with a {args.timeout:g} s "
             f"limit and 4 GB of address space; {seconds:.0f} s wall with {args.jobs} at a time; the largest peak "
             f"resident memory of any input was {peak:.0f} MB.", "",
             "| input | " + " | ".join(OUTCOMES) + " |", "|---|" + "---|" * len(OUTCOMES)]
    for kind in KINDS:
        lines.append(f"| {kind} | " + " | ".join(str(table[kind][o]) for o in OUTCOMES) + " |")
    totals = Counter(o for o, _ in outcomes)
    lines.append("| all | " + " | ".join(str(totals[o]) for o in OUTCOMES) + " |")
    bad = [(o, d) for o, d in outcomes if o in BAD]
    lines += ["", "Every refusal is one `netsim: error:` line with exit code 2 (a sweep or study may print its "
              "plan's progress lines above it)." if not bad else "Inputs to fix:", ""]
    lines += [f"* {o}: `{d}`" for o, d in bad[:30]]
    lines += ["", END]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
