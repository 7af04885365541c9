"""benchmarks/fuzz.py's classification (issue 18): a refusal counts only when it is one error line, exit 2."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks import fuzz


def classify(monkeypatch, tmp_path, code: int | None, err: str) -> str:
    def fake(argv, **kwargs):
        if code is None:
            raise subprocess.TimeoutExpired(argv, kwargs.get("timeout"))
        return subprocess.CompletedProcess(argv, code, "", err)

    monkeypatch.setattr(fuzz.subprocess, "run", fake)
    return fuzz.classify(["show", "quickstart"], tmp_path, 5.0)[0]


@pytest.mark.parametrize("code,err,kind", [
    (0, "", "accepted"),
    (2, "netsim: error: network.agents: accepted: an integer >= 1\n", "refused"),
    (2, "netsim: sweep of quickstart: 2 point(s)\nnetsim: error: --out '/': refused\n", "refused"),
    (2, "usage: netsim run [-h] SCENARIO\nnetsim: error: argument --trials: invalid int value\n", "untidy refusal"),
    (2, "netsim: error: first\nnetsim: error: second\n", "untidy refusal"),
    (2, "some warning\nnetsim: error: x\n", "untidy refusal"),
    (1, "Traceback (most recent call last):\n  File ...\nValueError: math domain error\n", "traceback"),
    (2, "Traceback (most recent call last):\nnetsim: error: x\n", "traceback"),
    (None, "", "hang"),
])
def test_classification(monkeypatch, tmp_path, code, err, kind):
    assert classify(monkeypatch, tmp_path, code, err) == kind
