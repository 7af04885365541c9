"""Standard normals of a PCG64 generator, the very values of ``Generator.standard_normal``, compiled (issue 25).

NumPy draws a standard normal with a 256-layer ziggurat (Marsaglia & Tsang 2000): one 64-bit word
gives the layer (8 bits), the sign (1 bit) and a 52-bit magnitude, accepted at once about 99 % of the
time; a rejected word is followed by more words (a wedge test with one uniform, or, in the base layer,
the tail with pairs of uniforms) before a new word is tried. NumPy's loop branches on the random sign
bit, about half of which the processor mispredicts: 15-19 ns a normal on the project's 2-core machine,
against 2.6 ns for the raw word. :func:`standard_normal` reads the raw words of the generator in one
block (``bit_generator.random_raw``) and runs the same algorithm with the same tables over them in a
compiled loop without that branch, about 8 ns a normal: the same words, the same arithmetic (products,
comparisons, and for the rare rejections the same ``exp``/``log1p``), hence bit for bit the same
values, and the generator ends in the same state (``tests/test_normals.py`` compares both).

The words are taken as they are needed: a block of as many words as normals are still missing (each
normal takes at least one), then again for the normals that rejections left short, so no word is
drawn that NumPy would not draw. The ziggurat tables are NumPy's (copied into numba's
``numba.np.random._constants``); the first call checks the loop against ``standard_normal`` on a fixed
sample and uses NumPy's own draw whenever numba, its tables or that check fail, and for other bit
generators and short draws (below :data:`SHORT`), which are not worth loading numba for. numba is
imported on first use only.
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
    """``flat`` from the raw words of ``rng``, a block of as many words as normals are missing at a time."""
    fill, tables = kernel
    done, left = 0, np.empty(0, dtype=np.uint64)
    while done < flat.size:
        raw = rng.bit_generator.random_raw(flat.size - done)
        if left.size:  # the words of a normal that the previous block left unfinished
            raw = np.concatenate([left, raw])
        made, used = fill(raw, flat[done:], *tables)
        done += made
        left = raw[used:]


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
