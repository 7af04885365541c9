"""``python -m benchmarks [--quick] [--only NAME ...] [--json PATH] [--page PATH]``.

Runs every benchmark (or those named with ``--only``), each case a few times after a warm-up,
against its baseline in the same run, and writes the raw figures to ``benchmarks/results.json``
and the page ``docs/performance.md``. With ``--only``, the results of the other benchmarks already
in the JSON file are kept (so one benchmark can be re-run alone) and the page is rebuilt from all of
them. ``--quick`` uses tiny sizes and one repeat: a smoke test whose numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import benchmarks  # noqa: F401  (pins BLAS threads before numpy is imported)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import simpy  # noqa: E402

from benchmarks.harness import maxrss_mib  # noqa: E402
from benchmarks.page import render  # noqa: E402
from benchmarks.suite import BENCHMARKS  # noqa: E402

ALL = BENCHMARKS


def machine() -> dict:
    return {"python": platform.python_version(), "numpy": np.__version__, "simpy": simpy.__version__,
            "platform": platform.platform(), "cpus": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (smoke test)")
    parser.add_argument("--only", action="append", choices=sorted(ALL), metavar="NAME",
                        help=f"run only this benchmark (repeatable): {', '.join(ALL)}")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results.json"), help="results file")
    parser.add_argument("--page", default=str(ROOT / "docs" / "performance.md"), help="markdown page")
    parser.add_argument("--page-only", action="store_true", help="rebuild the page from the results file")
    args = parser.parse_args(argv)
    if args.page_only:
        Path(args.page).write_text(render(json.loads(Path(args.json).read_text())))
        return 0
    names = args.only or list(ALL)
    path = Path(args.json)
    results: dict = {"benchmarks": {}}
    if args.only and path.exists():
        results = json.loads(path.read_text())
    results.setdefault("benchmarks", {})
    started = time.perf_counter()
    for name in names:
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        t0, load0 = time.perf_counter(), os.getloadavg()
        out = ALL[name](args.quick)
        out["meta"] = {"quick": args.quick, "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                       "wall_s": round(time.perf_counter() - t0, 1),
                       "loadavg_before": [round(x, 2) for x in load0],
                       "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
        results["benchmarks"][name] = out
        print(f"[benchmarks] {name}: {out['meta']['wall_s']} s", file=sys.stderr, flush=True)
    results["machine"] = machine()
    results["last_run"] = {"benchmarks": names, "quick": args.quick, "wall_s": round(time.perf_counter() - started, 1),
                           "maxrss_mib": maxrss_mib()}
    results["benchmarks"] = {k: results["benchmarks"][k] for k in ALL if k in results["benchmarks"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    page = Path(args.page)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(results))
    print(f"[benchmarks] wrote {path} and {page} in {results['last_run']['wall_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
