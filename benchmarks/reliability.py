"""Protocol x fault reliability table (issue 10): ``python -m benchmarks.reliability --out docs/reliability.md``.

For every registered protocol, a small fault-free base scenario is run for a few trials, then
the same scenario (same seeds: common random numbers) with one fault model at a time
(``netsim.faults``). Each cell says whether the protocol

* **rejected** the faulty scenario with a clear :class:`~netsim.errors.InputError` (the message
  is shown),
* **completed** it (every trial ended normally and the mean group regret rose by at most 10 %;
  for best-arm identification protocols, which have a ``correct`` column, also no fewer correct
  identifications),
* was **degraded** (every trial ended normally but regret rose by more than 10 % or fewer
  identifications were correct),
* **failed** (a trial was ended by the watchdog: no pull and no delivery for ``run.watchdog``,
  or over its wall-clock budget), or
* **crashed** (an exception escaped the simulation: a bug; none is expected).

The numbers are the mean group regret and communication cost of the faulty run and their
change against the fault-free run. Run with ``--json`` to get the raw figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netsim import scenario as S
from netsim.errors import InputError
from netsim.registry import protocols
from netsim.sim import run_trial
from netsim.streams import trial_sequence

# Small base instance of every protocol: (bundled scenario, --set overrides).
RIO = ["network.agents=16", "run.checkpoints=1"]
BASES: dict[str, tuple[str, list[str]]] = {
    "ucb1": ("quickstart", ["run.horizon=1000"]),
    "central-ucb": ("quickstart", ["protocol.name='central-ucb'", "run.horizon=1000"]),
    "cdp-mab": ("li2022-fig8-homogeneous", ["run.horizon=3000", "protocol.epsilon=inf"]),
    "ddp-mab": ("li2022-gis-path5", ["run.horizon=600"]),
    "hdp-mab": ("li2022-fig11-case1", ["network.agents=10", "network.components=2", "bandit.arms=5",
                                       "run.horizon=1000"]),
    "dubey2020a-private": ("dubey2020a-fig1a", ["network.agents=12", "network.p=0.4", "run.horizon=300"]),
    "dubey2020a-byzantine": ("dubey2020a-fig1b", ["network.agents=12", "network.p=0.4", "run.horizon=300"]),
    "dp-ucb-int": ("dubey2020a-fig1a-dpucbint", ["network.agents=12", "run.horizon=300"]),
    # zhu2021's "paper" mode reads neighbours instantly (no messages): the realistic mode sends them
    "fed-ucb": ("zhu2021-fig2a-eps1", ["protocol.mode='realistic'", "run.horizon=2000"]),
    "gossip-ucb": ("zhu2021-fig2a-eps1", ["protocol.name='gossip-ucb'", "protocol.epsilon=",
                                          "protocol.mode='realistic'", "run.horizon=2000"]),
    "feducb": ("dubey2020b-fig1c", ["network.agents=4", "run.horizon=300"]),
    "feducb-p2p": ("dubey2020b-p2p", ["network.agents=8", "network.p=0.4", "run.horizon=300"]),
    "mase": ("rio2023-fig1-left-eps0.1", ["protocol.name='mase'", "protocol.epsilon=", *RIO]),
    "dp-mase": ("rio2023-fig1-left-eps0.1", RIO),
    "corrupted-elimination": ("rio2023-fig1-right-xi0.05", RIO),
    "feraud2019": ("rio2023-fig1-right-xi0.05", ["protocol.name='feraud2019'", "protocol.xi=", *RIO]),
    "central-se": ("rio2023-fig1-central", RIO),
    "independent-se": ("rio2023-fig1-independent", RIO),
}

# Fault columns: name -> function(span) -> --set overrides; span = mean end time of the fault-free run.
FAULTS: dict[str, Any] = {
    "link down": lambda span: ["faults.link_down_rate=0.02", "faults.link_up_rate=0.2"],
    "crash (kept)": lambda span: [f"faults.crashes=[{{node=1, start={0.2 * span:.6g}, end={0.5 * span:.6g}}}]",
                                  "faults.state='kept'"],
    "crash (lost)": lambda span: [f"faults.crashes=[{{node=1, start={0.2 * span:.6g}, end={0.5 * span:.6g}}}]",
                                  "faults.state='lost'"],
    "duplication": lambda span: ["faults.duplication=0.2"],
    "reorder": lambda span: ["faults.reorder=0.3", "faults.reorder_delay={model='exponential', mean=2.0}"],
}
EXTRA_LABELS = {"dropped_link_down": "dropped (link down)", "dropped_crashed": "dropped (crashed)",
                "duplicated": "duplicated", "reordered": "held back"}
DEGRADED = 0.10  # regret rise (fraction) above which a completed run counts as degraded


def _load(name: str, overrides: Sequence[str]) -> S.Scenario:
    """The base instance of protocol ``name`` with ``overrides``; ``protocol.KEY=`` (empty) removes KEY."""
    base, sets = BASES[name]
    path = S.locate(base)
    keep = [s for s in [*sets, *overrides] if not s.endswith("=")]
    document = S.apply_overrides(tomllib.loads(path.read_text()), keep)
    for s in sets:
        if s.endswith("="):  # a key of the base scenario that this protocol does not have
            document["protocol"].pop(s[:-1].split(".", 1)[1], None)
    document.setdefault("name", path.stem)
    return S.from_dict(document, base_dir=path.parent, path=str(path))


def _run(scenario: S.Scenario, trials: int) -> dict[str, Any]:
    rows = []
    for trial in range(trials):
        rows.append(run_trial(scenario, trial_sequence(scenario.run["seed"], trial), trial).row)
    out: dict[str, Any] = {
        "trials": trials,
        "failed": sum(r["status"] != "ok" for r in rows),
        "failures": sorted({r["failure"] for r in rows if r["status"] != "ok"}),
        "group_regret": float(np.mean([r["group_regret"] for r in rows])),
        "comm_cost": float(np.mean([r["comm_cost"] for r in rows])),
        "end_time": float(np.mean([r["end_time"] for r in rows])),
    }
    if all("correct" in r for r in rows):
        out["correct"] = int(sum(bool(r["correct"]) for r in rows))
    for extra in ("dropped_link_down", "dropped_crashed", "duplicated", "reordered"):
        if extra in rows[0]:
            out[extra] = float(np.mean([r[extra] for r in rows]))
    return out


def cell(name: str, fault: str, base: dict[str, Any], trials: int, watchdog: float, budget: float) -> dict[str, Any]:
    """Outcome of ``name`` under ``fault`` (see module docstring)."""
    span = base["end_time"]
    sets = [*FAULTS[fault](span), f"run.watchdog={watchdog:.6g}", f"run.wall_budget={budget:g}"]
    try:
        scenario = _load(name, sets)
    except InputError as exc:
        return {"outcome": "rejected", "reason": exc.detail, "key": exc.key}
    try:
        got = _run(scenario, trials)
    except Exception as exc:  # noqa: BLE001 (the table reports bugs instead of dying)
        return {"outcome": "crashed", "reason": f"{type(exc).__name__}: {exc}"}
    if got["failed"]:
        got["outcome"] = "failed"
        return got
    worse = got["group_regret"] > base["group_regret"] * (1 + DEGRADED) + 1e-9
    if "correct" in got and got["correct"] < base.get("correct", 0):
        worse = True
    got["outcome"] = "degraded" if worse else "completed"
    return got


def table(names: Sequence[str], trials: int, *, progress: bool = True) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        started = time.perf_counter()
        if name not in BASES:
            results[name] = {"base": None, "reason": "no small base scenario in benchmarks/reliability.py"}
            continue
        plain = _load(name, [])
        watchdog_free = _run(plain, trials)
        span = watchdog_free["end_time"]
        # no pull and no delivery for twice the length of the fault-free run: stuck (event-driven protocols
        # such as rio2023's "events" mode legitimately stay silent for long stretches)
        watchdog = max(2 * span, 10 * plain.clock["period"])
        budget = 60.0
        row: dict[str, Any] = {"base": watchdog_free, "scenario": BASES[name][0], "sets": BASES[name][1],
                               "watchdog": watchdog}
        for fault in FAULTS:
            row[fault] = cell(name, fault, watchdog_free, trials, watchdog, budget)
        row["wall_s"] = time.perf_counter() - started
        results[name] = row
        if progress:
            print(f"{name}: {row['wall_s']:.1f} s", file=sys.stderr)
    return results


def _pct(new: float, old: float) -> str:
    if old == 0:
        return "+0%" if new == 0 else "new"
    return f"{100 * (new - old) / abs(old):+.0f}%"


def _cell_text(got: dict[str, Any], base: dict[str, Any]) -> str:
    outcome = got["outcome"]
    if outcome in ("rejected", "crashed"):
        return f"**{outcome}**: {got['reason'].replace('|', '/')}"
    text = (f"**{outcome}**: regret {got['group_regret']:.4g} ({_pct(got['group_regret'], base['group_regret'])}), "
            f"cost {got['comm_cost']:.4g} ({_pct(got['comm_cost'], base['comm_cost'])})")
    if "correct" in got:
        text += f", correct {got['correct']}/{got['trials']}"
    touched = [f"{got[k]:.4g} {label}" for k, label in EXTRA_LABELS.items() if got.get(k)]
    text += f"; per trial {', '.join(touched)}" if touched else "; no message affected"
    if outcome == "failed":
        text += f"; {got['failed']}/{got['trials']} failed: {'; '.join(got['failures'])}"
    return text


def markdown(results: dict[str, Any], trials: int, seconds: float) -> str:
    lines = [
        "# Reliability: every protocol under every fault model",
        "",
        "Produced by `python -m benchmarks.reliability --out docs/reliability.md` "
        f"({trials} trials per cell, {seconds:.0f} s on this machine). Do not edit by hand.",
        "",
        "Each protocol runs a small base instance (the bundled scenario with the `--set` overrides listed",
        "below) without faults, then with one fault model at a time, on the same seeds. Fault models",
        "(`[faults]`, see `docs/faults.md`):",
        "",
        "* **link down**: every link fails at rate 0.02 and comes back at rate 0.2 (down about 9 % of the time);",
        "* **crash (kept)** / **crash (lost)**: agent 1 crashes at 20 % of the fault-free run's length and restarts",
        "  at 50 %, keeping or losing its protocol state;",
        "* **duplication**: each message is delivered twice with probability 0.2;",
        "* **reorder**: each message is held back by an Exp(mean 2) extra delay with probability 0.3.",
        "",
        "Outcomes: **completed** (every trial ended normally, mean group regret at most 10 % above the fault-free",
        "run and, for best-arm identification, no fewer correct answers), **degraded** (ended normally, but",
        "regret up by more than 10 % or fewer correct answers), **failed** (the watchdog ended a trial: no pull",
        "and no delivery for twice the length of the fault-free run, or 60 s of wall-clock time), **rejected** (the",
        "scenario is refused when loaded, with the message shown), **crashed** (an exception: a bug).",
        "Numbers: mean group regret and communication cost of the faulty runs, their change against the",
        "fault-free run, and the mean number of messages per trial the fault touched (\"no message affected\":",
        "the protocol sends nothing the fault applies to, e.g. isolated or pooled baselines).",
        "",
        "| protocol | fault-free | " + " | ".join(FAULTS) + " |",
        "|---|---|" + "---|" * len(FAULTS),
    ]
    for name, row in results.items():
        base = row["base"]
        if base is None:
            lines.append(f"| {name} | {row['reason']} |" + " |" * len(FAULTS))
            continue
        head = f"regret {base['group_regret']:.4g}, cost {base['comm_cost']:.4g}"
        if "correct" in base:
            head += f", correct {base['correct']}/{base['trials']}"
        if base["failed"]:
            head += f"; {base['failed']} failed"
        cells = [_cell_text(row[f], base) for f in FAULTS]
        lines.append(f"| {name} | {head} | " + " | ".join(cells) + " |")
    lines += ["", "Base instances:", ""]
    for name, row in results.items():
        if row["base"] is not None:
            sets = " ".join(f"`{s}`" for s in row["sets"])
            lines.append(f"* {name}: `{row['scenario']}` {sets} (watchdog {row['watchdog']:.4g})")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the Markdown table here (default: print it)")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON here")
    parser.add_argument("--trials", type=int, default=3, help="trials per cell (default 3)")
    parser.add_argument("--protocol", action="append", help="only these protocols (repeatable)")
    args = parser.parse_args(argv)
    names = args.protocol or protocols.names()
    started = time.perf_counter()
    results = table(names, args.trials)
    seconds = time.perf_counter() - started
    text = markdown(results, args.trials, seconds)
    if args.out:
        from netsim.results import atomic_write

        atomic_write(args.out, text.encode())
    else:
        print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=lambda v: None if v is None else str(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
