"""What ``help()`` says of the estimators' fitted attributes is what a fit gives.

Every public estimator of the package is fitted on small data, in each of the settings that make an
attribute exist (``validation_fraction > 0``, ``center=True``, ...); the names listed under
``Attributes`` must all exist after one of these fits, and every public attribute ending in ``_``
that a fit sets must be listed.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator

import streamcov

_ENTRY = re.compile(r"^    ([A-Za-z_{}][\w{}]*(?:, [A-Za-z_{}][\w{}]*)*)(?: :|$)")


def _estimators() -> dict:
    found = {}
    for m in pkgutil.walk_packages(streamcov.__path__, "streamcov."):
        if m.name.endswith(("__main__", "_worker_preload")):
            continue
        mod = importlib.import_module(m.name)
        for name, obj in vars(mod).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseEstimator) and obj.__module__ == mod.__name__
                    and not name.startswith("_")):
                found[name] = obj
    return found


def documented(cls, section: str = "Attributes") -> list[str]:
    """The names of a section of ``cls``'s docstring (``a_, b_ : type`` gives two)."""
    doc = inspect.getdoc(cls) or ""
    lines = ("    " + line for line in doc.splitlines())   # getdoc strips the common indent: put it back
    names, inside = [], False
    for line in lines:
        stripped = line.strip()
        if inside and stripped and set(stripped) == {"-"}:
            continue
        if stripped == section:
            inside = True
            continue
        if inside and stripped in ("Parameters", "Attributes", "Notes", "Examples", "See Also", "References",
                                   "Methods"):
            break
        match = _ENTRY.match(line) if inside else None
        if match:
            names += match.group(1).split(", ")
    return names


def _data():
    rng = np.random.default_rng(0)
    X = rng.random((40, 6))
    y = np.repeat([0, 1], 20)
    Y = rng.random((40, 2))
    images = [rng.random((16, 16)) for _ in range(6)]
    return X, y, Y, images


def _fits(name: str, cls):
    """(estimator, fit arguments) for each setting that makes a documented attribute exist."""
    X, y, Y, images = _data()
    if name in ("CovarianceOperator", "RegionCovariance"):
        kw = {"n_frequencies": 5} if name == "CovarianceOperator" else {}
        return [(cls(**kw), (images,))]
    if name == "LogCovariance":
        return [(cls(), ([X[i:i + 10] for i in range(0, 40, 10)],))]
    if name == "LBFGSClassifier":
        return [(cls(), (X, y)), (cls(validation_fraction=0.25, random_state=0), (X, y))]
    if name == "GaussianKernelSVC":
        return [(cls(), (X, y))]
    if name in ("TwinGaussianProcess", "HSICKernelTransform"):
        return [(cls(random_state=0, **({"degree_input": 2, "degree_output": 2} if name == "HSICKernelTransform"
                                        else {})), (X, Y))]
    if name == "HeadProductSketch":
        return [(cls(n_components=16, n_head=2, random_state=0), (X,))]
    if name in ("RGWSampler", "RandomMaclaurinSampler"):
        return [(cls(n_components=8, random_state=0), (X,)), (cls(n_components=8, center=True, random_state=0), (X,))]
    if name == "BlockSumFeatures":
        return [(cls(n_components=8), (X,))]
    if name == "GaussianNystroem":
        return [(cls(n_components=8), (X,))]
    if name == "GlobalCenterScaler":
        return [(cls(), (X,))]
    return [(cls(n_components=8, random_state=0), (X,))]


def _fitted(est) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_") and not k.endswith("__")}


ESTIMATORS = _estimators()


def test_every_estimator_is_covered():
    # a new estimator is checked too: it joins ESTIMATORS by being a public BaseEstimator of the package
    assert {"LBFGSClassifier", "RGWSampler", "CovarianceOperator", "TwinGaussianProcess"} <= set(ESTIMATORS)
    assert all(documented(cls) for cls in ESTIMATORS.values()), \
        [n for n, cls in ESTIMATORS.items() if not documented(cls)]


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_documented_attributes_are_the_fitted_ones(name):
    cls = ESTIMATORS[name]
    patterns = [re.compile("^" + re.escape(n).replace(r"\{b\}", r"\d+") + "$") for n in documented(cls)]
    seen = set()
    for est, args in _fits(name, cls):
        est.fit(*args)
        got = _fitted(est)
        seen |= got
        undocumented = sorted(a for a in got if not any(p.match(a) for p in patterns))
        assert not undocumented, f"{name}: fitted but not under Attributes: {undocumented}"
    missing = sorted(n for n, p in zip(documented(cls), patterns) if not any(p.match(a) for a in seen))
    assert not missing, f"{name}: under Attributes but set by no fit: {missing}"


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_documented_parameters_are_the_signature(name):
    cls = ESTIMATORS[name]
    signature = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    assert documented(cls, "Parameters") == signature


def test_the_parser_reads_entries_of_two_names_and_templates():
    class Doc(BaseEstimator):
        """Doc.

        Parameters
        ----------
        p : int

        Attributes
        ----------
        a_, b_ : float
            Two.
        block{b}_ : object
        c_ : int

        Notes
        -----
        d_ : not an attribute
        """

    assert documented(Doc) == ["a_", "b_", "block{b}_", "c_"]
    assert documented(Doc, "Parameters") == ["p"]
