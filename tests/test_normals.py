"""netsim.engine.normals: the compiled ziggurat gives NumPy's standard normals bit for bit (issue 25)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.engine import normals


def pcg(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


@pytest.mark.parametrize("seed", [0, 7, 2020])
@pytest.mark.parametrize("size", [1, normals.SHORT - 1, normals.SHORT, 5001, 1_000_000])
def test_same_values_and_state_as_numpy(seed, size):
    theirs, mine = pcg(seed), pcg(seed)
    want = theirs.standard_normal(size)
    got = normals.standard_normal(mine, np.empty(size))
    assert np.array_equal(got, want)
    assert mine.bit_generator.state == theirs.bit_generator.state


def test_the_sample_exercises_every_branch_of_the_ziggurat():
    """1e6 words of seed 7 hold wedge rejections and base-layer tails (so the test above covers those paths)."""
    assert normals._kernel() is not None
    wi, ki = normals._kernel()[1][:2]
    raw = pcg(7).bit_generator.random_raw(1_000_000)
    idx, rabs = raw & np.uint64(0xFF), (raw >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
    rejected = rabs >= ki[idx.astype(np.int64)]
    assert (rejected & (idx == 0)).sum() > 50 and (rejected & (idx != 0)).sum() > 1000


def test_into_a_block_of_a_larger_array_and_in_pieces():
    """Rows of a 2-d array, drawn in two calls, equal one NumPy draw of all of them."""
    y = np.empty((5, 3000))
    g = pcg(3)
    normals.standard_normal(g, y[1:3])
    normals.standard_normal(g, y[3:])
    assert np.array_equal(y[1:], pcg(3).standard_normal((4, 3000)))


def test_other_generators_and_layouts_fall_back_to_numpy():
    philox = np.random.Generator(np.random.Philox(1))
    assert np.array_equal(normals.standard_normal(philox, np.empty(4000)),
                          np.random.Generator(np.random.Philox(1)).standard_normal(4000))
    with pytest.raises(ValueError, match="contiguous"):  # NumPy's own refusal of a strided out
        normals.standard_normal(pcg(1), np.empty((4000, 2))[:, 0])


def test_a_buffered_half_word_is_kept():
    """A generator holding half a word from a 32-bit draw keeps it (NumPy's normals never touch it)."""
    theirs, mine = pcg(11), pcg(11)
    for g in (theirs, mine):
        g.integers(0, 1000, dtype=np.uint32)
    want = theirs.standard_normal(5000)
    assert np.array_equal(normals.standard_normal(mine, np.empty(5000)), want)
    assert mine.bit_generator.state == theirs.bit_generator.state
    assert mine.integers(0, 2**32, dtype=np.uint32) == theirs.integers(0, 2**32, dtype=np.uint32)


def test_normals_whose_words_straddle_the_compiled_chunks():
    """Many seeds and lengths around the loop's chunk of words: rejected normals whose words run past a chunk
    (about 2 % of normals take more than one word) start the next chunk with those words."""
    from netsim.engine.normals_loop import CHUNK

    assert normals._kernel() is not None  # (a kernel failing its own check would fall back to NumPy's draw)
    for seed in range(150):
        size = CHUNK * (2 + seed % 5) + seed - 75
        theirs, mine = pcg(seed), pcg(seed)
        assert np.array_equal(normals.standard_normal(mine, np.empty(size)), theirs.standard_normal(size))
        assert mine.bit_generator.state == theirs.bit_generator.state
