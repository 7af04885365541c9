"""The studies benchmark's table (benchmarks/studies.py): sizes, estimated and end-to-end paper rows."""

import subprocess

from benchmarks import studies as bench


def _row(paper: dict) -> str:
    results = {"studies": {"quickstart": {"quick": {"wall_s": 7.5, "exit": 0}, "paper": paper}},
               "finished": "2026-11-27", "cpus": 2}
    return next(line for line in bench.table(results).splitlines() if line.startswith("| `quickstart`"))


def test_size_cell_counts_points_not_variants_times_a_quotient():
    # 3 variants, 12 points (some variants ungridded): the old cell divided and showed "3 x 4"
    row = _row({"trials": 40, "points": 12, "units": 480, "cpu_s": 60.0, "wall_min": 0.5, "extrapolated": False,
                "by_point": [{"lockstep": 1}]})
    assert "| 3 / 12 / 40 |" in row
    assert "one trial per point, measured in full, times the trials" in row


def test_end_to_end_row_says_how_it_was_measured(monkeypatch):
    done = subprocess.CompletedProcess([], 0, "", "")
    monkeypatch.setattr(bench, "_command", lambda name, scale, jobs, sets: (done, 815.6, 1601.7, []))
    paper = bench.end_to_end("quickstart", 2, [])
    # the injected child's 815.6 s and 1601.7 CPU s, reported in minutes and seconds (no clock is read here)
    expected = {"wall_min": 13.59, "cpu_s": 1601.7, "end_to_end": True, "trials": 40, "points": 3, "units": 120}
    assert {key: paper[key] for key in expected} == expected
    row = _row(paper)
    assert "| 13.6 |" in row
    assert "measured end to end" in row and "netsim study quickstart --scale paper --jobs 2" in row


def test_end_to_end_failure_is_reported_not_raised(monkeypatch):
    done = subprocess.CompletedProcess([], 2, "", "netsim: error: something\n")
    monkeypatch.setattr(bench, "_command", lambda name, scale, jobs, sets: (done, 1.0, 0.5, []))
    assert bench.end_to_end("quickstart", 2, []) == {"error": "netsim: error: something"}
