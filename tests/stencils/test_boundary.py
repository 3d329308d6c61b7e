"""The fold functions against numpy.pad, for every index from far outside to far inside."""

import numpy as np
import pytest

from oracle import NUMPY_PAD_MODE
from stencilpipe.stencils.boundary import FOLDS


@pytest.mark.parametrize("mode", sorted(FOLDS))
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_a_fold_picks_the_element_numpy_pad_puts_there(mode, n):
    reach = 4 * n + 3  # several periods out: frames smaller than the halo
    padded = np.pad(np.arange(n), reach, mode=NUMPY_PAD_MODE[mode])
    folded = [FOLDS[mode](j, n) for j in range(-reach, n + reach)]
    assert folded == padded.tolist()
