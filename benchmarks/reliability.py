"""Protocol x fault reliability table (issues 10, 15): ``python -m benchmarks.reliability --out docs/reliability.md``.

For every registered protocol, a small fault-free base scenario is run for a few trials, then
the same scenario (same seeds: common random numbers) with one fault model at a time
(``netsim.engine.faults``), and with continuous per-hop delays instead of the base scenario's. Each cell
says whether the protocol

* **rejected** the scenario with a clear :class:`~netsim.engine.errors.InputError` (the message is shown),
* **completed** it (every trial ended normally and the mean group regret, or the sample
  complexity of best-arm identification, rose by at most 10 %; for best-arm identification also
  no fewer correct identifications),
* was **degraded** (every trial ended normally but the figure rose by more than 10 % or fewer
  identifications were correct),
* is **suspect** (every trial ended normally but the figure *fell* by more than 10 %: an
  improvement under a fault is a bug until shown otherwise; each such cell needs an entry in
  :data:`EXPLAINED` with its investigated cause, printed under the table, else it is marked
  unexplained),
* **failed** (a trial was ended by the watchdog: no pull and no delivery for ``run.watchdog``,
  or over its wall-clock budget), or
* **crashed** (an exception escaped the simulation: a bug; none is expected).

"no server" marks the server-crash columns of protocols without a server. The numbers are the
mean group regret (and sample complexity) and communication cost of the faulty run and their
change against the fault-free run. ``--json`` writes the raw figures.

The output file keeps whatever it holds between ``<!-- fuzz:begin -->`` and ``<!-- fuzz:end -->``
(a section another tool maintains) when it is rewritten.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.registry import protocols
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence

# Small base instance of every protocol: (bundled scenario, --set overrides).
RIO = ["network.agents=16", "run.checkpoints=1"]
BASES: dict[str, tuple[str, list[str]]] = {
    "ucb1": ("quickstart", ["run.horizon=1000"]),
    "central-ucb": ("quickstart", ["protocol.name='central-ucb'", "network.servers=1", "run.horizon=1000"]),
    "cdp-mab": ("li2022-fig8-homogeneous", ["run.horizon=3000", "protocol.epsilon=inf"]),
    "ddp-mab": ("li2022-gis-path5", ["run.horizon=600"]),
    "hdp-mab": ("li2022-fig11-case1", ["network.agents=10", "network.components=2", "bandit.arms=5",
                                       "run.horizon=1000"]),
    "dubey2020a-private": ("dubey2020a-fig1a", ["network.agents=12", "network.p=0.4", "run.horizon=300"]),
    "dubey2020a-byzantine": ("dubey2020a-fig1b", ["network.agents=12", "network.p=0.4", "run.horizon=300"]),
    "dp-ucb-int": ("dubey2020a-fig1a-dpucbint", ["network.agents=12", "run.horizon=300"]),
    # zhu2021's "paper" mode reads neighbours instantly (no messages): the realistic mode sends them.
    # fed-ucb at epsilon = inf: at the bundled eps = 1 the Eq. (12) bonus keeps its play uniform for the
    # whole horizon (late_best_fraction 0.20 = 1/K at T = 2000: it learns nothing, so no fault could
    # change it); without privacy it learns (late_best_fraction 0.36-0.75 over 3 trials), and the cells
    # then measure what faults do to a learner
    "fed-ucb": ("zhu2021-fig2a-eps1", ["protocol.mode='realistic'", "run.horizon=2000", "protocol.epsilon=inf"]),
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


def _crash(node: int, span: float, state: str, plain: S.Scenario) -> list[str]:
    sets = [f"faults.crashes=[{{node={node}, start={0.2 * span:.6g}, end={0.5 * span:.6g}}}]",
            f"faults.state='{state}'"]
    if plain.protocol.get("simulation") == "events":  # rio2023: crashes need the round-by-round simulation
        sets.append("protocol.simulation='rounds'")
    return sets


def _server_crash(state: str) -> Callable[[float, S.Scenario], list[str] | None]:
    def overrides(span: float, plain: S.Scenario) -> list[str] | None:
        servers = protocols.get(plain.protocol["name"], key="protocol.name").servers
        if not servers or plain.network["servers"] < 1:
            return None  # "no server"
        return _crash(plain.network["agents"], span, state, plain)
    return overrides


# Fault columns: name -> function(span, base scenario) -> --set overrides (None: does not apply);
# span = mean end time of the fault-free run.
FAULTS: dict[str, Callable[[float, S.Scenario], list[str] | None]] = {
    "link down": lambda span, plain: ["faults.link_down_rate=0.02", "faults.link_up_rate=0.2"],
    "crash (kept)": lambda span, plain: _crash(1, span, "kept", plain),
    "crash (lost)": lambda span, plain: _crash(1, span, "lost", plain),
    "server crash (kept)": _server_crash("kept"),
    "server crash (lost)": _server_crash("lost"),
    "duplication": lambda span, plain: ["faults.duplication=0.2"],
    "reorder": lambda span, plain: ["faults.reorder=0.3", "faults.reorder_delay={model='exponential', mean=2.0}"],
}


def _delay(law: str) -> Callable[[float, S.Scenario], list[str]]:
    """Every per-hop delay drawn from ``law``: the delay keys that act on the scenario's links (no server:
    no server_delay; agents that talk only to a server: server_delay alone)."""

    def sets(span: float, plain: S.Scenario) -> list[str]:
        if not protocols.get(plain.protocol["name"], key="protocol.name").agent_links:  # a star: the one delay it has
            keys = ["network.server_delay" if plain.network["server_delay"] is not None else "network.delay"]
        else:
            keys = ["network.delay"] + (["network.server_delay"] if plain.network["servers"] else [])
        return [f"{key}={law}" for key in keys]

    return sets


# Delay columns: every per-hop delay (agent-agent and server-agent) drawn from one law, in slots.
DELAYS: dict[str, Callable[[float, S.Scenario], list[str]]] = {
    **{f"exp {m:g}": _delay(f"{{model='exponential', mean={m}}}") for m in (0.5, 2.0, 8.0)},
    **{f"lognormal {m:g}": _delay(f"{{model='lognormal', mean={m}, sigma=1.0}}") for m in (0.5, 2.0, 8.0)},
}
COLUMNS = {**FAULTS, **DELAYS}

EXTRA_LABELS = {"dropped_link_down": "dropped (link down)", "dropped_crashed": "dropped (crashed)",
                "duplicated": "duplicated", "reordered": "held back"}
DEGRADED = 0.10  # rise (fraction) above which a completed run counts as degraded
SUSPECT = 0.10  # fall (fraction) below which a run counts as suspect
STORE = Path(__file__).with_name("reliability.json")  # raw figures of every row, for partial regeneration

# (protocol, column) -> the investigated cause of a suspect cell (regret more than 10 % *below* the
# fault-free run). Written after looking at the run, not to make the table pass.
EXPLAINED: dict[tuple[str, str], str] = {
    ("gossip-ucb", "lognormal 8"): (
        "trial noise, not an effect: this base instance (Gaussian rewards of variance 1, heterogeneous "
        "U[0, 1] means) has a per-trial spread of about 120 (20 %), so a mean of 3 trials moves by 12 % "
        "by chance. Over 30 paired seeds the fault-free run gives 554.8 and lognormal delays of mean 8 "
        "give 561.8 (paired t-test p = 0.64, Wilcoxon p = 0.75): no improvement. The exchange cannot gain "
        "from delays: a delayed exchange applies the same average of the same two values, later."),
    ("dubey2020a-private", "lognormal 2"): (
        "trial noise, not an effect: this base instance has a per-trial spread of about 81 (21 %), so a "
        "mean of 3 trials moves by 12 % by chance. Over 30 paired seeds the fault-free run gives 384.0 "
        "and lognormal delays of mean 2 give 393.5 (+9.5 +- 9.4, paired t-test p = 0.32, Wilcoxon "
        "p = 0.72): no improvement (lognormal 0.5: +7.2 +- 6.9; exp 2: +8.1 +- 6.4)"),
    ("feducb", "server crash (lost)"): (
        "an earlier synchronisation, made by the protocol's recovery: the server, restarting without its "
        "sums at t = 150, opens a round at once to rebuild them from the agents, while the fault-free run "
        "synchronises only once, at t = 235 (the log-det rule of dubey2020 Alg. 1 line 12 at this scale; "
        "message traces of trials 0-2). The agents pool their data 85 steps sooner and the regret falls: "
        "over 40 paired seeds -20.4 +- 2.9 (paired t-test p = 1.5e-8). With epsilon = inf the same crash "
        "raises the regret by 16.0 +- 2.7 (30 seeds), and the server crash with its state kept leaves the "
        "run unchanged (+0 %): the fall is the extra round, not the transport (measured 2026-11-27 with "
        "the context draws of issue 25)"),
}


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
        "failed": sum(r["status"] == "failed" for r in rows),
        "unfinished": sum(r["status"] == "unfinished" for r in rows),
        "failures": sorted({r["failure"] for r in rows if r["status"] == "failed"}),
        "group_regret": float(np.mean([r["group_regret"] for r in rows])),
        "comm_cost": float(np.mean([r["comm_cost"] for r in rows])),
        "end_time": float(np.mean([r["end_time"] for r in rows])),
    }
    if all("correct" in r for r in rows):
        # of the trials that finished: an unfinished trial (the horizon came first) gave no answer, it is
        # counted apart (``unfinished``), not as a wrong one
        out["correct"] = int(sum(r["correct"] == 1 for r in rows if r["status"] != "unfinished"))
    if all("late_best_fraction" in r for r in rows):  # whether a learner learns (zhu2021)
        out["late_best_fraction"] = float(np.mean([r["late_best_fraction"] for r in rows]))
    if all("sample_complexity" in r for r in rows):
        out["sample_complexity"] = float(np.mean([r["sample_complexity"] for r in rows]))
    for extra in EXTRA_LABELS:
        if extra in rows[0]:
            out[extra] = float(np.mean([r[extra] for r in rows]))
    return out


def _figure(result: dict[str, Any]) -> str:
    """The figure a cell is judged on: sample complexity for best-arm identification, else regret."""
    return "sample_complexity" if "sample_complexity" in result else "group_regret"


def cell(name: str, column: str, base: dict[str, Any], trials: int, watchdog: float, budget: float) -> dict[str, Any]:
    """Outcome of ``name`` under ``column`` (see module docstring)."""
    try:
        plain = _load(name, [])
        sets = COLUMNS[column](base["end_time"], plain)
        if sets is None:
            return {"outcome": "no server"}
        scenario = _load(name, [*sets, f"run.watchdog={watchdog:.6g}", f"run.wall_budget={budget:g}"])
    except InputError as exc:
        return {"outcome": "rejected", "reason": exc.detail, "key": exc.key}
    try:
        got = _run(scenario, trials)
    except Exception as exc:  # noqa: BLE001 (the table reports bugs instead of dying)
        return {"outcome": "crashed", "reason": f"{type(exc).__name__}: {exc}"}
    if got["failed"]:
        got["outcome"] = "failed"
        return got
    figure = _figure(base)
    new, old = got.get(figure, got["group_regret"]), base[figure]
    worse = (new > old * (1 + DEGRADED) + 1e-9 or ("correct" in got and got["correct"] < base.get("correct", 0))
             or got["unfinished"] > base.get("unfinished", 0))
    if worse:
        got["outcome"] = "degraded"
    elif new < old * (1 - SUSPECT) - 1e-9:
        got["outcome"] = "suspect"
        got["explained"] = (name, column) in EXPLAINED
    else:
        got["outcome"] = "completed"
    return got


def _row(name: str, trials: int, columns: Sequence[str]) -> dict[str, Any]:
    started = time.perf_counter()
    if name not in BASES:
        return {"base": None, "reason": "no small base scenario in benchmarks/reliability.py"}
    plain = _load(name, [])
    base = _run(plain, trials)
    # no pull and no delivery for twice the length of the fault-free run: stuck (event-driven protocols
    # such as rio2023's "events" mode legitimately stay silent for long stretches)
    watchdog = max(2 * base["end_time"], 10 * plain.clock["period"])
    row: dict[str, Any] = {"base": base, "scenario": BASES[name][0], "sets": BASES[name][1], "watchdog": watchdog}
    bases = {(): base}
    for column in columns:
        # a column that switches the protocol's simulation mode (rio2023 crashes: 'rounds') is judged against
        # a fault-free run in that mode, not against the event mode's: like for like
        sets = COLUMNS[column](base["end_time"], plain) or []
        mode = tuple(s for s in sets if s.startswith("protocol."))
        if mode not in bases:
            bases[mode] = _run(_load(name, list(mode)), trials)
            bases[mode]["mode"] = ", ".join(mode)
        row[column] = cell(name, column, bases[mode], trials, watchdog, 60.0)
        if mode:
            row[column]["against"] = bases[mode]
    row["wall_s"] = time.perf_counter() - started
    return row


def table(names: Sequence[str], trials: int, *, columns: Sequence[str] = tuple(COLUMNS), jobs: int = 1,
          progress: bool = True) -> dict[str, Any]:
    """One row per protocol (in ``jobs`` processes when > 1)."""
    results: dict[str, Any] = {}
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            futures = {name: pool.submit(_row, name, trials, list(columns)) for name in names}
            for name, future in futures.items():
                results[name] = future.result()
                if progress:
                    print(f"{name}: {results[name].get('wall_s', 0):.1f} s", file=sys.stderr)
        return results
    for name in names:
        results[name] = _row(name, trials, columns)
        if progress:
            print(f"{name}: {results[name].get('wall_s', 0):.1f} s", file=sys.stderr)
    return results


def _pct(new: float, old: float) -> str:
    if old == 0:
        return "+0%" if new == 0 else "new"
    return f"{100 * (new - old) / abs(old):+.0f}%"


def _cell_text(got: dict[str, Any], base: dict[str, Any]) -> str:
    """A cell: outcome, figures and their change against ``base`` (or the mode-matched base it names)."""
    outcome = got["outcome"]
    base = got.get("against", base)
    if outcome == "no server":
        return "no server"
    if outcome in ("rejected", "crashed"):
        return f"**{outcome}**: {got['reason'].replace('|', '/')}"
    label = f"**{outcome}**"
    if outcome == "suspect":
        label += " (explained below)" if got.get("explained") else " (**unexplained**)"
    text = f"{label}: regret {got['group_regret']:.4g} ({_pct(got['group_regret'], base['group_regret'])})"
    if "sample_complexity" in got:
        text += (f", sample complexity {got['sample_complexity']:.4g} "
                 f"({_pct(got['sample_complexity'], base['sample_complexity'])})")
    text += f", cost {got['comm_cost']:.4g} ({_pct(got['comm_cost'], base['comm_cost'])})"
    if "correct" in got:
        text += f", correct {got['correct']}/{got['trials'] - got['unfinished']} finished"
    if got.get("unfinished"):
        text += f", {got['unfinished']}/{got['trials']} unfinished"
    if "late_best_fraction" in got:
        text += f", late best-arm share {got['late_best_fraction']:.2f}"
    if "mode" in base:
        text += (f" (against the fault-free run with {base['mode']}: regret {base['group_regret']:.4g}"
                 + (f", sample complexity {base['sample_complexity']:.4g}" if "sample_complexity" in base else "")
                 + ")")
    touched = [f"{got[k]:.4g} {label}" for k, label in EXTRA_LABELS.items() if got.get(k)]
    if touched:
        text += f"; per trial {', '.join(touched)}"
    if outcome == "failed":
        text += f"; {got['failed']}/{got['trials']} failed: {'; '.join(got['failures'])}"
    return text


def _grid(results: dict[str, Any], columns: Sequence[str], *, with_base: bool) -> list[str]:
    head = "| protocol | " + ("fault-free | " if with_base else "") + " | ".join(columns) + " |"
    lines = [head, "|---|" + ("---|" if with_base else "") + "---|" * len(columns)]
    for name, row in results.items():
        base = row["base"]
        if base is None:
            lines.append(f"| {name} | {row['reason']} |" + " |" * (len(columns) - (0 if with_base else 1)))
            continue
        cells = [_cell_text(row[c], base) for c in columns]
        if with_base:
            head = f"regret {base['group_regret']:.4g}"
            if "sample_complexity" in base:
                head += f", sample complexity {base['sample_complexity']:.4g}"
            head += f", cost {base['comm_cost']:.4g}"
            if "correct" in base:
                head += f", correct {base['correct']}/{base['trials'] - base['unfinished']} finished"
            if base.get("unfinished"):
                head += f", {base['unfinished']}/{base['trials']} unfinished"
            if "late_best_fraction" in base:
                head += f", late best-arm share {base['late_best_fraction']:.2f}"
            if base["failed"]:
                head += f"; {base['failed']} failed"
            cells = [head, *cells]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


FUZZ_BEGIN, FUZZ_END = "<!-- fuzz:begin -->", "<!-- fuzz:end -->"


def preserved_fuzz(old: str | None) -> str:
    """The section between the fuzz markers of ``old`` (markers included), or empty markers."""
    if old:
        found = re.search(re.escape(FUZZ_BEGIN) + r".*?" + re.escape(FUZZ_END), old, flags=re.S)
        if found:
            return found.group(0)
    return f"{FUZZ_BEGIN}\n{FUZZ_END}"


def markdown(results: dict[str, Any], trials: int, seconds: float, *, fuzz: str | None = None) -> str:
    faults = [c for c in FAULTS]
    delays = [c for c in DELAYS]
    lines = [
        "# Reliability: every protocol under every fault model and delay law",
        "",
        "Produced by `python -m benchmarks.reliability --out docs/reliability.md` "
        f"({trials} trials per cell, {seconds:.0f} s on this machine for the rows last run). Do not edit by hand",
        "(except between the fuzz markers, which the writer keeps). `--protocol NAME` (repeatable) reruns only",
        "those rows and keeps the others from `benchmarks/reliability.json`, the raw figures of every row.",
        "",
        "Each protocol runs a small base instance (the bundled scenario with the `--set` overrides listed",
        "below) without faults, then with one fault model at a time, and with continuous per-hop delays in",
        "place of the base instance's, on the same seeds. Fault models (`[faults]`, see `docs/faults.md`):",
        "",
        "* **link down**: every link fails at rate 0.02 and comes back at rate 0.2 (down about 9 % of the time);",
        "* **crash (kept)** / **crash (lost)**: agent 1 crashes at 20 % of the fault-free run's length and restarts",
        "  at 50 %, keeping or losing its protocol state (rio2023 protocols then run round by round,",
        "  `protocol.simulation = 'rounds'`: the exact-law event mode refuses crashes; its regret counts",
        "  only the rewards pulled, while the event mode's also counts rewards drawn ahead and never reached",
        "  (docs/protocols/rio2023.md); such a cell is judged against a fault-free run in the same round-by-round",
        "  mode, named in the cell, not against the event-mode run of the row's first column);",
        "* **server crash (kept)** / **(lost)**: the same for the server node (\"no server\": the protocol has none);",
        "* **duplication**: each message is delivered twice with probability 0.2;",
        "* **reorder**: each message is held back by an Exp(mean 2) extra delay with probability 0.3.",
        "",
        "Delay laws (second table): every agent-agent and server-agent hop drawn from an exponential or a",
        "lognormal law (sigma = 1) of mean 0.5, 2 or 8 slots.",
        "",
        "Outcomes: **completed** (every trial ended normally, mean group regret, or sample complexity for",
        "best-arm identification, at most 10 % above the fault-free run and no fewer correct answers),",
        "**degraded** (ended normally, but up by more than 10 % or fewer correct answers), **suspect** (ended",
        "normally but *down* by more than 10 %: an improvement under a fault is a bug until its cause is",
        "shown; the causes found are listed under the tables), **failed** (the watchdog ended a trial: no pull",
        "and no delivery for twice the length of the fault-free run, or 60 s of wall-clock time), **rejected**",
        "(the scenario is refused when loaded, with the message shown), **crashed** (an exception: a bug).",
        "Numbers: mean group regret and communication cost of the runs, their change against the",
        "fault-free run, and the mean number of messages per trial the fault touched. A best-arm identification",
        "trial that reached its horizon before answering is counted **unfinished** (\"correct x/y finished\"",
        "counts the answers of the y trials that finished; more unfinished trials than the fault-free run is",
        "degraded), never as a wrong answer. `late best-arm share`: the share of pulls of the best arm in the",
        "last part of the run (zhu2021), which shows that the protocol learns at all; fed-ucb runs at",
        "epsilon = inf, because at the bundled epsilon = 1 it plays uniformly for the whole horizon (share",
        "0.20 = 1/K) and no fault could change it.",
        "",
        "## Faults",
        "",
        *_grid(results, faults, with_base=True),
        "",
        "## Delays",
        "",
        *_grid(results, delays, with_base=False),
        "",
        "## Suspect cells and their causes",
        "",
    ]
    suspects = [(name, c) for name, row in results.items() if row["base"] is not None
                for c in COLUMNS if c in row and row[c]["outcome"] == "suspect"]
    if not suspects:
        lines.append("None.")
    for name, column in suspects:
        cause = EXPLAINED.get((name, column), "**not investigated yet**")
        lines.append(f"* {name}, {column}: {cause}.")
    lines += ["", fuzz or preserved_fuzz(None), "", "Base instances:", ""]
    for name, row in results.items():
        if row["base"] is not None:
            sets = " ".join(f"`{s}`" for s in row["sets"])
            lines.append(f"* {name}: `{row['scenario']}` {sets} (watchdog {row['watchdog']:.4g})")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the Markdown page here (default: print it)")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON here")
    parser.add_argument("--trials", type=int, default=3, help="trials per cell (default 3)")
    parser.add_argument("--protocol", action="append", help="only these protocols (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="protocols run in this many processes (default 1)")
    parser.add_argument("--store", type=Path, default=STORE,
                        help="raw figures of every row, read by --protocol runs for the rows not rerun "
                             "(default benchmarks/reliability.json)")
    args = parser.parse_args(argv)
    names = args.protocol or protocols.names()
    unknown = [n for n in names if n not in protocols.names()]
    if unknown:
        print(f"python -m benchmarks.reliability: --protocol {unknown[0]!r} is not registered; accepted: "
              f"{', '.join(protocols.names())}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = table(names, args.trials, jobs=args.jobs)
    seconds = time.perf_counter() - started
    if args.out:  # the rows not rerun come from the store of the last full or partial run
        stored = json.loads(args.store.read_text()) if args.protocol and args.store.exists() else {}
        stored.update(json.loads(json.dumps(results, default=str)))
        args.store.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        results = {name: stored[name] for name in protocols.names() if name in stored}
    old = args.out.read_text() if args.out and args.out.exists() else None
    text = markdown(results, args.trials, seconds, fuzz=preserved_fuzz(old))
    if args.out:
        from netsim.experiment.results import atomic_write

        atomic_write(args.out, text.encode())
    else:
        print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=lambda v: None if v is None else str(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
