import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import reference as ref
from streamcov.features import RGWSampler


@parametrize_with_checks([RGWSampler(n_components=20, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def unit_rows(rng, n, d):
    X = rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_w_is_never_formed_and_shapes(rng):
    X = unit_rows(rng, 5, 1653)
    m = RGWSampler(n_components=300, sigma=1.0, theta=0.5, random_state=0).fit(X)
    assert m.projections_.shape == (1653, m.degrees_.sum())
    assert m.transform(X).shape == (5, 300)
    assert m.transform(X.astype(np.float32)).dtype == np.float32


def test_degree_distribution_is_geometric(rng):
    theta = 0.3
    m = RGWSampler(n_components=20000, theta=theta, random_state=1).fit(np.zeros((1, 3)))
    # rho(n) = theta (1 - theta)^n: mean (1 - theta) / theta; 20000 draws give the
    # sample mean a standard error of sqrt(1 - theta)/theta/sqrt(20000) ~ 0.02.
    assert abs(m.degrees_.mean() - (1 - theta) / theta) < 5 * np.sqrt(1 - theta) / theta / np.sqrt(20000)
    assert abs(np.mean(m.degrees_ == 0) - theta) < 0.02


@pytest.mark.parametrize("sigma,theta", [(1.0, 0.5), (1.5, 0.3)])
def test_unbiased_on_unit_norm_inputs(rng, sigma, theta):
    """Theorem 1: E <Phi(x), Phi(y)> = exp(-||x - y||^2 / (2 sigma^2)) for unit-norm x, y.

    The mean of 400 independent maps must lie within 4 standard errors (measured
    from the same draws) of the exact kernel: a false alarm has probability < 1e-4
    under the central limit theorem.
    """
    X = unit_rows(rng, 2, 30)
    exact = ref.gaussian_gram(X, sigma)[0, 1]
    est = np.array([
        (lambda Z: Z[0] @ Z[1])(RGWSampler(n_components=200, sigma=sigma, theta=theta,
                                           random_state=s).fit_transform(X))
        for s in range(400)])
    se = est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.mean() - exact) < 4 * se, (est.mean(), exact, se)


def test_variance_decays_as_one_over_nu(rng):
    """The variance of the estimate falls as nu^-1 (not nu^-3 as Theorem 2 claims).

    Variance measured over 150 maps at each nu; the fitted log-log slope must lie
    in [-1.3, -0.7]: with 150 draws each variance carries ~12% relative error, so
    the slope over a 64x range of nu is known to about +-0.1; nu^-3 is far outside.
    """
    X = unit_rows(rng, 2, 30)
    nus = np.array([25, 100, 400, 1600])
    var = []
    for nu in nus:
        est = [(lambda Z: Z[0] @ Z[1])(RGWSampler(n_components=int(nu), sigma=1.0,
                                                  random_state=1000 * int(nu) + s).fit_transform(X))
               for s in range(150)]
        var.append(np.var(est, ddof=1))
    slope = np.polyfit(np.log(nus), np.log(var), 1)[0]
    assert -1.3 < slope < -0.7, slope


def test_gram_error_shrinks(rng):
    X = unit_rows(rng, 40, 50)
    K = ref.gaussian_gram(X, 1.0)
    err = []
    for nu in (200, 3200):
        Z = RGWSampler(n_components=nu, sigma=1.0, random_state=3).fit_transform(X)
        err.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
    # 16x the components: the 1/sqrt(nu) rate predicts a 4x smaller error; ask for 2.5x.
    assert err[1] < err[0] / 2.5, err


def test_parameter_errors():
    X = np.zeros((2, 3))
    with pytest.raises(ValueError, match="n_components"):
        RGWSampler(n_components=0).fit(X)
    with pytest.raises(ValueError, match="theta"):
        RGWSampler(theta=1.0).fit(X)
    with pytest.raises(ValueError, match="sigma"):
        RGWSampler(sigma=-1.0).fit(X)
    m = RGWSampler(n_components=5, random_state=0).fit(X)
    with pytest.raises(ValueError, match="3 features"):
        m.transform(np.zeros((2, 4)))


@pytest.mark.parametrize("sampling", ["iid", "stratified"])
def test_a_plan_or_projections_beyond_memory_are_refused_before_they_are_made(sampling):
    """max_degree = 10**9 built degree arrays of 8 GB each until the process was killed for memory;
    n_components = 10**12 was numpy's MemoryError. Both are refused in one line naming the value."""
    from streamcov.errors import ConfigError

    X = np.ones((3, 4))
    with pytest.raises(ConfigError, match=r"^max_degree = 1000000000000: needs [\d.]+ TiB of memory, this process "
                                          r"may use .*; lower max_degree"):
        RGWSampler(max_degree=10 ** 12, sampling=sampling).fit(X)
    with pytest.raises(ConfigError, match=r"^n_components = 1000000000000: needs [\d.]+ TiB of memory, .*; lower "
                                          r"n_components$"):
        RGWSampler(n_components=10 ** 12, sampling=sampling).fit(X)


def test_a_tiny_theta_is_a_law_cut_at_max_degree_not_an_infinite_map():
    """theta = 1e-320 has an infinite untruncated mean degree: a map of 20 features was refused as needing
    infinite memory, blaming n_components. The law is cut at max_degree, so its degrees are at most that."""
    from streamcov.features import RGWSampler
    from streamcov.features.registry import projection_columns

    assert projection_columns({"map": "rgw", "theta": 1e-320, "max_degree": 7}) == 7.0
    X = np.random.default_rng(0).standard_normal((6, 3)) / 3
    m = RGWSampler(theta=1e-320, n_components=20, max_degree=7, random_state=0).fit(X)
    assert m.degrees_.max() <= 7 and np.isfinite(m.transform(X)).all()


def test_a_series_cut_below_the_rows_norm_is_said_and_its_bias_is_the_poisson_tail():
    """max_degree cuts eq. (3)'s Taylor series: the map is unbiased for the cut series, whose relative loss at a
    diagonal entry is P(Poisson(|x|^2 / sigma^2) > max_degree). Checked here without the map's sampler: the cut
    series sum_{n <= N} t^n / n! against e^t. Uncentred unit vectors at sigma 0.125 lose 96% of the diagonal at
    the default N = 50, which the fit now says; at sigma 0.2 it is below 1e-5 and said nothing."""
    import math
    import warnings

    t = 1 / 0.125 ** 2
    cut = sum(t ** n / math.factorial(n) for n in range(51)) / math.exp(t)
    assert 1 - cut == pytest.approx(0.9582786, abs=1e-6)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 10))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    with pytest.warns(UserWarning, match=r"^RGWSampler: the series of eq\. \(3\) is cut after degree max_degree=50, "
                                         r"which misses 95\.8% of the kernel's diagonal at the training row of largest "
                                         r"norm \(\|x\|\^2 / sigma\^2 = 64\); raise max_degree to 91 or raise sigma, or "
                                         r"center the rows \(center=True\)$"):
        RGWSampler(n_components=20, sigma=0.125, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RGWSampler(n_components=20, sigma=0.2, random_state=0).fit(X)
        RGWSampler(n_components=20, sigma=0.125, max_degree=91, random_state=0).fit(X)


def test_a_pipelines_map_is_checked_for_a_cut_series_on_training_rows_block_by_block():
    """A map of the pyramid's windows (BlockSumFeatures of RGW maps, two views: the mirror) drawn from the width
    alone: :func:`check_map_on_rows` finds the block whose rows the cut series misses, in the [features] table's
    words, and says nothing where every block's series reaches the rows' norms. The map's own fit on its
    sample says nothing in its class's words (one warning, not two)."""
    import warnings

    from streamcov.features.registry import check_map_on_rows, fit_feature_map

    rng = np.random.default_rng(0)
    small = rng.standard_normal((40, 6)) * 0.01      # block 0: |x|^2 / sigma^2 far below degree 3
    large = rng.standard_normal((40, 4))
    large /= np.linalg.norm(large, axis=1, keepdims=True)   # block 1: unit rows, |x|^2 / sigma^2 = 64 at sigma 0.125
    view = np.hstack([small, large])
    X = np.hstack([view, view[::-1]])   # two views of every row
    params = {"map": "rgw", "n_components": 40, "sigma": 0.125, "max_degree": 3, "center": False,
              "blocks": [[6, 1.0], [4, 1.0]], "views": 2}
    fmap, _ = fit_feature_map(params, 0, X.shape[1])   # drawn from the width: nothing to say yet
    with pytest.warns(UserWarning, match=r"^features\.max_degree = 3: the series of eq\. \(3\) is cut after degree "
                                         r"3, which misses 100\.0% of the kernel's diagonal at the training row of "
                                         r"largest norm \(\|x\|\^2 / sigma\^2 = 64\); raise features\.max_degree to "
                                         r"91 or raise features\.sigma, or center the rows \(features\.center = "
                                         r"true\)$") as said:
        check_map_on_rows(params, fmap, X)
    assert len(said) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_map_on_rows(params, fmap, np.hstack([small, small[:, :4], small, small[:, :4]]))
    # centred and fitted on the rows: the fit's own warning is replaced by the table's
    centred = {**params, "center": True}
    with pytest.warns(UserWarning) as said:
        fit_feature_map(centred, 0, X.shape[1], sample=X * 3.0)
    assert [str(w.message).split(":")[0] for w in said] == ["features.max_degree = 3"], [str(w.message) for w in said]
