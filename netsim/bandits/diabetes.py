"""UCI "Diabetes 130-US hospitals" (Strack et al. 2014) as a federated bandit (zhu2021 Sec. 5.2).

Reads the dataset's own ``diabetic_data.csv`` (one inpatient encounter per row; columns
``encounter_id, patient_nbr, race, gender, age, ..., metformin, ..., insulin, ...,
change, diabetesMed, readmitted``). The dataset cannot be shipped: point ``[bandit] file`` at
your copy.

Arms (Sec. 5.2): each of the 23 medication columns holds No / Steady / Up / Down. The paper
keeps only No and Steady and groups the medications into 5 arms:

1. steady insulin;
2. steady metformin;
3. steady repaglinide, glipizide, rosiglitazone, acarbose, miglitol or troglitazone;
4. steady nateglinide, chlorpropamide, glyburide, examide, glimepiride, acetohexamide,
   tolbutamide, pioglitazone, sitagliptin, glyburide-metformin, glipizide-metformin,
   glimepiride-pioglitazone, metformin-rosiglitazone or metformin-pioglitazone;
5. no action: every medication No.

Decisions where the paper is silent (its "supplementary materials" are not available):

* a row with any Up or Down is dropped (only No and Steady are used);
* the paper's "sitagliptin" is the dataset's column ``citoglipton`` (the dataset's spelling);
* a row belongs to arm 1-4 when all its Steady medications lie in that arm's group; rows with
  Steady medications in several groups, or a Steady tolazamide (listed among the 23
  medications but in no arm), are dropped;
* reward (Sec. 5.2): ``readmitted`` ">30" -> 1; "NO" and "<30" -> 0; any other value is an error.

Hospitals: the kept rows are divided into N = ``network.agents`` equal parts (sizes differ by
at most one). ``split = "order"`` (default) keeps the file order, which the paper reports to
produce the local biases the federated setting is about; ``split = "random"`` shuffles first
with ``split_seed`` (fixed across trials, so every trial sees the same hospitals).

Pulling arm k at hospital i resamples a reward from that hospital's rows of arm k
(:class:`~netsim.bandits.tabular.TabularBandit`); regret is against the average over
hospitals of the per-hospital means.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from netsim.bandits.base import bandits
from netsim.bandits.tabular import TabularBandit
from netsim.engine import files
from netsim.engine import params as P
from netsim.engine.errors import InputError

MEDICATIONS = (
    "metformin", "repaglinide", "nateglinide", "chlorpropamide", "glimepiride", "acetohexamide", "glipizide",
    "glyburide", "tolbutamide", "pioglitazone", "rosiglitazone", "acarbose", "miglitol", "troglitazone",
    "tolazamide", "examide", "citoglipton", "insulin", "glyburide-metformin", "glipizide-metformin",
    "glimepiride-pioglitazone", "metformin-rosiglitazone", "metformin-pioglitazone",
)
ARM_GROUPS = (
    ("insulin",),
    ("metformin",),
    ("repaglinide", "glipizide", "rosiglitazone", "acarbose", "miglitol", "troglitazone"),
    ("nateglinide", "chlorpropamide", "glyburide", "examide", "glimepiride", "acetohexamide", "tolbutamide",
     "pioglitazone", "citoglipton", "glyburide-metformin", "glipizide-metformin", "glimepiride-pioglitazone",
     "metformin-rosiglitazone", "metformin-pioglitazone"),
)
ARM_LABELS = ("1-insulin", "2-metformin", "3-repaglinide-group", "4-nateglinide-group", "5-no-action")
REWARDS = {">30": 1.0, "NO": 0.0, "<30": 0.0}
REQUIRED = ("readmitted",) + MEDICATIONS

_GROUP_OF = {med: g for g, meds in enumerate(ARM_GROUPS) for med in meds}


def arm_of(row: Mapping[str, str]) -> int | None:
    """Arm index 0..4 of one encounter (module docstring), or None when the row is dropped."""
    groups: set[int] = set()
    steady_elsewhere = False
    for med in MEDICATIONS:
        value = row[med]
        if value == "No":
            continue
        if value != "Steady":
            return None  # Up / Down
        group = _GROUP_OF.get(med)
        if group is None:
            steady_elsewhere = True
        else:
            groups.add(group)
    if not groups:
        return None if steady_elsewhere else 4
    if len(groups) > 1 or steady_elsewhere:
        return None
    return groups.pop()


@functools.lru_cache(maxsize=4)
def _encounters(path: str, stamp: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(arm, reward) of every kept row in file order (cached per file version). Every problem is one
    InputError naming the file and line, never quoting its contents."""
    name = repr(Path(path).name)
    text = files.read_text(path, what="data file", key="bandit.file")
    arms, rewards = [], []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"data file {name} lacks column(s) {missing}; accepted: the UCI diabetic_data.csv "
                             "schema", key="bandit.file")
        for row in reader:
            if None in row or any(value is None for value in row.values()):
                raise InputError(f"line {reader.line_num} of data file {name} has another number of fields than "
                                 "its header; accepted: the UCI diabetic_data.csv schema", key="bandit.file")
            arm = arm_of(row)
            if arm is None:
                continue
            label = row["readmitted"].strip()
            if label not in REWARDS:
                raise InputError(f"line {reader.line_num} of data file {name}: readmitted is none of "
                                 f"{', '.join(REWARDS)}; accepted: one of them", key="bandit.file")
            arms.append(arm)
            rewards.append(REWARDS[label])
    except csv.Error:
        raise InputError(f"line {reader.line_num} of data file {name} is not CSV (a NUL byte, an unclosed quote "
                         "or a field over 128 kB); accepted: the UCI diabetic_data.csv", key="bandit.file") from None
    return np.array(arms, dtype=np.int64), np.array(rewards)


def hospitals(path: Path, num_hospitals: int, split: str, seed: int) -> tuple[list, list, dict]:
    """Split the kept encounters into hospitals: (hospital labels, arm labels, groups)."""
    stat = path.stat() if path.is_file() else None
    arms, rewards = _encounters(str(path), (stat.st_mtime_ns, stat.st_size) if stat else (0, 0))
    order = np.arange(len(arms))
    if split == "random":
        order = np.random.default_rng(seed).permutation(len(arms))
    parts = np.array_split(order, num_hospitals)
    agents = [f"hospital-{i}" for i in range(num_hospitals)]
    groups = {}
    for agent, part in zip(agents, parts):
        for k, label in enumerate(ARM_LABELS):
            chosen = part[arms[part] == k]
            if len(chosen):
                groups[(agent, label)] = rewards[chosen]
    return agents, list(ARM_LABELS), groups


@bandits.register("diabetes")
class DiabetesBandit(TabularBandit):
    """UCI diabetes encounters split into hospitals; 5 medication arms; reward = readmitted > 30 days."""

    kind = "diabetes"
    description = "UCI Diabetes 130-US hospitals (zhu2021 Sec. 5.2): 5 medication arms, hospitals as agents"
    fields = {
        "file": P.text(doc="path to the UCI diabetic_data.csv, relative to the scenario file", label="data file"),
        "split": P.choice(("order", "random"), "order",
                          doc="hospitals as contiguous parts of the file (order) or of a shuffle (random)",
                          label="hospital split"),
        "split_seed": P.integer(0, low=0, doc="seed of the random split (same hospitals in every trial)",
                                label="split seed"),
    }

    @classmethod
    def _load(cls, options: Mapping[str, Any], num_agents: int) -> tuple[list, list, dict]:
        return hospitals(Path(options["file"]), num_agents, options["split"], options["split_seed"])
