"""The compiled ziggurat loop of :mod:`netsim.engine.normals` (numba; imported on first use only).

:func:`fill` generates the PCG64 words itself (NumPy's ``PCG64``: a 128-bit LCG stepped before each output,
XSL-RR output) in four interleaved lanes, each lane four steps ahead of the one before it is stepped, so that
the four 128-bit multiplications of a block of four words are independent (about 1.5 ns a word here,
against 2.6-3 ns for NumPy's ``random_raw``, whose every step waits for the previous one). The words come
out in the generator's own order and feed the ziggurat in chunks that stay in the L1 cache.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

CHUNK = 1024  # words generated at a time (8 KiB): a multiple of the four lanes
SPARE = 64  # room for the words of a normal that a chunk ends inside (a tail takes a few pairs)


@intrinsic
def _mulhi(typingctx, a, b):  # pragma: no cover (compiled)
    """The high 64 bits of the 128-bit product of two uint64 (one ``mul`` on x86-64)."""
    def codegen(context, builder, signature, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return types.uint64(types.uint64, types.uint64), codegen


@njit(cache=True, inline="always")
def _step(hi, lo, mul_hi, mul_lo, add_hi, add_lo):  # pragma: no cover (compiled)
    """``state * mul + add`` modulo 2^128, every number as (high, low) 64-bit halves."""
    low = lo * mul_lo
    high = _mulhi(lo, mul_lo) + lo * mul_hi + hi * mul_lo
    new_lo = low + add_lo
    carry = np.uint64(1) if new_lo < low else np.uint64(0)
    return high + add_hi + carry, new_lo


@njit(cache=True, inline="always")
def _output(hi, lo):  # pragma: no cover (compiled)
    """PCG's XSL-RR output of a 128-bit state: the xor of its halves rotated right by its top 6 bits."""
    x = hi ^ lo
    rot = hi >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


@njit(cache=True)
def _rejected(raw, n, i, r, wi, ki, fi, r_tail, inv_r, to_unit):  # noqa: PLR0913  # pragma: no cover (compiled)
    """The rest of a normal whose first word ``r`` was not accepted at once, from word ``i`` on: NumPy's
    wedge test (one uniform) or, in the base layer, its tail (pairs of uniforms), a new word after a
    failed wedge. Returns (value, next word), or (0, -1) when the first ``n`` words of ``raw`` end first."""
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
def _ziggurat(raw, n, out, made, wi, ki, fi, signs, r_tail, inv_r, to_unit):  # noqa: PLR0913  # pragma: no cover
    """Normals into ``out[made:]`` from the first ``n`` words of ``raw`` in order; returns (normals made so far,
    words used). Stops at the end of ``out`` or where ``raw`` ends inside a normal (its words then unused)."""
    i = 0
    m = out.shape[0]
    while made < m and i < n:
        r = raw[i]
        idx = r & 0xFF
        rabs = (r >> 9) & 0x000FFFFFFFFFFFFF
        if rabs < ki[idx]:  # the layer's rectangle: 99 % of words (the sign from a table, not a branch)
            out[made] = rabs * wi[idx] * signs[(r >> 8) & 0x1]
            made += 1
            i += 1
            continue
        x, j = _rejected(raw, n, i + 1, r, wi, ki, fi, r_tail, inv_r, to_unit)
        if j < 0:
            return made, i
        out[made] = x
        made += 1
        i = j
    return made, i


@njit(cache=True)
def fill(out, state_hi, state_lo, inc_hi, inc_lo, mul_hi, mul_lo, lane_hi, lane_lo, shift_hi,  # noqa: PLR0913
         shift_lo, wi, ki, fi, signs, r_tail, inv_r, to_unit):  # pragma: no cover (compiled)
    """``out`` filled with the normals of the PCG64 generator at state (``state_hi``, ``state_lo``) with
    increment (``inc_hi``, ``inc_lo``) and multiplier (``mul_hi``, ``mul_lo``); returns the words used (the
    caller advances the generator by as many). (``lane_hi``, ``lane_lo``) and (``shift_hi``, ``shift_lo``) are
    the multiplier and increment of four steps at once, which each lane takes."""
    raw = np.empty(CHUNK + SPARE, dtype=np.uint64)
    h0, l0 = _step(state_hi, state_lo, mul_hi, mul_lo, inc_hi, inc_lo)
    h1, l1 = _step(h0, l0, mul_hi, mul_lo, inc_hi, inc_lo)
    h2, l2 = _step(h1, l1, mul_hi, mul_lo, inc_hi, inc_lo)
    h3, l3 = _step(h2, l2, mul_hi, mul_lo, inc_hi, inc_lo)
    used, made, kept = 0, 0, 0  # kept: words of an unfinished normal carried to the front of raw
    while made < out.shape[0]:
        for k in range(kept, kept + CHUNK, 4):
            raw[k] = _output(h0, l0)
            raw[k + 1] = _output(h1, l1)
            raw[k + 2] = _output(h2, l2)
            raw[k + 3] = _output(h3, l3)
            h0, l0 = _step(h0, l0, lane_hi, lane_lo, shift_hi, shift_lo)
            h1, l1 = _step(h1, l1, lane_hi, lane_lo, shift_hi, shift_lo)
            h2, l2 = _step(h2, l2, lane_hi, lane_lo, shift_hi, shift_lo)
            h3, l3 = _step(h3, l3, lane_hi, lane_lo, shift_hi, shift_lo)
        n = kept + CHUNK
        made, i = _ziggurat(raw, n, out, made, wi, ki, fi, signs, r_tail, inv_r, to_unit)
        used += i
        kept = n - i
        if made < out.shape[0]:  # a normal's words run past the chunk: they start the next one
            left = raw[i:n].copy()
            if kept + CHUNK > raw.shape[0]:  # (never seen: a base-layer tail longer than SPARE words)
                raw = np.empty(kept + CHUNK, dtype=np.uint64)
            raw[:kept] = left
    return used
