"""Issue 18 items 3 and 9: where netsim writes, and with which permissions.

* a scenario ``name`` never takes ``run`` or ``trace`` outside ``results/`` (relative or absolute);
* with ``--out`` (or ``results/NAME``) nothing else is written: not in the working folder, HOME or
  TMPDIR (matplotlib's own cache is pointed at a folder of its own and left out);
* every file netsim writes gets the user's umask (here 027, so 0640, not a fixed 0600 or 0644);
* ``.sweep.lock`` is never followed through a symlink; unit files are staged under unpredictable names.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from netsim.experiment import sweeps as W
from netsim.experiment.cli import main

QUICK = ["--set", "run.horizon=40", "--set", "run.checkpoints=2", "--quiet"]


@pytest.mark.parametrize("command", [["run", "quickstart", *QUICK, "--no-plots"],
                                     ["trace", "quickstart", "--until", "5"]])
@pytest.mark.parametrize("name", ["../../escaped", "/tmp/netsim-escaped-by-name", "results/../../escaped"])
def test_a_scenario_name_cannot_leave_results(capsys, tmp_path, monkeypatch, command, name):
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--set", f"name='{name}'"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "outside results/" in err, err
    assert not list(tmp_path.iterdir())
    assert not Path("/tmp/netsim-escaped-by-name").exists() and not (tmp_path.parent / "escaped").exists()


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.parametrize("argv,allowed", [
    (["run", "quickstart", *QUICK, "--out", "OUT"], ["OUT"]),
    (["run", "quickstart", *QUICK], ["results"]),
    (["sweep", "quickstart", "--grid", "network.agents=3,4", "--trials", "2", *QUICK, "--jobs", "2", "--out", "OUT"],
     ["OUT"]),
    (["trace", "quickstart", "--until", "5", "--out", "OUT/t.jsonl"], ["OUT"]),
])
def test_nothing_is_written_outside_the_output(tmp_path, argv, allowed):
    """One process per command, with its own HOME and TMPDIR; afterwards the only new paths are the output's.
    matplotlib keeps using the font cache this test process found (MPLCONFIGDIR), outside the check."""
    import matplotlib

    cwd, home, tmp = (tmp_path / name for name in ("cwd", "home", "tmp"))
    for folder in (cwd, home, tmp):
        folder.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "MPLCONFIGDIR": matplotlib.get_cachedir(),
           "NETSIM_NO_PROGRESS": "1"}
    argv = [str(cwd / "OUT") if a == "OUT" else str(cwd / "OUT" / "t.jsonl") if a == "OUT/t.jsonl" else a
            for a in argv]
    done = subprocess.run([sys.executable, "-m", "netsim", *argv], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not _files(home) and not _files(tmp), (_files(home), _files(tmp))
    assert {p.split("/")[0] for p in _files(cwd)} == set(allowed)


def _modes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*")
            if p.is_file()}


def test_every_file_follows_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        assert main(["run", "quickstart", *QUICK, "--no-plots", "--out", str(tmp_path / "run")]) == 0
        assert main(["sweep", "quickstart", "--grid", "network.agents=3,4", "--trials", "2", *QUICK, "--no-plots",
                     "--out", str(tmp_path / "sweep")]) == 0
        assert main(["trace", "quickstart", "--until", "5", "--out", str(tmp_path / "trace" / "t.jsonl"),
                     "--out", str(tmp_path / "trace" / "t.png")]) == 0
    finally:
        os.umask(previous)
    modes = _modes(tmp_path)
    assert {name.split("/")[0] for name in modes} == {"run", "sweep", "trace"}
    assert any(name.startswith("sweep/units/") for name in modes) and any(name.endswith(".png") for name in modes)
    assert set(modes.values()) == {0o640}, modes


def test_a_symlink_at_the_lock_is_refused_not_followed(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".sweep.lock").symlink_to(victim)
    assert main(["sweep", "quickstart", "--grid", "network.agents=3,4", *QUICK, "--out", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("netsim: error:")]
    assert len(errors) == 1 and ".sweep.lock" in errors[0], errors
    assert victim.read_text() == "keep me" and not (out / "units").exists()


def test_unit_files_are_staged_under_unpredictable_names(tmp_path):
    """A symlink planted at the name a unit used to be staged under (``.UID.PID.tmp``) is never written
    through; the stored unit is a plain file."""
    plan = W.plan("quickstart", ["network.agents=3"], overrides=["run.horizon=20", "run.checkpoints=2"], trials=1)
    [planned] = plan.units()
    store = W.UnitStore(tmp_path / "units")
    store.folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (store.folder / f".{planned.id}.{os.getpid()}.tmp").symlink_to(victim)
    store.put(planned.id, W.encode_result(planned, planned.unit().run()))
    assert victim.read_text() == "keep me"
    assert store.path(planned.id).is_file() and not store.path(planned.id).is_symlink()
    assert store.get(planned.id) is not None
