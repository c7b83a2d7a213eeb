"""The full-batch L-BFGS learner: objective, optimizer, streamed passes, determinism, resume, pipeline."""
import json
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import REPO, RGW_SETS
from streamcov.errors import ConfigError
from streamcov.linear import LOG_LOSS, SQUARED_HINGE, _rows_loss_residual, linear_loss_gradient
from streamcov.optimize import LBFGSState, lbfgs_direction, lbfgs_iteration, lbfgs_start
from streamcov.preprocessing import GlobalCenterScaler
from streamcov.stream import lbfgs as L
from streamcov.stream.lbfgs import LBFGSClassifier, make_plan, scaler_from_moments
from streamcov.stream.model import AsyncCheckpointWriter, FittedPipeline
from streamcov.stream.sgd import _ArrayBlocks
from streamcov.tasks import run as run_pipeline
from streamcov.tasks.config import load_config
from test_training import synth_store  # noqa: F401  (the 240-sequence synthetic store of the SGD tests)


def blobs(n=240, d=12, k=4, seed=0, spread=2.0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * spread
    y = rng.integers(0, k, n)
    return centres[y] + rng.standard_normal((n, d)), y


# ----------------------------------------------------------------- objective
def slow_rows(S, y, b, loss, binary):
    """Row by row, class by class: the textbook formulas."""
    total, R = 0.0, np.zeros(S.shape)
    for i in range(S.shape[0]):
        s = [float(v) + float(bj) for v, bj in zip(S[i], b)]
        if loss == LOG_LOSS and binary:
            t = 1.0 if y[i] == 1 else -1.0
            total += np.log(1.0 + np.exp(-t * s[0]))
            R[i, 0] = -t / (1.0 + np.exp(t * s[0]))
        elif loss == LOG_LOSS:
            e = [np.exp(v) for v in s]
            total += np.log(sum(e)) - s[y[i]]
            for j in range(len(s)):
                R[i, j] = e[j] / sum(e) - (1.0 if j == y[i] else 0.0)
        else:
            for j in range(len(s)):
                c = j + 1 if binary else j
                t = 1.0 if y[i] == c else -1.0
                m = max(0.0, 1.0 - t * s[j])
                total += m * m
                R[i, j] = -2.0 * t * m
    return total, R


@pytest.mark.parametrize("loss", [LOG_LOSS, SQUARED_HINGE])
@pytest.mark.parametrize("k", [1, 5])
def test_row_losses_and_residuals_match_the_textbook_formulas(loss, k, rng):
    n = 37
    S = rng.standard_normal((n, k)) * 3
    y = rng.integers(0, 2 if k == 1 else k, n)
    b = rng.standard_normal(k)
    total, correct, R, r = _rows_loss_residual(S, y, b, loss, k == 1, True)
    want_total, want_R = slow_rows(S, y, b, loss, k == 1)
    # float64 throughout; only the order of the sums differs
    assert total == pytest.approx(want_total, rel=1e-12)
    np.testing.assert_allclose(R, want_R, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r, want_R.sum(axis=0), rtol=1e-12, atol=1e-13)
    pred = (S[:, 0] + b[0] > 0).astype(int) if k == 1 else (S + b).argmax(axis=1)
    assert correct == int((pred == y).sum())


def test_log_loss_is_stable_for_huge_scores():
    S = np.array([[800.0, -800.0, 0.0], [-800.0, 800.0, 0.0]])
    total, _, R, _ = _rows_loss_residual(S, np.array([1, 1]), np.zeros(3), LOG_LOSS, False, True)
    assert np.isfinite(total) and total == pytest.approx(1600.0)
    assert np.isfinite(R).all()


@pytest.mark.parametrize("loss", ["log_loss", "squared_hinge"])
@pytest.mark.parametrize("k", [2, 4])
def test_gradient_matches_central_differences(loss, k):
    X, y = blobs(n=90, d=7, k=k, seed=k)
    rng = np.random.default_rng(1)
    cols = 1 if k == 2 else k
    W, b = rng.standard_normal((cols, 7)) * 0.3, rng.standard_normal(cols)
    f, gW, gb = linear_loss_gradient(X, y, W, b, loss=loss, C=3.0, dtype=np.float64)
    h = 1e-6
    for (i, j) in [(0, 0), (cols - 1, 6), (0, 3)]:
        E = np.zeros_like(W)
        E[i, j] = h
        fd = (linear_loss_gradient(X, y, W + E, b, loss=loss, C=3.0, dtype=np.float64)[0]
              - linear_loss_gradient(X, y, W - E, b, loss=loss, C=3.0, dtype=np.float64)[0]) / (2 * h)
        # central differences: error O(h^2 f''') + O(eps f / h), about 1e-9 here
        assert gW[i, j] == pytest.approx(fd, rel=1e-6, abs=1e-8)
    e = np.zeros(cols)
    e[0] = h
    fd = (linear_loss_gradient(X, y, W, b + e, loss=loss, C=3.0, dtype=np.float64)[0]
          - linear_loss_gradient(X, y, W, b - e, loss=loss, C=3.0, dtype=np.float64)[0]) / (2 * h)
    assert gb[0] == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_float32_gemms_agree_with_float64():
    X, y = blobs(n=500, d=300, k=6)
    W = np.random.default_rng(2).standard_normal((6, 300)) * 0.05
    b = np.zeros(6)
    f32, g32, _ = linear_loss_gradient(X, y, W, b, dtype=np.float32)
    f64, g64, _ = linear_loss_gradient(X, y, W, b, dtype=np.float64)
    # float32 rounding of X and W (6e-8 relative) and sums of 300 terms: a few 1e-6 relative
    assert f32 == pytest.approx(f64, rel=1e-5)
    np.testing.assert_allclose(g32, g64, rtol=0, atol=1e-5 * np.abs(g64).max())


def slow_chunk(X, y, W, b, loss, binary):
    """Loss sum, correct count, G = R^T X and r of a chunk: products by Python loops over float64."""
    n, D = X.shape
    k = W.shape[0]
    S = np.array([[sum(float(X[i, j]) * float(W[c, j]) for j in range(D)) for c in range(k)]
                  for i in range(n)]).reshape(n, k)
    total, R = slow_rows(S, y, b, loss, binary)
    pred = (S[:, 0] + b[0] > 0).astype(int) if binary else (S + b).argmax(axis=1)
    G = np.array([[sum(R[i, c] * float(X[i, j]) for i in range(n)) for j in range(D)] for c in range(k)])
    return total, int((pred == y).sum()), G.reshape(k, D), R.sum(axis=0)


@given(n=st.integers(1, 45), D=st.integers(1, 19), k=st.integers(1, 9),
       loss=st.sampled_from([LOG_LOSS, SQUARED_HINGE]), seed=st.integers(0, 2 ** 32 - 1))
@settings(max_examples=150, deadline=None)
def test_chunk_kernel_matches_the_slow_reference(n, D, k, loss, seed):
    """The numba kernel in float64 against Python loops: every shape of row blocks (32), row groups (4),
    class groups (4 forward, 2 backward) and their tails. Both sum in float64 in different orders: the
    difference is a few ulps of the sums of absolute terms, bounded here by 1e-12 relative to them."""
    from streamcov.linear import chunk_sums

    rng = np.random.default_rng(seed)
    binary = k == 1
    X = rng.standard_normal((n, D))
    W = rng.standard_normal((k, D)) * 0.5
    b = rng.standard_normal(k)
    y = rng.integers(0, 2 if binary else k, n).astype(np.int64)
    total, correct, G, r = chunk_sums(X, y, W, b, loss, binary, True, kernel=True)
    want_total, want_correct, want_G, want_r = slow_chunk(X, y, W, b, loss, binary)
    scale = np.abs(X).sum() * np.abs(W).sum() + 1.0
    assert total == pytest.approx(want_total, rel=1e-12, abs=1e-12 * scale)
    assert correct == want_correct
    np.testing.assert_allclose(G, want_G, rtol=1e-11, atol=1e-12 * scale)
    np.testing.assert_allclose(r, want_r, rtol=1e-11, atol=1e-12 * scale)
    # without the gradient: the same loss and count from the same scores
    assert chunk_sums(X, y, W, b, loss, binary, False, kernel=True) == (total, correct, None, None)


@pytest.mark.parametrize("loss", [LOG_LOSS, SQUARED_HINGE])
@pytest.mark.parametrize("k", [1, 10])
def test_chunk_kernel_agrees_with_blas_and_ignores_alignment(loss, k, rng):
    """The float32 kernel against the BLAS path on the learner's precision (both accumulate 300 float32
    products per score: about 300 x 6e-8 relative at worst, 1e-4 of the largest entry allowed), and bit
    for bit itself whatever the alignment of its operands (OpenBLAS's rounding follows the alignment;
    the kernel's vector loops do not peel for it)."""
    from streamcov.linear import chunk_sums

    n, D, binary = 203, 300, k == 1
    X = rng.standard_normal((n, D)).astype(np.float32)
    W = (rng.standard_normal((k, D)) * 0.1).astype(np.float32)
    b = rng.standard_normal(k)
    y = rng.integers(0, 2 if binary else k, n).astype(np.int64)
    got = chunk_sums(X, y, W, b, loss, binary, True, kernel=True)
    blas = chunk_sums(X, y, W, b, loss, binary, True, kernel=False)
    assert got[0] == pytest.approx(blas[0], rel=1e-5) and abs(got[1] - blas[1]) <= 2
    np.testing.assert_allclose(got[2], blas[2], rtol=0, atol=1e-4 * np.abs(blas[2]).max())
    np.testing.assert_allclose(got[3], blas[3], rtol=0, atol=1e-4 * np.abs(blas[3]).max())
    for shift in (1, 3):     # 4 and 12 bytes off any vector alignment
        bufX = np.empty(n * D + shift, dtype=np.float32)
        Xs = bufX[shift:].reshape(n, D)
        Xs[...] = X
        bufW = np.empty(k * D + shift, dtype=np.float32)
        Ws = bufW[shift:].reshape(k, D)
        Ws[...] = W
        moved = chunk_sums(Xs, y, Ws, b, loss, binary, True, kernel=True)
        assert (moved[0], moved[1]) == (got[0], got[1])
        assert moved[2].tobytes() == got[2].tobytes() and moved[3].tobytes() == got[3].tobytes()


@pytest.mark.parametrize("loss", [LOG_LOSS, SQUARED_HINGE])
@pytest.mark.parametrize("k", [1, 3])
def test_chunk_kernel_keeps_a_nan_as_blas_does(loss, k, rng):
    """A NaN feature makes the loss NaN on both paths, with or without the gradient (Python's max(0.0, nan)
    is 0.0: a hinge written with it would hide the row), and a NaN score is the argmax, as numpy takes it."""
    from streamcov.linear import chunk_sums

    X = rng.standard_normal((9, 5)).astype(np.float32)
    X[4, 2] = np.nan
    W = rng.standard_normal((k, 5)).astype(np.float32)
    y = rng.integers(0, 2 if k == 1 else k, 9).astype(np.int64)
    b = np.zeros(k)
    for want_grad in (True, False):
        got = chunk_sums(X, y, W, b, loss, k == 1, want_grad, kernel=True)
        with np.errstate(invalid="ignore"):       # numpy says so; the kernel is silent
            blas = chunk_sums(X, y, W, b, loss, k == 1, want_grad, kernel=False)
        assert np.isnan(got[0]) and np.isnan(blas[0]) and got[1] == blas[1]
    S = np.array([[1.0, np.nan, 0.5]])
    from streamcov._kernels.linear import _row_loss

    for yi in (0, 1):
        want = _rows_loss_residual(S, np.array([yi]), np.zeros(3), loss, False, False)[1]
        assert _row_loss(S[0], yi, np.zeros(3), loss == SQUARED_HINGE, False, np.empty(3))[1] == want


@pytest.mark.parametrize("loss", ["log_loss", "squared_hinge"])
def test_objective_with_the_kernel_matches_central_differences(loss):
    X, y = blobs(n=90, d=7, k=4, seed=3)
    rng = np.random.default_rng(1)
    W, b = rng.standard_normal((4, 7)) * 0.3, rng.standard_normal(4)

    def f(W, b, kernel=True):
        return linear_loss_gradient(X, y, W, b, loss=loss, C=3.0, dtype=np.float64, kernel=kernel)

    f0, gW, gb = f(W, b)
    # the same objective as the BLAS path, to float64 rounding of sums in another order
    assert f0 == pytest.approx(f(W, b, kernel=False)[0], rel=1e-13)
    h = 1e-6
    for (i, j) in [(0, 0), (3, 6), (2, 3)]:
        E = np.zeros_like(W)
        E[i, j] = h
        # central differences: error O(h^2 f''') + O(eps f / h), about 1e-9 here
        assert gW[i, j] == pytest.approx((f(W + E, b)[0] - f(W - E, b)[0]) / (2 * h), rel=1e-6, abs=1e-8)


def test_the_kernel_is_chosen_by_the_size_of_a_pass(monkeypatch):
    import streamcov.linear as lin

    assert not lin.use_kernel(400, 30, 5)             # a pass of 0.02 ms: BLAS, not a 10-120 ms kernel load
    assert lin.use_kernel(291, 5000, 20)              # MSR-Action3D's pass: the kernel (1.1x OpenBLAS)
    assert lin.use_kernel(100_000, 2000, 10)          # the generated store's pass
    monkeypatch.setattr(lin, "KERNEL_MIN_MACS", 0)
    assert lin.use_kernel(1, 1, 1)


def test_objective_validates_its_arguments():
    X, y = blobs(n=10, d=3, k=3)
    with pytest.raises(ValueError, match="loss must be one of"):
        linear_loss_gradient(X, y, np.zeros((3, 3)), np.zeros(3), loss="hinge")
    with pytest.raises(ValueError, match=r"coef must have shape \(3, 3\)"):
        linear_loss_gradient(X, y, np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="NaN or infinite"):
        linear_loss_gradient(np.full((2, 2), np.nan), [0, 1], np.zeros((1, 2)), np.zeros(1))
    with pytest.raises(ValueError, match="C must be a finite number > 0"):
        linear_loss_gradient(X, y, np.zeros((3, 3)), np.zeros(3), C=0)
    # these returned NaN, or a quietly mangled objective (numpy's cast warnings only)
    W0, b0 = np.zeros((3, 3)), np.zeros(3)
    for bad in ("1", None, True, np.nan):
        with pytest.raises(ValueError, match="C must be a finite number > 0"):
            linear_loss_gradient(X, y, W0, b0, C=bad)
    assert linear_loss_gradient(X, y, W0, b0, C=np.array(3.0))[0] == linear_loss_gradient(X, y, W0, b0, C=3.0)[0]
    with pytest.raises(ValueError, match="coef or intercept holds NaN or infinite values"):
        linear_loss_gradient(X, y, np.full((3, 3), np.nan), b0)
    with pytest.raises(ValueError, match="coef or intercept holds NaN or infinite values"):
        linear_loss_gradient(X, y, W0, np.array([0.0, np.inf, 0.0]))
    with pytest.raises(ValueError, match=r"^X holds values up to 1e\+39; in float32 the products take values below "
                                         r"1\.8e\+19 \(beyond, a row's square overflows\): standardize X$"):
        linear_loss_gradient(X * 0 + 1e39, y, W0, b0)
    with pytest.raises(ValueError, match=r"^X holds values up to 1e\+200; in float64"):
        linear_loss_gradient(X * 0 + 1e200, y, W0, b0, dtype=np.float64)
    assert np.isfinite(linear_loss_gradient(X * 1e30, y, W0, b0, dtype=np.float64)[0])
    with pytest.raises(ValueError, match="X: complex values are not supported"):
        linear_loss_gradient(X + 1j, y, W0, b0)
    with pytest.raises(ValueError, match="coef and intercept: complex values are not supported"):
        linear_loss_gradient(X, y, W0 + 1j, b0)
    for bad in (2.5, 1, True, "3"):
        with pytest.raises(ValueError, match=f"n_classes must be an integer >= 2, got {bad!r}"):
            linear_loss_gradient(X, y, W0, b0, n_classes=bad)
    # coefficients beyond the products' precision, or scores beyond the float range: a NaN objective before
    with pytest.raises(ValueError, match=r"^coef or intercept holds values up to 1e\+39, beyond float32 \(at most "
                                         r"3\.4e\+38\); scale them down or pass dtype=np\.float64$"):
        linear_loss_gradient(X, y, W0 + 1e39, b0)
    with pytest.raises(ValueError, match=r"^the objective overflows at these coefficients \(coef up to 1e\+300, X up "
                                         r"to [\d.e+]+\): the scores or the penalty exceed the float range; give smaller"):
        linear_loss_gradient(X, y, W0 + 1e300, b0, dtype=np.float64)
    assert np.isfinite(linear_loss_gradient(X, y, W0 + 1e30, b0)[0])   # large, in range: a finite objective
    # no columns: a numpy reduction error before
    with pytest.raises(ValueError, match=r"^X must be a non-empty 2-D numeric array \(rows and columns\), got shape "
                                         r"\(3, 0\)$"):
        linear_loss_gradient(np.ones((3, 0)), [0, 1, 0], np.zeros((1, 0)), np.zeros(1))


# ----------------------------------------------------------------- optimizer
def test_two_loop_recursion_equals_the_dense_bfgs_inverse(rng):
    n = 6
    g = rng.standard_normal(n)
    s = [rng.standard_normal(n) for _ in range(4)]
    A = rng.standard_normal((n, n))
    A = A @ A.T + n * np.eye(n)   # y = A s: positive curvature
    y = [A @ si for si in s]
    gamma = s[-1] @ y[-1] / (y[-1] @ y[-1])
    H = gamma * np.eye(n)
    for si, yi in zip(s, y):
        rho = 1.0 / (yi @ si)
        V = np.eye(n) - rho * np.outer(yi, si)
        H = V.T @ H @ V + rho * np.outer(si, si)
    np.testing.assert_allclose(lbfgs_direction(g, s, y), -H @ g, rtol=1e-10, atol=1e-12)


def rosenbrock(x):
    f = float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))
    g = np.zeros_like(x)
    g[:-1] = -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return f, g, {"f": f}


def test_lbfgs_minimizes_rosenbrock_and_resumes_exactly_from_any_iteration():
    state = lbfgs_start(rosenbrock, np.full(6, -1.2))
    saved = []
    while np.abs(state.g).max() > 1e-8:
        arrays, scalars = state.to_arrays()
        # a checkpoint: float64 arrays and a JSON round trip
        saved.append(({k: v.copy() for k, v in arrays.items()}, json.loads(json.dumps(scalars))))
        state, ok = lbfgs_iteration(rosenbrock, state)
        assert ok and state.n_iter < 200
    np.testing.assert_allclose(state.x, np.ones(6), atol=1e-7)
    for k in (1, len(saved) // 2, len(saved) - 1):
        s = LBFGSState.from_arrays(*saved[k])
        while s.n_iter < state.n_iter:
            s, _ = lbfgs_iteration(rosenbrock, s)
        assert s.x.tobytes() == state.x.tobytes() and s.n_evals == state.n_evals


def test_lbfgs_checkpoint_without_stored_products_resumes_the_same_run():
    # a state saved before the pair products were kept: they are recomputed as the run computed them
    state = lbfgs_start(rosenbrock, np.full(6, -1.2))
    for _ in range(5):
        state, _ = lbfgs_iteration(rosenbrock, state)
    arrays, scalars = state.to_arrays()
    assert len(state.sy) == len(state.s) == len(arrays["sy"]) > 0
    old = {k: v for k, v in arrays.items() if k not in ("sy", "yy")}
    a, b = LBFGSState.from_arrays(old, scalars), LBFGSState.from_arrays(arrays, scalars)
    assert a.sy == b.sy and a.yy == b.yy
    for _ in range(5):
        a, _ = lbfgs_iteration(rosenbrock, a)
        b, _ = lbfgs_iteration(rosenbrock, b)
    assert a.x.tobytes() == b.x.tobytes()


def test_lbfgs_direction_with_given_products_equals_computed():
    rng = np.random.default_rng(3)
    s = [rng.standard_normal(9) for _ in range(3)]
    y = [si + 0.1 * rng.standard_normal(9) for si in s]
    g = rng.standard_normal(9)
    sy = [float(np.dot(a, b)) for a, b in zip(s, y)]
    yy = [float(np.dot(b, b)) for b in y]
    assert lbfgs_direction(g, s, y, sy, yy).tobytes() == lbfgs_direction(g, s, y).tobytes()



def two_loop_as_numpy_writes_it(g, s, y):
    """The two-loop recursion in plain numpy expressions: the rounding the in-place forms must keep."""
    sy = [float(np.dot(a, b)) for a, b in zip(s, y)]
    q = g.copy()
    alpha = [0.0] * len(s)
    for i in range(len(s) - 1, -1, -1):
        alpha[i] = (1.0 / sy[i]) * float(np.dot(s[i], q))
        q -= alpha[i] * y[i]
    r = (sy[-1] / float(np.dot(y[-1], y[-1]))) * q
    for i in range(len(s)):
        beta = (1.0 / sy[i]) * float(np.dot(y[i], r))
        r += (alpha[i] - beta) * s[i]
    return -r


@pytest.mark.parametrize("jit", [False, True])
def test_two_loop_in_place_rounds_as_numpy_expressions(rng, monkeypatch, jit):
    # with numba's JIT running (fused kernels) or not (numpy through a scratch vector): the same bits
    import streamcov.optimize as O

    monkeypatch.setattr(O, "jit_started", lambda: jit)
    p = 20011
    s = [rng.standard_normal(p) for _ in range(5)]
    y = [si * rng.uniform(0.2, 3.0) + 0.1 * rng.standard_normal(p) for si in s]
    g = rng.standard_normal(p)
    assert lbfgs_direction(g, s, y).tobytes() == two_loop_as_numpy_writes_it(g, s, y).tobytes()


def test_fused_gradient_kernels_round_as_numpy(rng):
    from streamcov._kernels.vector import penalized_gradient, scale_columns

    k, D, n, lam = 7, 1031, 193, 1.0 / (30.0 * 193)
    W, G = rng.standard_normal((k, D)), rng.standard_normal((k, D))
    r, dm = rng.standard_normal(k), rng.standard_normal(D) * 1e-7
    for inv in (0.37, 1.0, 1.0 / rng.uniform(0.5, 2.0, D)):
        cols = np.broadcast_to(np.asarray(inv, dtype=np.float64), (D,)).copy()
        Wp, W32, out = np.empty((k, D)), np.empty((k, D), dtype=np.float32), np.empty((k, D))
        scale_columns(W, cols, Wp, W32)
        assert Wp.tobytes() == (W * inv).tobytes()
        assert W32.tobytes() == (W * inv).astype(np.float32).tobytes()
        penalized_gradient(G, r, dm, cols, float(n), lam, W, out)
        assert out.tobytes() == ((G - np.outer(r, dm)) * inv / n + lam * W).tobytes()


def test_fit_is_the_same_with_and_without_the_jit_kernels(monkeypatch):
    import streamcov.optimize as O

    X, y = blobs(n=300, d=60, k=5, spread=0.2)     # about 200 iterations: a full memory of pairs
    fits = []
    for jit in (False, True):
        monkeypatch.setattr(O, "jit_started", lambda: jit)
        monkeypatch.setattr(L, "jit_started", lambda: jit)
        clf = LBFGSClassifier(loss="squared_hinge", C=300.0, max_iter=300).fit(X, y)
        fits.append((clf.coef_.tobytes(), clf.intercept_.tobytes(), clf.n_iter_, clf.n_evals_))
    assert fits[0] == fits[1] and fits[0][2] > 20


# ------------------------------------------------------------- the estimator
def scipy_reference(X, y, loss, C, k):
    """The objective written out in float64 numpy, minimized by scipy's L-BFGS-B to 1e-10."""
    from scipy.optimize import minimize

    n, d = X.shape
    cols = 1 if k == 2 else k

    def fun(x):
        W, b = x[:cols * d].reshape(cols, d), x[cols * d:]
        f, gW, gb = linear_loss_gradient(X, y, W, b, loss=loss, C=C, dtype=np.float64)
        return f, np.concatenate([gW.ravel(), gb])

    res = minimize(fun, np.zeros(cols * d + cols), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 20000})
    return res.x[:cols * d].reshape(cols, d), res.x[cols * d:]


@pytest.mark.parametrize("loss", ["log_loss", "squared_hinge"])
@pytest.mark.parametrize("k", [2, 4])
def test_fit_reaches_the_minimum_of_the_objective(loss, k):
    X, y = blobs(n=300, d=20, k=k, seed=3, spread=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # tol is below what float32 reaches
        est = LBFGSClassifier(loss=loss, C=2.0, tol=1e-9, max_iter=1000).fit(X, y)
    W, b = scipy_reference(X, y, loss, 2.0, k)
    # float32 GEMMs: the objective is exact to ~1e-7 relative, which stops L-BFGS (no Wolfe step
    # left) at gradients of 1e-7 .. 1e-5; the minimizer is then known to ~1e-3 of its size
    # (measured: 3e-5 .. 1e-3 relative)
    assert est.stop_reason_ == "line_search" and est.grad_max_ < 1e-4
    np.testing.assert_allclose(est.coef_, W, rtol=0, atol=2e-3 * np.abs(W).max())
    S = X @ W.T + b
    np.testing.assert_allclose(est.decision_function(X).reshape(S.shape), S, rtol=0, atol=2e-3 * np.abs(S).max())
    assert est.coef_.shape == ((1, 20) if k == 2 else (k, 20))


def test_log_loss_is_scikit_learn_logistic_regression():
    X, y = blobs(n=400, d=30, k=5, seed=4, spread=0.7)
    ours = LBFGSClassifier(C=0.5, tol=1e-6, max_iter=500).fit(X, y)
    ref = LogisticRegression(C=0.5, tol=1e-10, max_iter=10000).fit(X, y)
    # the fit stops where no float32 step lowers the objective: its float64 gradient there is a few 1e-6
    f, gW, gb = linear_loss_gradient(X, y, ours.coef_, ours.intercept_, C=0.5, dtype=np.float64)
    assert max(np.abs(gW).max(), np.abs(gb).max()) < 1e-5
    # a gradient g left there moves the coefficients from the optimum by up to about g / lam along the
    # weakest curvature (lam = 1 / (C n) = 5e-3): 1e-5 / 5e-3 = 2e-3 at most; 1.1e-4 of the largest
    # coefficient measured (numpy 2.4, OpenBLAS 0.3.31), 5e-4 allowed
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=0, atol=5e-4 * np.abs(ref.coef_).max())
    # float32 products: the fit stops where no float32 step lowers the objective, the largest gradient
    # entry near 1e-6 (tol); its probabilities then differ from the float64 optimum by up to about 5e-5
    # depending on the last bits of the path (the rounding of the mean, of the sums), so 1e-4
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-4)
    assert (ours.predict(X) == ref.predict(X)).all()


def test_labels_of_any_type_and_probabilities():
    X, y = blobs(n=120, d=5, k=3)
    labels = np.array(["walk", "run", "sit"])[y]
    est = LBFGSClassifier(C=10.0).fit(X, labels)
    assert sorted(est.classes_) == ["run", "sit", "walk"] and est.score(X, labels) > 0.9
    P = est.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    assert (est.classes_[P.argmax(axis=1)] == est.predict(X)).all()
    hinge = LBFGSClassifier(loss="squared_hinge").fit(X, labels)
    assert not hasattr(hinge, "predict_proba")
    with pytest.raises(ValueError, match="at least 2 classes"):
        LBFGSClassifier().fit(X, np.zeros(len(X)))


def test_warm_start_continues_from_the_previous_model():
    X, y = blobs(n=200, d=10, k=3, spread=1.0)
    est = LBFGSClassifier(C=5.0, tol=1e-5, warm_start=True).fit(X, y)
    first = est.coef_.copy()
    est.fit(X, y)
    assert est.n_iter_ <= 1   # already at the minimum
    np.testing.assert_allclose(est.coef_, first, atol=1e-5 * np.abs(first).max())


def test_early_stopping_keeps_the_best_validation_iterate():
    # more features than rows, weak regularization: the validation loss turns up
    X, y = blobs(n=120, d=200, k=3, seed=5, spread=0.15)
    kw = dict(C=1e4, tol=1e-9, max_iter=300, validation_fraction=0.25, random_state=7)
    est = LBFGSClassifier(n_iter_no_change=3, **kw).fit(X, y)
    curve = est.validation_loss_curve_
    assert est.stop_reason_ == "early_stopping"
    assert est.best_iter_ == int(np.argmin(curve)) and len(curve) == est.n_iter_ + 1
    assert est.n_iter_ == est.best_iter_ + 3
    # the kept model is the iterate of best_iter_: the same run cut there returns it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cut = LBFGSClassifier(n_iter_no_change=100, **{**kw, "max_iter": est.best_iter_}).fit(X, y)
    assert cut.coef_.tobytes() == est.coef_.tobytes()


def test_max_iter_warns():
    from sklearn.exceptions import ConvergenceWarning

    X, y = blobs(n=100, d=10, k=3, spread=0.5)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=2"):
        LBFGSClassifier(max_iter=2, tol=1e-10).fit(X, y)


@parametrize_with_checks([LBFGSClassifier(max_iter=30)])
def test_scikit_learn_estimator_checks(estimator, check):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


# ----------------------------------------------------------- streamed passes
def _left_to_right(*xs):
    """merge_sums' order: 0 + x0 + x1 + ..., in float64 (rounding makes the grouping visible)."""
    out = 0.0
    for x in xs:
        out += x
    return out


@given(n=st.integers(1, 70), fan_in=st.integers(2, 9), data=st.data())
@settings(max_examples=300, deadline=None)
def test_holders_merge_the_same_tree(n, fan_in, data):
    """A pass with one task per worker (each merging the nodes of the fixed tree inside its run of
    partitions, the driver the rest) adds the partition sums in exactly the order of the fixed tree: the same
    bits for any cut of the partitions into runs, i.e. any number of workers."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    leaves = list(rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=6)))) if n > 1 else []
    runs = [r for r in np.split(np.arange(n), cuts) if len(r)]
    known = {}
    for run in runs:
        nodes = L._run_on_holder(lambda src, x, *a: x, _left_to_right, None, [leaves[p] for p in run],
                                 int(run[0]), n, fan_in, ())
        for (level, i), _ in nodes:   # maximal: inside the run, its parent not
            lo, hi = i * fan_in ** level, min((i + 1) * fan_in ** level, n)
            assert run[0] <= lo and hi <= run[-1] + 1
            if level < L._top(n, fan_in):
                plo = (i // fan_in) * fan_in ** (level + 1)
                phi = min((i // fan_in + 1) * fan_in ** (level + 1), n)
                assert plo < run[0] or phi > run[-1] + 1
        known.update(nodes)
    level = list(leaves)         # the tree as first written: groups of fan_in consecutive items, level by level
    while len(level) > 1:
        level = [_left_to_right(*level[i:i + fan_in]) for i in range(0, len(level), fan_in)]
    want = level[0]
    got = L._node_value(L._top(n, fan_in), 0, n, fan_in, known, None, _left_to_right)
    assert got == want           # bitwise: the same additions in the same order
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L, "FAN_IN", fan_in)
        assert L._tree(leaves, _left_to_right) == want    # the threads path's tree is the same


def test_plan_holds_every_row_once_in_order(rng):
    bounds = np.array([0, 7, 7, 30, 31, 100])
    fit = rng.random(100) < 0.6
    val = ~fit & (rng.random(100) < 0.5)
    y = rng.integers(0, 3, 100)
    import streamcov.linear as lin
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lin, "CHUNK_BYTES", 4 * 10 * 3)        # 3 rows of width 10 per chunk... at least 64
        mp.setattr(L, "PARTITION_BYTES", 4 * 10 * 100)
        plan = make_plan(bounds, fit, val, y, 10)
    rows_fit = [bounds[p.block] + p.fit for s in plan for c in s.chunks for p in c]
    rows_val = [bounds[p.block] + p.val for s in plan for c in s.chunks for p in c]
    assert np.concatenate(rows_fit).tolist() == np.flatnonzero(fit).tolist()
    assert np.concatenate(rows_val).tolist() == np.flatnonzero(val).tolist()
    assert np.concatenate([np.concatenate(s.y_fit) for s in plan]).tolist() == y[fit].tolist()


@pytest.mark.parametrize("kind", ["center", "standard"])
def test_scaler_from_streamed_moments_equals_the_fitted_scaler(kind, rng):
    X = (rng.standard_normal((300, 8)) * [1, 2, 3, 4, 5, 6, 7, 0] + 5).astype(np.float32)
    blocks = _ArrayBlocks(X, 64)
    mask = np.ones(300, dtype=bool)
    p = L._Problem(blocks, np.zeros(300, dtype=np.int64), mask, ~mask, 2, "log_loss", None, "memory")
    sc, inv = scaler_from_moments(kind, *p.moments)
    ref = (GlobalCenterScaler() if kind == "center" else StandardScaler()).fit(X.astype(np.float64))
    # Chan-merged float64 moments of the float32 rows against one float64 pass: 1e-12 relative
    np.testing.assert_allclose(sc.mean_, ref.mean_, rtol=1e-12)
    np.testing.assert_allclose(sc.scale_, ref.scale_, rtol=1e-10)
    np.testing.assert_allclose(sc.transform(X[:5]), ref.transform(X[:5]), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(inv, 1.0 / np.asarray(ref.scale_), rtol=1e-10)


def test_streamed_learner_with_a_scaler_is_the_learner_on_scaled_rows():
    X, y = blobs(n=400, d=16, k=3, spread=0.8)
    X = X * 3 + 10          # a large common offset: the scaler's mean, folded into the passes
    sc = StandardScaler().fit(X)
    ref = LBFGSClassifier(C=3.0, tol=1e-5, max_iter=500).fit(sc.transform(X), y)
    mask = np.ones(len(X), dtype=bool)
    est, scaler = L.train_lbfgs(_ArrayBlocks(X, 50), y, mask, np.arange(3),
                                LBFGSClassifier(C=3.0, tol=1e-5, max_iter=500), scale="standard")
    np.testing.assert_allclose(scaler.mean_, sc.mean_, rtol=1e-6)
    # two runs to |grad| <= 1e-5 on float32 rows (scaled once, or centred with the scale folded in):
    # the same minimizer to 1e-3 of its size
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-3 * np.abs(ref.coef_).max())
    S = ref.decision_function(sc.transform(X))
    np.testing.assert_allclose(est.decision_function(sc.transform(X)), S, atol=1e-3 * np.abs(S).max())


def test_progress_bar_is_not_redrawn_at_every_iteration(capsys, monkeypatch):
    """The bar's loss note is set without a redraw (tqdm's default redraws at every set_postfix): on a log file
    (stderr not a terminal) a fit of many short iterations wrote one bar state per iteration; the bar now
    redraws at tqdm's own rate, from update."""
    from tqdm.std import tqdm

    from streamcov import _config

    calls = []
    original = tqdm.set_postfix

    def spy(self, *args, **kwargs):
        calls.append(kwargs.get("refresh", True))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(tqdm, "set_postfix", spy)
    monkeypatch.setattr(_config, "BAR_DISABLE", False)   # drawn although stderr is captured (not a terminal)
    X, y = blobs(n=400, d=16, k=3, spread=0.8)
    est, _ = L.train_lbfgs(_ArrayBlocks(X, 50), y, np.ones(len(X), dtype=bool), np.arange(3),
                           LBFGSClassifier(loss="squared_hinge", C=100.0, tol=1e-8, max_iter=200), progress=True)
    assert est.n_iter_ >= 30 and "train (L-BFGS)" in capsys.readouterr().err
    assert len(calls) == est.n_iter_ and not any(calls)     # a note per iteration, none of them a redraw


def test_streaming_holds_no_rows():
    """cache = "stream": the plan only; one pass reads and frees the rows chunk by chunk."""
    import tracemalloc

    X, y = blobs(n=8000, d=200, k=3)
    mask = np.ones(len(X), dtype=bool)

    class Store(_ArrayBlocks):
        path = "unused"
    store = Store(X, 100)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L, "_open", lambda src: store)
        import streamcov.linear as lin
        mp.setattr(lin, "CHUNK_BYTES", 100 * 200 * 4)    # chunks of 100 rows
        stream = L._Problem(store, y, mask, ~mask, 3, "log_loss", None, "stream")
        assert all(isinstance(d, L.PartSpec) for d in stream.data)
        W32, b = np.zeros((3, 200), dtype=np.float32), np.zeros(3)
        # a first pass in a fresh process loads the pass kernel from numba's cache (about 15 MB of imports and
        # typing, once per process): run alone the test measured that, not rows; the pass measured is the next
        stream.sums(W32, b)
        tracemalloc.start()
        stream.sums(W32, b)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    # a cache would hold 6.4 MB of float32 rows; streaming holds one chunk of 100 rows at a time
    # (its float64 rows as read, 160 KB, their float32 copy, scores and sums): under 1 MB whatever
    # the number of rows
    assert peak < 1 << 20, peak


def test_async_checkpoint_writer_keeps_the_newest(tmp_path):
    w = AsyncCheckpointWriter(tmp_path / "c.npz", min_interval=60.0)
    w.save({"a": np.array([1])})
    for i in range(2, 6):
        w.save(lambda i=i: {"a": np.array([i])})
    assert not (tmp_path / "c.npz").exists()   # the first write waits for min_interval too
    w.close()        # writes the newest at once despite min_interval
    with np.load(tmp_path / "c.npz") as z:
        assert z["a"][0] == 5
    w = AsyncCheckpointWriter(tmp_path / "missing" / "c.npz")
    w.save({"a": np.array([1])})
    with pytest.raises(FileNotFoundError, match=rf"No such file or directory: "
                                                rf"'{re.escape(str(tmp_path / 'missing'))}/\.c\.npz\."):
        w.close()


# ------------------------------------------------------------------ pipeline
def lbfgs_cfg(store, out, *extra):
    # span = "features": these tests are about the passes over the store (120 training rows of 256 features
    # would otherwise be fitted in the span of the rows)
    return load_config(REPO / "pipelines" / "msr_action3d.toml",
                       [f'output="{out}"', *RGW_SETS, "features.n_components=256",
                        "dask.block_size=16", 'model.learner="lbfgs"', "model.C=10.0", 'model.span="features"',
                        *extra], store=store.path)


def test_span_rows_beyond_its_limits_stops_a_pipeline_before_its_features(synth_store, tmp_path, monkeypatch):
    """Past the span's limits, span = "rows" is refused in one line naming the key and the fold, before the
    features are computed (it was a traceback after them, exit 1)."""
    from cli_cases import cli

    monkeypatch.setattr(L, "SPAN_MAX_ROWS", 50)
    cfg = lbfgs_cfg(synth_store, tmp_path / "o", 'model.span="rows"')
    with pytest.raises(ConfigError, match=r'^model\.span = "rows": fold \'\S+\': the span holds the \d+ training '
                                          r'rows, .* at most 50 rows and 2 GiB; set model\.span = "features" \(or "auto"'):
        run_pipeline(cfg, scheduler="synchronous")
    assert not (tmp_path / "o" / "features.zarr").exists()
    rc, err, _ = cli("run", REPO / "pipelines" / "msr_action3d.toml", "--store", synth_store.path, "--quiet",
                     "--output", tmp_path / "c", "--set", "features.n_components=64", "--set", 'model.span="rows"')
    assert rc == 2 and re.search(r'(?m)^streamcov run: error: --set model\.span="rows": model\.span = "rows": fold ', err), err
    assert not (tmp_path / "c" / "features.zarr").exists()


def model_arrays(out):
    clf = FittedPipeline.load(out / "model").classifier
    return clf.coef_.tobytes() + clf.intercept_.tobytes()


def shrink_partitions(mp, kernel=False):
    """Chunks of 12 rows, partitions of 2 chunks, a fan-in of 2: on 120 training rows, 5 partitions
    added in a tree of 3 levels; ``kernel``: the passes run the numba kernel (not BLAS)."""
    import streamcov.linear as lin
    mp.setattr(lin, "KERNEL_MIN_MACS", 0 if kernel else 1 << 62)
    mp.setattr(lin, "MIN_CHUNK_ROWS", 1)
    mp.setattr(lin, "CHUNK_BYTES", 12 * 256 * 4)
    mp.setattr(L, "PARTITION_BYTES", 24 * 256 * 4)
    mp.setattr(L, "FAN_IN", 2)


@pytest.fixture
def small_partitions(monkeypatch):
    shrink_partitions(monkeypatch)


@pytest.fixture(scope="module")
def reference(synth_store, tmp_path_factory):
    """The lbfgs pipeline in this thread (synchronous scheduler), small partitions, rows streamed."""
    out = tmp_path_factory.mktemp("ref")
    with pytest.MonkeyPatch.context() as mp:
        shrink_partitions(mp)
        res = run_pipeline(lbfgs_cfg(synth_store, out, 'model.cache="stream"'), scheduler="synchronous")
    return res, model_arrays(out)


@pytest.fixture(scope="module")
def reference_kernel(synth_store, tmp_path_factory):
    """The same, with the passes in the numba kernel."""
    out = tmp_path_factory.mktemp("ref_kernel")
    with pytest.MonkeyPatch.context() as mp:
        shrink_partitions(mp, kernel=True)
        res = run_pipeline(lbfgs_cfg(synth_store, out, 'model.cache="stream"'), scheduler="synchronous")
    return res, model_arrays(out)


def test_lbfgs_pipeline(reference, reference_kernel, synth_store):
    res, _ = reference
    # the kernel's passes: the same fit to float32 rounding (the same iterations give the same accuracy)
    assert reference_kernel[0]["accuracy"] == pytest.approx(res["accuracy"], abs=0.02)
    assert reference_kernel[1] != reference[1]
    assert res["stop"] == "converged" and res["converged"] and res["cache"] == "stream"
    assert 0 < res["iterations"] <= res["passes"] and res["accuracy"] > 0.5
    assert "epochs" not in res and "epochs_run" not in res
    model = FittedPipeline.load(res["model_path"])
    assert type(model.classifier).__name__ == "LBFGSClassifier"
    assert type(model.scaler).__name__ == "GlobalCenterScaler"


@pytest.mark.parametrize("kernel", [False, True], ids=["blas", "kernel"])
def test_same_model_on_threads_and_a_local_cluster(kernel, request, synth_store, scheduler, monkeypatch):
    """Fixed partitions and a fixed tree: bitwise the pipeline's model on any scheduler, cached or
    streamed, with the passes in BLAS or in the numba kernel (the driver's choice travels with the
    pass to the workers)."""
    from streamcov.stream.featurestore import FeatureStore
    from streamcov.stream.runtime import dask_runtime

    shrink_partitions(monkeypatch, kernel)
    res, want = request.getfixturevalue("reference_kernel" if kernel else "reference")
    cfg = lbfgs_cfg(synth_store, "unused")
    fstore = FeatureStore(res["features_path"])
    y = synth_store.labels.astype(np.int64)
    train = synth_store.subjects % 2 == 1
    held = []
    close = L._Problem.close

    def record_placement(self):
        if self.client is not None and self.mode == "memory" and self.route == "actors":
            # each worker's actor reads and holds the partitions of that worker
            where = {p: [w] for w, _, parts, _ in self.holders for part in parts for p in part}
            held.append((self.owners, [where[p] for p in range(self.n_partitions)]))
        elif self.client is not None and self.mode == "memory":
            where = self.client.who_has(self.data)
            held.append((self.owners, [list(where[f.key]) for f in self.data]))
        close(self)

    monkeypatch.setattr(L._Problem, "close", record_placement)
    with dask_runtime(scheduler, 2) as runtime:
        for cache in ("memory", "stream"):
            est = L.make_lbfgs(cfg.model.model_copy(update={"cache": cache}), int(train.sum()), cfg.seed)
            clf, _ = L.train_lbfgs(fstore, y, train, np.arange(8), est, runtime=runtime, scale="center")
            assert clf.fit_info_["cache"] == cache and clf.fit_info_["partitions"] == 5
            assert clf.fit_info_["kernel"] is kernel
            assert clf.coef_.tobytes() + clf.intercept_.tobytes() == want, cache
            assert clf.n_evals_ == res["passes"]
            assert clf.fit_info_["pass_route"] == ("actors" if scheduler == "local-cluster" else None)
        if scheduler == "local-cluster":   # the passes as tasks through the scheduler: the same bits
            monkeypatch.setattr(L, "ACTOR_PASSES", False)
            est = L.make_lbfgs(cfg.model.model_copy(update={"cache": "memory"}), int(train.sum()), cfg.seed)
            clf, _ = L.train_lbfgs(fstore, y, train, np.arange(8), est, runtime=runtime, scale="center")
            assert clf.fit_info_["pass_route"] == "tasks"
            assert clf.coef_.tobytes() + clf.intercept_.tobytes() == want
    if scheduler == "local-cluster":
        # cached rows stay on the worker they were loaded on, spread over both workers. By tasks, a
        # partition's tasks may run elsewhere when its worker is busy (allow_other_workers, which a lost
        # worker needs), and a loaded machine made that happen to one partition of five once in a CI run: one
        # copy is tolerated. Before the partitions were pinned, the scheduler copied most of them to both
        # workers. By actors, each worker's actor reads and holds its own partitions (one copy).
        assert len(held) == 2     # the cached fits by actors and by tasks
        for owners, where in held:
            assert all(o in w for o, w in zip(owners, where)) and len(set(owners)) == 2
            assert sum(len(w) > 1 for w in where) <= 1, where



@pytest.mark.parametrize("cache", ["memory", "stream"])
def test_a_worker_killed_between_passes_gives_the_same_model(reference, synth_store, small_partitions, cache):
    """kill -9 of the worker that holds the first partitions, after the third pass: its cached rows (or
    the specs of the rows it streams) are lost; the fit places the partitions again on the workers there
    are (the nanny restarts the killed one), repeats the pass, and the model is still bitwise the one of
    the synchronous run."""
    import os
    import signal

    from streamcov.stream.featurestore import FeatureStore
    from streamcov.stream.runtime import dask_runtime

    res, want = reference
    cfg = lbfgs_cfg(synth_store, "unused")
    y = synth_store.labels.astype(np.int64)
    train = synth_store.subjects % 2 == 1
    killed, placed = [], []
    sums, place = L._Problem.sums, L._Problem._place

    def record_owners(self, specs):
        out = place(self, specs)
        placed.append(list(self.owners))
        return out

    def kill_after_third_pass(self, W32, b):
        if self.passes == 3 and not killed:
            pid = self.client.run(os.getpid, workers=[self.owners[0]])[self.owners[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return sums(self, W32, b)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L._Problem, "sums", kill_after_third_pass)
        mp.setattr(L._Problem, "_place", record_owners)
        with dask_runtime("local-cluster", 2) as runtime:
            est = L.make_lbfgs(cfg.model.model_copy(update={"cache": cache}), int(train.sum()), cfg.seed)
            clf, _ = L.train_lbfgs(FeatureStore(res["features_path"]), y, train, np.arange(8), est,
                                   runtime=runtime, scale="center")
    assert clf.fit_info_["cache"] == cache
    assert killed, "training ended before the kill: nothing was tested"
    assert clf.fit_info_["recoveries"] == 1 and clf.n_evals_ == res["passes"] > 3
    assert clf.coef_.tobytes() + clf.intercept_.tobytes() == want
    # placed again on 2 workers (the fit waited for the nanny's restart), not all on the survivor
    assert len(placed) == 2 and len(set(placed[1])) == 2 and clf.fit_info_["pass_tasks"] == 2


@pytest.mark.parametrize("cache", ["memory", "stream"])
def test_a_worker_lost_while_the_actors_read_the_rows_gives_the_same_model(reference, synth_store,
                                                                           small_partitions, cache):
    """The first placement recovers as the later steps do: a lost-worker error while the workers' actors are
    made and read their rows (simulated: raised once after they were made, as the driver's wait for them
    raises it) places the rows again, and the model is bitwise the synchronous run's."""
    from concurrent.futures import CancelledError

    from streamcov.stream.featurestore import FeatureStore
    from streamcov.stream.runtime import dask_runtime

    res, want = reference
    cfg = lbfgs_cfg(synth_store, "unused")
    y = synth_store.labels.astype(np.int64)
    train = synth_store.subjects % 2 == 1
    make, raised = L._Problem._make_holders, []

    def lose_once(self, specs):
        make(self, specs)
        if not raised:
            raised.append(True)
            raise CancelledError("simulated: a worker left while its actor read the rows")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L._Problem, "_make_holders", lose_once)
        with dask_runtime("local-cluster", 2) as runtime:
            est = L.make_lbfgs(cfg.model.model_copy(update={"cache": cache}), int(train.sum()), cfg.seed)
            clf, _ = L.train_lbfgs(FeatureStore(res["features_path"]), y, train, np.arange(8), est,
                                   runtime=runtime, scale="center")
    assert raised and clf.fit_info_["recoveries"] == 1 and clf.fit_info_["pass_route"] == "actors"
    assert clf.fit_info_["cache"] == cache
    assert clf.coef_.tobytes() + clf.intercept_.tobytes() == want


def test_a_worker_with_two_threads_runs_a_pass_as_two_tasks(reference, synth_store, small_partitions):
    """One part per worker thread, on consecutive parts of the worker's partitions: both threads of a
    2-thread worker read the rows, centre them and work on a pass (its actor runs a thread per part), and
    the sums (the model) are the same bits."""
    from distributed import LocalCluster

    from streamcov.stream.featurestore import FeatureStore
    from streamcov.stream.runtime import dask_runtime

    res, want = reference
    cfg = lbfgs_cfg(synth_store, "unused")
    y = synth_store.labels.astype(np.int64)
    train = synth_store.subjects % 2 == 1
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, dask_runtime(cluster.scheduler_address) as runtime:
        est = L.make_lbfgs(cfg.model.model_copy(update={"cache": "memory"}), int(train.sum()), cfg.seed)
        clf, _ = L.train_lbfgs(FeatureStore(res["features_path"]), y, train, np.arange(8), est,
                               runtime=runtime, scale="center")
    assert clf.fit_info_["pass_tasks"] == 2 and clf.fit_info_["partitions"] == 5
    assert clf.fit_info_["pass_route"] == "actors"
    assert clf.coef_.tobytes() + clf.intercept_.tobytes() == want


class _LosingCluster:
    """A stand-in client for the recovery logic: ``workers`` alive, no waiting."""

    def __init__(self, workers):
        self.workers = workers

    def wait_for_workers(self, n, timeout=None):
        if len(self.workers) < n:
            raise TimeoutError

    def scheduler_info(self, n_workers=-1):
        return {"workers": {w: {"nthreads": 1} for w in self.workers}}


def _problem_on(client):
    p = L._Problem.__new__(L._Problem)
    p.client, p.recoveries, p.owners, p.specs, p.m32 = client, 0, ["w0", "w1"], [], None
    p.path, p.cache, p.nbytes, p.runtime, p.mode = None, "auto", 0, None, "memory"
    p._place = lambda specs: []
    return p


def test_recovery_gives_up_with_the_error_that_lost_the_workers():
    from distributed import KilledWorker

    from streamcov.errors import StreamcovError

    def lose():
        raise KilledWorker("partition_sums", SimpleNamespace(address="tcp://w0"), 3)

    p = _problem_on(_LosingCluster([]))          # no worker left, none comes back: one line, from the lost work
    with pytest.raises(StreamcovError, match=r": every worker left the cluster and none came back in 30 s; start "
                                             r"workers") as info:
        p._recovering(lose)
    assert isinstance(info.value.__cause__, KilledWorker) and p.recoveries == 1
    p = _problem_on(_LosingCluster(["w1"]))      # one left: placed again there, at most MAX_RECOVERIES times
    with pytest.raises(KilledWorker):
        p._recovering(lose)
    assert p.recoveries == L.MAX_RECOVERIES
    p = _problem_on(_LosingCluster(["w0", "w1"]))

    def task_error():
        raise ValueError("a genuine error of the task")

    with pytest.raises(ValueError, match="genuine"):   # not a lost worker: raised at once
        p._recovering(task_error)
    assert p.recoveries == 0


def test_rows_are_centred_once_however_often_the_centring_runs(rng):
    X = rng.standard_normal((6, 3)).astype(np.float32) + 5
    m32 = X.mean(axis=0)
    part = L.PartData(X.copy(), X[:0].copy(), None)
    once = L._centred(part, m32).X_fit.copy()
    assert L._centred(part, m32).X_fit.tobytes() == once.tobytes()
    assert L._centred(part, m32) is part
    np.testing.assert_allclose(once.mean(axis=0), 0, atol=1e-5)

def test_a_finished_runs_checkpoint_drops_the_pairs_and_resumes_to_the_same_model(tmp_path):
    X, y = blobs(n=300, d=40, k=4)
    blocks, mask, ck = _ArrayBlocks(X.astype(np.float32), 64), np.ones(len(X), dtype=bool), tmp_path / "c.npz"

    def fit(resume):
        est = LBFGSClassifier(loss="squared_hinge", C=30.0, max_iter=200)
        clf, _ = L.train_lbfgs(blocks, y, mask, np.arange(4), est, scale="center", checkpoint=ck, resume=resume,
                               fingerprint="f")
        return clf

    a = fit(False)
    with np.load(ck) as z:
        assert "state.x" in z.files and "state.s" not in z.files and "state.y" not in z.files
        doc = json.loads(z["checkpoint_json"].tobytes().decode())
    assert doc["engine"]["stop"] == a.stop_reason_ and doc["state"]["pairs"] == 0
    assert doc["engine"]["loss_curve"] == a.loss_curve_.tolist()
    b = fit(True)
    assert b.fit_info_["passes"] == 0 and (b.n_iter_, b.n_evals_) == (a.n_iter_, a.n_evals_)
    assert b.coef_.tobytes() + b.intercept_.tobytes() == a.coef_.tobytes() + a.intercept_.tobytes()

def crash_at_pass(monkeypatch, n: int):
    """The ``n``-th pass raises KeyboardInterrupt (a simulated crash); returns what undoes it."""
    original = L._Problem.sums
    calls = {"n": 0}

    def crashing(self, *a):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt("simulated crash")
        return original(self, *a)

    monkeypatch.setattr(L._Problem, "sums", crashing)
    return lambda: monkeypatch.setattr(L._Problem, "sums", original)


def test_resume_after_a_crash_gives_the_same_model(reference, synth_store, tmp_path, monkeypatch,
                                                   small_partitions):
    monkeypatch.setattr(L, "CHECKPOINT_INTERVAL", 0.0)
    undo = crash_at_pass(monkeypatch, 12)
    cfg = lbfgs_cfg(synth_store, tmp_path, 'model.cache="stream"')
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(cfg, scheduler="synchronous")
    undo()
    with np.load(tmp_path / "checkpoints" / "odd-even.npz") as z:
        state = json.loads(z["checkpoint_json"].tobytes().decode())["state"]
    assert 0 < state["n_iter"] < reference[0]["iterations"]
    resumed = run_pipeline(cfg, scheduler="synchronous", resume=True)
    assert resumed["featurized_sequences"] == 0
    assert model_arrays(tmp_path) == reference[1]
    assert resumed["passes"] == reference[0]["passes"] and resumed["accuracy"] == reference[0]["accuracy"]


def test_predict_reproduces_the_test_accuracy(reference, synth_store, tmp_path):
    from streamcov.stream.predict import predict

    res = reference[0]
    summary = predict(res["model_path"], synth_store.path, tmp_path / "p.csv", scheduler="synchronous")
    assert summary["accuracy"] == pytest.approx(res["accuracy"], abs=1e-12)


def test_early_stopping_in_the_pipeline(synth_store, tmp_path):
    res = run_pipeline(lbfgs_cfg(synth_store, tmp_path, "model.validation_fraction=0.25",
                                 "model.n_iter_no_change=2", "model.C=1e6", "model.tol=1e-12"),
                       scheduler="synchronous")
    assert res["stop"] in ("early_stopping", "line_search", "stalled")
    assert res["n_train"] == int((synth_store.subjects % 2 == 1).sum())


@pytest.mark.parametrize("sets,message", [
    (['model.loss="hinge"'], r'model\.loss = "hinge" is not a loss of learner "lbfgs": use "log_loss" or '
                             r'"squared_hinge"'),
    (['model.penalty="l1"'], r'model\.penalty = "l1": learner "lbfgs" fits the l2 penalty only'),
    (['model.cache="disk"'], r'--set model\.cache="disk": model\.cache = "disk": expected one of "auto", '
                             r'"memory" or "stream"'),
    (["model.max_iter=0"], r"--set model\.max_iter=0: model\.max_iter = 0: expected a value >= 1"),
    (["model.tol=0"], r"--set model\.tol=0: model\.tol = 0: expected a value > 0"),
    (["model.max_iters=5"], r"unknown key 'model\.max_iters' \(did you mean 'max_iter'\?\)"),
])
@pytest.mark.usefixtures("as_command")
def test_bad_lbfgs_settings_are_one_line_errors(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(REPO / "pipelines" / "msr_action3d.toml", ['model.learner="lbfgs"', *sets])


def test_the_loss_defaults_to_the_learner():
    cfg = load_config(REPO / "pipelines" / "msr_action3d_exact.toml", ['model.learner="lbfgs"'])
    assert cfg.model.loss == "log_loss"
    cfg = load_config(REPO / "pipelines" / "msr_action3d_exact.toml", ['model.learner="sgd"'])
    assert cfg.model.loss == "hinge"


@pytest.mark.parametrize("jit", [True, False], ids=["kernel", "numpy-buffer"])
@pytest.mark.parametrize("shape", [(1, 5), (3, 7), (17, 2000), (1048, 200), (300, 8), (100, 1), (1000, 2)])
def test_chunk_moments_are_those_of_the_casting_reductions(shape, jit, rng, monkeypatch):
    """partition_moments forms each chunk's float64 moments by the numba kernel (JIT running) or in a reused
    float64 buffer (not): either way the same bits as numpy's casting mean and the squared deviations of
    ``A - mean`` (both add the rows in order to +0.0), so the scaler and the mean correction of every fit
    are what they were and do not depend on whether a worker has started numba. A column of -0.0 (mean
    +0.0 in numpy) and one holding NaN are included."""
    import streamcov._config as C

    n, d = shape
    A = (rng.standard_normal((n, d)) * rng.uniform(0.1, 10, d) + rng.uniform(-5, 5, d)).astype(np.float32)
    A[:, 0] = -0.0
    if d > 2:
        A[n // 2, 1] = np.nan
    if d == 1:   # one column (numpy sums it pairwise): values whose order of addition shows
        A[:, 0] = np.float32(1.0)
        A[0, 0] = np.float32(1e16)
    monkeypatch.setattr(C, "jit_started", lambda: jit)
    part = L.PartData(A.copy(), A[:0].copy(), SimpleNamespace(y_fit=[np.zeros(n)], y_val=[np.zeros(0)]))
    got_n, got_mean, got_M2 = L.partition_moments(None, part)
    mean = A.mean(axis=0, dtype=np.float64)
    assert got_n == n and got_mean.tobytes() == mean.tobytes()
    assert got_M2.tobytes() == np.square(A - mean).sum(axis=0).tobytes()


def test_badly_scaled_features_train_or_say_to_standardize():
    """Features of size 1e3 train as sklearn's LogisticRegression does (training accuracy within 2 points:
    the two stop at different points of a nearly flat objective). At 1e6 the float32 objective's Wolfe
    search finds no step after the first (a backtracking fallback takes that one; before, the fit stopped
    at its start at chance with a warning about float32 precision): the warning says to standardize X."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 20))
    y = (X[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(int)
    est = LBFGSClassifier(max_iter=200).fit(X * 1e3, y)
    assert est.score(X * 1e3, y) >= LogisticRegression().fit(X * 1e3, y).score(X * 1e3, y) - 0.02
    with pytest.warns(ConvergenceWarning, match=r"L-BFGS found no step that lowers its float32 objective after "
                                                r"\d+ iteration\(s\) .*; X holds values up to \S+: standardize X"):
        est = LBFGSClassifier(max_iter=200).fit(X * 1e6, y)
    assert est.n_iter_ >= 1


def test_features_beyond_float32_are_refused():
    X, y = blobs(n=40, d=3, k=2)
    with pytest.raises(ValueError, match=r"X holds values up to \d\.\d+e\+39; the L-BFGS passes run in float32 and "
                                         r"take values below 1\.8e\+19: standardize X"):
        LBFGSClassifier().fit(X * 1e39, y)


def _timed_out():
    raise TimeoutError("read timed out")


def test_a_pass_stuck_after_its_worker_left_is_raised_as_lost(monkeypatch):
    """The scheduler, having lost a worker, rarely neither recomputes nor forgets a pass's tasks, and the fit
    waited forever (once in a CI run of the worker-kill test above). A pass still unfinished RECOVERY_WAIT
    seconds after one of its owners left is cancelled and raised as a lost-worker error, which the fit
    recovers from; one whose owners are all there is waited for."""
    import time as _time
    from concurrent.futures import CancelledError
    from types import SimpleNamespace

    from distributed import Client, LocalCluster

    monkeypatch.setattr(L, "RECOVERY_WAIT", 0.5)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        here = sorted(client.scheduler_info()["workers"])
        slow = client.submit(_time.sleep, 3.0, pure=False)
        t0 = _time.monotonic()
        assert L._Problem._gather(_bound(SimpleNamespace(owners=here, client=client), "_watch"), [slow]) == [None]
        assert _time.monotonic() - t0 > 2.5   # waited: its owner is there
        # a task's own TimeoutError is its error, raised at once (it was taken for the wait's and looped for ever)
        t0 = _time.monotonic()
        with pytest.raises(TimeoutError, match="read timed out"):
            L._Problem._gather(_bound(SimpleNamespace(owners=here, client=client), "_watch"),
                               [client.submit(_timed_out, pure=False)])
        assert _time.monotonic() - t0 < 30.0   # not looped for ever (a loose bound: another process shares the cores)
        stuck = client.submit(_time.sleep, 4.0, pure=False)   # raised long before it ends
        t0 = _time.monotonic()
        with pytest.raises(CancelledError, match=r"work still unfinished 0\.5 s after a worker holding its partitions"):
            L._Problem._gather(_bound(SimpleNamespace(owners=["tcp://10.255.255.1:1"], client=client), "_watch"),
                               [stuck])
        assert _time.monotonic() - t0 < 3.5 and stuck.cancelled()


class _Call:
    """A stand-in actor call: ``result`` raises ``error`` (or waits ``wait`` seconds, then gives [])."""

    def __init__(self, error=None, wait=0.0):
        self.error, self.wait = error, wait

    def result(self, timeout=None):
        import time as _time

        if self.error is not None:
            raise self.error
        if self.wait > (timeout or 0):
            _time.sleep(timeout)
            raise TimeoutError
        return []

    def done(self):
        return self.wait == 0


class _Actor:
    def __init__(self, call=None, lost=False):
        self.call, self.lost = call, lost

    def nodes(self, *args):
        if self.lost:
            raise RuntimeError("Worker holding Actor was lost.  Status: lost")
        return self.call


class _LeavingCluster(_LosingCluster):
    """Its workers leave after ``seen`` looks at the scheduler's list: a killed worker the scheduler notices
    only after a call to it has failed."""

    def __init__(self, workers, seen: int):
        super().__init__(workers)
        self.seen = seen

    def scheduler_info(self, n_workers=-1):
        self.seen -= 1
        if self.seen < 0:
            self.workers = []
        return super().scheduler_info(n_workers)


def _on_actor(actor, workers, client=None):
    p = SimpleNamespace(n_partitions=1, holders=[("w0", None, [[0]], actor)],
                        client=client or _LosingCluster(workers))
    return _bound(p, "_worker_left", "_watch")


def _actor_pass(p):
    """A pass through ``p``'s actors (:meth:`_Problem._on_actors`, as :meth:`_Problem._run` makes it)."""
    return L._Problem._on_actors(p, lambda actor: actor.nodes(L.partition_sums, L.merge_sums, 1, L.FAN_IN, ()),
                                 L.merge_sums)


def _bound(p, *methods):
    """``p`` with ``_Problem``'s ``methods`` bound to it."""
    for m in methods:
        setattr(p, m, getattr(L._Problem, m).__get__(p))
    return p


def test_an_actor_pass_whose_worker_left_is_raised_as_lost(monkeypatch):
    """Direct calls to the workers' actors: a call that cannot reach a worker that has left (or leaves
    within RECOVERY_WAIT: the scheduler notices a killed worker after a call to it has failed, as a CI run
    of the worker-kill test above once showed), an actor whose worker was lost, and a call still unanswered
    RECOVERY_WAIT seconds after its worker left are raised as lost-worker errors (the fit places the rows
    again); a failure on a worker that is still there is raised as it is."""
    import time
    from concurrent.futures import CancelledError

    monkeypatch.setattr(L, "RECOVERY_WAIT", 0.5)
    unreachable = OSError("Unable to contact Actor's worker")
    with pytest.raises(CancelledError, match="the worker w0 holding partitions left: Unable to contact"):
        _actor_pass(_on_actor(_Actor(_Call(unreachable)), []))
    # the scheduler notices the worker's departure after the call failed: waited for, then lost
    with pytest.raises(CancelledError, match="the worker w0 holding partitions left: Unable to contact"):
        _actor_pass(_on_actor(_Actor(_Call(unreachable)), None, _LeavingCluster(["w0"], seen=3)))
    t0 = time.monotonic()
    with pytest.raises(OSError, match="Unable to contact"):      # its worker stays: not a lost worker
        _actor_pass(_on_actor(_Actor(_Call(unreachable)), ["w0"]))
    assert time.monotonic() - t0 >= 0.5                          # after RECOVERY_WAIT
    with pytest.raises(FileNotFoundError, match="chunk"):       # the work's own OSError: raised at once
        _actor_pass(_on_actor(_Actor(_Call(FileNotFoundError("chunk X/c/3"))), ["w0"]))
    with pytest.raises(CancelledError, match="the worker w0 holding partitions left: Worker holding Actor was"):
        _actor_pass(_on_actor(_Actor(lost=True), ["w0"]))
    with pytest.raises(CancelledError, match=r"work still unfinished 0\.5 s after a worker holding its"):
        _actor_pass(_on_actor(_Actor(_Call(wait=60)), []))
    # the pass's own TimeoutError (a store on a network file system that timed out) is the pass's error, raised
    # at once, not taken for a call still running (it looped for ever: TimeoutError is what a wait raises too)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="read timed out"):
        _actor_pass(_on_actor(_Actor(_Call(TimeoutError("read timed out"))), ["w0"]))
    assert time.monotonic() - t0 < 10.0   # not looped for ever (a loose bound: another process shares the cores)
    with pytest.raises(ValueError, match="genuine"):             # an error of the pass itself
        _actor_pass(_on_actor(_Actor(_Call(ValueError("a genuine error"))), ["w0"]))


@pytest.mark.parametrize("C", [1e-320, 1e308])
def test_a_C_whose_penalty_is_zero_or_infinite_is_refused(C):
    """lam = 1 / (C n) infinite (C below the float range's reach) trained a model of one class at chance, without
    a word; 0 (C n overflowing) an unregularized one that the docs do not promise. Both are one ValueError."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 5)), np.arange(40) % 2
    with pytest.raises(ValueError, match=rf"^C={re.escape(repr(C))} gives the penalty 1 / \(C n\) = (inf|0\.0) for 40 training rows, "
                                         rf"which the learner cannot take; give C between 1e-300 and 1e300$"):
        LBFGSClassifier(C=C).fit(X, y)


def test_n_jobs_reads_as_scikit_learn_reads_it(monkeypatch):
    """n_jobs=-1 (all cores, by scikit-learn's habit) was refused; n_jobs beyond the cores warned in the command
    line's words (--workers, dask.workers). -1 and -2 count back from the cores, more than the cores is said in
    the estimator's own words, 0 is refused."""
    import warnings

    from sklearn.utils._param_validation import InvalidParameterError

    from streamcov import _config

    monkeypatch.setattr(_config, "available_cores", lambda: 2)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] > 0).astype(int)
    one = LBFGSClassifier().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (-1, -2, 2):
            np.testing.assert_allclose(LBFGSClassifier(n_jobs=n).fit(X, y).coef_, one.coef_, rtol=0, atol=1e-6)
    with pytest.warns(UserWarning, match=r"^n_jobs=8 and 2 cores available: 2 threads used$"):
        LBFGSClassifier(n_jobs=8).fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"'n_jobs' parameter of LBFGSClassifier must be None, an int in "
                                                    r"the range \[1, inf\) or an int in the range \(-inf, -1\]"):
        LBFGSClassifier(n_jobs=0).fit(X, y)


def test_binary_probabilities_of_large_scores_raise_no_overflow_warning():
    """1 / (1 + exp(-S)) warned of an overflow in exp for large negative scores (LogisticRegression does not);
    the probabilities are the same numbers."""
    X, y = blobs(n=200, d=5, k=2)
    est = LBFGSClassifier(loss="log_loss", C=1e6, max_iter=50).fit(X * 1e3, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = est.predict_proba(X * 1e6)
    S = est.decision_function(X * 1e6)
    assert np.abs(S).max() > 800   # exp(800) overflows float64
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(P[:, 1], 1.0 / (1.0 + np.exp(-S)), rtol=1e-12, atol=0)


def test_validation_split_is_the_stratified_holdout():
    """The L-BFGS learner's early-stopping rows are :func:`streamcov.splits.holdout`'s, drawn from the seed: a
    class of two rows among 98 keeps one to fit on (a plain draw of half the rows lost both in a quarter of
    the seeds)."""
    from streamcov.splits import holdout
    from streamcov.stream.lbfgs import validation_split

    y = np.array([0] * 98 + [1] * 2)
    train = np.ones(100, bool)
    for seed in range(10):
        fit, val = validation_split(y, train, 0.5, seed)
        ref = holdout(y, train, 0.5, np.random.default_rng(seed))
        assert (fit == ref[0]).all() and (val == ref[1]).all()
        assert fit[y == 1].sum() == 1 and val.sum() == 50


def test_the_cache_budget_is_the_containers_not_the_hosts(tmp_path, monkeypatch):
    """cache = "auto" measured the memory available by /proc/meminfo, which shows the host's memory inside a
    container: rows larger than the container's limit were cached, and the processes killed. The budget is now
    the least of MemAvailable, the container's limit less its usage, and ulimit -v."""
    from streamcov import _config
    from streamcov.stream import memory

    gib = 1 << 30
    (tmp_path / "memory.max").write_text(str(2 * gib))
    (tmp_path / "memory.current").write_text(str(gib // 2))
    monkeypatch.setattr(_config, "HARD_LIMITS", (str(tmp_path / "absent"), str(tmp_path / "memory.max")))
    monkeypatch.setattr(_config, "USAGE", (str(tmp_path / "absent.usage"), str(tmp_path / "memory.current")))
    monkeypatch.setattr(_config, "STATS", (str(tmp_path / "absent.stat"), str(tmp_path / "memory.stat")))
    monkeypatch.setattr(memory, "_machine_available", lambda: 64 * gib)
    assert _config.container_room() == gib + gib // 2
    assert memory.available_memory() == gib + gib // 2
    assert memory.memory_budget() == int(memory.CACHE_FRACTION * (gib + gib // 2))
    assert not memory.use_cache("auto", gib) and memory.use_cache("auto", gib // 4)
    # the inactive file cache (a feature store just written) is reclaimed before the limit: not counted as used
    (tmp_path / "memory.current").write_text(str(gib + gib // 2))
    (tmp_path / "memory.stat").write_text(f"anon 1000\nfile {gib}\ninactive_file {gib}\nactive_file 0\n")
    assert _config.container_room() == gib + gib // 2
    (tmp_path / "memory.max").write_text("max\n")   # no limit: the machine's figure
    assert _config.container_room() is None and memory.available_memory() == min(64 * gib, _config.total_memory())


def test_total_memory_reads_ulimit_v(tmp_path):
    """``ulimit -v`` (RLIMIT_AS) caps what an allocation may take; Linux ignores RLIMIT_RSS, which was the only
    limit read, so the checks made beforehand passed work that then failed with a MemoryError."""
    import subprocess
    import sys

    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.getrlimit("
            "resource.RLIMIT_AS)[1])); from streamcov._config import total_memory; print(total_memory(), "
            "total_memory(soft=True))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) == 3 << 30
    # not the memory a local cluster's workers share (each worker process has its own address space)
    assert int(out[1]) > 3 << 30
