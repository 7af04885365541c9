"""Issue 27 items 3 and 6: data files are read through one loader, checked before the first trial (``netsim
show`` too), never echoed; every reproducer of a traceback is one line, exit 2, naming the file or flag and key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netsim.experiment.cli import main

SECRET = "netsim-test-secret-7d1f"
TINY = ["--set", "run.horizon=20", "--set", "run.checkpoints=2"]


def one_line(capsys, argv: list[str], *needles: str) -> str:
    """``argv`` exits 2 with exactly one ``netsim: error:`` line on stderr (netsim's own progress lines may
    come before it), at most ~1,000 characters, holding every needle and no secret."""
    code = main(argv)
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2, captured
    assert err and err[-1].startswith("netsim: error:"), err
    assert not [line for line in err[:-1] if not line.startswith("netsim: ")], err
    assert len(err[-1]) < 1100 and SECRET not in captured.err + captured.out
    for needle in needles:
        assert needle in err[-1], (needle, err[-1])
    return err[-1]


def csv_scenario(tmp_path: Path, file: str, agents: int = 2) -> list[str]:
    return ["quickstart", "--set", f"bandit={{kind = 'csv', file = '{file}'}}", "--set", f"network.agents={agents}",
            *TINY]


def write_csv(tmp_path: Path, rows: list[str], name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(["agent,arm,reward", *rows]) + "\n")
    return path


@pytest.mark.parametrize("command", ["show", "run"])
def test_the_csv_bandit_never_echoes_the_data_file(capsys, tmp_path, monkeypatch, command):
    monkeypatch.setenv("NETSIM_TEST_SECRET", SECRET)
    out = ["--out", str(tmp_path / "o"), "--quiet"] if command == "run" else []
    one_line(capsys, [command, *csv_scenario(tmp_path, "/proc/self/environ"), *out], "bandit.file")
    assert not (tmp_path / "o" / "trials.csv").exists()


@pytest.mark.parametrize("rows,needles", [
    (["a,x,1", "a,y,nan", "b,x,1", "b,y,0"], ["line 3", "finite"]),
    (["a,x,1", "a,y,inf", "b,x,1", "b,y,0"], ["line 3", "finite"]),
    (["a,x,1", f"a,y,{SECRET}", "b,x,1", "b,y,0"], ["line 3", "finite"]),
    (["a,x,1", "a,y,0", "b,x,1"], ["no row"]),
    (["a,x,1", "a,y,0"], ["network.agents", "1 agent"]),
    (["a,x,1,9"], ["line 2", "field"]),
])
def test_a_bad_csv_is_refused_by_show_before_any_trial(capsys, tmp_path, rows, needles):
    path = write_csv(tmp_path, rows)
    one_line(capsys, ["show", *csv_scenario(tmp_path, str(path))], *needles)


def test_a_good_csv_shows_and_runs(capsys, tmp_path):
    path = write_csv(tmp_path, ["a,x,1", "a,y,0", "b,x,0.5", "b,y,0.25"])
    assert main(["show", *csv_scenario(tmp_path, str(path))]) == 0
    assert main(["run", *csv_scenario(tmp_path, str(path)), "--out", str(tmp_path / "o"), "--quiet",
                 "--no-plots"]) == 0


@pytest.mark.parametrize("content", [b"agent,arm,reward\n\xff\xfe,x,1\n", b"agent,arm,reward\na,\x00,1\n",
                                     b'agent,arm,reward\na,"x,1\n'])
def test_a_csv_that_is_not_utf8_text_is_one_line(capsys, tmp_path, content):
    path = tmp_path / "d.csv"
    path.write_bytes(content)
    one_line(capsys, ["show", *csv_scenario(tmp_path, str(path))], "d.csv")


def test_a_diabetes_file_that_is_not_utf8_is_one_line(capsys, tmp_path):
    path = tmp_path / "diabetic_data.csv"
    path.write_bytes(b"readmitted,\xff\n")
    one_line(capsys, ["show", "zhu2021-fig2c", "--set", f"bandit.file='{path}'"], "bandit.file", "UTF-8")


@pytest.mark.parametrize("kind", ["loop", "folder", "fifo", "missing"])
def test_a_data_file_that_is_no_file_is_one_line(capsys, tmp_path, kind):
    path = tmp_path / "d.csv"
    if kind == "loop":
        os.symlink(path, path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    one_line(capsys, ["show", *csv_scenario(tmp_path, str(path))], "bandit.file")


@pytest.mark.parametrize("line", ["1 \u00b2", "0 1\n\u0661 0", "0 99"])
def test_an_edge_list_with_odd_digits_is_one_line(capsys, tmp_path, line):
    path = tmp_path / "edges.txt"
    path.write_text(line + "\n")
    one_line(capsys, ["show", "quickstart", "--set", "network.topology='edgelist'", "--set", f"network.file='{path}'",
                      "--set", "network.agents=3"], "network.file", "line")


def test_an_unknown_key_of_100_kb_is_cut(capsys):
    err = one_line(capsys, ["show", "quickstart", "--set", f"protocol.{'k' * 100_000}=1"], "characters")
    assert len(err) < 1100


@pytest.mark.parametrize("document", ["a = " + "[" * 1000 + "]" * 1000, "a = " + "{b = " * 1000 + "1" + "}" * 1000])
def test_toml_nested_a_thousand_deep_is_one_line(capsys, tmp_path, document):
    path = tmp_path / "deep.toml"
    path.write_text(document + "\n")
    one_line(capsys, ["show", str(path)], "deep")
    one_line(capsys, ["show", "quickstart", "--set", document], "--set")
    study = tmp_path / "deep-study.toml"
    study.write_text(document + "\n")
    one_line(capsys, ["study", str(study), "--out", str(tmp_path / "o")], "deep")


@pytest.mark.parametrize("argv,needles", [
    (["show", "quickstart", "--set", "name='a\x00b'"], ["name"]),
    (["run", "quickstart", "--set", "name='a\x00b'", *TINY, "--quiet"], ["name"]),
    (["trace", "quickstart", "--until", "2", "--out", "x" * 300 + ".jsonl"], ["--out", "255"]),
    (["run", "quickstart", "--set", f"name='{'n' * 300}'", *TINY, "--quiet"], ["name", "255"]),
    (["show", "x" * 5000 + ".toml"], ["scenario"]),
    (["run", "--plugin", "x" * 300 + ".py"], ["--plugin"]),
])
def test_names_and_paths_no_file_system_takes_are_one_line(capsys, tmp_path, monkeypatch, argv, needles):
    monkeypatch.chdir(tmp_path)
    one_line(capsys, argv, *needles)
    assert not list(tmp_path.iterdir())


def test_a_plugin_class_without_description_is_listed(capsys, tmp_path, isolated_plugins):
    plugin = tmp_path / "bare.py"
    plugin.write_text("from netsim.engine.registry import register_protocol\n\n"
                      "@register_protocol\nclass Bare:\n    name = 'bare-harden-27'\n")
    assert main(["list", "--plugin", str(plugin)]) == 0
    assert "bare-harden-27" in capsys.readouterr().out


def test_bare_netsim_is_one_line_naming_the_commands_exit_2(capsys):
    err = one_line(capsys, [], "COMMAND", "run", "study", "--help")
    assert err.count("\n") == 0
