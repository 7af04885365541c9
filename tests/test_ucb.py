"""protocols.ucb: the UCB1 bonus against its plain formula (numpy's own division and square root)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from protocols.ucb import ucb_bonus


def test_ucb_bonus_is_the_plain_formula_and_inf_for_unpulled_arms():
    counts = np.array([[0.0, 1.0, 7.0], [3.0, 0.0, 1e6]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing divides by zero, so nothing warns
        got = ucb_bonus(counts, 50, scale=6.0)
        per_row = ucb_bonus(counts, np.array([[50.0], [2.0]]), scale=6.0)   # t broadcast against n
    pulled = counts > 0
    assert np.array_equal(got[pulled], np.sqrt(6.0 * math.log(50) / counts[pulled]))
    assert np.isinf(got[~pulled]).all()
    assert np.array_equal(per_row[1, [0, 2]], np.sqrt(6.0 * np.log(np.array([2.0, 2.0])) / counts[1, [0, 2]]))
    assert np.isinf(per_row[~pulled]).all() and per_row.shape == counts.shape
    assert np.array_equal(ucb_bonus(np.array([4.0]), 1), [0.0])   # ln 1 = 0
