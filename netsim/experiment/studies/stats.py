"""The statistics of a study's figures and tables.

Every mean is drawn with a **95 % Student-t confidence interval** over the trials:
``mean ± t(0.975, n - 1) · s / sqrt(n)`` with ``s`` the sample standard deviation (ddof = 1).
With one trial there is no interval (``lo = hi = mean``). Trials whose ``status`` is ``failed``
(the watchdog or the wall budget ended them) are left out of every statistic, and values a
protocol leaves undefined (NaN, e.g. ``sample_complexity`` of an unfinished run) are left out of
that metric's; both are counted (``failed``, ``unfinished`` and ``n`` columns), never dropped silently.

The Pareto front of a trade-off figure holds the points no other point beats on both axes
(lower is better on both: cost and regret); :func:`pareto` marks them. :func:`slope` is the
least-squares slope of log y on log x (the exponent of a power law, for log-log figures).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CONFIDENCE = 0.95


def t_quantile(dof: int) -> float:
    """``t(0.975, dof)``, the two-sided 95 % Student-t quantile."""
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, dof))


def interval(values: Sequence[float] | np.ndarray) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, n)`` of the finite-or-infinite, non-NaN ``values`` (95 % t interval)."""
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    n = len(data)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(data.mean())
    if n == 1:
        return mean, mean, mean, 1
    half = t_quantile(n - 1) * float(data.std(ddof=1)) / np.sqrt(n)
    return mean, mean - half, mean + half, n


def summarise(frame: pd.DataFrame, by: list[str], metric: str, prefix: str = "") -> pd.DataFrame:
    """Per group of ``by``: mean, lo, hi, n and the smallest value (``min``) of ``metric`` (columns
    prefixed by ``prefix``), in the order the groups first appear in ``frame``."""
    rows = []
    for key, group in frame.groupby(by, sort=False, dropna=False) if by else [((), frame)]:
        key = key if isinstance(key, tuple) else (key,)
        values = group[metric].to_numpy(dtype=float)
        mean, lo, hi, n = interval(values)
        smallest = float(np.nanmin(values)) if n else float("nan")
        rows.append({**dict(zip(by, key)), f"{prefix}mean": mean, f"{prefix}lo": lo, f"{prefix}hi": hi,
                     f"{prefix}n": n, f"{prefix}min": smallest})
    columns = [*by, *(f"{prefix}{c}" for c in ("mean", "lo", "hi", "n", "min"))]
    return pd.DataFrame(rows, columns=columns)


def pareto(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """True for the points that no other point dominates (another point with x' <= x and y' <= y,
    one of them strictly); NaN points are never on the front."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    front = np.zeros(len(xs), dtype=bool)
    for i in range(len(xs)):
        if np.isnan(xs[i]) or np.isnan(ys[i]):
            continue
        dominated = (xs <= xs[i]) & (ys <= ys[i]) & ((xs < xs[i]) | (ys < ys[i]))
        front[i] = not dominated.any()
    return front


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``log y`` on ``log x`` over the points with x, y > 0 (NaN if fewer than 2)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = (xs > 0) & (ys > 0) & np.isfinite(xs) & np.isfinite(ys)
    if keep.sum() < 2 or np.ptp(xs[keep]) == 0:
        return float("nan")
    return float(np.polyfit(np.log(xs[keep]), np.log(ys[keep]), 1)[0])


def overlapping(labels: Sequence[str], lo: Sequence[float], hi: Sequence[float], n: Sequence[int],
                zero: bool = False) -> list[list[str]]:
    """For each interval ``[lo, hi]`` over ``n`` trials, the labels of the other intervals it overlaps
    (shares a value with), plus ``"0"`` when ``zero`` and it contains 0 (a paired difference not told
    apart from the baseline). A mean of one trial has no interval and cannot separate: it counts as
    overlapping every other interval. NaN intervals overlap nothing."""
    lows, highs = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    single = np.asarray(n, dtype=float) < 2
    out = []
    for i in range(len(lows)):
        if np.isnan(lows[i]) or np.isnan(highs[i]):
            out.append([])
            continue
        hit = [labels[j] for j in range(len(lows)) if j != i and not np.isnan(lows[j])
               and (single[i] or single[j] or (lows[i] <= highs[j] and lows[j] <= highs[i]))]
        if zero and (single[i] or lows[i] <= 0.0 <= highs[i]):
            hit.append("0")
        out.append(hit)
    return out
