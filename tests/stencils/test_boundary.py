"""The fold function against numpy.pad, for every index from far outside to far inside."""

import numpy as np
import pytest

from oracle import NUMPY_PAD_MODE
from stencilpipe.stencils.boundary import MODE_CODES, fold

FOLDING = sorted(set(MODE_CODES) - {"constant"})


@pytest.mark.parametrize("mode", FOLDING)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_a_fold_picks_the_element_numpy_pad_puts_there(mode, n):
    reach = 4 * n + 3  # several periods out: frames smaller than the halo
    padded = np.pad(np.arange(n), reach, mode=NUMPY_PAD_MODE[mode])
    folded = [fold(j, n, MODE_CODES[mode]) for j in range(-reach, n + reach)]
    assert folded == padded.tolist()


@pytest.mark.parametrize("n", [1, 2, 5])
def test_constant_reads_cval_outside_and_the_element_inside(n):
    reach = 2 * n + 1
    padded = np.pad(np.arange(n), reach, mode="constant", constant_values=-1)
    folded = [fold(j, n, MODE_CODES["constant"]) for j in range(-reach, n + reach)]
    assert folded == padded.tolist()
