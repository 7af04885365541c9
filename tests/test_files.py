"""Issue 27 items 1, 2 and 6 (files): netsim writes only inside its output folder, never through a link it
finds there, only regular files, deletes only what it wrote; every file it reads fails in one line.

The canary test plants a link at every name netsim writes in an output folder, each pointing into a
canary folder beside it, runs every writing command, and checks that nothing in the canary folder was
created, changed or deleted.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from netsim.engine import files
from netsim.engine.errors import InputError
from netsim.experiment.cli import main

QUICK = ["--set", "run.horizon=20", "--set", "run.checkpoints=2", "--quiet"]
STUDY = """
seed = 1
[scale.quick]
trials = 1
set = {{ "run.horizon" = 20, "run.checkpoints" = 2, "network.agents" = 3 }}
[scale.paper]
trials = 1
[[variant]]
name = "isolated"
scenario = "quickstart"
[[figure]]
name = {name}
kind = "series"
"""


def one_line(capsys, argv: list[str], *needles: str) -> str:
    """``argv`` exits 2 with one ``netsim: error:`` line (after netsim's own progress lines) holding the needles."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("netsim: error:"), err
    assert not [line for line in err[:-1] if not line.startswith("netsim: ")], err
    assert "Traceback" not in "\n".join(err)
    for needle in needles:
        assert needle in err[-1], (needle, err[-1])
    return err[-1]


def study_file(folder: Path, name: str = '"regret"') -> Path:
    path = folder / "s.toml"
    path.write_text(STUDY.format(name=name))
    return path


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry below ``folder`` (links not followed) with its kind, bytes and modification time."""
    out = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else os.readlink(path) \
            if path.is_symlink() else None
        out[path.relative_to(folder).as_posix()] = (info.st_mode, content, info.st_mtime_ns)
    return out


# ---------------------------------------------------------------------- (a) names
@pytest.mark.parametrize("name", ['"../../../escaped"', '"/tmp/netsim-escaped-figure"', '"a/b"', '".hidden"',
                                  '"x\\u0000y"', f'"{"n" * 300}"'])
def test_a_figure_name_cannot_leave_the_figures_folder(capsys, tmp_path, name):
    out = tmp_path / "deep" / "out"
    one_line(capsys, ["study", str(study_file(tmp_path, name)), "--out", str(out), "--quiet"], "figure 1.name")
    assert not out.exists() and not (tmp_path / "escaped").exists() and not Path("/tmp/netsim-escaped-figure").exists()


def test_a_tampered_meta_json_cannot_write_outside_through_netsim_plot(capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["study", str(study_file(tmp_path)), "--out", str(out), "--quiet", "--no-plots"]) == 0
    capsys.readouterr()
    meta = json.loads((out / "meta.json").read_text())
    meta["study_text"] = meta["study_text"].replace('name = "regret"', 'name = "../../escaped"')
    (out / "meta.json").write_text(json.dumps(meta))
    one_line(capsys, ["plot", str(out)], "meta.json", "figure 1.name")
    assert not (tmp_path / "escaped.png").exists() and not (out / "figures").exists()


@pytest.mark.parametrize("damage", ["no meta", "bad json", "no study_text", "no columns", "not csv"])
def test_netsim_plot_on_a_damaged_folder_is_one_line(capsys, tmp_path, damage):
    out = tmp_path / "out"
    assert main(["study", str(study_file(tmp_path)), "--out", str(out), "--quiet", "--no-plots"]) == 0
    capsys.readouterr()
    if damage == "no meta":
        (out / "meta.json").unlink()
    elif damage == "bad json":
        (out / "meta.json").write_text("{")
    elif damage == "no study_text":
        (out / "meta.json").write_text("{}")
    elif damage == "no columns":
        (out / "study_timeseries.csv").write_text("a,b\n1,2\n")
    else:
        (out / "study.csv").write_bytes(b"\xff\xfe\x00")
    one_line(capsys, ["plot", str(out)], str(out))


# ---------------------------------------------------------------------- (b) links, devices, deletion
@pytest.mark.parametrize("plots", [True, False])
def test_a_linked_figures_folder_is_refused_and_nothing_there_deleted(capsys, tmp_path, plots):
    canary = tmp_path / "canary"
    canary.mkdir()
    for name in ("keep.png", "keep.svg", "keep.csv"):
        (canary / name).write_text(name)
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").symlink_to(canary, target_is_directory=True)
    before = snapshot(canary)
    one_line(capsys, ["study", str(study_file(tmp_path)), "--out", str(out), "--quiet",
                      *([] if plots else ["--no-plots"])], "figures", "link")
    assert snapshot(canary) == before


def test_a_save_deletes_only_figures_netsim_wrote(tmp_path):
    out = tmp_path / "out"
    argv = ["study", str(study_file(tmp_path)), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    (out / "figures" / "mine.png").write_text("the user's own figure")
    assert main(argv) == 0
    assert (out / "figures" / "mine.png").read_text() == "the user's own figure"
    assert "regret.png" in os.listdir(out / "figures")
    assert files.written(out).count("figures/regret.png") == 1


@pytest.mark.parametrize("kind", ["fifo", "link", "folder"])
def test_trace_out_onto_anything_but_a_regular_file_is_refused(capsys, tmp_path, kind):
    target = tmp_path / "t.jsonl"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "link":
        target.symlink_to(victim)
    else:
        target.mkdir()
    one_line(capsys, ["trace", "quickstart", "--until", "3", "--out", str(target)], "--out")
    assert victim.read_text() == "keep me"
    assert (target.is_fifo() if kind == "fifo" else target.is_symlink() if kind == "link" else target.is_dir())


@pytest.mark.parametrize("relative", ["../x", "/abs", "a/../b", "", "a//b", "x\x00y", "n" * 256])
def test_the_writer_refuses_paths_that_leave_the_folder(tmp_path, relative):
    with pytest.raises(InputError):
        files.write(tmp_path / "out", relative, b"x")
    assert not (tmp_path / "x").exists() and not Path("/abs").exists()


def test_the_writer_follows_the_umask_and_replaces_atomically(tmp_path):
    previous = os.umask(0o027)
    try:
        path = files.write(tmp_path, "sub/f.txt", b"one")
        files.write(tmp_path, "sub/f.txt", b"two")
    finally:
        os.umask(previous)
    assert path.read_bytes() == b"two" and (path.stat().st_mode & 0o777) == 0o640
    assert sorted(os.listdir(tmp_path / "sub")) == ["f.txt"]  # no staging file left
    assert files.written(tmp_path) == ["sub/f.txt"]


# ---------------------------------------------------------------------- the canary folder
def plant(out: Path, canary: Path, names: list[str]) -> None:
    """A link at each of ``names`` inside ``out``, to a file or folder of the same name in ``canary``."""
    for name in names:
        target = canary / name.replace("/", "_")
        if name in ("units", "figures"):
            target.mkdir()
            (target / "keep.png").write_text("keep")
            (target / ".x.0123456789abcdef.tmp").write_text("keep")  # looks like netsim's own staging file
        else:
            target.write_text("keep")
        link = out / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)


RUN_NAMES = ["trials.csv", "agents.csv", "timeseries.csv", "timings.csv", "meta.json", "regret.png",
             "communication.png", files.MANIFEST]
STUDY_NAMES = ["study.csv", "study_agents.csv", "study_timeseries.csv", "meta.json", "report.html", files.MANIFEST]


@pytest.mark.parametrize("command", ["run", "sweep", "study", "study-figures", "trace", "plot"])
def test_nothing_outside_out_is_created_changed_or_deleted(capsys, tmp_path, command):
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "data.txt").write_text("the user's data")
    out = tmp_path / "out"
    out.mkdir()
    study = study_file(tmp_path)
    if command == "run":
        plant(out, canary, RUN_NAMES)
        argv = ["run", "quickstart", *QUICK, "--out", str(out)]
    elif command == "sweep":
        plant(out, canary, ["units", "sweep.csv", "regret_by_network.agents.png"])
        argv = ["sweep", "quickstart", "--grid", "network.agents=3,4", *QUICK, "--out", str(out)]
    elif command == "study":
        plant(out, canary, STUDY_NAMES)
        argv = ["study", str(study), "--out", str(out), "--quiet"]
    elif command == "study-figures":
        plant(out, canary, ["figures"])
        argv = ["study", str(study), "--out", str(out), "--quiet"]
    elif command == "trace":
        plant(out, canary, ["t.jsonl", "t.jsonl.png"])
        argv = ["trace", "quickstart", "--until", "3", "--out", str(out / "t.jsonl")]
    else:
        assert main(["study", str(study), "--out", str(out), "--quiet"]) == 0
        shutil.rmtree(out / "figures")
        (out / "report.html").unlink()
        plant(out, canary, ["figures", "report.html"])
        argv = ["plot", str(out)]
    before = snapshot(canary)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "link" in err.splitlines()[-1], err
    assert snapshot(canary) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canary", "out", "s.toml"]
