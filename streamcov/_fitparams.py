"""Parameters of a fit: a transformer refuses to transform with parameters changed since its fit.

``set_params`` without a refit is legal in scikit-learn, but a transformer that
reads a parameter at ``transform`` (a map's bandwidth, its block size, a
descriptor's pixel features) would then mix the fit of one setting with
another; every transformer of streamcov records the parameters of its fit and
names the ones changed since.
"""
from __future__ import annotations

import copy

import numpy as np


def same(a, b) -> bool:
    """Whether two parameter values are equal: mappings and sequences item by item, arrays entry by entry;
    values that cannot be compared are taken as equal (a refusal must never come from the comparison itself,
    and fit keeps a deep copy, so identity says nothing)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.shape(a) == np.shape(b) and bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return True


class FitParams:
    """``transform`` works with the parameters of the fit: one changed since (``set_params`` without a
    refit) is refused, not half applied (a changed ``pixels`` met the fitted frequencies of the old
    features inside numpy; a changed ``center`` gave rows of another width than ``n_features_out_``).
    Transformers pickled before the parameters were recorded are not checked."""

    def _remember_params(self) -> None:
        self._fit_params = copy.deepcopy(self.get_params(deep=False))

    def _check_params_unchanged(self) -> None:
        before = getattr(self, "_fit_params", None)
        if before is None:
            return
        now = self.get_params(deep=False)
        # random_state is read by fit alone (its seed is seed_); a RandomState given is consumed there; an
        # estimator's own _PREDICT_PARAMS are read at predict and may change after fit (a solver's budget)
        free = ("random_state", *getattr(self, "_PREDICT_PARAMS", ()))
        changed = [k for k in before if k not in free and not same(before[k], now.get(k))]
        if changed:
            raise ValueError(f"{type(self).__name__}: {', '.join(changed)} changed since fit (set_params); call fit "
                             f"again, or set {'it' if len(changed) == 1 else 'them'} back to "
                             f"{', '.join(f'{k}={before[k]!r}' for k in changed)}")
