"""Per-pixel features + region covariances of the Virus images: numba kernels vs scipy.

Usage: ``python benchmarks/image_features.py [--limit N] [--data PATH]``

The "virus" feature set of paper 004 (intensity, |Ix|, |Iy|, |Ixx|, |Iyy| and
20 Gabor magnitudes, 4 orientations x 5 scales, 39 x 39 filters) and the
25 x 25 covariance of every image, computed three ways side by side on the
same images (all 1500 by default):

* ``numba``: :func:`streamcov.descriptors.pixels.image_covariances`: one
  fused kernel per image (separable complex Gabor convolution, derivatives,
  covariance), images in parallel over the cores (and once more with one
  numba thread);
* ``ndimage`` (the straightforward version): ``scipy.ndimage.correlate1d`` for
  the derivatives, ``scipy.ndimage.convolve`` with the real and imaginary 2-D
  Gabor kernels, ``np.cov``;
* ``fftconvolve``: the same with the Gabor responses from
  ``scipy.signal.fftconvolve`` on the reflect-padded image (the public-layer
  alternative considered for the convolutions).

Keys of the final JSON line: ``speedup`` = ndimage seconds / numba seconds
(goal >= 5), ``speedup_single_thread`` (numba on one thread),
``speedup_vs_fftconvolve``, the timings, ``max_abs_diff`` between the numba and
ndimage covariances, the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from streamcov.data.imageio import load_folders  # noqa: E402
from streamcov.descriptors.pixels import gabor_bank, gabor_kernel_2d, image_covariances  # noqa: E402


def ndimage_covariance(img, kernels):
    from scipy import ndimage as ndi
    I = img.astype(np.float64) / 255.0
    planes = [I]
    for w in ([-1.0, 0.0, 1.0], [1.0, -2.0, 1.0]):
        planes.append(np.abs(ndi.correlate1d(I, w, axis=1, mode="reflect")))
        planes.append(np.abs(ndi.correlate1d(I, w, axis=0, mode="reflect")))
    planes = [planes[0], planes[1], planes[2], planes[3], planes[4]]
    for k in kernels:
        planes.append(np.hypot(ndi.convolve(I, k.real, mode="reflect"), ndi.convolve(I, k.imag, mode="reflect")))
    x = np.stack([p.ravel() for p in planes], axis=1)
    return np.cov(x.T, bias=True)


def fft_covariance(img, kernels):
    from scipy import ndimage as ndi
    from scipy.signal import fftconvolve
    I = img.astype(np.float64) / 255.0
    r = kernels.shape[1] // 2
    planes = [I]
    for w in ([-1.0, 0.0, 1.0], [1.0, -2.0, 1.0]):
        planes.append(np.abs(ndi.correlate1d(I, w, axis=1, mode="reflect")))
        planes.append(np.abs(ndi.correlate1d(I, w, axis=0, mode="reflect")))
    pad = np.pad(I, r, mode="symmetric")
    resp = fftconvolve(pad[None], kernels, mode="valid", axes=(1, 2))   # all 20 filters at once
    planes += list(np.abs(resp))
    x = np.stack([p.ravel() for p in planes], axis=1)
    return np.cov(x.T, bias=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "virus_kylberg" / "raw"))
    ap.add_argument("--limit", type=int, default=None, help="use the first N images only")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits
    import numba

    data = load_folders(args.data, group_level=2)
    images = data.images[:args.limit] if args.limit else data.images
    kernels = gabor_kernel_2d(4, 5, 0.25, 19)
    gabor_bank()  # import side effects out of the timings
    image_covariances(images[:2], "virus")  # JIT compile (cached) outside the timing

    t = time.perf_counter()
    fast = image_covariances(images, "virus")
    t_numba = time.perf_counter() - t
    prev = numba.get_num_threads()
    numba.set_num_threads(1)
    t = time.perf_counter()
    image_covariances(images, "virus")
    t_numba1 = time.perf_counter() - t
    numba.set_num_threads(prev)

    with threadpool_limits(limits=1):   # scipy.ndimage is single-threaded anyway
        t = time.perf_counter()
        slow = np.stack([ndimage_covariance(im, kernels) for im in images])
        t_nd = time.perf_counter() - t
        t = time.perf_counter()
        fftc = np.stack([fft_covariance(im, kernels) for im in images])
        t_fft = time.perf_counter() - t

    out = {
        "benchmark": "image_features",
        "n_images": len(images),
        "features": 25,
        "numba_seconds": round(t_numba, 3),
        "numba_single_thread_seconds": round(t_numba1, 3),
        "ndimage_seconds": round(t_nd, 3),
        "fftconvolve_seconds": round(t_fft, 3),
        "speedup": round(t_nd / t_numba, 2),
        "speedup_single_thread": round(t_nd / t_numba1, 2),
        "speedup_vs_fftconvolve": round(t_fft / t_numba, 2),
        "max_abs_diff": float(np.abs(fast - slow).max()),
        "max_abs_diff_fft": float(np.abs(fftc - slow).max()),
        "numba_threads": prev,
        "loadavg": os.getloadavg()[0],
        "goal_speedup": 5,
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
