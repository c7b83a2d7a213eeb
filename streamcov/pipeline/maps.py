"""Feature maps by name, as written in pipeline files."""
from __future__ import annotations

import numpy as np

from .config import ConfigError

# name -> (module, class); all approximate exp(-||x - y||^2 / (2 sigma^2)).
MAPS = {
    "rgw": ("streamcov.features", "RGWSampler"),
    "rff": ("sklearn.kernel_approximation", "RBFSampler"),
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


def needs_data(params: dict) -> bool:
    """Nystroem picks landmarks and a centred RGW or Maclaurin map its mean row
    from data; the other random maps only need the input dimension."""
    name = str(params.get("map", "rgw")).lower()
    return name == "nystroem" or (name in ("rgw", "maclaurin") and bool(params.get("center", False)))


def make_feature_map(params: dict, seed: int):
    """Build the transformer named by ``params["map"]`` (``none`` gives None).

    ``sigma`` is translated to ``gamma = 1 / (2 sigma^2)`` for maps that take
    a gamma, so every map targets the same Gaussian kernel of eq. (1).
    """
    import importlib

    params = dict(params)
    name = str(params.pop("map", "rgw")).lower()
    if name not in MAPS:
        raise ConfigError(f"features.map {name!r} unknown; choose one of {', '.join(MAPS)}")
    if name == "none":
        return None
    module, cls_name = MAPS[name]
    cls = getattr(importlib.import_module(module), cls_name)
    accepted = set(cls().get_params())
    kwargs = {}
    sigma = params.pop("sigma", None)
    if sigma is not None:
        if "sigma" in accepted:
            kwargs["sigma"] = float(sigma)
        elif "gamma" in accepted:
            kwargs["gamma"] = 1.0 / (2.0 * float(sigma) ** 2)
    if name == "nystroem":
        kwargs["kernel"] = "rbf"
    for key, value in params.items():
        if key not in accepted:
            if key in RGW_ONLY and name != "rgw":
                continue  # shared pipeline files carry RGW's own options
            raise ConfigError(f"features.{key} is not a parameter of {cls_name} "
                              f"(accepted: {sorted(accepted)})")
        kwargs[key] = value
    if "random_state" in accepted:
        kwargs["random_state"] = int(seed)
    return cls(**kwargs)


def fit_feature_map(fmap, n_features: int, sample: np.ndarray | None = None):
    """Fit a map; random maps only need the dimension (a zero row stands in)."""
    if fmap is None:
        return None
    X = sample if sample is not None else np.zeros((1, n_features))
    return fmap.fit(X)


def output_dim(fmap, n_features: int) -> int:
    return n_features if fmap is None else int(fmap.n_components)
