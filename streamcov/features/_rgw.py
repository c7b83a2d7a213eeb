"""Random feature map of paper 000 (Cavazza et al.), eq. (3)."""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from scipy.special import gammaln
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import run_parallel
from .._fitparams import FitParams
from .._kernels.products import grouped_products
from ..errors import ConfigError
from ..kernels import _bandwidth, gaussian_kernel
from ._fourier import check_map_memory
from ._series import CutSeriesWarning, cut_series


class RGWSampler(FitParams, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Explicit feature map for the Log-Euclidean Gaussian kernel (paper 000, eq. (3)).

    Approximates ``k(x, y) = exp(-||x - y||^2 / (2 sigma^2))`` for inputs of
    unit Euclidean norm, e.g. unit-Frobenius-norm ``vec(log X)`` of SPD
    matrices (eq. (1)). Component ``j`` draws a degree ``n_j ~ rho`` with
    ``rho(n) = theta (1 - theta)^n`` and ``n_j`` independent Gaussian
    projections ``u_a ~ N(0, sigma^2 I)``::

        Phi_j(x) = sigma^(-2 n) sqrt(exp(-1/sigma^2) / (nu rho(n) n!)) prod_a <u_a, x>

    This is eq. (3) with the weight tensor ``W`` of size ``d^n x d^n``
    replaced, as in the proof of Theorem 1, by ``n`` independent Gaussian
    matrices; on vectorized symmetric matrices (off-diagonals times sqrt 2)
    ``<U, log X>_F`` is exactly a Gaussian projection of ``vec(log X)``, so
    ``W`` is never formed. ``E <Phi(x), Phi(y)> = k(x, y)`` when
    ``||x|| = ||y|| = 1`` (Theorem 1). The variance of the estimate decays as
    ``1/nu`` (not ``1/nu^3`` as stated in Theorem 2) and grows quickly as
    sigma shrinks (bound ``exp((3 - 2 sigma^2) / sigma^4)``), so sigma below
    about 1 needs many components.

    Parameters
    ----------
    n_components : int, default=100
        Number of features ``nu``.
    sigma : float, default=1.0
        Kernel bandwidth. With ``center=False``, for one ``random_state``, it
        only rescales each feature column (the degrees do not depend on it,
        the projections are ``sigma`` times the same Gaussian draws; with
        ``center=True`` each row also gets ``k(x', 0)``): a per-column scaler after
        the map (``StandardScaler``, a pipeline's ``model.scale = "standard"``)
        undoes it, and a grid over sigma then scores every value alike. Keep
        the kernel with :class:`~streamcov.preprocessing.GlobalCenterScaler`.
    theta : float, default=0.5
        Parameter of the geometric degree distribution, in (0, 1). Larger
        theta gives lower degrees (cheaper) but a larger variance constant
        ``C_rho`` (eq. (6)).
    max_degree : int, default=50
        Degrees are drawn from the geometric law truncated at ``max_degree``
        (probability mass beyond it is below ``(1 - theta)^51``; the weights
        use the truncated law). The estimate is then unbiased for the Taylor
        series of eq. (3) cut after degree ``max_degree``, not for the whole
        kernel: the relative bias of an entry is the probability that a
        Poisson variable of mean ``<x, y> / sigma^2`` (of the centred inputs
        with ``center=True``) exceeds ``max_degree``. At the default it is
        below 1e-5 while ``<x, y> / sigma^2 <= 25`` (unit vectors:
        ``sigma >= 0.2``); uncentred unit vectors at ``sigma = 0.125`` lose
        most of the diagonal (the mean is 64).
    sampling : {"iid", "stratified"}, default="iid"
        How the degrees are allocated. ``"iid"`` is the paper's scheme: each
        component draws its degree from ``rho``. ``"stratified"`` is an
        unbiased variance-reducing variant: the degree-0 term, a constant
        with no variance, gets exactly one component carrying its exact
        weight ``exp(-1/(2 sigma^2))``; the other ``nu - 1`` components get
        degree ``n >= 1`` deterministically ``floor((nu - 1) q(n))`` times,
        ``q = rho`` conditioned on ``n >= 1``, and the remaining few draw
        their degree i.i.d. from the leftover fractions. Every degree then
        has expected count ``m_n = (nu - 1) q(n)`` and its components carry
        ``1 / m_n`` in place of ``1 / (nu rho(n))`` in eq. (3), so the
        estimate stays exactly unbiased; only the random degree counts (and
        the constant components that ``"iid"`` spends on ``n = 0``) go away.
    center : bool, default=False
        If True, ``fit`` stores the mean of X and the map is applied to
        ``x' = x - mean_`` with the exact factor ``exp(-||x'||^2 / (2 sigma^2))``
        in place of ``exp(-1 / (2 sigma^2))``. Since
        ``k(x, y) = exp(-||x'||^2/(2 sigma^2)) exp(-||y'||^2/(2 sigma^2)) exp(<x', y'>/sigma^2)``,
        the estimate is unbiased for the same Gaussian kernel for inputs of
        any norm (the kernel is translation invariant; the expansion of
        Theorem 1 is applied to ``exp(<x', y'> / sigma^2)``). For data
        concentrated around its mean, e.g. unit-norm log-covariance vectors
        of one dataset, ``<x', y'>`` is small and the variance of the
        products drops by orders of magnitude.
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    degrees_ : ndarray of shape (n_components,)
        Degree ``n_j`` of each component.
    projections_ : ndarray of shape (n_features_in_, sum(degrees_))
        Stacked Gaussian projection vectors, grouped by component.
    group_start_ : ndarray of shape (n_components + 1,)
        Component ``j`` uses columns ``group_start_[j]:group_start_[j+1]``.
    scale_ : ndarray of shape (n_components,)
        The normalization constant of eq. (3) for each component (with
        ``center=True``, without the factor ``exp(-1 / (2 sigma^2))``, which
        ``transform`` replaces by the per-sample ``exp(-||x'||^2 / (2 sigma^2))``).
    mean_ : ndarray of shape (n_features_in_,)
        The mean of the fitted X (only with ``center=True``).
    n_features_in_ : int
    """

    # the only fitted array that depends on the rows of ``fit``; the rest is drawn from random_state
    # (a feature store keeps this one and draws the others again: streamcov.stream.featurestore)
    _data_arrays = ("mean_",)

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "theta": [Interval(Real, 0, 1, closed="neither")],
        "max_degree": [Interval(Integral, 0, None, closed="left")],
        "sampling": [StrOptions({"iid", "stratified"})],
        "center": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components=100, sigma=1.0, theta=0.5, max_degree=50, sampling="iid",
                 center=False, random_state=None):
        self.n_components = n_components
        self.sigma = sigma
        self.theta = theta
        self.max_degree = max_degree
        self.sampling = sampling
        self.center = center
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw degrees and projections from the number of features of X (and its mean with ``center=True``);
        warns when ``max_degree`` cuts the series where X's rows lie (:func:`_warn_cut_series`)."""
        X = validate_data(self, X, accept_sparse=False, dtype=[np.float64, np.float32])
        rng = check_random_state(self.random_state)
        d = X.shape[1]
        theta = float(self.theta)
        n = int(self.n_components)   # True passed the Integral constraint and reached numpy as a bool
        _check_room(n, int(self.max_degree), theta, self.sampling, d)
        plan = _degree_plan(n, theta, self.max_degree, self.sampling)
        degrees = _draw_degrees(plan, rng)
        group_start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(degrees, out=group_start[1:])
        total = int(group_start[-1])
        s2 = _bandwidth(self.sigma, "sigma") ** 2   # 1e-300 was a ZeroDivisionError, 1e300 an OverflowError
        # u_a ~ N(0, sigma^2 I); the sigma^(-2n) of eq. (3) is folded into the
        # scale so projections stay O(1) and products do not overflow.
        projections = rng.standard_normal((d, total))
        projections *= math.sqrt(s2)   # in place: the same numbers without a second matrix of this size
        self.projections_ = projections
        norm_term = 0.0 if self.center else -1.0 / s2
        log_scale = (-degrees * math.log(s2)
                     + 0.5 * (norm_term - plan.log_expected_count[degrees] - gammaln(degrees + 1.0)))
        self.scale_ = np.exp(log_scale)
        if self.center:
            self.mean_ = X.mean(axis=0, dtype=np.float64)
        _warn_cut_series(X, self.mean_ if self.center else None, s2, int(self.max_degree), type(self).__name__)
        self.degrees_ = degrees
        self.group_start_ = group_start
        self._n_features_out = n   # get_feature_names_out: rgwsampler0, ...
        self._remember_params()
        return self

    def transform(self, X):
        """Map X of shape (n_samples, n_features) to (n_samples, n_components)."""
        check_is_fitted(self)
        self._check_params_unchanged()
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        dtype = X.dtype
        proj = self.projections_.astype(dtype, copy=False)
        if self.center:
            X = X - self.mean_.astype(dtype, copy=False)
        z = np.ascontiguousarray(X @ proj)
        out = np.empty((X.shape[0], len(self.scale_)), dtype=dtype)
        sq = np.einsum("ij,ij->i", X, X, dtype=np.float64) if self.center else None
        return product_features(z, self.group_start_, self.scale_, out, sq, self.sigma, type(self).__name__, X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _warn_cut_series(X, mean, s2: float, max_degree: int, name: str) -> None:
    """Warn (:class:`CutSeriesWarning`) of what :func:`cut_series` finds at the rows a map is fitted on."""
    said = cut_series(X, mean, s2, max_degree)
    if said is not None:
        import warnings

        warnings.warn(f"{name}: {said}", CutSeriesWarning,
                      stacklevel=4)   # the caller of fit (wrapped once by scikit-learn)


def product_features(z, starts, scales, out, sq, sigma: float, name: str, rows=None):
    """``out`` = the grouped products of the projections ``z`` (:func:`grouped_products`), times
    ``k(x', 0)`` where ``sq`` (squared norms of the rows) is given; a ValueError when a feature is not
    finite, which names a non-finite input row (``rows``: the rows projected) as such. The degrees of a
    Maclaurin-type map reach tens: inputs of large norm overflow, and a NaN would otherwise flow silently into
    a learner."""
    starts = np.asarray(starts)
    # grouped_products reads z[:, starts[j]:starts[j + 1]] without bounds checks: the fitted arrays (a model file's,
    # edited) must give each feature a slice within z's columns, one per output column
    if (starts.ndim != 1 or starts.dtype.kind not in "iu" or np.ndim(scales) != 1 or len(scales) != out.shape[1]
            or len(starts) != len(scales) + 1 or starts[0] != 0 or starts[-1] != z.shape[1]
            or (np.diff(starts) < 0).any()):
        raise ValueError(f"{name}: the fitted group starts ({starts.dtype} array of shape {starts.shape}) do not "
                         f"split its {z.shape[1]} projections into {out.shape[1]} features of "
                         f"{np.shape(scales)[0] if np.ndim(scales) == 1 else np.shape(scales)} scales; the map "
                         f"is damaged")
    run_parallel(grouped_products, z, starts, scales.astype(out.dtype), out)

    def refuse_input_row(r):
        # the input's own check skipped (sklearn.set_config(assume_finite=True)): not an overflow to blame
        if rows is not None and not np.isfinite(rows[r]).all():
            raise ValueError(f"{name}: row {r} of the {len(out)} transformed holds NaN or infinity; give finite "
                             f"rows (sklearn's assume_finite=True skipped the check of the input)")

    if sq is not None and np.isnan(sq).any():   # a squared norm is NaN only for a row that held NaN or infinity
        refuse_input_row(int(np.argmax(np.isnan(sq))))
    if sq is not None:
        with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused just below
            out *= gaussian_kernel(sq, float(sigma)).astype(out.dtype)[:, None]   # k(x', 0)
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        # a ConfigError, which is a ValueError: one line and exit 2 when a pipeline's settings cause it
        r = int(np.argmin(finite))
        refuse_input_row(r)
        wider = " or use float64" if out.dtype != np.float64 else ""
        raise ConfigError(f"{name}: the features of row {r} of the {len(out)} transformed are not finite: the "
                          f"products of its projections overflowed {out.dtype}; scale the rows (e.g. to unit norm, "
                          f"or center=True){wider}; in a pipeline, raise features.sigma or lower "
                          f"features.max_degree")
    return out


def _check_room(n_components: int, max_degree: int, theta: float, sampling: str, d: int) -> None:
    """Refuse a map whose degree plan (a few arrays of ``max_degree + 1`` numbers) or projections (``d`` x the
    expected total degree, :func:`registry.projection_columns`) would not fit in memory: max_degree = 10**9 was
    killed for memory, not refused."""
    from .._config import check_memory
    from .registry import projection_columns

    check_memory(56.0 * (max_degree + 1), f"max_degree = {max_degree}",
                 "lower max_degree (a degree n is drawn with probability theta (1 - theta)^n: at theta = 0.5, "
                 "degrees above 100 have probability below 1e-30)")
    check_map_memory(n_components, 8.0 * (4 + d * projection_columns({"map": "rgw", "theta": theta,
                                                                       "sampling": sampling,
                                                                       "max_degree": max_degree})))


class _DegreePlan:
    """Degree counts ``fixed + Multinomial(n_random, random_pmf)``.

    ``log_expected_count[n]`` is ``log E[count of degree n]``; weighting each
    degree-``n`` component by ``1 / E[count]`` keeps the estimate unbiased.
    """

    def __init__(self, fixed, n_random, random_pmf, log_expected_count):
        self.fixed = fixed
        self.n_random = n_random
        self.random_pmf = random_pmf
        self.log_expected_count = log_expected_count


def _degree_plan(n_components, theta, max_degree, sampling):
    support = np.arange(max_degree + 1)
    pmf = theta * (1.0 - theta) ** support
    pmf /= pmf.sum()
    if sampling == "iid" or max_degree == 0:
        # log(nu) + log(rho(n)) as in eq. (3), term by term so the default map
        # is unchanged to the last bit.
        with np.errstate(divide="ignore"):
            log_count = math.log(n_components) + np.log(pmf)
        return _DegreePlan(np.zeros(max_degree + 1, dtype=np.int64), n_components, pmf, log_count)
    fixed = np.zeros(max_degree + 1, dtype=np.int64)
    fixed[0] = 1
    rest = n_components - 1
    q = pmf.copy()
    q[0] = 0.0
    q /= q.sum()
    target = rest * q
    fixed[1:] = np.floor(target[1:]).astype(np.int64)
    n_random = int(rest - fixed[1:].sum())
    leftover = np.maximum(target - fixed, 0.0)
    leftover[0] = 0.0
    random_pmf = leftover / leftover.sum() if n_random > 0 else leftover
    expected = target
    expected[0] = 1.0
    with np.errstate(divide="ignore"):
        log_count = np.log(expected)
    return _DegreePlan(fixed, n_random, random_pmf, log_count)


def _draw_degrees(plan, rng):
    if not plan.fixed.any():
        return rng.choice(len(plan.random_pmf), size=plan.n_random, p=plan.random_pmf)
    degrees = np.repeat(np.arange(len(plan.fixed)), plan.fixed)
    if plan.n_random > 0:
        extra = rng.choice(len(plan.random_pmf), size=plan.n_random, p=plan.random_pmf)
        degrees = np.concatenate([degrees, extra])
    return degrees
