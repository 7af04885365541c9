"""Reproduction time of every paper figure (``python -m benchmarks --only figures``).

For each figure, ONE trial of every curve (a bundled scenario, possibly with ``--set`` overrides
for the sweeps the paper draws in one panel) is run and its CPU time measured. Where a trial at
full size would take more than about a minute here, the trial is run at a smaller horizon
(``measure``) and its cost scaled linearly in the horizon (per-step cost taken as constant: the
scaling benchmark shows slopes close to 1 in the horizon for these protocols). The figure's time
is then sum over curves of trials x (CPU s per trial), reported

* for the bundled scenarios as shipped (their horizon and trial count), and
* for the paper's own size where a bundled scenario is scaled down (``paper``: horizon and
  trials of the paper; again linear in both).

Times are CPU seconds of one process; a run with ``--jobs 2`` on two free cores takes about half.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.suite import ROOT, run_scenario
from benchmarks.zhu2021 import load

#: bundled variants that are not curves of the paper's figure
NOT_CURVES = {"dubey2020a-fig1a-delays"}  # Fig. 1(a) with sampled link delays (realistic mode)


def _names(prefix: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / "scenarios").glob(f"{prefix}*.toml") if p.stem not in NOT_CURVES)


def _curves(names: list[str]) -> list[tuple[str, list[str]]]:
    return [(n, []) for n in names]


FEDUCB_1A = [("dubey2020b-fig1a", [f"protocol.epsilon={e}"]) for e in (100, 300, 1000, 3000, 10000)] + \
    [("dubey2020b-fig1a", [f"network.agents={m}"]) for m in (20, 50, 100)]
FEDUCB_1B = [("dubey2020b-fig1b", [f"protocol.communication='{c}'", *e])
             for c in ("m1.5", "mlogt", "mt") for e in ([], ["protocol.epsilon=inf"])]
FEDUCB_1C = [("dubey2020b-fig1c", [f"bandit.dimension={d}", f"bandit.arms={min(d * d, 256)}"])
             for d in (8, 16, 32, 64, 128)]
RIO_FIG1 = [(n, [f"network.agents={m}"]) for n in _names("rio2023-fig1-") for m in (64, 128, 256, 512, 1024)]

#: figure, family, curves, overrides of the measured run (empty: full size), the paper's size where
#: the bundled scenarios are scaled down, and a note.
FIGURES: list[dict[str, Any]] = [
    *[{"figure": f"li2022 Fig. {k}", "family": "li2022", "curves": _curves(_names(f"li2022-fig{k}-")), "measure": []}
      for k in (4, 5, 6, 7, 8, 10, 11, 12)],
    *[{"figure": f"dubey2020a Fig. 1({p})", "family": "dubey2020a", "curves": _curves(_names(f"dubey2020a-fig1{p}")),
       "measure": ["run.horizon=100"],
       **({"note": "dubey2020a-fig1a-delays (realistic-mode variant, not a paper curve) is left out"}
          if p == "a" else {})}
      for p in ("a", "b", "c")],
    {"figure": "dubey2020b (FedUCB) Fig. 1(A)", "family": "feducb", "curves": FEDUCB_1A, "measure": ["run.horizon=200"],
     "paper": {"horizon": 1e7, "trials": 100}},
    {"figure": "dubey2020b (FedUCB) Fig. 1(B)", "family": "feducb", "curves": FEDUCB_1B, "measure": ["run.horizon=100"],
     "paper": {"horizon": 1e7, "trials": 100}},
    {"figure": "dubey2020b (FedUCB) Fig. 1(C)", "family": "feducb", "curves": FEDUCB_1C, "measure": ["run.horizon=100"],
     "paper": {"horizon": 1e7, "trials": 100},
     "note": "the paper also uses M = 100 agents (bundled: 10); the paper-size estimate keeps M = 10"},
    *[{"figure": f"zhu2021 Fig. 2({p})", "family": "zhu2021", "curves": _curves(_names(f"zhu2021-fig2{p}-")),
       "measure": ["run.horizon=10000", "run.checkpoints=10"], "paper": {"horizon": 1e6, "trials": 100}}
      for p in ("a", "b")],
    {"figure": "zhu2021 Fig. 2(c)", "family": "zhu2021", "curves": [], "measure": [],
     "note": "not measured: needs the UCI diabetic_data.csv, which is not bundled"},
    {"figure": "rio2023 Fig. 1", "family": "rio2023", "curves": RIO_FIG1, "measure": []},
    {"figure": "rio2023 Fig. 2", "family": "rio2023", "curves": _curves(_names("rio2023-fig2-")), "measure": []},
]


def measure_figure(spec: dict, quick: bool) -> dict:
    curves = spec["curves"]
    measure = list(spec["measure"])
    if quick:                     # smoke test: first curve only, tiny horizon
        curves = curves[:1]
        if spec["family"] == "rio2023":
            measure = ["network.agents=16"]
        else:
            measure = measure + ["run.horizon=100"]
    rows, total, paper_total, measured = [], 0.0, 0.0, 0.0
    for name, overrides in curves:
        sc = load(name, overrides)
        horizon_full, trials = float(sc.run["horizon"]), int(sc.run["trials"])
        cpu, wall = time.process_time(), time.perf_counter()
        row = run_scenario(name, overrides + measure)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        measured += cpu
        ran = float(load(name, overrides + measure).run["horizon"])
        factor = horizon_full / ran if ran < horizon_full else 1.0
        per_trial = cpu * factor
        total += trials * per_trial
        item = {"scenario": name, "set": overrides, "trials": trials, "horizon": horizon_full, "measured_horizon": ran,
                "measured_cpu_s": round(cpu, 3), "measured_wall_s": round(wall, 3),
                "trial_cpu_s": round(per_trial, 3), "extrapolated": factor > 1.0}
        if spec.get("paper"):
            p = spec["paper"]
            paper_trial = cpu * p["horizon"] / ran
            paper_total += p["trials"] * paper_trial
            item["paper_trial_cpu_s"] = round(paper_trial, 1)
        rows.append(item)
        del row
    out = {"figure": spec["figure"], "family": spec["family"], "curves": rows,
           "measured_cpu_s": round(measured, 2), "figure_cpu_s": round(total, 1),
           "figure_min_2_jobs": round(total / 2 / 60, 2),
           "extrapolated": any(r["extrapolated"] for r in rows)}
    if spec.get("paper"):
        out["paper"] = dict(spec["paper"])
        out["paper_cpu_s"] = round(paper_total)
        out["paper_hours_2_jobs"] = round(paper_total / 2 / 3600, 1)
    if spec.get("note"):
        out["note"] = spec["note"]
    return out


def figures(quick: bool) -> dict:
    return {
        "title": "Reproduction time of each paper figure",
        "workload": "one trial of every curve; CPU s per trial measured at full size or at a smaller horizon and "
                    "scaled linearly; figure time = sum over curves of trials x CPU s per trial",
        "unit": "CPU s",
        "figures": [measure_figure(spec, quick) for spec in FIGURES],
        "ratios": {},
        "targets": {},
    }
