"""Markdown page (``docs/performance.md``) from the results of ``python -m benchmarks``."""

from __future__ import annotations

from typing import Any

#: Why a target is missed, shown under the summary when the measured ratio misses it.
WHY: dict[str, str] = {
    "engine/naive (constant delays)":
        "with constant delays a broadcast is one multicast entry and an instant one batch, so the engine's "
        "cost is the per-message handler call and counters; on a loaded machine both sides slow down.",
    "engine/naive (exponential delays)":
        "with continuous random delays every message is due at its own instant; the engine pays, per "
        "message, an entry, its share of one sort and a Message for its handler, plus its counters and "
        "link accounting, and the naive baseline pays a SimPy process per message.",
    "engine/heapq (exponential delays)":
        "the engine does per message what the heapq loop does (an entry, its ordering, a handler call with "
        "the message's fields) plus what the loop does not: a Message for the handler (a NamedTuple built "
        "from a slice of the entry through tuple.__new__ and released: about 1,800 instructions in an "
        "isolated model, against some 450 for the loop's plain tuple; CPython has no cheaper way to make an "
        "instance of a tuple subclass: from zipped columns about 1,400, built at send time no cheaper "
        "overall), the counters and link accounting, and the receivers noted per stretch and counted with "
        "numpy. A broadcast on plain links outside the delivery loop is only noted (one Python call and one "
        "4-tuple); the broadcasts of an instant are made together as broadcast_each calls before anything "
        "can see them, so the engine row pays the send path once per tick as engine-many does, plus about "
        "700 instructions per message for the noted calls (2,800 per call: the call with its keyword "
        "default, the note, the grouping by kind and size). Callgrind (PYTHONHASHSEED=0, bytecode compiled "
        "beforehand, a 200-tick run less a 100-tick run, 80,000 messages): about 7,630 instructions per "
        "message against 7,390 for the heapq loop; the engine allocates and frees more objects per "
        "message, so its CPU ratio is lower than the count's; CPU times on this shared machine vary by tens "
        "of percent between rounds (the range beside each ratio).",
    "engine-many/heapq (exponential delays)":
        "engine-many is the engine row's network and traffic with each tick's 200 broadcasts sent as one "
        "Network.broadcast_each call (every agent a sender at one instant, as a synchronous round sends; the "
        "same messages, sequence numbers, delay draws and delivery order as the loop of broadcasts): the "
        "send path's calls, counters and flag checks are paid once per tick, and every sender's entries "
        "are built in one comprehension. What is left per message is what the engine row pays besides "
        "those: the entry, its share of the sort, the Message for the handler and the stretch's counters. "
        "Callgrind (as above): about 6,930 instructions per message against 7,370 for the heapq loop (a "
        "ratio of 1.06).",
    "engine-many/callbacks (exponential delays)":
        "3x callbacks asks for about 5,760 instructions per message (callbacks: about 17,270); engine-many "
        "runs about 5,170 since the run is kept as columns (docs/performance.md, 'Issue 25, the run as "
        "columns'), so a miss is the load of the machine (this ratio's rounds spread by 2x when several "
        "processes share the cores). What is left per message: the handler call and the loop around it "
        "(about 1,000), the Message built in C (about 600 with the zipped lists), the stable argsort and the "
        "gather of every column (about 700 over the 1.6 sorts a message sees).",
    "engine/callbacks (exponential delays)":
        "SimPy with a timeout and a callback per message pays an event, a heap push and pop and a SimPy "
        "step per message, but no Message object, no counters and no link accounting. By callgrind it "
        "runs about 17,270 instructions per message (2.34x the heapq loop), so 3x callbacks asks for about "
        "5,760 instructions per message; the engine row runs about 5,860 (the engine-many row about "
        "5,170): the difference is the 200 broadcast calls per tick themselves (each noted, then made "
        "together as one broadcast_each, about 2,700 instructions per call with the caller's loop). In CPU "
        "time the callbacks loop takes about 3.2x the heapq loop (it allocates more objects per message), "
        "so the CPU ratio is higher than the count's.",
    "realistic/paper CPU, dubey2020a-fig1a, M = 200, T = 1000, exponential delays mean 1":
        "paper mode computes the hops as sparse products per tick; realistic mode handles about 4,000 "
        "record copies per tick: the flush's 4,000 per-link delays drawn and sorted into a flight, its "
        "settlement, the payloads joined (one np.concatenate) and one compiled call (sort by receiver and "
        "due time, windows, latest table and its sums). By py-spy the engine's send, flight and settlement "
        "take about a quarter of the realistic trial, the compiled call about as much.",
    "realistic/paper CPU, gossip-ucb, 1,000-agent ring, T = 1000, exponential delays mean 1":
        "each tick's n-tilde broadcast is one flight of about 2,000 messages (its delays one slice of the "
        "law's block, sorted once), settled when the next tick collects it (held flights are settled when "
        "read, about once a tick instead of about 7.6 times) and read with one maximum.at over the flat "
        "(receiver, arm) cells; what is left is that per-tick array work (the send about 20 %, the read "
        "about 13 % of a py-spy profile), the pairwise exchange messages with their transports (about "
        "10 %) and the per-tick numpy step both modes share. The previous run (2026-11-27) had 3.12x "
        "(paper 0.62-0.85, realistic 1.91-2.05 CPU s).",
    "plain/engine, Gossip_UCB":
        "the engine path adds the SimPy clock process, the bandit environment's bookkeeping (per-agent "
        "regret and pull counts, exact-law reward draws) and the checkpoints to the same numpy update.",
    "events/rounds, DP-MASE":
        "DP-MASE draws each epoch's rewards as one exact-law sum, so a run costs O(epochs + votes).",
    "events/rounds, CORRUPTED ELIMINATION":
        "CORRUPTED ELIMINATION tests its condition at every step of every agent's reward path (its votes "
        "can change at any step, not only at epoch ends), so its event mode walks the paths in blocks "
        "rather than jumping from epoch to epoch; the margin over round by round has been thin (104x, "
        "120x, 155x in earlier runs on this machine) and both sides vary by +-20 % with the load.",
}

#: Why a limit (a figure with a bound) is missed, by the start of its name.
WHY_LIMIT: dict[str, str] = {
    "dubey2020a Fig. 1(":
        "the sum over the panel's curves of 100 trials (CPU of one trial from the difference of a 1-trial and "
        "a 4-trial run) and one fixed cost per curve, halved for two jobs; the byzantine-proof trials at "
        "gamma = 2 and gamma = D place about 35,000 and 40,000 new reward samples per trial step in their "
        "agents' X or Y halves in arrival order, and CPU time on this shared machine grows with its load.",
    "realistic dubey2020a-private M = 10,000":
        "about 4.2 million record copies per tick (gamma = 2, mean degree 20) are checked against each pair's "
        "anti-replay window and about 4 million latest-table entries (10 values each) are replaced per tick, "
        "by two compiled loops (netsim.comm.kernels, numba) that are bound by memory traffic at about 0.14 s "
        "per tick each; joining each batch's payloads, the sums over the whole table (np.add.reduceat, kept "
        "for bit-identical tables) and the flush make up most of the rest. The same code measured 47.7-65.4 "
        "CPU s in whole-process runs on this machine on the same day: the limit is within that spread.",
    "gossip-ucb, 10,000-agent ring":
        "its set-up and per-tick update belong to the zhu2021 family (the gossip matrix and lambda_2 at "
        "set-up, the per-tick numpy step), not to the engine.",
    "ddp-mab, 1,000 agents":
        "its cost is the li2022 family's GIS handshakes over one shared (M, K) table, not the engine.",
}

#: Profile of the slowest family and the fix, measured by hand (see the text); filled in below.
PROFILE = """\
**Issue 25: realistic mode as array work.** Before (main, issue 25): with sampled delays a LOCAL flush
became one queue entry and one `Message` per link (`_send_one`), and `Flooding._process` looped in
Python over the delivered items with an `np.full` / `np.array` per message; dubey2020a-fig1a with
exponential delays took 18-100x the paper-mode CPU of the same trial. Now:

1. `netsim/engine/held.py`: a `broadcast_chunks` flush of a kind with a deferred reader is one *flight*,
   whatever the delays: arrays sorted by `(due, sequence)`, per-link due times drawn as one slice of
   the law's block (the same draws as one link at a time). Flights wake nobody: they are settled
   when something can see them (`collect`, `in_flight`, crash and restart events, the end of the
   trial; one `searchsorted` and one slice per flight), counting delivered, dropped (receivers down
   at their due time) and in flight exactly as settling at every due time would; `collect` hands the
   slices over as `Multicast` records with per-message due times. Tested against a plain reference
   model (`tests/test_held.py`).
2. `netsim/comm/heard.py` (LOCAL flooding's batch path): the messages of a batch as arrays over the
   rows they carry, joined once as raw rows, grouped by receiver; the record copies then taken one at
   a time, receiver by receiver, by a compiled loop (`netsim/comm/kernels.py`, numba): the pair from a
   per-node lookup filled with the receiver's gamma-ball (a bisection costs ~3x), the anti-replay
   window as `ReplayWindow` (delivery order), the latest-table candidate per pair; a second loop
   copies the winners' raw rows into the latest table and their terms into the column-wise terms of
   the sums, which stay `np.add.reduceat` calls (bit-identical tables). As numpy array passes (one
   packed-key sort per block of 32,768 copies, about 25 passes per copy) the M = 10,000 case took
   117 CPU s and 2.31 GB in a paired run on a loaded machine (load average ~9 on 2 cores), compiled
   73.5 CPU s and 2.04 GB in the same pairing (68.7 CPU s alone, load ~6). Tested against a plain
   model, one copy at a time through `ReplayWindow` (`tests/test_flooding_batch.py`); why numba, and
   what its compile costs: `docs/engine.md`, "Compiled loops". Later passes: one compiled call per
   batch (its own sort by receiver and due time, the windows, the latest table and its sums) and
   whole payloads joined with one `np.concatenate`, for Fig. 1(a)'s 4,000 copies per tick, where the
   fixed cost of each call is what a tick costs; a batch of more than 32,768 messages (M = 10,000:
   200,000 messages, 4 million copies per tick) is sorted by numpy before that call, its carried rows
   joined with their 16-byte headers apart and its table changed in a second call, where memory is
   what a tick costs (one call with its own sort had made that trial 1.35x slower). Paired, alternating
   processes on a loaded machine (load ~7 on 2 cores): Fig. 1(a) realistic/paper 2.60x against main's
   3.24x (medians of 5, 3 repeats each; `/tmp` script timing `benchmarks.realistic.trial_cpu` as
   `measure` does), M = 10,000 42.8-47.7 CPU s (median 45.1) against main's 44.5-52.1 (median 47.1;
   5 pairs, median pair ratio 0.95, 1.6 GB).
3. `netsim/engine/delivery.py`: an entry carries its `Message` fields contiguously (`entry[2:9]`), so a
   delivery builds its `Message` from one slice; a message alone at its instant goes to its batch
   reader inside the stretch (gossip-ucb realistic: 28 -> 16 CPU s on a 1,000-agent ring); the
   send path arms the wake-up at a lower bound of the head (the block's smallest delay) instead of a
   `min` per send; `broadcast_chunks` for per-instant readers builds its entries in bulk.
4. `netsim run` draws its figures only with `--plots` (or `netsim plot DIR`).

Same seed, same tables: `python -m benchmarks.tables` fingerprints every bundled scenario's
`trials`, `agents` and `timeseries` tables at a tiny horizon; before (main) and after give the same
fingerprints for all 89 scenarios that run (realistic ones included: the flights take the same
delays in the same order, and a deferred reader gets the same messages in the same order); the
one scenario that needs an unshipped data file fails the same way.

**Issue 16: one delivery heap, multicast records, sparse hops.** Before (measured on main, issue 16):
the engine paid, per message, a `_pending` dict entry keyed by a float, a SimPy event, a SimPy step
and a delivery batch of one, and dubey2020a's byzantine branch built a `Message` and called the
corruptor per link (793,600 calls for Fig. 1(b), 0.1 % of them corrupting). Now:

1. `netsim/engine/network.py`: one network-owned heap of `(due, sequence, ...)` entries and a single SimPy
   wake-up armed for its head; the wake-up delivers entries in a tight loop (advancing the clock
   itself) while they are due before the next SimPy event, checkpoints and crashes first, ticks
   after (same-instant order in `docs/engine.md`); a send to many over constant-delay links is one
   entry; random delays are drawn in blocks of 4096 per law.
2. `Network.broadcast_chunks`: a whole LOCAL flush (every sender's rows of one array to its agent
   neighbours) is one engine call and one heap entry, counted per link exactly as before
   (`sent = delivered + dropped + in flight`, li2022 Eq. 2), corrupted once per sender chunk.
3. Link accounting over edge ids with per-edge slot stamps (numpy for long lists).
4. `netsim/comm/flooding.py`: duplicate detection and the latest-record table over the gamma-balls (pairs
   that can talk, from sparse products of the adjacency; memory linear in them), and in paper mode
   the hops themselves as sparse products over the distance rings (`synchronous=True`), with the
   latest-table sums recomputed as `sum_h D_h @ snapshot(t - h)`.
5. Lazy imports: scipy.stats / scipy.special / pandas load on first use, not at start-up.
6. dubey2020a Fig. 1(b), (c) (byzantine-proof curves): the trimmed means of Definition 4.1 were taken
   over a histogram of every distinct reward heard (each corrupted report a new U[0, 1] value), so a
   step cost grew with t (20 CPU s per trial at gamma = 1, 136 at gamma = D); `protocols/robust.py`
   `SampleSets` now keeps, per agent, arm and half, the counts of exact 0s and 1s and the other values
   in a sorted pool with prefix sums, and evaluates the leftmost shortest window over the few run
   starts among the lowest ranks (cost independent of t). The byzantine protocol reads every new record
   in arrival order, which kept it on the message path (680,000 record copies per step at gamma = D);
   the sparse hops now hand each receiver its records in the message path's order (fixed by the graph,
   `netsim/comm/hops.py` `arrival_order`) and keep corruption at the source (same draws), so paper-mode
   byzantine runs take them too. Same tables as before, byte for byte (Fig. 1 (b), (c) curves).

**Same seed, same tables.** Paper-mode scenarios (constant delays) give byte-identical
`trials.csv`, `agents.csv` and `timeseries.csv` before and after (checked with a reference clone of
main: dubey2020a Fig. 1 (a), (b), (c) curves, li2022 Figs. 4, 10, 11, 12 and GIS, zhu2021 Fig. 2,
rio2023 Figs. 1-2, FedUCB Fig. 1, quickstart; shortened horizons). Realistic-mode scenarios (sampled
delays) change: their link delays now come from their own `delays` stream, drawn in blocks, instead of
the `network` stream shared with the loss draws (e.g. `li2022-fig10-ring-lossy`); the results are
draws of the same law, not the same draws. The sparse-product hops of `dubey2020a-private` keep the
message path's tables exactly (tested) and its sums up to floating-point summation order; no bundled
paper-mode table changed.

**Issue 16: CORRUPTED ELIMINATION's event mode** (76.9x before). It tests its condition at every
local step (rio2023 appendix Alg. 4), so its rewards are drawn per step, in blocks. The blocks now
come from `bandit.pull_walk` (one agent's uniforms as a slice of its stream, returned as running
sums, one row per arm) instead of `pull_many` (a rank per pull by a sort and a search, a gather of
the means per pull); the banked steps are stored one row per arm, so the test over the few arms
still active reads contiguous rows; steps already tested are not tested again after each
interruption; the thresholds come from a table (`protocols/rio2023/paths.py`). Same uniforms in the
same order: the event mode's `trials.csv` rows are bit-identical for the same seed, and no bundled
rio2023 table changed.

**Issue 16, engine/heapq with exponential delays.** Profiled with cProfile, line_profiler and
callgrind instruction counts: the engine spent about 1.4 us per message against 0.55 us for the
heapq loop, half in the send path (per send: counters, a per-edge slot-stamp loop for the link
accounting, flag checks, a heap push per message) and half in the delivery loop (a heap pop, a
look-ahead, counters and a `Message` per message). Now:

1. `netsim/engine/delivery.py`: the single messages sent between two wake-ups are appended to a list and,
   when the wake-up fires, sorted into a *run* with the unread rest of the previous one (one stable
   sort by due time); multicasts and what handlers send wait on the heap; the loop merges the two
   heads by `(due, sequence)`.
2. Messages of the run go to per-message handlers in *stretches*, due before the heap's head and
   the next SimPy event: each alone at its instant or, when the run holds one kind with a
   per-message handler and the heap is empty, all of them (an index step, the clock, the handler);
   a stretch updates its counters (per-kind delivered, per-node received, in flight) when it ends.
3. `netsim/engine/metrics.py`: link accounting is deferred: a send appends its edge ids (the broadcast's
   neighbour list itself) to `Metrics.pending_edges`; the ids noted at one instant are marked with
   set operations (one set of built edges per slot) before anything reads or marks links, and
   newly built edges are summed into the totals with numpy when read.
4. `netsim/engine/network.py`: the fault-free send path tests one flag (`tracer` and `faults` are
   properties that keep it current), takes its delays from the current block without a call and
   gets its edge ids from its caller (`broadcast` passes its neighbour list's).

Instructions per run of the exponential workload (callgrind, `PYTHONHASHSEED=0`): 1,332 M on main
before, 838 M now, against 581 M for the heapq loop. Same seed, same tables: 18 runs of 2 trials
(realistic li2022, dubey2020a, zhu2021 and FedUCB settings with exponential and lognormal delays,
loss, duplication, reordering, crashes and link outages, and paper-mode li2022, dubey2020a,
rio2023, zhu2021 and quickstart) give byte-identical `trials.csv`, `agents.csv` and
`timeseries.csv` before and after.

**Issue 25, the per-agent broadcast row.** A broadcast notes its sender once
(`Metrics.pending_sources`) instead of its edge ids: its sent count and its links follow from the
sender, and when at least 32 senders (and one per 16 nodes) share an instant they are counted and
marked with numpy (the links built are the edges with a sending end, a sorted array when they
open the slot), fewer through the slot's set. The send path builds its entries in a plain loop
appended straight to the fresh ones (a comprehension made six of its locals closure cells at every
call) and leaves faulty links to `_send_faulty`. Callgrind (`PYTHONHASHSEED=0`, bytecode compiled
beforehand, a 200-tick run less a 100-tick run): the engine row 9,840 -> 8,390 instructions per
message, engine-many 7,600 -> 6,930 (heapq 7,370, callbacks 17,270). Same seed, same tables: ten
bundled scenarios (li2022 Fig. 10 ring and random, Fig. 11 case 1, li2022-realistic,
dubey2020a Fig. 1(a) with delays and Fig. 1(c) private, dubey2020b-p2p, zhu2021 Fig. 2(a),
peer-flooding-ucb, quickstart), one trial each, give byte-identical `trials.csv`, `agents.csv` and
`timeseries.csv` before and after.

**Issue 25, noted broadcasts.** On plain links a `broadcast` outside the delivery loop is only
noted; the broadcasts of one instant are made together as `broadcast_each` calls (one per run of
one kind and size, in call order: the same messages, sequence numbers, delay draws, counters and
links) by the wake-up armed at that instant, or earlier by anything that could see them (another
send, `settle`/`in_flight`, a read of the sent counts or links). Callgrind (as above): the engine
row 8,390 -> 7,630 instructions per message (engine-many 6,930, heapq 7,390). Same seed, same
tables: thirteen cases of bundled scenarios (quickstart, dubey2020a Fig. 1(a) and with delays,
li2022-realistic with exponential, lognormal-with-loss and duplication-and-reordering delays,
li2022 Fig. 10 lossy ring and GIS path, zhu2021 gossip and Fed-UCB trade-offs, the byzantine
mp-UCB peer, rio2023 Fig. 1 central, dubey2020b-p2p), one trial each, give byte-identical
`trials.csv`, `agents.csv` and `timeseries.csv` before and after.
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e5:
            return f"{value:.3g}"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.3g}"
        return f"{value:.3g}"
    return str(value)


def _rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.3g} M"
    if value >= 1e3:
        return f"{value / 1e3:.3g} k"
    return f"{value:.3g}"


def _mmm(stat: dict, fn=_fmt) -> str:
    return f"{fn(stat['median'])} ({fn(stat['min'])}-{fn(stat['max'])})"


def _met(value: float, target: list) -> tuple[str, str]:
    op, bound = target
    ok = value >= bound if op == ">=" else value <= bound
    if ok:
        return "met", ""
    if op == ">=":
        return "**missed**", f"{value / bound:.2f} of the target ({bound / value:.2f}x short)"
    return "**missed**", f"{value / bound:.2f}x the bound"


def summary(results: dict) -> list[str]:
    lines = ["| benchmark | figure | measured | target | status |", "|---|---|---|---|---|"]
    notes = []
    for name, bench in results["benchmarks"].items():
        for key, value in bench.get("ratios", {}).items():
            target = bench.get("targets", {}).get(key)
            if target:
                status, short = _met(value, target)
                lines.append(f"| {name} | {key} | {value:.3g}x | {target[0]} {target[1]:g}x | {status} |")
                if short:
                    notes.append(f"- **{key}**: {value:.3g}x, {short}. Why: {WHY.get(key, '')}")
            else:
                lines.append(f"| {name} | {key} | {value:.3g}x | (none) | |")
                if key in WHY:
                    notes.append(f"- **{key}**: {value:.3g}x. {WHY[key]}")
        for key, (op, bound, value) in bench.get("limits", {}).items():
            if value is None:
                lines.append(f"| {name} | {key} | did not finish | {op} {bound:g} | **missed** |")
                why = next((text for start, text in WHY_LIMIT.items() if key.startswith(start)), "")
                if why:
                    notes.append(f"- **{key}**: stopped at the benchmark's cap. Why: {why}")
                continue
            ok = value <= bound if op == "<=" else value >= bound
            lines.append(f"| {name} | {key} | {value:.3g} | {op} {bound:g} | {'met' if ok else '**missed**'} |")
            why = next((text for start, text in WHY_LIMIT.items() if key.startswith(start)), "")
            if not ok and why:
                notes.append(f"- **{key}**: {value:.3g}. Why: {why}")
        if name == "local":
            for case, r in bench["cases"].items():
                rate = _rate(r["rate_per_cpu_s"]["median"])
                lines.append(f"| local | records forwarded per CPU s, {case} | {rate} | | |")
        if name == "feducb":
            for case, r in bench["cases"].items():
                lines.append(f"| feducb | agent-steps per CPU s, {case} | {_rate(r['rate_per_cpu_s']['median'])} | | |")
        if name == "scaling":
            for fam, f in bench["families"].items():
                lines.append(f"| scaling | {fam} ({f['protocol']}): slope in agents / in horizon | "
                             f"{_fmt(f['agents']['slope'])} / {_fmt(f['horizon']['slope'])} | | |")
    return lines + [""] + notes


def cases_table(bench: dict) -> list[str]:
    unit = bench.get("unit", "work")
    lines = [f"| case | {unit} per run | CPU s median (min-max) | wall s median | {unit} per CPU s median (min-max) "
             "| peak heap MiB | repeats |", "|---|---|---|---|---|---|---|"]
    for name, r in bench["cases"].items():
        lines.append(f"| {name} | {_fmt(r['work'])} | {_mmm(r['cpu_s'])} | {_fmt(r['wall_s']['median'])} | "
                     f"{_mmm(r['rate_per_cpu_s'], _rate)} | {_fmt(r['peak_heap_mib'])} | {r['repeats']} |")
    return lines


SCALING_NOTE = (
    "Reading the slopes: about 1 means cost proportional to the work (agents x steps); below 1 means "
    "fixed costs (set-up, per-tick overhead independent of the agents) or exact-law shortcuts dominate. "
    "li2022's CDP-MAB and rio2023's event mode draw whole epochs as exact-law sums, so their cost hardly "
    "grows with the horizon (slopes near 0 and 0.25): they simulate rounds, not pulls. Gossip_UCB's "
    "per-tick update is vectorised over agents, so its cost grows sub-linearly in the agents at small N "
    "and linearly in the ticks once the fixed set-up is amortised. dubey2020a and FedUCB are linear in "
    "both (per-message and per-agent work). dubey2020a's horizon sweep stops at 1e4 steps (1e5 would take "
    "about 10x the 1e4 point, the slope being about 1)."
)


def scaling_section(bench: dict) -> list[str]:
    lines = [SCALING_NOTE, ""]
    for fam, f in bench["families"].items():
        lines.append(f"**{fam}** (`{f['protocol']}`, from `{f['scenario']}`)")
        lines.append("")
        for axis in ("agents", "horizon"):
            a = f[axis]
            pts = ", ".join(f"{p[axis]:g}: {p['cpu_s']:.3g} s" for p in a["points"])
            lines.append(f"- {axis} ({a['at']}): {pts}; slope **{_fmt(a['slope'])}**")
        lines.append("")
    return lines


def peers_section(bench: dict) -> list[str]:
    lines = ["| setting | CPU s per run (whole process) | peak RSS MiB | agent-steps per CPU s | peer code | "
             "peer, same run | x peer (same run) | peer, reported elsewhere (not a ratio) |",
             "|---|---|---|---|---|---|---|---|"]
    for scenario, r in bench["peers"].items():
        cpus = ", ".join(f"{c:.3g}" for c in r["cpu_s"])
        measured = r.get("peer_measured")
        reported = r["peer_reported"]
        lines.append(f"| `{scenario}` | {cpus} | {r['maxrss_mib']:g} | {_rate(r['rate'])} | {r['peer']} | "
                     f"{_rate(measured['rate']) if measured else 'not run'} | "
                     f"{r['times_peer'] if measured else '-'} | {reported['rate']:g} ({reported['source']}) |")
    return lines


def realistic_section(bench: dict) -> list[str]:
    out = bench["realistic"]
    lines = ["| case | paper mode CPU s | realistic CPU s | realistic / paper (pairs' range) | target | "
             "engine messages (realistic) | engine's share of the realistic trial |", "|---|---|---|---|---|---|---|"]
    for label, c in out["cases"].items():
        paper = ", ".join(f"{v:.3g}" for v in c["paper_cpu_s"])
        real = ", ".join(f"{v:.3g}" for v in c["realistic_cpu_s"])
        target = f"<= {c['target']:g}x" if c["target"] else "(none)"
        lo, hi = c["ratio_range"]
        lines.append(f"| {label} | {paper} | {real} | **{c['ratio']:g}x** ({lo:g}-{hi:g}) | {target} | "
                     f"{c['messages_realistic']:,} | {c['engine_share_realistic']:.0%} |")
    big = out["big"]
    lines += ["", f"`{big['scenario']}` {' '.join(big['overrides'])} (whole `netsim run` process):", "",
              "| mode | CPU s | wall s | peak RSS MiB |", "|---|---|---|---|"]
    for mode in ("paper", "realistic", "realistic, empty compile cache"):
        p = big.get(mode, {})
        if "error" in p:
            lines.append(f"| {mode} | {p['error']} | - | - |")
        elif p:
            lines.append(f"| {mode} | {p['cpu_s']:.3g} | {p['wall_s']:.3g} | {p['maxrss_mib']:g} |")
    return lines


def scale_section(bench: dict) -> list[str]:
    out = bench["scale"]
    lines = ["dubey2020a-private, one trial, whole process (log-log slope of CPU s in M: "
             f"**{_fmt(bench['slope'])}**):", "",
             "| agents M | CPU s | wall s | peak RSS MiB | engine messages |", "|---|---|---|---|---|"]
    for p in out["dubey2020a-private"]:
        lines.append(f"| {p['agents']:,} | {p['cpu_s']:.3g} | {p['wall_s']:.3g} | {p['maxrss_mib']:g} | "
                     f"{p['messages_sent']:,} |")
    lines += ["", "| setting | scenario | CPU s | peak RSS MiB | target |", "|---|---|---|---|---|"]
    for label, p in out["settings"].items():
        target = f"<= {p['cpu_target_s']:g} CPU s" + (f", <= {p['memory_target_mib']:g} MiB"
                                                       if p.get("memory_target_mib") else "")
        if "error" in p:
            lines.append(f"| {label} | `{p['scenario']}` | {p['error']} | - | {target} |")
        else:
            lines.append(f"| {label} | `{p['scenario']}` | {p['cpu_s']:.3g} | {p['maxrss_mib']:g} | {target} |")
    return lines


def render(results: dict) -> str:
    m = results.get("machine", {})
    last = results.get("last_run", {})
    out = [
        "# Performance",
        "",
        "Generated by `python -m benchmarks` (writes this page and `benchmarks/results.json`; "
        "`--only NAME` re-runs one benchmark, `--quick` is a smoke test). Every benchmark measures its "
        "case and its baseline in the same run, so the **ratios** are the figures to compare across "
        "machines; absolute rates depend on the machine and its load. The time of every paper figure, at "
        "quick and paper scale, is in [studies.md](studies.md) (`python -m benchmarks.studies`).",
        "",
        f"Machine: Python {m.get('python')}, numpy {m.get('numpy')}, SimPy {m.get('simpy')}, {m.get('platform')}, "
        f"{m.get('cpus')} CPUs shared with other jobs, BLAS threads {m.get('blas_threads')}. Last run: "
        f"{', '.join(last.get('benchmarks', []))} in {last.get('wall_s')} s wall"
        f"{' (QUICK: smoke-test sizes, numbers meaningless)' if last.get('quick') else ''}.",
        "",
        "Method: each case runs once as a warm-up under `tracemalloc` (giving its peak Python + numpy heap, "
        "column *peak heap*), then `repeats` times timed; the tables give median (min-max). Rates are per "
        "**CPU second** of the process (`time.process_time`; BLAS pinned to one thread), which is far "
        "steadier than wall time on this shared machine; wall medians are listed too. Cases compared by a ratio run "
        "interleaved, one run of each per round in an order rotated per round, and a ratio is the median "
        "of the per-round ratios (paired runs under the same load; its rounds' range in brackets).",
        "",
        "## Summary",
        "",
        *summary(results),
        "",
    ]
    for name, bench in results["benchmarks"].items():
        meta = bench.get("meta", {})
        out += [f"## {bench['title']} (`--only {name}`)", "", f"Workload: {bench['workload']}.", "",
                f"Ran {meta.get('finished')}, {meta.get('wall_s')} s wall, load average "
                f"{meta.get('loadavg_before', ['?'])[0]} before / {meta.get('loadavg_after', ['?'])[0]} after"
                f"{' (QUICK sizes)' if meta.get('quick') else ''}.", ""]
        if "cases" in bench:
            out += cases_table(bench) + [""]
        if name == "scaling":
            out += scaling_section(bench)
        if name == "peers":
            out += peers_section(bench) + [""]
        if name == "scale":
            out += scale_section(bench) + [""]
        if name == "realistic":
            out += realistic_section(bench) + [""]
        if name == "fig1":
            rows = ["| panel | curve | measured at T | CPU s of the runs (1 trial, more trials) | trials | "
                    "fixed CPU s | CPU s per trial | peak RSS MiB |", "|---|---|---|---|---|---|---|---|"]
            for panel, data in bench["panels"].items():
                for curve, c in data["curves"].items():
                    one, more = c["runs_cpu_s"]
                    rows.append(f"| 1({panel}) | `{curve}` | {c['measured_horizon']:g} | {one:.3g}, {more:.3g} | "
                                f"1, {c['measured_trials']} | {c['fixed_cpu_s']:.3g} | {c['trial_cpu_s']:.3g} | "
                                f"{c['maxrss_mib']:g} |")
            out += rows + [""] + [f"Fig. 1({p}): **{d['minutes_2_jobs']:.3g} minutes** with --jobs 2 (extrapolated)"
                                  for p, d in bench["panels"].items()] + [""]
        if name == "startup":
            out += [f"Median of {len(bench['runs'])} runs: **{bench['startup_cpu_s']:.3g} CPU s** (target <= 0.4); "
                    "runs: " + ", ".join(f"{r['cpu_s']:.3g}" for r in bench["runs"]) + ". None of pandas, scipy.stats "
                    "or matplotlib is imported before the first trial (they load when results are written or "
                    "plotted, or when a bandit needs them).", ""]
        if bench.get("ratios"):
            spread = bench.get("ratio_ranges", {})
            out += ["Ratios: " + "; ".join(f"{k} = **{v:.3g}x**" + (f" (rounds {spread[k][0]:.3g}-{spread[k][1]:.3g})"
                                                                  if k in spread else "")
                                           for k, v in bench["ratios"].items()), ""]
    out += ["## Profile of the slowest family and fix", "", PROFILE]
    return "\n".join(out).rstrip() + "\n"
