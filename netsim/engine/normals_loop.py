"""The compiled ziggurat loop of :mod:`netsim.engine.normals` (numba; imported on first use only)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _rejected(raw, i, r, wi, ki, fi, r_tail, inv_r, to_unit):  # noqa: PLR0913  # pragma: no cover (compiled)
    """The rest of a normal whose first word ``r`` was not accepted at once, from word ``i`` on: NumPy's
    wedge test (one uniform) or, in the base layer, its tail (pairs of uniforms), a new word after a
    failed wedge. Returns (value, next word), or (0, -1) when ``raw`` ends first."""
    n = raw.shape[0]
    while True:
        idx = r & 0xFF
        rabs = (r >> 9) & 0x000FFFFFFFFFFFFF
        x = rabs * wi[idx]
        if (r >> 8) & 0x1:
            x = -x
        if rabs < ki[idx]:
            return x, i
        if idx == 0:
            while True:
                if i + 1 >= n:
                    return 0.0, -1
                xx = -inv_r * np.log1p(-((raw[i] >> 11) * to_unit))
                yy = -np.log1p(-((raw[i + 1] >> 11) * to_unit))
                i += 2
                if yy + yy > xx * xx:
                    return (-(r_tail + xx) if (rabs >> 8) & 0x1 else r_tail + xx), i
        if i >= n:
            return 0.0, -1
        u = (raw[i] >> 11) * to_unit
        i += 1
        if (fi[idx - 1] - fi[idx]) * u + fi[idx] < np.exp(-0.5 * x * x):
            return x, i
        if i >= n:
            return 0.0, -1
        r = raw[i]
        i += 1


@njit(cache=True)
def fill(raw, out, wi, ki, fi, signs, r_tail, inv_r, to_unit):  # noqa: PLR0913  # pragma: no cover (compiled)
    """Normals into ``out`` from the words ``raw`` in order; returns (normals made, words used). Stops at
    the end of ``out`` or when ``raw`` ends inside a normal (whose words are then not counted as used)."""
    i = 0
    made = 0
    n = raw.shape[0]
    while made < out.shape[0] and i < n:
        r = raw[i]
        idx = r & 0xFF
        rabs = (r >> 9) & 0x000FFFFFFFFFFFFF
        if rabs < ki[idx]:  # the layer's rectangle: 99 % of words (the sign from a table, not a branch)
            out[made] = rabs * wi[idx] * signs[(r >> 8) & 0x1]
            made += 1
            i += 1
            continue
        x, j = _rejected(raw, i + 1, r, wi, ki, fi, r_tail, inv_r, to_unit)
        if j < 0:
            return made, i
        out[made] = x
        made += 1
        i = j
    return made, i
