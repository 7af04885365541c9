"""Smoke test of ``python -m benchmarks``: runs one small benchmark with --quick into a temp dir and
checks the structure of the JSON and the page (no assertion on any time or rate)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *only: str) -> tuple[dict, str]:
    out, page = tmp_path / "results.json", tmp_path / "performance.md"
    args = [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out), "--page", str(page)]
    for name in only:
        args += ["--only", name]
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.read_text()), page.read_text()


def _check_case(case: dict) -> None:
    assert case["repeats"] >= 1
    assert case["work"] > 0
    for key in ("wall_s", "cpu_s", "rate_per_cpu_s"):
        stat = case[key]
        assert set(stat) == {"median", "min", "max"}
        assert stat["min"] <= stat["median"] <= stat["max"]
    assert case["peak_heap_mib"] is not None and case["peak_heap_mib"] >= 0
    assert case["maxrss_mib"] > 0


def test_quick_engine_and_bai(tmp_path):
    results, page = _run(tmp_path, "engine", "bai")
    assert list(results["benchmarks"]) == ["engine", "bai"]
    assert results["last_run"]["quick"] is True
    assert {"python", "numpy", "cpus"} <= set(results["machine"])
    engine = results["benchmarks"]["engine"]
    assert set(engine["cases"]) == {f"{impl}-{law}" for impl in ("engine", "engine-many", "naive", "callbacks", "heapq")
                                    for law in ("constant", "exponential")}
    for case in engine["cases"].values():
        _check_case(case)
        assert case["work"] == 20 * 4 * 5       # agents x degree x ticks messages, every one delivered
    bai = results["benchmarks"]["bai"]
    names = {"events/rounds, DP-MASE", "events/rounds, CORRUPTED ELIMINATION"}
    assert set(bai["ratios"]) == set(bai["targets"]) == names
    for case in bai["cases"].values():
        _check_case(case)
    # the ratio is the quotient of the median rates as stored
    dp = bai["cases"]
    fast = dp["DP-MASE: exact-law events"]["rate_per_cpu_s"]["median"]
    expected = fast / dp["DP-MASE: round by round"]["rate_per_cpu_s"]["median"]
    assert abs(bai["ratios"]["events/rounds, DP-MASE"] - expected) <= 1e-3 * expected
    assert set(engine["targets"]) <= set(engine["ratios"])
    for ratio in ("engine/naive (exponential delays)", "engine/heapq (exponential delays)",
                  "engine/callbacks (exponential delays)", "engine-many/heapq (exponential delays)",
                  "engine-many/callbacks (exponential delays)",
                  "events/rounds, CORRUPTED ELIMINATION"):
        assert ratio in page
    assert "# Performance" in page and "QUICK" in page


def test_only_merges_into_existing_results(tmp_path):
    _run(tmp_path, "engine")
    results, page = _run(tmp_path, "local")
    assert list(results["benchmarks"]) == ["engine", "local"]          # engine kept, order of the suite
    for case in results["benchmarks"]["local"]["cases"].values():
        _check_case(case)
    assert "records forwarded per CPU s" in page


def test_quick_startup(tmp_path):
    """The start-up benchmark runs a child process; nothing heavy is imported before the first trial."""
    results, page = _run(tmp_path, "startup")
    startup = results["benchmarks"]["startup"]
    assert startup["startup_cpu_s"] > 0
    assert all(run["heavy_modules_loaded"] == [] for run in startup["runs"])  # pandas, scipy.stats, matplotlib
    assert set(startup["limits"]) == {"start-up CPU s (median)"}
    assert "start-up CPU s" in page


def test_unknown_benchmark_is_rejected(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "nope", "--json", str(tmp_path / "r.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
    assert not (tmp_path / "r.json").exists()
