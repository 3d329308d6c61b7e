"""
On a GPU
========

The same kernel runs on CuPy arrays, compiled with ``numba.cuda.jit`` from the same rewritten
kernel as the CPU version: one thread per output element. This example is shown, not run,
when the site is built (the build machines have no GPU); it needs
``pip install 'stencilpipe[gpu]'`` and an NVIDIA GPU.
"""

import cupy
import dask.array as da
import numpy as np
from skimage import data

import stencilpipe as sp


@sp.stencil
def sharpen(x):
    return 5 * x[0, 0] - x[-1, 0] - x[1, 0] - x[0, -1] - x[0, 1]  # saturates to uint8


frame = data.camera()
on_device = cupy.asarray(frame)
sharpened = sharpen(on_device)  # CuPy in, CuPy out: the kernel ran on the GPU
assert isinstance(sharpened, cupy.ndarray)
# Integer kernels give the CPU's result bit for bit (float ones can differ in the last bits:
# the GPU fuses multiply-adds).
assert np.array_equal(sharpened.get(), sharpen(frame))

# %%
# A Dask stack whose chunks live on the GPU: moved once, filtered by a whole chain there, and
# moved back once.

stack = da.from_array(np.stack([frame] * 64), chunks=(8, -1, -1))
chain = sp.chain(sp.library.median(3), sharpen)
on_gpu = chain(sp.to_backend(stack, "cupy"))
result = sp.to_backend(on_gpu, "numpy").compute()
print(result.shape, result.dtype)

# %%
# From the command line, ``--gpu`` starts dask-cuda's ``LocalCUDACluster`` (one worker per GPU)
# and runs every stage on the device:
#
# .. code-block:: sh
#
#    stencilpipe apply gaussian:sigma=1,sobel:axis=0 "in/*.tif" out/ --gpu
