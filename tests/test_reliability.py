"""The reliability table (benchmarks/reliability.py): coverage, outcomes, and the kept fuzz section."""

from __future__ import annotations

from benchmarks import reliability as rel
from netsim.engine.registry import protocols


def test_every_protocol_has_a_base_instance_and_every_column_exists():
    registered = {n for n in protocols.names() if not n.startswith("test-")}
    missing = registered - set(rel.BASES)
    assert not missing, f"add a base instance to benchmarks/reliability.py for {missing}"
    assert set(rel.FAULTS) == {"link down", "crash (kept)", "crash (lost)", "server crash (kept)",
                               "server crash (lost)", "duplication", "reorder"}
    assert set(rel.DELAYS) == {f"{law} {m}" for law in ("exp", "lognormal") for m in ("0.5", "2", "8")}


def test_outcomes_against_the_fault_free_figure():
    """dubey2020a-private takes each (origin, seq) once, so under duplication it repeats the
    fault-free run exactly (regret r; docs/protocols/dubey2020a.md, Faults): judged against a base
    of r it completes, against 2r it is suspect (50 % below), against r/2 degraded (100 % above).
    Protocols without a server get "no server"; ucb1 sends nothing, so duplication is refused."""
    name = "dubey2020a-private"
    plain = rel._run(rel._load(name, []), 1)
    r = plain["group_regret"]
    outcome = {}
    for label, figure in (("same", r), ("higher base", 2 * r), ("lower base", r / 2)):
        base = {**plain, "group_regret": figure}
        outcome[label] = rel.cell(name, "duplication", base, 1, 1e4, 60.0)
    assert outcome["same"]["outcome"] == "completed"
    assert outcome["higher base"]["outcome"] == "suspect" and outcome["higher base"]["explained"] is False
    assert outcome["lower base"]["outcome"] == "degraded"
    assert rel.cell(name, "server crash (lost)", plain, 1, 1e4, 60.0)["outcome"] == "no server"
    refused = rel.cell("ucb1", "duplication", plain, 1, 1e4, 60.0)
    assert refused["outcome"] == "rejected" and refused["key"] == "faults.duplication"
    text = rel._cell_text(outcome["higher base"], {**plain, "group_regret": 2 * r})
    assert "**suspect** (**unexplained**)" in text and "(-50%)" in text


def test_server_crash_columns_crash_the_server_node():
    plain = rel._load("cdp-mab", [])
    sets = rel.FAULTS["server crash (lost)"](100.0, plain)
    assert sets == ["faults.crashes=[{node=5, start=20, end=50}]", "faults.state='lost'"]
    assert rel.FAULTS["server crash (kept)"](100.0, rel._load("ddp-mab", [])) is None


def test_the_writer_keeps_the_fuzz_section(tmp_path):
    out = tmp_path / "reliability.md"
    out.write_text("old table\n<!-- fuzz:begin -->\n## Fuzzing\nkept | as | is\n<!-- fuzz:end -->\nold tail\n")
    store = tmp_path / "rows.json"
    assert rel.main(["--protocol", "ucb1", "--trials", "1", "--out", str(out), "--store", str(store)]) == 0
    text = out.read_text()
    assert "<!-- fuzz:begin -->\n## Fuzzing\nkept | as | is\n<!-- fuzz:end -->" in text
    assert "old table" not in text and "| ucb1 |" in text
    fresh = tmp_path / "fresh.md"
    assert rel.main(["--protocol", "central-ucb", "--trials", "1", "--out", str(fresh), "--store", str(store)]) == 0
    text = fresh.read_text()
    assert "<!-- fuzz:begin -->\n<!-- fuzz:end -->" in text
    # a partial run keeps the stored rows of the protocols it did not rerun
    assert "| ucb1 |" in text and "| central-ucb |" in text


def test_unfinished_trials_are_counted_apart_not_as_wrong(monkeypatch):
    """Three trials: one correct, one wrong, one that reached its horizon without an answer."""
    rows = iter([{"status": "ok", "correct": 1.0}, {"status": "ok", "correct": 0.0},
                 {"status": "unfinished", "correct": float("nan")}])

    class Result:
        def __init__(self):
            self.row = {"group_regret": 1.0, "comm_cost": 2.0, "end_time": 3.0, "failure": "none", **next(rows)}

    monkeypatch.setattr(rel, "run_trial", lambda *args: Result())
    got = rel._run(rel._load("ucb1", []), 3)
    assert (got["correct"], got["unfinished"], got["trials"]) == (1, 1, 3)
    got["outcome"] = "completed"
    assert "correct 1/2 finished, 1/3 unfinished" in rel._cell_text(got, got)


def test_crash_cells_of_a_mode_switching_protocol_are_judged_in_that_mode():
    """rio2023's crash columns run round by round: their base is a fault-free round-by-round run."""
    row = rel._row("central-se", 1, ["crash (kept)", "duplication"])
    against = row["crash (kept)"]["against"]
    assert against["mode"] == "protocol.simulation='rounds'"
    assert against["sample_complexity"] != row["base"]["sample_complexity"]  # the two modes' own figures
    assert "against" not in row["duplication"]
    assert "against the fault-free run with protocol.simulation='rounds'" in rel._cell_text(row["crash (kept)"],
                                                                                           row["base"])


def test_unknown_protocol_is_refused(capsys):
    assert rel.main(["--protocol", "no-such-protocol"]) == 2
    err = capsys.readouterr().err
    assert "--protocol 'no-such-protocol'" in err and "accepted:" in err
