"""Issue 27: a CI-sized sample of benchmarks/fuzz.py's inputs (scenario, study, edge-list and CSV files, every
verb's command lines, damaged results folders), run in-process: each exits 0, or 2 with exactly one error line;
none raises (a traceback) and nothing is written outside the input's own folder.

The full run (1,500 inputs, one process each, memory-limited) is ``python -m benchmarks.fuzz``; its results are
in docs/reliability.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import fuzz
from netsim.experiment.cli import main

#: inputs per CI run (about 20 s), from a seed of their own: a new input set each time this constant changes
INPUTS = 200
SEED = 27


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("fuzz")
    template = workdir / "template"
    assert main(["study", "quickstart", "--trials", "1", "--set", "run.horizon=20", "--set", "run.checkpoints=2",
                 "--quiet", "--out", str(template)]) == 0
    mp = pytest.MonkeyPatch()
    mp.setenv("NETSIM_FUZZ_RESULTS", str(template))
    made = fuzz.make_inputs(INPUTS, SEED, workdir)
    mp.undo()
    return workdir, made


def _in_process(kind: str, argv: list[str]) -> list[str]:
    """A mutated scenario or CSV file's run is checked by `show` (the same validation, data files included;
    running them is the full benchmark's job); command lines keep their verb, with a wall budget of 0.5 s."""
    if kind in ("scenario", "csv") and argv[:1] == ["run"]:
        argv = ["show", *argv[1:]]
    return argv


def test_every_input_exits_0_or_2_with_one_line(inputs, capsys, monkeypatch, isolated_plugins):
    workdir, made = inputs
    kinds = {kind for kind, _, _ in made}
    assert kinds == set(fuzz.KINDS), kinds
    bad = []
    for kind, folder, argv in made:
        monkeypatch.chdir(folder)
        argv = fuzz.capped(_in_process(kind, argv), folder)
        argv = [a.replace("run.wall_budget=5", "run.wall_budget=0.5") for a in argv]
        code = main(argv)
        err = capsys.readouterr().err
        outcome, detail = fuzz.judge(code, err)
        if outcome not in ("accepted", "refused"):
            bad.append((kind, argv[:6], outcome, detail))
    assert not bad, bad
    # nothing beside the inputs' folders: no file escaped a folder through a name, a link or a figure
    assert {p.name for p in workdir.iterdir()} == {"template", *(f"in{i}" for i in range(len(made)))}
    assert not Path("/tmp/netsim-fuzz-escape").exists()
