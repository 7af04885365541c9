"""The API reference (docs/build_api.py, pdoc) builds from the docstrings with no warning."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "build_api.py"


def load_script():
    spec = importlib.util.spec_from_file_location("build_api", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    build = load_script()
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    assert {f"{name.replace('.', '/')}.html" for name in build.modules()} <= pages
    assert {"netsim/experiment/api.html", "netsim/experiment/testing.html", "protocols/ucb.html", "index.html"} <= pages
    top = (tmp_path / "netsim.html").read_text()
    for name in ("run", "sweep", "Results", "Scenario", "load_plugin"):
        assert f'id="{name}"' in top, name
    assert 'id="MessageSpy"' in (tmp_path / "netsim" / "experiment" / "testing.html").read_text()


def test_only_our_and_pdocs_warnings_count():
    build = load_script()

    def warning(filename: str) -> warnings.WarningMessage:
        return warnings.WarningMessage("w", UserWarning, filename, 1)

    assert build.ours(warning("/site-packages/pdoc/doc_types.py"))
    assert build.ours(warning(str(ROOT / "netsim" / "engine" / "network.py")))
    assert not build.ours(warning("/site-packages/pandas/core/frame.py"))
