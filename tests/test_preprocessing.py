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
    from streamcov.stream.sgd import fit_scaler
    with pytest.raises(ValueError, match="model.scale must be none, standard or center"):
        fit_scaler(None, np.ones(3, bool), 1, "minmax")
