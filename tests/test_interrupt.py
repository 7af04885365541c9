"""An interrupted `netsim run` leaves the complete old result files or none, and says so (exit 130)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time


def _interrupted_run(out, *extra):
    argv = [sys.executable, "-m", "netsim", "run", "quickstart", "--set", "run.horizon=400000", "--trials", "3",
            "--quiet", "--out", str(out), *extra]
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until the run has started (its banner is on stderr)
        line = process.stderr.readline()
        if "running quickstart" in line:
            break
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


def test_interrupted_first_run_writes_nothing(tmp_path):
    out = tmp_path / "fresh"
    code, err = _interrupted_run(out)
    assert code == 130
    assert "interrupted" in err and "Traceback" not in err
    assert not out.exists() or not [p for p in out.iterdir()]


def test_interrupted_rerun_keeps_previous_files(tmp_path):
    out = tmp_path / "kept"
    done = subprocess.run([sys.executable, "-m", "netsim", "run", "quickstart", "--set", "run.horizon=200",
                           "--quiet", "--no-plots", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, err = _interrupted_run(out, "--no-plots")
    assert code == 130 and "interrupted" in err
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before  # no temporary file left behind, nothing replaced
