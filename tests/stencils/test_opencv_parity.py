"""The library's filters on uint8/uint16 against OpenCV's (an independent implementation),
under the same border mode: the pairs benchmarks/integer.py times side by side."""

import numpy as np
import pytest

import stencilpipe as sp

cv2 = pytest.importorskip("cv2")

#: stencilpipe's boundary modes and OpenCV's names for them.
BORDERS = {
    "reflect": cv2.BORDER_REFLECT,
    "mirror": cv2.BORDER_REFLECT_101,
    "nearest": cv2.BORDER_REPLICATE,
    "constant": cv2.BORDER_CONSTANT,  # cval 0, OpenCV's default border value
}

BOX = np.ones((3, 3), np.uint8)

#: name -> (stencilpipe filter, OpenCV on one frame with a border type).
PAIRS = {
    "mean 3x3": (sp.library.mean(3), lambda f, b: cv2.blur(f, (3, 3), borderType=b)),
    "sobel axis 0": (sp.library.sobel(0), lambda f, b: cv2.Sobel(f, -1, 0, 1, borderType=b)),
    "sobel axis 1": (sp.library.sobel(1), lambda f, b: cv2.Sobel(f, -1, 1, 0, borderType=b)),
    "laplace": (sp.library.laplace(), lambda f, b: cv2.Laplacian(f, -1, ksize=1, borderType=b)),
    "minimum 3x3": (
        sp.library.minimum(3),
        lambda f, b: cv2.erode(f, BOX, borderType=b, borderValue=0),
    ),
    "maximum 3x3": (
        sp.library.maximum(3),
        lambda f, b: cv2.dilate(f, BOX, borderType=b, borderValue=0),
    ),
}


def frames(dtype) -> np.ndarray:
    """A random stack of odd-sized frames, and frames of the extremes (the largest sums
    and differences: alternating rows and columns of the dtype's smallest and largest)."""
    top = np.iinfo(dtype).max
    rng = np.random.default_rng(7)
    stack = rng.integers(0, top, (4, 37, 53), dtype=dtype, endpoint=True)
    stack[1, ::2], stack[1, 1::2] = top, 0
    stack[2, :, ::2], stack[2, :, 1::2] = top, 0
    stack[3] = rng.choice(np.array([0, 1, top - 1, top], dtype), (37, 53))
    return stack


def opencv(call, stack: np.ndarray, border: int) -> np.ndarray:
    return np.stack([call(frame, border) for frame in stack])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("mode", list(BORDERS))
@pytest.mark.parametrize("name", list(PAIRS))
def test_filters_equal_opencv_bit_for_bit(name, mode, dtype):
    ours, theirs = PAIRS[name]
    stack = frames(dtype)
    want = opencv(theirs, stack, BORDERS[mode])
    np.testing.assert_array_equal(ours(stack, boundary=mode, cval=0), want)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_median_3x3_equals_opencv(dtype):
    """medianBlur's only border is replicate (nearest)."""
    stack = frames(dtype)
    want = np.stack([cv2.medianBlur(frame, 3) for frame in stack])
    np.testing.assert_array_equal(sp.library.median(3, boundary="nearest")(stack), want)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_gaussian_is_within_one_of_opencvs_fixed_point(dtype):
    """OpenCV's integer GaussianBlur rounds fixed-point weights; ours rounds scipy's float64
    sums (test_integer.py): the two differ by at most 1, on a few percent of the points."""
    stack = frames(dtype)
    want = opencv(
        lambda f, b: cv2.GaussianBlur(f, (5, 5), 1.0, borderType=b), stack, BORDERS["reflect"]
    )
    got = sp.library.gaussian(1.0, truncate=2.0)(stack)
    assert np.abs(got.astype(np.int64) - want).max() <= 1
