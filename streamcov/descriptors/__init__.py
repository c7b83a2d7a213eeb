"""Descriptors: one vector per sequence or per image, from the covariance of its features.

* :mod:`.skeleton`: the log-covariance descriptor of skeleton sequences (paper 000);
* :mod:`.pixels`: per-pixel image features (paper 004, eq. (38));
* :mod:`.operators`: covariance operators of images and their distances
  (approximate and exact Log-HS, HS, E, LogE, Stein);
* :mod:`.image`: image descriptors as vectors;
* :mod:`.transformers`: the scikit-learn transformers :class:`LogCovariance`,
  :class:`CovarianceOperator` and :class:`RegionCovariance`.
"""
import importlib

_LOCATIONS = {"ImageDescriptor": ".image", "JointSelection": ".skeleton", "log_covariance_vectors": ".skeleton",
              "CovarianceOperator": ".transformers", "LogCovariance": ".transformers",
              "RegionCovariance": ".transformers"}

__all__ = sorted(_LOCATIONS)


def __getattr__(name):   # lazily: the functions do not pull in scikit-learn
    if name in _LOCATIONS:
        return getattr(importlib.import_module(_LOCATIONS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
