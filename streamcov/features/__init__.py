"""Explicit feature maps approximating kernels on (log-covariance) vectors.

Every map is a scikit-learn transformer with ``n_components`` and
``random_state``. Names resolve lazily so ``import streamcov.features`` stays
cheap.
"""
from __future__ import annotations

import importlib

_LOCATIONS = {
    "RGWSampler": "._rgw",
    "OrthogonalRBFSampler": "._fourier",
    "QuasiRandomRBFSampler": "._fourier",
    "RandomMaclaurinSampler": "._maclaurin",
    "FastfoodSampler": "._fastfood",
}

__all__ = sorted(_LOCATIONS)


def __getattr__(name):
    if name in _LOCATIONS:
        return getattr(importlib.import_module(_LOCATIONS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
