"""Protocols from a file: ``--plugin FILE.py``, ``NETSIM_PLUGINS``, and worker processes.

The protocol file is the protocol-author guide's example (docs/protocol-author.md), written to
a temporary folder; the command line runs in a separate process.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from netsim.engine.errors import InputError
from tests.test_protocol_author_guide import guide_file

SMALL = ["--set", "run.horizon=60", "--set", "run.checkpoints=4", "--quiet", "--no-plots"]
OTHER = '''
from netsim.comm.protocol import Protocol
from netsim.engine.registry import register_protocol


@register_protocol
class Idle(Protocol):
    name = "example-idle"
    description = "pulls nothing (a second plug-in file)"

    def start(self):
        pass
'''


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "neighbour_ucb.py").write_text(guide_file("neighbour_ucb.py"))
    (tmp_path / "guide.toml").write_text(guide_file("guide.toml"))
    return tmp_path


def netsim(cwd: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "NETSIM_PLUGINS"} | (env or {})
    return subprocess.run([sys.executable, "-m", "netsim", *argv], cwd=cwd, env=environ, capture_output=True,
                          text=True)


def test_plugin_flag_and_environment_variable_run_the_guide_protocol(folder):
    done = netsim(folder, "run", "guide.toml", "--plugin", "neighbour_ucb.py", "--out", "flag", *SMALL)
    assert done.returncode == 0, done.stderr
    env = {"NETSIM_PLUGINS": os.pathsep.join(["", str(folder / "neighbour_ucb.py"), "other.py"])}
    (folder / "other.py").write_text(OTHER)
    done = netsim(folder, "run", "guide.toml", "--out", "env", "--jobs", "2", *SMALL, env=env)
    assert done.returncode == 0, done.stderr

    flag, via_env = (pd.read_csv(folder / name / "trials.csv") for name in ("flag", "env"))
    assert list(flag["protocol"]) == ["example-neighbour-ucb"] * 2
    assert (flag["messages_sent"] == 6 * 5 * 60).all()                   # 6 agents x 5 neighbours x 60 ticks
    assert (flag["observations_per_agent"] == 60 + 5 * 59).all()        # rewards of the last tick arrive at T
    assert (folder / "flag" / "trials.csv").read_bytes() == (folder / "env" / "trials.csv").read_bytes()
    assert flag["group_regret"].nunique() == 2                          # two trials, two draws

    listed = netsim(folder, "list", env=env)
    assert "example-neighbour-ucb" in listed.stdout and "example-idle" in listed.stdout


def cli_error(capsys, *argv: str) -> str:
    """The one line ``netsim ARGV`` (run in this process) prints on stderr, exiting 2."""
    from netsim.experiment.cli import main

    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_unknown_protocol_error_names_the_flag_and_the_variable(folder, monkeypatch, capsys):
    monkeypatch.chdir(folder)
    err = cli_error(capsys, "run", "guide.toml", *SMALL)
    assert "protocol.name: unknown protocol 'example-neighbour-ucb'" in err
    assert "--plugin FILE.py" in err and "NETSIM_PLUGINS" in err


@pytest.mark.parametrize("content,fragment", [
    (None, "no such Python file"),
    ("x = 1\ny = undefined_name\n", "line 2: NameError: name 'undefined_name' is not defined"),
    ("def broken(:\n", "line 1: SyntaxError"),
    (OTHER.replace("example-idle", "ucb1"), "protocol 'ucb1' registered twice"),
])
def test_a_bad_plugin_file_is_one_line_naming_it(folder, content, fragment, monkeypatch, capsys, isolated_plugins):
    monkeypatch.chdir(folder)
    if content is not None:
        (folder / "bad.py").write_text(content)
    err = cli_error(capsys, "show", "guide.toml", "--plugin", "bad.py")
    assert err.startswith("netsim: error: --plugin 'bad.py': ") and fragment in err
    monkeypatch.setenv("NETSIM_PLUGINS", "bad.py")
    monkeypatch.setattr(isolated_plugins, "_loaded", False)  # read the variable again
    err = cli_error(capsys, "list")
    assert err.startswith("netsim: error: NETSIM_PLUGINS 'bad.py': ") and fragment in err


def test_a_failed_import_leaves_the_registries_as_they_were(tmp_path, isolated_plugins):
    half = tmp_path / "half.py"
    half.write_text(OTHER + "\nraise RuntimeError('second half missing')\n")
    with pytest.raises(InputError, match="second half missing"):
        isolated_plugins.load_plugin(half)
    assert "example-idle" not in isolated_plugins.protocols.names()
    half.write_text(OTHER)  # fixed: the same path now loads
    isolated_plugins.load_plugin(half)
    assert "example-idle" in isolated_plugins.protocols.names()
    assert isolated_plugins.load_plugin(half) is isolated_plugins.load_plugin(str(half))  # once per process
    assert isolated_plugins.plugin_files() == (str(half.resolve()),)


def test_a_spawned_worker_imports_the_plugin_files_of_the_unit(folder, isolated_plugins):
    """A process that did not inherit the registry (spawn start method) learns the files from the unit."""
    from netsim.engine import scenario as S
    from netsim.experiment import runner

    isolated_plugins.load_plugin(folder / "neighbour_ucb.py")
    scenario = S.load(str(folder / "guide.toml"), ["run.horizon=30"])
    unit = runner.Unit(scenario, 1)
    assert unit.plugins == (str((folder / "neighbour_ucb.py").resolve()),)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        remote = pool.submit(runner._run_unit, unit).result()
    local = unit.run()
    assert remote.row == local.row and remote.row["messages_sent"] == 6 * 5 * 30
