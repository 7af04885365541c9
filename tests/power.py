"""One-sided paired comparisons for the papers' claim tests (issue 19).

Each claim test runs both sides on the same seeds (common random numbers) and asks a one-sided
Wilcoxon signed-rank test at ``ALPHA`` whether the paired differences lean the claimed way. Its
docstring states the effect and spread measured over 10 seeds and the number of seeds chosen for
a power of at least 0.9 (from the noncentral t of the paired differences, with a margin since the
signed-rank test keeps at least 86 % of the t-test's efficiency). A rank test also stays valid for
the heavy-tailed regrets of runs that sometimes eliminate late.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from scipy import stats

ALPHA = 0.01


def assert_greater(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> None:
    """Paired samples: a exceeds b (one-sided Wilcoxon signed-rank test at ``alpha``)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    p = stats.wilcoxon(diff, alternative="greater").pvalue
    assert p < alpha, f"not shown greater: p = {p:.3g}; means {np.mean(a):.4g} vs {np.mean(b):.4g}"


def assert_decreasing(samples: Sequence[Sequence[float]], alpha: float = ALPHA) -> None:
    """Each sample exceeds the next one (paired, see :func:`assert_greater`)."""
    for a, b in pairwise(samples):
        assert_greater(a, b, alpha)
