"""benchmarks/fuzz.py's classification (issues 18, 27): a refusal counts only when it is one error line, exit 2."""

from __future__ import annotations

import pytest

from benchmarks import fuzz


@pytest.mark.parametrize("code,err,kind", [
    (0, "", "accepted"),
    (2, "netsim: error: network.agents: accepted: an integer >= 1\n", "refused"),
    (2, "netsim: sweep of quickstart: 2 point(s)\nnetsim: error: --out '/': refused\n", "refused"),
    (2, "usage: netsim run [-h] SCENARIO\nnetsim: error: argument --trials: invalid int value\n", "untidy refusal"),
    (2, "netsim: error: first\nnetsim: error: second\n", "untidy refusal"),
    (2, "some warning\nnetsim: error: x\n", "untidy refusal"),
    (1, "Traceback (most recent call last):\n  File ...\nValueError: math domain error\n", "traceback"),
    (2, "Traceback (most recent call last):\nnetsim: error: x\n", "traceback"),
    (1, "Traceback (most recent call last):\n  File ...\nMemoryError\n", "blow-up"),
    (-9, "", "blow-up"),
    (None, "", "hang"),
])
def test_classification(code, err, kind):
    assert fuzz.judge(code, err)[0] == kind


def test_caps_keep_a_run_short_and_inside_its_folder(tmp_path):
    argv = fuzz.capped(["run", "quickstart"], tmp_path)
    budget = "run.wall_budget=5"  # a cap on each fuzzed run, passed as a --set
    assert argv[argv.index("--out") + 1] == str(tmp_path / "out") and budget in argv
    assert fuzz.capped(["plot", "OUT"], tmp_path) == ["plot", str(tmp_path / "out")]
