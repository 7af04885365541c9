"""The code base passes the linter configured in ruff.toml (run as part of the test suite, so CI checks it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "netsim", "protocols", "tests", "benchmarks"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
