"""stencilpipe.ndmorph behind scipy.ndimage's signatures, for scipy's own morphology tests.

stencilpipe.ndmorph's binary functions take dask-image's parameter order
(``output=`` keyword-only); scipy's tests pass ``output`` positionally, so they run
against these wrappers, which only reorder arguments. The grey functions take
scipy's order already. The structure helpers the tests call are scipy's (they build
inputs; they are not under test).
"""

from __future__ import annotations

from scipy.ndimage import generate_binary_structure, iterate_structure  # noqa: F401

import stencilpipe.ndmorph as ndm
from stencilpipe.ndmorph import (  # noqa: F401  (scipy order already)
    grey_closing,
    grey_dilation,
    grey_erosion,
    grey_opening,
)

#: The functions under test (the port keeps the cases of these only).
TESTED = {
    "binary_erosion",
    "binary_dilation",
    "binary_opening",
    "binary_closing",
    "grey_erosion",
    "grey_dilation",
    "grey_opening",
    "grey_closing",
}


def _erosion_or_dilation(name):
    def wrapper(
        input,
        structure=None,
        iterations=1,
        mask=None,
        output=None,
        border_value=0,
        origin=0,
        brute_force=False,
        *,
        axes=None,
    ):
        return getattr(ndm, name)(
            input, structure, iterations, mask, border_value, origin, brute_force,
            output=output, axes=axes,
        )  # fmt: skip

    wrapper.__name__ = name
    return wrapper


def _opening_or_closing(name):
    def wrapper(
        input,
        structure=None,
        iterations=1,
        output=None,
        origin=0,
        mask=None,
        border_value=0,
        brute_force=False,
        *,
        axes=None,
    ):
        return getattr(ndm, name)(
            input, structure, iterations, origin, mask, border_value, brute_force,
            output=output, axes=axes,
        )  # fmt: skip

    wrapper.__name__ = name
    return wrapper


binary_erosion = _erosion_or_dilation("binary_erosion")
binary_dilation = _erosion_or_dilation("binary_dilation")
binary_opening = _opening_or_closing("binary_opening")
binary_closing = _opening_or_closing("binary_closing")
