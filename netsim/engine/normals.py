"""Standard normals of a PCG64 generator, the very values of ``Generator.standard_normal``, compiled (issue 25).

NumPy draws a standard normal with a 256-layer ziggurat (Marsaglia & Tsang 2000): one 64-bit word
gives the layer (8 bits), the sign (1 bit) and a 52-bit magnitude, accepted at once about 99 % of the
time; a rejected word is followed by more words (a wedge test with one uniform, or, in the base layer,
the tail with pairs of uniforms) before a new word is tried. NumPy's loop calls the generator once per
word and branches on the random sign bit, about half of which the processor mispredicts: 15-19 ns a
normal on the project's 2-core machine. :func:`standard_normal` runs the same algorithm with the same
tables in a compiled loop without that branch, over words it generates itself: PCG64's own recurrence
and output (the generator's state and increment are read from ``bit_generator.state``), in four
interleaved lanes so that successive 128-bit multiplications do not wait for each other
(:mod:`netsim.engine.normals_loop`). The same words, the same arithmetic (products, comparisons, and for
the rare rejections the same ``exp``/``log1p``), hence bit for bit the same values; the generator is then
advanced by exactly the words used (``PCG64.advance``, its buffered 32-bit half kept), so it ends in the
state NumPy leaves (``tests/test_normals.py`` compares both).

The ziggurat tables are NumPy's (copied into numba's ``numba.np.random._constants``); the first call
checks the loop against ``standard_normal`` on a fixed sample and uses NumPy's own draw whenever numba,
its tables or that check fail, and for other bit generators and short draws (below :data:`SHORT`), which
are not worth loading numba for. numba is imported on first use only.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

SHORT = 2048  # normals below which a draw is NumPy's own (loading numba is not worth it)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2^-53: NumPy's next_double of a PCG64 word (its top 53 bits)


def standard_normal(rng: np.random.Generator, out: np.ndarray) -> np.ndarray:
    """Fill the C-contiguous float64 array ``out`` as ``rng.standard_normal(out=out)`` does (same values, same
    final generator state) and return it."""
    kernel = _kernel() if out.size >= SHORT and isinstance(rng.bit_generator, np.random.PCG64) else None
    if kernel is None or not out.flags.c_contiguous or out.dtype != np.float64:
        return rng.standard_normal(out=out)
    _fill(kernel, rng, out.reshape(-1))
    return out


def _fill(kernel: tuple[Any, tuple], rng: np.random.Generator, flat: np.ndarray) -> None:
    """``flat`` from the words of ``rng``'s PCG64, which is then advanced past the words used."""
    fill, tables = kernel
    generator = rng.bit_generator
    before = generator.state
    state, inc = before["state"]["state"], before["state"]["inc"]
    used = fill(flat, *_halves(state), *_halves(inc), *_halves(_MULTIPLIER), *_halves(_FOUR),
                *_halves(_FOUR_INC * inc % _MOD), *tables)
    generator.advance(used)
    if before["has_uint32"]:  # advance drops the buffered half of a word that NumPy's normals leave alone
        after = generator.state
        after["has_uint32"], after["uinteger"] = before["has_uint32"], before["uinteger"]
        generator.state = after


def _halves(value: int) -> tuple[np.uint64, np.uint64]:
    """A 128-bit integer as its (high, low) 64-bit halves."""
    return np.uint64(value >> 64), np.uint64(value & 0xFFFFFFFFFFFFFFFF)


_MOD = 1 << 128
_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645  # PCG64's 128-bit LCG multiplier (NumPy's pcg64.h)
# four steps s -> a s + c at once: s -> a^4 s + (1 + a + a^2 + a^3) c (each lane of the compiled loop takes these)
_FOUR = _MULTIPLIER**4 % _MOD
_FOUR_INC = (1 + _MULTIPLIER + _MULTIPLIER**2 + _MULTIPLIER**3) % _MOD


@cache
def _kernel() -> tuple[Any, tuple] | None:
    """The compiled loop and NumPy's tables, or None (numba or the tables missing, or the check failed)."""
    try:
        from numba.np.random._constants import fi_double, ki_double, wi_double, ziggurat_nor_inv_r, ziggurat_nor_r

        from netsim.engine.normals_loop import fill
    except ImportError:  # pragma: no cover (numba is a dependency)
        return None
    tables = (np.asarray(wi_double, dtype=np.float64), np.asarray(ki_double, dtype=np.uint64),
              np.asarray(fi_double, dtype=np.float64), np.array([1.0, -1.0]), float(ziggurat_nor_r),
              float(ziggurat_nor_inv_r), _TO_UNIT)
    kernel = (fill, tables)
    if not _agrees(kernel):  # pragma: no cover (tables that are no longer NumPy's)
        return None
    return kernel


def _agrees(kernel: tuple[Any, tuple]) -> bool:
    """The loop gives NumPy's values and final state on a fixed sample (20,000 normals: tails and wedges included)."""
    mine, theirs = (np.random.Generator(np.random.PCG64(20201127)) for _ in range(2))
    want, got = theirs.standard_normal(20000), np.empty(20000)
    _fill(kernel, mine, got)
    return bool(np.array_equal(got, want)) and mine.bit_generator.state == theirs.bit_generator.state
