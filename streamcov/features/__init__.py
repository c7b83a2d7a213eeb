"""Explicit feature maps approximating the Gaussian kernel on (log-covariance) vectors.

Every map is a scikit-learn transformer with ``n_components`` and
``random_state``: the random map of paper 000's eq. (3) (:class:`RGWSampler`),
orthogonal and quasi-random Fourier features, random Maclaurin, Fastfood,
seeded-block random Fourier features for very wide inputs
(:class:`GaussianRandomFeatures`), the tensor sketch of paper 004's
conv + head product kernel (:class:`HeadProductSketch`), Nystroem features of a Gaussian kernel or of
a sum of them over column blocks (:class:`GaussianNystroem`), and a sum of Gaussian kernels over column
blocks by one map per block (:class:`BlockSumFeatures`). :mod:`.registry` names them as pipeline
files do. Names resolve lazily so ``import streamcov.features`` stays cheap.
"""
from __future__ import annotations

import importlib

_LOCATIONS = {
    "RGWSampler": "._rgw",
    "OrthogonalRBFSampler": "._fourier",
    "QuasiRandomRBFSampler": "._fourier",
    "RandomMaclaurinSampler": "._maclaurin",
    "FastfoodSampler": "._fastfood",
    "GaussianRandomFeatures": "._gaussian",
    "HeadProductSketch": "._product",
    "GaussianNystroem": "._nystroem",
    "BlockSumFeatures": ".registry",
    "MAPS": ".registry",
    "make_feature_map": ".registry",
    "fit_feature_map": ".registry",
    "needs_data": ".registry",
}

__all__ = sorted(_LOCATIONS)


def __getattr__(name):
    if name in _LOCATIONS:
        return getattr(importlib.import_module(_LOCATIONS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
