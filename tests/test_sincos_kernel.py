"""The vectorized cos/sin kernel of the approximate covariance operators against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcov._kernels.fourier import MAX_PHASE, sincos_rows
from streamcov.descriptors.operators import _cos_sin


def _run(z):
    z = np.ascontiguousarray(z, dtype=np.float64)
    co, si = np.empty_like(z), np.empty_like(z)
    return sincos_rows(z, co, si), co, si


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e4])
def test_matches_numpy_to_roundoff(scale):
    # Tolerance: |error| <= 2.5e-16 absolute (values in [-1, 1]): Cody-Waite
    # reduction with a 33 + 53-bit pi/2 keeps the reduced argument exact to
    # ~1e-16 * |k| * 2**-33 for |k| < 2**19, and fdlibm's kernels are < 1 ulp.
    z = np.random.default_rng(0).standard_normal((64, 257)) * scale
    ok, co, si = _run(z)
    assert ok
    np.testing.assert_allclose(co, np.cos(z), rtol=0, atol=2.5e-16)
    np.testing.assert_allclose(si, np.sin(z), rtol=0, atol=2.5e-16)


def test_quadrant_boundaries_and_signs():
    k = np.arange(-2000, 2001, dtype=np.float64)
    z = np.concatenate([k * np.pi / 2, k * np.pi / 4, -0.0 * k[:1], [MAX_PHASE, -MAX_PHASE]])[None]
    ok, co, si = _run(z)
    assert ok
    np.testing.assert_allclose(co, np.cos(z), rtol=0, atol=2.5e-16)
    np.testing.assert_allclose(si, np.sin(z), rtol=0, atol=2.5e-16)
    # pythagoras holds to round-off wherever the reduction is exact
    np.testing.assert_allclose(co ** 2 + si ** 2, 1.0, rtol=0, atol=5e-16)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-MAX_PHASE, max_value=MAX_PHASE, allow_nan=False), min_size=1,
                max_size=40))
def test_any_phase_in_range(values):
    z = np.array(values)[None]
    ok, co, si = _run(z)
    assert ok
    np.testing.assert_allclose(co, np.cos(z), rtol=0, atol=2.5e-16)
    np.testing.assert_allclose(si, np.sin(z), rtol=0, atol=2.5e-16)


def test_out_of_range_and_nan_are_reported_and_handled_by_numpy():
    z = np.array([[0.5, 2 * MAX_PHASE, np.nan, -1e12, np.inf]])
    ok, _, _ = _run(z)
    assert not ok
    with pytest.warns(RuntimeWarning, match="invalid value encountered"):  # inf phase: NaN, not silent
        co, si = _cos_sin(z)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(co, np.cos(z))
        np.testing.assert_array_equal(si, np.sin(z))
