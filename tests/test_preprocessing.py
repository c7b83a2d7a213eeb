import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from streamcov.preprocessing import GlobalCenterScaler


@parametrize_with_checks([GlobalCenterScaler()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_streaming_pass_equals_one_fit(rng):
    X = rng.normal(loc=3.0, size=(500, 40))
    s = GlobalCenterScaler()
    for part in np.array_split(X, 7):
        s.partial_fit(part)
    whole = GlobalCenterScaler().fit(X)
    np.testing.assert_allclose(s.mean_, X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(s.scale_, whole.scale_, rtol=1e-10)
    Z = s.transform(X)
    # mean row removed, mean squared norm 1
    np.testing.assert_allclose(Z.mean(0), 0.0, atol=1e-12)
    assert np.mean((Z ** 2).sum(1)) == pytest.approx(1.0, rel=1e-10)


def test_rows_close_together_far_from_the_origin_keep_their_scale(rng):
    """E||x||^2 - ||mean||^2 cancels to <= 0 here (spread 1e-6 at 1e4), which left the data unscaled.
    Against the two-pass reference: the rows hold 1e4 to ~1e-12 absolute, so their deviations, and the
    scale, are known to ~1e-6 relative; 1e-5 allows for that, in one fit and in a stream of 7 batches."""
    X = 1e4 + 1e-6 * rng.standard_normal((500, 20))
    ref = np.sqrt(((X - X.mean(0)) ** 2).sum(1).mean())
    assert GlobalCenterScaler().fit(X).scale_ == pytest.approx(ref, rel=1e-5)
    s = GlobalCenterScaler()
    for part in np.array_split(X, 7):
        s.partial_fit(part)
    assert s.scale_ == pytest.approx(ref, rel=1e-5)
    assert GlobalCenterScaler().fit(np.full((5, 3), 7.0)).scale_ == 1.0    # equal rows: nothing to divide by


def test_preserves_the_kernel_up_to_one_factor(rng):
    """Centred Gram = H K H / s^2: differences of features keep their geometry."""
    X = rng.normal(size=(30, 12))
    s = GlobalCenterScaler().fit(X)
    Z = s.transform(X)
    d_raw = ((X[:, None] - X[None]) ** 2).sum(-1)
    d_new = ((Z[:, None] - Z[None]) ** 2).sum(-1)
    np.testing.assert_allclose(d_new * s.scale_ ** 2, d_raw, rtol=1e-10, atol=1e-10)


def test_errors():
    s = GlobalCenterScaler().fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="2 features"):
        s.transform(np.ones((3, 4)))
    # rows whose squared deviations overflow: the scale was inf and every transformed row 0, without a word
    with pytest.raises(ValueError, match=r"X: the squared deviations of its rows overflow float64 \(values up to "
                                         r"3e\+300\); scale X down"):
        GlobalCenterScaler().fit(np.array([[1e300, 0.0], [-3e300, 1.0]]))
    kept = GlobalCenterScaler().fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="overflow float64"):
        kept.partial_fit(np.array([[1e300, 0.0], [-3e300, 1.0]]))
    assert kept.n_samples_seen_ == 3 and kept.scale_ == 1.0   # a refused batch leaves the moments as they were
    first = GlobalCenterScaler()   # a refused first batch leaves it unfitted, free to take another width
    with pytest.raises(ValueError, match="overflow float64"):
        first.partial_fit(np.array([[1e300, 0.0], [-3e300, 1.0]]))
    assert not hasattr(first, "n_samples_seen_") and not hasattr(first, "n_features_in_")
    assert first.partial_fit(np.ones((3, 3))).n_features_in_ == 3
    from streamcov.stream.sgd import fit_scaler
    with pytest.raises(ValueError, match="model.scale must be none, standard or center"):
        fit_scaler(None, np.ones(3, bool), 1, "minmax")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_equal_to_rounding_are_refused(rng, dtype):
    """Rows a few units in the last place apart (a descriptor swamped by its regularization) are refused;
    rows far closer together than their size, but well above rounding, are kept: the threshold is
    ROUNDING_ULPS units of the rows' own dtype, in spread relative to size."""
    from streamcov.errors import ConfigError
    from streamcov.preprocessing import ROUNDING_ULPS, check_rows_differ

    def moments(X):
        X = X.astype(np.float64)
        return len(X), X.mean(0), ((X - X.mean(0)) ** 2).sum(0)

    eps = np.finfo(dtype).eps
    base = rng.normal(size=(1, 30)) * 1e3
    for rel, refused in [(ROUNDING_ULPS * eps / 4, True), (0.0, True), (100 * ROUNDING_ULPS * eps, False)]:
        X = base + rel * np.linalg.norm(base) / np.sqrt(30) * rng.normal(size=(50, 30))
        if refused:
            with pytest.raises(ConfigError, match=r"the 50 training rows' features are all equal to within "
                                                  r"rounding \(relative spread \S+\): nothing can be learned"):
                check_rows_differ(*moments(X), dtype)
        else:
            check_rows_differ(*moments(X), dtype)
    check_rows_differ(*moments(base), dtype)    # one row: no spread to speak of, not refused
