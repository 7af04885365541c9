"""Same seed, same tables: fingerprints of every bundled scenario's result tables at a tiny horizon.

Runs each bundled scenario (``netsim list``) for ``--trials`` trials at ``run.horizon = --horizon``
(in this process, serial executor) and records a SHA-256 of its ``trials``, ``agents`` and
``timeseries`` tables (as ``netsim run`` writes them to CSV, wall-clock columns left out). With
``--out FILE`` the fingerprints are written as JSON; with ``--compare FILE`` they are checked
against a file written before a change, one line per scenario, and the exit status is 1 when a
*paper-mode* scenario differs (unit constant delays equal to the clock period, no loss, no
faults, no link overrides): a realistic-mode table may change when an engine change consumes
the delay draws in another order, and is listed as such.

Run, before and after a change::

    python -m benchmarks.tables --out /tmp/before.json
    python -m benchmarks.tables --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import warnings

from netsim.engine import scenario as S
from netsim.experiment import api

TIMING = ("wall_s",)


def paper_mode(sc: S.Scenario) -> bool:
    """Unit constant hops equal to the clock period, no loss, no link overrides, no faults."""
    net = sc.network
    delay = net["delay"]
    period = sc.document.get("clock", {}).get("period", 1.0)
    faults = sc.document.get("faults") or {}
    quiet = not any(value for key, value in faults.items() if key not in ("state",) and value not in (0, 0.0, [], {}))
    return (delay.get("model") == "constant" and delay.get("value") == period and net.get("loss", 0.0) == 0.0
            and not net.get("links") and quiet)


def fingerprint(name: str, horizon: int, trials: int) -> dict:
    """SHA-256 of the scenario's three tables at ``horizon`` (or the error it raises)."""
    overrides = [f"run.horizon={horizon}", f"run.checkpoints={min(5, horizon)}"]
    try:
        sc = api.prepare(name, set=overrides, trials=trials)
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            results = api.run(sc, trials=trials)
    except Exception as error:  # noqa: BLE001 - recorded: a scenario that fails fails the same way
        return {"error": f"{type(error).__name__}: {error}"[:300], "paper": None}
    out = {"paper": paper_mode(sc)}
    for table in ("trials", "agents", "timeseries"):
        frame = getattr(results, table)
        frame = frame.drop(columns=[c for c in TIMING if c in frame.columns])
        out[table] = hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()[:16]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=30)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (default: every bundled one)")
    parser.add_argument("--out", help="write the fingerprints here (JSON)")
    parser.add_argument("--compare", help="check against fingerprints written before")
    args = parser.parse_args(argv)
    names = args.only or sorted(S.bundled())
    prints = {}
    for name in names:
        prints[name] = fingerprint(name, args.horizon, args.trials)
        print(f"{name}: {prints[name].get('error') or 'ok'}", file=sys.stderr, flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"horizon": args.horizon, "trials": args.trials, "scenarios": prints}, fh, indent=1)
    if not args.compare:
        return 0
    with open(args.compare) as fh:
        before = json.load(fh)["scenarios"]
    failed = 0
    for name, now in prints.items():
        then = before.get(name)
        if then is None:
            print(f"new       {name}")
            continue
        same = {k: then.get(k) == now.get(k) for k in ("trials", "agents", "timeseries", "error")}
        if all(same.values()):
            print(f"same      {name}")
        elif now.get("paper") or then.get("paper"):
            failed += 1
            print(f"CHANGED   {name} (paper mode): " + ", ".join(k for k, v in same.items() if not v))
        else:
            print(f"changed   {name} (realistic mode): " + ", ".join(k for k, v in same.items() if not v))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
