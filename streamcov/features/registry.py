"""Explicit feature maps by name, as pipeline files write them, and their data-dependent fits.

Every map targets the Gaussian kernel ``exp(-||x - y||^2 / (2 sigma^2))``
(:mod:`streamcov.kernels`): ``sigma`` is translated to ``gamma = 1 / (2
sigma^2)`` for the maps that take a gamma. With ``bandwidth = "median"`` the
given ``sigma`` is a multiple of the median pairwise distance of the rows
the map is fitted on (the median heuristic; paper 004 sets the bandwidth of
its kernel K2 so).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..kernels import distances, gamma_from_sigma, median_distance, sigma_from_gamma

# name -> (module, class)
MAPS = {
    "rgw": ("streamcov.features", "RGWSampler"),
    "rff": ("sklearn.kernel_approximation", "RBFSampler"),
    "rff-blocks": ("streamcov.features", "GaussianRandomFeatures"),
    # paper 004's conv + head kernel: rows [v, h], Gaussian on v times (1 - w) + w <h, h'>, tensor-sketched
    "rff-head": ("streamcov.features", "HeadProductSketch"),
    "orf": ("streamcov.features", "OrthogonalRBFSampler"),
    "qmc": ("streamcov.features", "QuasiRandomRBFSampler"),
    "maclaurin": ("streamcov.features", "RandomMaclaurinSampler"),
    "fastfood": ("streamcov.features", "FastfoodSampler"),
    "nystroem": ("sklearn.kernel_approximation", "Nystroem"),
    "none": (None, None),
}

# Options of RGWSampler that pipeline files share between maps; a map that
# does not take one ignores it (Maclaurin takes ``center`` and ``sampling``).
RGW_ONLY = ("theta", "sampling", "center", "max_degree")
# Options of the fit, not of the estimator.
FIT_OPTIONS = ("fit_sample", "bandwidth")
BANDWIDTHS = ("absolute", "median")


def map_class(name: str):
    """The estimator class of map ``name`` (None for ``"none"``)."""
    import importlib

    name = str(name).lower()
    if name not in MAPS:
        raise ConfigError(f"features.map {name!r} unknown; choose one of {', '.join(MAPS)}")
    module, cls_name = MAPS[name]
    return None if module is None else getattr(importlib.import_module(module), cls_name)


def needs_data(params: dict) -> bool:
    """Whether fitting the map reads rows, not only their width.

    Nystroem picks landmarks, a centred RGW or Maclaurin map its mean row and
    a median bandwidth its scale from data; the other random maps only need
    the input dimension.
    """
    name = str(params.get("map", "rgw")).lower()
    return (name == "nystroem" or (name in ("rgw", "maclaurin") and bool(params.get("center", False)))
            or params.get("bandwidth", "absolute") == "median")


def make_feature_map(params: dict, seed: int, sigma_scale: float = 1.0):
    """Build the transformer named by ``params["map"]`` (``none`` gives None).

    ``sigma`` (times ``sigma_scale``, the median distance of a median
    bandwidth) goes to the maps that take a sigma, and as ``gamma = 1 / (2
    sigma^2)`` to those that take a gamma, so every map targets the same
    Gaussian kernel of eq. (1) of paper 000.
    """
    params = {k: v for k, v in params.items() if k not in FIT_OPTIONS}
    name = str(params.pop("map", "rgw")).lower()
    cls = map_class(name)
    if cls is None:
        return None
    accepted = set(cls().get_params())
    kwargs = {}
    sigma = params.pop("sigma", None)
    if sigma is not None:
        sigma = float(sigma) * float(sigma_scale)
        if "sigma" in accepted:
            kwargs["sigma"] = sigma
        elif "gamma" in accepted:
            kwargs["gamma"] = gamma_from_sigma(sigma)
    if name == "nystroem":
        kwargs["kernel"] = "rbf"
    for key in ("gamma", "kernel"):   # set from sigma above: one bandwidth convention everywhere
        if key in params and key in kwargs:
            hint = (f"; for gamma = {params['gamma']} set sigma = {sigma_from_gamma(float(params['gamma'])):.6g}"
                    if key == "gamma" and isinstance(params["gamma"], (int, float)) and params["gamma"] > 0 else "")
            raise ConfigError(f"features.{key} is set by streamcov from features.sigma (every map targets "
                              f"exp(-||x - y||^2 / (2 sigma^2))); remove it{hint}")
    for key, value in params.items():
        if key not in accepted:
            if key in RGW_ONLY and name != "rgw":
                continue  # shared pipeline files carry RGW's own options
            import difflib

            close = difflib.get_close_matches(key, sorted(accepted), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"features.{key} is not a parameter of {cls.__name__}{hint} "
                              f"(accepted: {', '.join(sorted(accepted))})")
        kwargs[key] = value
    if "random_state" in accepted:
        kwargs["random_state"] = int(seed)
    return cls(**kwargs)


def fit_feature_map(params: dict, seed: int, n_features: int, sample: np.ndarray | None = None):
    """Build and fit the map of ``params``; returns ``(map or None, fit record)``.

    ``sample``: training rows, required when :func:`needs_data`; random maps
    only need the dimension (a zero row stands in). The record holds what
    was learned from data (the median distance of a median bandwidth).
    """
    record: dict = {}
    scale = 1.0
    if params.get("bandwidth", "absolute") == "median":
        if sample is None or len(sample) < 2:
            raise ConfigError("features.bandwidth = 'median' needs at least 2 training rows to measure "
                              "the median distance on")
        # a map of [v, h] rows measures the bandwidth of its Gaussian kernel on v only
        n_head = int(params.get("n_head", 0)) if str(params.get("map", "")).lower() == "rff-head" else 0
        scale = median_distance(distances(sample[:, :sample.shape[1] - n_head] if n_head else sample))
        record["median_distance"] = scale
        record["sigma"] = float(params.get("sigma", 1.0)) * scale
    fmap = make_feature_map(params, seed, scale)
    if fmap is None:
        return None, record
    if str(params.get("map", "rgw")).lower() != "rff-blocks":   # rff-blocks draws its frequencies per block
        from .._config import check_memory

        # a dense map holds n_components x n_features numbers (its frequencies or projections)
        n = int(params.get("n_components", 0))
        check_memory(8.0 * n * n_features, f"features.n_components = {n} on {n_features}-dimensional descriptors",
                     "lower features.n_components (or use map = \"rff-blocks\")")
    if needs_data(params):
        fmap.fit(sample)
    else:
        fmap.fit(np.zeros((1, n_features)))
    return fmap, record


def output_dim(fmap, n_features: int) -> int:
    return n_features if fmap is None else int(fmap.n_components)
