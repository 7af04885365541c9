"""Does dubey2020a-private's regret fall with the per-hop delay, and why (issue 24, item 3)?

``python -m benchmarks.dubey2020a_delay [--trials 12] [--delays 1,2,6] [--reference 40]``: the issue's
reproducer (``dubey2020a-fig1a`` with M = 30 on G(30, 0.1), T = 1500, constant per-hop delays) run with the
same seeds at every delay, for the paper's weighting (``record_counts = "current"``), the
consistent one (``"released"``) and, as a control, ``"released"`` with the releases' Laplace noise
switched off (the interval schedule unchanged: only the noise is removed, by replacing
:meth:`IntervalMechanism.scale` with zero in this process). Prints each delay's mean group regret
and its paired difference from the first delay with a 95 % t interval, and how many trials fell.

Then the same question on the independent reference (:mod:`benchmarks.dubey2020a_reference`, no
netsim code; fed netsim's streams it makes netsim's every choice, tests/test_dubey2020a_reference.py)
on ``--reference N`` independent draws of the setting: the fall with both weightings; with the noise
off; with delay 6 only up to trial 200 or only after it (when the fall accrues); with every heard
record 6 trials old whatever its hop count; with the releases on a clock instead of at pull counts
(the reference's laboratory variant ``refresh = "clock"``: a draw then stays f trials whatever it
is); the late pulls of the second-best arm; and the correlation, for the second-best arm's releases
after the round-robin, between a release's Laplace draw and how long it stays the owner's latest
(trials until its next release of the arm).

Measured (2 cores shared; 12 netsim trials, seed 2020; 40 reference instances, seeds [2020, i]):
netsim, delays 1 / 2 / 6, paired with delay 1 [95 % t interval]: current 1,404 / 1,297 (-107 [-235,
+22]) / 1,073 (-331 [-524, -137], lower in 12 of 12); released 1,372 / 1,233 (-139 [-254, -25]) /
1,106 (-266 [-392, -139], 11 of 12); released, noise off 905 / 925 (+20 [-22, +62]) / 916 (+11
[-18, +40]). Reference: current 1,143 / 986 at delay 6 (-157 [-225, -89]); released 1,153 / 987
(-166 [-237, -94]); noise off 810 / 822 (+12 [-3, +28]); delay 6 only up to t = 200: -54 [-125,
+17]; delay 6 only after t = 200: -181 [-253, -108]; every heard record 6 trials old: -138 [-215,
-60]; releases on a clock 1,262 / 1,263 (+1 [-17, +19]); pulls of the second-best arm after
t = 200: 4,663 at delay 1, 3,864 at delay 6 (-799 [-1,461, -137]); corr(draw, lifetime) +0.048 at
delay 1, -0.070 at delay 6 (paired -0.118 [-0.185, -0.051], 34 instances with such releases).
About 0.7 (delay 1) to 1.5 (delay 6) CPU s per netsim trial, 0.1 s per reference run; the whole
command took about 8 minutes on the shared machine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
from scipy import stats

import netsim

BASE = {"network.agents": 30, "network.p": 0.1, "run.horizon": 1500}


def paired(regrets: dict[float, np.ndarray]) -> list[str]:
    """One line per delay: mean, paired difference from the first delay [95 % t interval], falls."""
    first = next(iter(regrets))
    lines = []
    for delay, values in regrets.items():
        text = f"  delay {delay:g}: {values.mean():,.0f}"
        if delay != first:
            diff = values - regrets[first]
            half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff))
            text += (f"  paired {diff.mean():+,.0f} [{diff.mean() - half:+,.0f}, {diff.mean() + half:+,.0f}], "
                     f"lower in {(diff < 0).sum()} of {len(diff)}")
        lines.append(text)
    return lines


def measure(record_counts: str, delays: Sequence[float], trials: int, *, noise: bool = True) -> dict[float, np.ndarray]:
    from protocols.privacy.interval import IntervalMechanism

    scale = IntervalMechanism.scale
    if not noise:
        IntervalMechanism.scale = lambda self, n: np.zeros_like(np.asarray(n, dtype=float))
    try:
        return {d: netsim.run("dubey2020a-fig1a", trials=trials,
                              set={**BASE, "network.delay": d, "protocol.record_counts": record_counts}
                              ).trials["group_regret"].to_numpy() for d in delays}
    finally:
        IntervalMechanism.scale = scale


def lifetimes(run, arm: int, horizon: int, after: int) -> tuple[np.ndarray, np.ndarray]:
    """Each release of ``arm`` after trial ``after`` as (unit Laplace draw z, trials until its owner's next
    release of the arm, or to the end): how long the draw stays in every table that hears its owner."""
    rel = np.array([r for r in run.releases if r[2] == arm and r[0] > after]).reshape(-1, 4)
    z, life = [], []
    for agent in np.unique(rel[:, 1]):
        own = rel[rel[:, 1] == agent]
        z.append(own[:, 3])
        life.append(np.diff(np.r_[own[:, 0], horizon + 1]))
    return (np.concatenate(z), np.concatenate(life)) if z else (np.zeros(0), np.zeros(0))


def anatomy(instances: int) -> list[str]:
    """The same question on the independent reference (no netsim code), on ``instances`` independent draws
    of the setting (G(30, 0.1) conditioned on connected, gamma = half-diameter, K = 5, means U[0, 1],
    T = 1500, eps = 0.1): the fall, its controls, when it accrues, and the persistence of released draws."""
    from benchmarks import dubey2020a_reference as ref

    horizon, out, corr, late = 1500, {}, {1: [], 6: []}, {1: [], 6: []}
    for i in range(instances):
        adjacency, means, uniforms, noise = ref.draw_instance(np.random.default_rng([2020, i]), 30, 0.1, 5, horizon)
        gamma = ref.half_diameter(adjacency)
        lag = {d: ref.hop_lags(adjacency, gamma, d) for d in (1, 6)}
        heard = lag[1] > 0
        state = noise.bit_generator.state
        second = int(np.argsort(-means)[1])
        variants = {  # name: (lags, record_counts, noise on, later)
            "current, delay 1": (lag[1], "current", True, None),
            "current, delay 6": (lag[6], "current", True, None),
            "released, delay 1": (lag[1], "released", True, None),
            "released, delay 6": (lag[6], "released", True, None),
            "released, noise off, delay 1": (lag[1], "released", False, None),
            "released, noise off, delay 6": (lag[6], "released", False, None),
            "released, delay 6 until t = 200, then 1": (lag[6], "released", True, (201, lag[1])),
            "released, delay 1 until t = 200, then 6": (lag[1], "released", True, (201, lag[6])),
            "released, every heard record 6 trials old": (np.where(heard, 6, 0), "released", True, None),
            "released, releases on a clock, delay 1": (lag[1], "released", True, None),
            "released, releases on a clock, delay 6": (lag[6], "released", True, None),
        }
        for name, (lags, counts, noisy, later) in variants.items():
            noise.bit_generator.state = state
            run = ref.simulate(lags, means, horizon, epsilon=0.1, v=1.1, record_counts=counts, uniforms=uniforms,
                               noise=noise if noisy else None, later=later,
                               refresh="clock" if "clock" in name else "pulls")
            out.setdefault(name, []).append(run.group_regret)
            if name in ("released, delay 1", "released, delay 6"):
                z, life = lifetimes(run, second, horizon, after=50)
                corr[int(name[-1])].append(np.corrcoef(z, life)[0, 1] if len(z) > 2 else np.nan)
                late[int(name[-1])].append(float(np.sum(run.arms[200:] == second)))
    lines = []
    for name, values in out.items():
        paired_with_own = "noise off" in name or "clock" in name or name.startswith("current")
        base = name.replace("delay 6", "delay 1") if paired_with_own else "released, delay 1"
        text = f"  {name}: {np.mean(values):,.0f}"
        if name != base:
            text += "  " + interval(np.array(values) - np.array(out[base]), f"minus {base!r}")
        lines.append(text)
    lines.append(f"  pulls of the second-best arm after t = 200 (released): delay 1 {np.mean(late[1]):,.0f}, "
                 f"delay 6 {np.mean(late[6]):,.0f}, " + interval(np.array(late[6]) - np.array(late[1]), "paired"))
    diff = np.array(corr[6]) - np.array(corr[1])
    lines.append("  corr(release draw z, its lifetime), second-best arm, releases after t = 50: "
                 f"delay 1 {np.nanmean(corr[1]):+.3f}, delay 6 {np.nanmean(corr[6]):+.3f}, "
                 + interval(diff[np.isfinite(diff)], "paired"))
    return lines


def interval(diff: np.ndarray, label: str) -> str:
    """``label mean [95 % t interval], lower in a of n``."""
    half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff))
    form = "{:+,.0f}" if abs(diff.mean()) + half >= 10 else "{:+.3f}"
    low, mean, high = (form.format(x) for x in (diff.mean() - half, diff.mean(), diff.mean() + half))
    return f"{label} {mean} [{low}, {high}], lower in {(diff < 0).sum()} of {len(diff)}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dubey2020a_delay", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12, help="paired trials per delay (default 12)")
    parser.add_argument("--delays", default="1,2,6", help="constant per-hop delays, the first is the reference")
    parser.add_argument("--reference", type=int, default=40, metavar="N",
                        help="independent instances for the reference's anatomy (default 40; 0: skip)")
    args = parser.parse_args(argv)
    delays = [float(d) for d in args.delays.split(",")]
    if args.trials > 0:
        for label, counts, noise in (("current counts (the paper)", "current", True),
                                     ("released counts", "released", True),
                                     ("released counts, noise off", "released", False)):
            print(label)
            print("\n".join(paired(measure(counts, delays, args.trials, noise=noise))), flush=True)
    if args.reference > 0:
        print(f"independent reference, {args.reference} instances (benchmarks/dubey2020a_reference.py)")
        print("\n".join(anatomy(args.reference)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
