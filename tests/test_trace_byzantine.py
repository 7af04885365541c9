"""`netsim trace` on a byzantine scenario: corrupted messages are marked, and the counts agree with
the result counters of the same trial."""

from __future__ import annotations

import json

from netsim.engine import scenario as S
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence
from netsim.experiment.cli import main

SMALL = ["network.agents=30", "network.p=0.3", "run.horizon=60", "adversary.corruption=0.05", "run.checkpoints=5"]


def test_trace_marks_corruptions_and_matches_the_counters(tmp_path):
    out = tmp_path / "byz.jsonl"
    argv = ["trace", "dubey2020a-fig1b", "--out", str(out)]
    for override in SMALL:
        argv += ["--set", override]
    assert main(argv) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    corrupt = [e for e in events if e["event"] == "corrupt"]
    row = run_trial(S.load("dubey2020a-fig1b", SMALL), trial_sequence(2020, 0), 0).row
    assert row["messages_corrupted"] > 0
    assert len(corrupt) == row["messages_corrupted"]
    assert sum(1 for e in events if e["event"] == "send") == row["messages_sent"]
    assert sum(1 for e in events if e["event"] == "deliver") == row["messages_delivered"]
    # a corruption is marked on a message that was delivered on the same link, unless the trial ended first
    delivered = {(e["src"], e["dst"], e["sent_at"]) for e in events if e["event"] == "deliver"}
    horizon = 60.0
    assert all((e["src"], e["dst"], e["sent_at"]) in delivered for e in corrupt if e["due_at"] < horizon)
