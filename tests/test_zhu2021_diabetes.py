"""UCI diabetes loader (zhu2021 Sec. 5.2) on small generated files of the diabetic_data.csv schema."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from netsim.bandits import diabetes as D
from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence

# The 50 columns of the UCI file, in its order.
COLUMNS = [
    "encounter_id", "patient_nbr", "race", "gender", "age", "weight", "admission_type_id",
    "discharge_disposition_id", "admission_source_id", "time_in_hospital", "payer_code", "medical_specialty",
    "num_lab_procedures", "num_procedures", "num_medications", "number_outpatient", "number_emergency",
    "number_inpatient", "diag_1", "diag_2", "diag_3", "number_diagnoses", "max_glu_serum", "A1Cresult",
    *D.MEDICATIONS, "change", "diabetesMed", "readmitted",
]
assert len(COLUMNS) == 50

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def encounter(i: int, readmitted: str, **meds: str) -> dict:
    row = {c: "?" for c in COLUMNS}
    row.update(encounter_id=str(1000 + i), patient_nbr=str(5000 + i), race="Caucasian", gender="Female",
               age="[50-60)", admission_source_id="7", readmitted=readmitted, change="No", diabetesMed="Yes")
    for med in D.MEDICATIONS:
        row[med] = "No"
    for med, value in meds.items():
        row[med.replace("_", "-")] = value
    return row


def write(path: Path, rows: list[dict], columns=COLUMNS) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


# Per arm, a pattern of readmission labels; each hospital (a contiguous third) gets its own rates.
ARM_MEDS = [{"insulin": "Steady"}, {"metformin": "Steady"}, {"glipizide": "Steady", "acarbose": "Steady"},
            {"glyburide_metformin": "Steady", "citoglipton": "Steady"}, {}]


@pytest.fixture
def data_file(tmp_path):
    """3 hospitals x 5 arms x 4 kept rows, plus dropped rows interleaved; hospital h's arm k has
    (h + k) % 4 + 1 of its 4 rows readmitted '>30' (reward 1), the others 'NO' or '<30'."""
    rows, i = [], 0
    for h in range(3):
        for k, meds in enumerate(ARM_MEDS):
            ones = (h + k) % 4 + 1
            for r in range(4):
                label = ">30" if r < ones else ("NO" if r % 2 else "<30")
                rows.append(encounter(i, label, **meds))
                i += 1
        # dropped: an Up dose, steady meds of two arms, steady tolazamide
        rows.append(encounter(i, ">30", insulin="Up"))
        rows.append(encounter(i + 1, ">30", insulin="Steady", metformin="Steady"))
        rows.append(encounter(i + 2, ">30", tolazamide="Steady"))
        i += 3
    return write(tmp_path / "diabetic_data.csv", rows)


def test_arm_mapping_of_single_rows():
    assert D.arm_of(encounter(0, "NO", insulin="Steady")) == 0
    assert D.arm_of(encounter(0, "NO", metformin="Steady")) == 1
    assert D.arm_of(encounter(0, "NO", troglitazone="Steady", miglitol="Steady")) == 2
    assert D.arm_of(encounter(0, "NO", metformin_pioglitazone="Steady")) == 3
    assert D.arm_of(encounter(0, "NO", citoglipton="Steady")) == 3  # the paper's sitagliptin
    assert D.arm_of(encounter(0, "NO")) == 4
    assert D.arm_of(encounter(0, "NO", insulin="Down")) is None
    assert D.arm_of(encounter(0, "NO", insulin="Steady", glipizide="Steady")) is None
    assert D.arm_of(encounter(0, "NO", tolazamide="Steady")) is None
    assert D.arm_of(encounter(0, "NO", tolazamide="Steady", insulin="Steady")) is None
    assert sum(len(g) for g in D.ARM_GROUPS) == 22  # 23 medications minus tolazamide


def test_hospitals_arms_and_rewards_in_file_order(data_file):
    agents, arms, groups = D.hospitals(data_file, 3, "order", 0)
    assert agents == ["hospital-0", "hospital-1", "hospital-2"] and len(arms) == 5
    for h in range(3):
        for k in range(5):
            rewards = groups[(agents[h], arms[k])]
            assert len(rewards) == 4
            assert rewards.sum() == (h + k) % 4 + 1


def test_bandit_means_and_regret_from_the_file(data_file):
    sc = S.from_dict({
        "name": "diab", "bandit": {"kind": "diabetes", "file": str(data_file)},
        "network": {"topology": "complete", "agents": 3},
        "protocol": {"name": "fed-ucb", "epsilon": 2.0}, "run": {"horizon": 300, "seed": 4},
    })
    from netsim.engine.sim import Simulation

    sim = Simulation(sc, trial_sequence(4, 0))
    expected = np.array([[((h + k) % 4 + 1) / 4 for k in range(5)] for h in range(3)])
    np.testing.assert_allclose(sim.bandit.local_means, expected)
    result = sim.run()
    assert result.row["lambda2"] == pytest.approx(0.5)
    assert result.row["noise_terms"] > 0 and result.row["epsilon_spent"] <= 2.0
    assert sim.bandit.pulls.sum() == 3 * 5 + 3 * 299


def test_random_split_is_fixed_by_its_seed(data_file):
    a = D.hospitals(data_file, 3, "random", 7)[2]
    b = D.hospitals(data_file, 3, "random", 7)[2]
    assert all(np.array_equal(a[key], b[key]) for key in a)
    total = sum(len(v) for v in a.values())
    assert total == 60


def test_missing_file_is_a_clear_input_error(tmp_path):
    with pytest.raises(InputError) as err:
        S.load(str(SCENARIOS / "zhu2021-fig2c.toml"), [f"bandit.file={tmp_path / 'nope.csv'}"])
    text = str(err.value)
    assert err.value.key == "bandit.file" and "nope.csv" in text and "accepted" in text
    assert "zhu2021-fig2c.toml" in text


def test_wrong_schema_and_bad_labels_are_rejected(tmp_path):
    bad = write(tmp_path / "x.csv", [encounter(0, "NO")], columns=[c for c in COLUMNS if c != "insulin"])
    with pytest.raises(InputError, match="insulin"):
        D.hospitals(bad, 1, "order", 0)
    odd = write(tmp_path / "y.csv", [encounter(0, "maybe")])
    with pytest.raises(InputError, match="readmitted"):
        D.hospitals(odd, 1, "order", 0)


def test_fig2c_runs_on_a_file_of_the_schema(data_file):
    sc = S.load(str(SCENARIOS / "zhu2021-fig2c.toml"), [f"bandit.file={data_file}", "run.horizon=200",
                                                 "protocol.epsilon=inf"])
    row = run_trial(sc, trial_sequence(1, 0), 0).row
    assert row["protocol"] == "fed-ucb" and math.isinf(row["epsilon_spent"])
