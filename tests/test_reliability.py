"""The reliability table (benchmarks/reliability.py): coverage, outcomes, and the kept fuzz section."""

from __future__ import annotations

from benchmarks import reliability as rel
from netsim.registry import protocols


def test_every_protocol_has_a_base_instance_and_every_column_exists():
    registered = {n for n in protocols.names() if not n.startswith("test-")}
    missing = registered - set(rel.BASES)
    assert not missing, f"add a base instance to benchmarks/reliability.py for {missing}"
    assert set(rel.FAULTS) == {"link down", "crash (kept)", "crash (lost)", "server crash (kept)",
                               "server crash (lost)", "duplication", "reorder"}
    assert set(rel.DELAYS) == {f"{law} {m}" for law in ("exp", "lognormal") for m in ("0.5", "2", "8")}


def test_outcomes_against_the_fault_free_figure():
    """ucb1 sends nothing, so under duplication it repeats the fault-free run exactly (regret r):
    judged against a base of r it completes, against 2r it is suspect (50 % below), against r/2
    degraded (100 % above). Protocols without a server get "no server"."""
    plain = rel._run(rel._load("ucb1", []), 1)
    r = plain["group_regret"]
    outcome = {}
    for label, figure in (("same", r), ("higher base", 2 * r), ("lower base", r / 2)):
        base = {**plain, "group_regret": figure}
        outcome[label] = rel.cell("ucb1", "duplication", base, 1, 1e4, 60.0)
    assert outcome["same"]["outcome"] == "completed"
    assert outcome["higher base"]["outcome"] == "suspect" and outcome["higher base"]["explained"] is False
    assert outcome["lower base"]["outcome"] == "degraded"
    assert rel.cell("ucb1", "server crash (lost)", plain, 1, 1e4, 60.0)["outcome"] == "no server"
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
    assert rel.main(["--protocol", "ucb1", "--trials", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert "<!-- fuzz:begin -->\n## Fuzzing\nkept | as | is\n<!-- fuzz:end -->" in text
    assert "old table" not in text and "| ucb1 |" in text
    fresh = tmp_path / "fresh.md"
    assert rel.main(["--protocol", "ucb1", "--trials", "1", "--out", str(fresh)]) == 0
    assert "<!-- fuzz:begin -->\n<!-- fuzz:end -->" in fresh.read_text()


def test_unknown_protocol_is_refused(capsys):
    assert rel.main(["--protocol", "no-such-protocol"]) == 2
    err = capsys.readouterr().err
    assert "--protocol 'no-such-protocol'" in err and "accepted:" in err
