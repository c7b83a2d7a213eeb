"""The L-BFGS fit in the span of the training rows (``span = "rows"``) against the fit over the features.

The minimizer of an L2-penalized linear loss lies in the span of the training rows, and the fit there is
the fit over the features in orthogonal coordinates: the same iterates in exact arithmetic, so the same
objective along the run, the same minimizer and the same predictions, up to the float32 rounding of the
passes (both routes multiply float32 rows, and stop where no float32 step lowers the objective).
"""
import json
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from streamcov.linear import linear_loss_gradient
from streamcov.stream import lbfgs as L
from streamcov.stream.lbfgs import LBFGSClassifier
from streamcov.stream.sgd import _ArrayBlocks
from test_training import synth_store  # noqa: F401  (the 240-sequence synthetic store of the SGD tests)


def wide(n=120, d=600, k=4, seed=0, offset=0.5):
    """Fewer rows than features, classes apart by about the noise, and an offset the centring removes."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 0.3
    y = rng.integers(0, k, n)
    X = (centres[y] + rng.standard_normal((n, d))) / np.sqrt(d) + offset
    return X, y


def fit(X, y, span, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # tol below what float32 passes reach
        return LBFGSClassifier(span=span, **{"tol": 1e-8, "max_iter": 3000, **kw}).fit(X, y)


@pytest.mark.parametrize("loss", ["log_loss", "squared_hinge"])
@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("C", [1.0, 100.0])
def test_the_fit_in_the_span_is_the_fit_over_the_features(loss, k, C):
    X, y = wide(k=k, seed=k)
    a = fit(X, y, "features", loss=loss, C=C)
    b = fit(X, y, "rows", loss=loss, C=C)
    assert a.fit_info_["span"] == "features" and b.fit_info_["span"] == "rows"
    # rank: the 120 rows less the direction the centring takes out
    assert b.fit_info_["rank"] == 119 and b.coef_.shape == a.coef_.shape == (1 if k == 2 else k, 600)
    # the same iterates in exact arithmetic: the objective along the first iterations agrees to the
    # float32 rounding of the passes (about 1e-7 relative; 1e-5 allowed, the runs drift apart slowly)
    m = min(8, len(a.loss_curve_), len(b.loss_curve_))
    np.testing.assert_allclose(b.loss_curve_[:m], a.loss_curve_[:m], rtol=1e-5)
    # the minimizer: both stop at the float32 precision of the objective, gradients of 1e-7 .. 1e-5;
    # measured coefficient differences up to 1e-3 of the largest and score differences up to 1.4e-3
    # (squared hinge, two classes, C = 100, whose weakest curvature is lam = 1 / (C n) = 8e-5); 3e-3
    # allowed
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=0, atol=3e-3 * np.abs(a.coef_).max())
    Sa, Sb = a.decision_function(X), b.decision_function(X)
    np.testing.assert_allclose(Sb, Sa, rtol=0, atol=3e-3 * np.abs(Sa).max())
    # the float64 objective of both: equal to 1e-5 relative. Each stops where no float32 step lowers it;
    # the near-separable fits (squared hinge, C = 100) end at f ~ 1e-3, where that is 1e-6 relative
    # (measured: up to 1.4e-6)
    fa = linear_loss_gradient(X, y, a.coef_, a.intercept_, loss=loss, C=C, dtype=np.float64)[0]
    fb = linear_loss_gradient(X, y, b.coef_, b.intercept_, loss=loss, C=C, dtype=np.float64)[0]
    assert fb == pytest.approx(fa, rel=1e-5)


@pytest.mark.parametrize("scale", ["none", "center", "standard"])
def test_the_span_route_folds_every_scaler(scale):
    X, y = wide(n=90, d=400, k=3, seed=1)
    X[:, :50] *= 7.0   # columns of another scale: "standard" changes the problem, "center" does not
    blocks, mask = _ArrayBlocks(X.astype(np.float32), 32), np.ones(len(X), dtype=bool)
    out = {}
    for span in ("features", "rows"):
        est = LBFGSClassifier(loss="squared_hinge", C=10.0, tol=1e-7, max_iter=3000, span=span)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf, scaler = L.train_lbfgs(blocks, y, mask, np.arange(3), est, scale=scale)
        Xs = X if scaler is None else scaler.transform(X)
        out[span] = (clf, scaler, clf.decision_function(Xs))
    (a, sa, Sa), (b, sb, Sb) = out["features"], out["rows"]
    assert b.fit_info_["span"] == "rows"
    assert (sa is None) == (sb is None) == (scale == "none")
    if sa is not None:
        # the scaler from float64 column moments equals the streamed one to rounding
        np.testing.assert_allclose(sb.mean_, sa.mean_, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sb.scale_, sa.scale_, rtol=1e-10)
    # the float64 objective of the scaled problem: equal to 1e-5 relative (as above), 1e-4 with "standard",
    # whose rows of norm ~20 against lam = 1 / (C n) = 1e-3 leave the weakest curvature 4e5 times below the
    # strongest: where the two routes stop within float32 precision along that direction moves with the
    # rounding of the BLAS and numpy at hand (measured 3e-6 in an earlier environment, 2.1e-5 with numpy
    # 2.4.6 and scipy 1.17.1), and scores at the same objective differ by up to 0.5%: 1e-2 allowed
    Xs = X if sa is None else sa.transform(X)
    fa = linear_loss_gradient(Xs, y, a.coef_, a.intercept_, loss="squared_hinge", C=10.0, dtype=np.float64)[0]
    fb = linear_loss_gradient(Xs, y, b.coef_, b.intercept_, loss="squared_hinge", C=10.0, dtype=np.float64)[0]
    assert fb == pytest.approx(fa, rel=1e-4 if scale == "standard" else 1e-5)
    np.testing.assert_allclose(Sb, Sa, rtol=0, atol=1e-2 * np.abs(Sa).max())
    assert (Sb.argmax(axis=1) == Sa.argmax(axis=1)).mean() >= 0.98


def test_the_span_route_is_scikit_learn_logistic_regression():
    X, y = wide(n=150, d=800, k=5, seed=4)
    ours = fit(X, y, "rows", C=1.0, tol=1e-6)
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=10000).fit(X, y)
    # the multinomial coefficients are fixed up to a common shift per feature (softmax): compare centred
    # rows; tolerance as for the feature route (tests/test_lbfgs.py): 5e-4 of the largest coefficient
    W, R = ours.coef_ - ours.coef_.mean(axis=0), ref.coef_ - ref.coef_.mean(axis=0)
    np.testing.assert_allclose(W, R, rtol=0, atol=5e-4 * np.abs(R).max())
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-4)


def test_early_stopping_in_the_span_follows_the_same_validation_curve():
    # more features than rows, weak regularization: the validation loss turns up
    X, y = wide(n=160, d=800, k=8, seed=5)
    kw = dict(C=1e4, tol=1e-9, max_iter=300, validation_fraction=0.25, n_iter_no_change=3, random_state=7)
    a = fit(X, y, "features", **kw)
    b = fit(X, y, "rows", **kw)
    assert b.fit_info_["span"] == "rows" and b.fit_info_["n_validation"] == 40 and b.fit_info_["n_fit"] == 120
    # the held-out rows are the same draw, their loss along the run the same to float32 rounding
    m = min(len(a.validation_loss_curve_), len(b.validation_loss_curve_), 6)
    np.testing.assert_allclose(b.validation_loss_curve_[:m], a.validation_loss_curve_[:m], rtol=1e-5)
    assert b.stop_reason_ == "early_stopping" and b.best_iter_ == int(np.argmin(b.validation_loss_curve_))


@pytest.mark.parametrize("span", ["features", "rows"])
def test_a_refit_without_validation_keeps_no_curve_of_the_fit_before(span):
    """A refit with validation_fraction = 0 kept the earlier fit's validation_loss_curve_ and best_iter_, which
    then described another run (a curve longer than this fit's loss curve)."""
    X, y = wide(n=160, d=800, k=3, seed=5)
    est = LBFGSClassifier(span=span, max_iter=20, validation_fraction=0.3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
        assert hasattr(est, "validation_loss_curve_") and hasattr(est, "best_iter_")
        est.set_params(validation_fraction=0.0).fit(X, y)
    assert not hasattr(est, "validation_loss_curve_") and not hasattr(est, "best_iter_")
    assert len(est.loss_curve_) == est.n_iter_ + 1


def test_a_warm_start_from_a_model_outside_the_span_reaches_the_same_minimum():
    # a model fitted on other rows has components outside the span of these: the span route starts from
    # its projection on the span, and ends at the same minimizer as a cold fit
    X, y = wide(n=100, d=500, k=4, seed=7)
    other_rows, other_y = wide(n=100, d=500, k=4, seed=8)
    mask = np.ones(len(X), dtype=bool)
    blocks = _ArrayBlocks(X.astype(np.float32), 32)
    start = LBFGSClassifier(C=3.0, span="features", warm_start=True)
    L.train_lbfgs(_ArrayBlocks(other_rows.astype(np.float32), 32), other_y, mask, np.arange(4), start,
                  scale="center")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cold, scaler = L.train_lbfgs(blocks, y, mask, np.arange(4), LBFGSClassifier(C=30.0, tol=1e-7, span="rows"),
                                     scale="center")
        warm, _ = L.train_lbfgs(blocks, y, mask, np.arange(4), start.set_params(C=30.0, tol=1e-7, span="rows"),
                                scale="center")
    assert warm.fit_info_["span"] == "rows" and warm.loss_curve_[0] != cold.loss_curve_[0]
    # both at the minimum to float32 precision: tolerance as in the first test
    Sa, Sb = cold.decision_function(scaler.transform(X)), warm.decision_function(scaler.transform(X))
    np.testing.assert_allclose(Sb, Sa, rtol=0, atol=3e-3 * np.abs(Sa).max())


def test_a_warm_start_in_the_span_continues_from_the_previous_model():
    X, y = wide(n=100, d=500, k=4, seed=6)
    est = LBFGSClassifier(C=5.0, tol=1e-5, warm_start=True, span="rows").fit(X, y)
    first = est.coef_.copy()
    est.fit(X, y)
    assert est.fit_info_["span"] == "rows" and est.n_iter_ <= 1   # projected on the span: at the minimum
    np.testing.assert_allclose(est.coef_, first, atol=1e-5 * np.abs(first).max())
    # from a model fitted over the features, to another C
    other = LBFGSClassifier(C=20.0, tol=1e-5, span="features").fit(X, y)
    cold = LBFGSClassifier(C=20.0, tol=1e-5, span="rows").fit(X, y)
    est.set_params(C=20.0).fit(X, y)
    assert est.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(est.coef_, other.coef_, atol=2e-3 * np.abs(other.coef_).max())


def test_auto_chooses_the_span_for_few_rows_per_class():
    def route(n, d, n_classes, span="auto"):
        return L.span_route(LBFGSClassifier(span=span), _ArrayBlocks(np.zeros((n, d), np.float32), 64), n, 0,
                            n_classes)

    # at most half as many rows as features, and at most 25 per score column
    assert route(291, 5000, 20) and route(99, 5000, 10)
    assert not route(291, 500, 20)            # more than half the features
    assert not route(600, 5000, 20)           # 30 rows per class
    assert not route(30, 5000, 2)             # two classes: one score column, 25 rows
    assert route(25, 5000, 2)
    assert not route(291, 5000, 20, "features") and route(291, 500, 20, "rows")


def test_span_rows_beyond_its_limits_is_a_clear_error(monkeypatch):
    X, y = wide(n=60, d=200, k=3)
    monkeypatch.setattr(L, "SPAN_MAX_ROWS", 50)
    with pytest.raises(ValueError, match=r"span='rows': the span holds the 60 training rows, their 60 x 60 Gram matrix .* "
                                         r"at most 50 rows and 2 GiB; use span='features'"):
        LBFGSClassifier(span="rows").fit(X, y)
    assert LBFGSClassifier(span="auto").fit(X, y).fit_info_["span"] == "features"
    monkeypatch.setattr(L, "SPAN_MAX_ROWS", 8192)
    monkeypatch.setattr(L, "SPAN_MAX_BYTES", L.span_bytes(60, 0, 200) - 1)
    with pytest.raises(ValueError, match=r"at most 8192 rows and .* GiB"):
        LBFGSClassifier(span="rows").fit(X, y)


def test_auto_is_decided_by_the_shapes_and_the_cache_setting_only():
    blocks = _ArrayBlocks(np.zeros((291, 5000), np.float32), 64)
    assert L.span_route(LBFGSClassifier(cache="memory"), blocks, 291, 0, 20)
    assert L.span_route(LBFGSClassifier(cache="auto"), blocks, 291, 0, 20)
    # rows asked not to be held in memory: the passes stream them
    assert not L.span_route(LBFGSClassifier(cache="stream"), blocks, 291, 0, 20)
    assert L.span_route(LBFGSClassifier(cache="stream", span="rows"), blocks, 291, 0, 20)
    # the byte bound: rows, the Gram matrix, its eigenvectors, the span coordinates
    assert L.span_bytes(291, 30, 5000) == 4 * 5000 * 321 + 8 * (4 * 291 * 291 + 30 * 291) + 4 * 321 * 291


def test_rows_that_span_nothing_fit_the_intercept_over_the_features():
    X = np.ones((40, 300))
    y = np.arange(40) % 2
    est = LBFGSClassifier(span="rows").fit(X, y)
    assert est.fit_info_["span"] == "features" and np.all(est.coef_ == 0)


def test_the_span_fit_resumes_from_its_checkpoint_to_the_same_model(tmp_path, monkeypatch):
    X, y = wide(n=120, d=600, k=4, seed=8)
    blocks, mask, ck = _ArrayBlocks(X.astype(np.float32), 32), np.ones(len(X), dtype=bool), tmp_path / "c.npz"
    monkeypatch.setattr(L, "CHECKPOINT_INTERVAL", 0.0)

    def run(resume):
        est = LBFGSClassifier(loss="squared_hinge", C=100.0, max_iter=400, span="rows")
        clf, _ = L.train_lbfgs(blocks, y, mask, np.arange(4), est, scale="center", checkpoint=ck,
                               resume=resume, fingerprint="f")
        return clf

    whole = run(False)
    assert whole.fit_info_["span"] == "rows" and whole.n_iter_ > 20
    ck.unlink()
    from test_lbfgs import crash_at_pass

    undo = crash_at_pass(monkeypatch, 15)
    with pytest.raises(KeyboardInterrupt):
        run(False)
    undo()
    with np.load(ck) as z:
        doc = json.loads(z["checkpoint_json"].tobytes().decode())
    assert 0 < doc["state"]["n_iter"] < whole.n_iter_ and "span rows 119" in doc["fingerprint"]
    resumed = run(True)
    assert resumed.coef_.tobytes() + resumed.intercept_.tobytes() == whole.coef_.tobytes() + whole.intercept_.tobytes()
    assert resumed.n_iter_ == whole.n_iter_


def test_the_span_fit_is_the_same_bits_on_one_and_two_blas_threads():
    """OpenBLAS rounds some product shapes differently on 1 and 2 threads (these among them); every product
    of the route runs on one thread, so the caller's limit does not reach the model."""
    from streamcov._config import blas_threads

    rng = np.random.default_rng(0)
    n, d, k = 1600, 3200, 20
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, k, n)
    out = []
    for threads in (1, 2):
        est = LBFGSClassifier(C=1e3, max_iter=20, span="rows", validation_fraction=0.0625, random_state=0)
        with blas_threads(threads), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf, _ = L.train_lbfgs(_ArrayBlocks(X, 64), y, np.ones(n, dtype=bool), np.arange(k), est,
                                   scale="center")   # (fails on the code before the fix; with "none" it did not)
        assert clf.fit_info_["span"] == "rows"
        out.append(clf.coef_.tobytes() + clf.intercept_.tobytes())
    assert out[0] == out[1]


def test_a_checkpoint_is_not_resumed_in_another_basis(tmp_path, monkeypatch):
    """Rows with repeated eigenvalues (one-hot rows): a basis computed with other rounding comes out
    rotated, and a checkpoint's span coordinates would mean another model in it."""
    rng = np.random.default_rng(0)
    X = np.zeros((60, 4000))
    X[np.arange(60), rng.integers(0, 4000, 60)] = 1.0
    y = np.arange(60) % 3
    blocks, mask, ck = _ArrayBlocks(X.astype(np.float32), 32), np.ones(60, dtype=bool), tmp_path / "c.npz"

    def run(resume):
        est = LBFGSClassifier(loss="squared_hinge", C=10.0, span="rows")
        return L.train_lbfgs(blocks, y, mask, np.arange(3), est, checkpoint=ck, resume=resume, fingerprint="f")[0]

    first = run(False)
    assert ck.is_file() and not first.fit_info_["checkpoint_ignored"]
    panels = L._panels

    def halves(X, mean, inv):   # the same products summed over half panels: other last bits, same constants
        for j0, j1, B in panels(X, mean, inv):
            h = (j1 - j0) // 2
            yield j0, j0 + h, np.ascontiguousarray(B[:, :h])
            yield j0 + h, j1, np.ascontiguousarray(B[:, h:])

    monkeypatch.setattr(L, "_panels", halves)
    resumed = run(True)
    assert resumed.fit_info_["checkpoint_ignored"] and resumed.fit_info_["passes"] > 1
    ck.unlink()
    fresh = run(False)
    assert resumed.coef_.tobytes() == fresh.coef_.tobytes()
    # the other basis is another rounding of the same span: the same model to float32 precision
    np.testing.assert_allclose(resumed.decision_function(X), first.decision_function(X), rtol=0, atol=1e-3)


def test_the_span_route_through_the_pipeline_resumes_and_predicts(synth_store, tmp_path):
    from streamcov.stream.predict import predict
    from streamcov.tasks import run as run_pipeline
    from test_lbfgs import lbfgs_cfg, model_arrays

    cfg = lbfgs_cfg(synth_store, tmp_path, 'model.span="auto"', "model.C=100.0", 'model.loss="squared_hinge"')
    res = run_pipeline(cfg, scheduler="threads")
    # 120 training rows of 256 features, 8 classes: the span of the rows
    assert res["span"] == "rows" and res["rank"] <= 120 and res["gram_flops"] == 120 * 121 * 256
    assert res["gram_seconds"] > 0 and res["passes"] >= res["iterations"] > 0
    want = model_arrays(tmp_path)
    again = run_pipeline(cfg, scheduler="threads", resume=True)
    assert again["featurized_sequences"] == 0 and model_arrays(tmp_path) == want
    summary = predict(res["model_path"], synth_store.path, tmp_path / "p.csv", scheduler="synchronous")
    assert summary["accuracy"] == pytest.approx(res["accuracy"], abs=1e-12)
    features = run_pipeline(lbfgs_cfg(synth_store, tmp_path / "f", "model.C=100.0", 'model.loss="squared_hinge"'),
                            scheduler="threads")
    # the same minimizer: the same test predictions but for rows at a tie (none expected of 120)
    assert features["span"] == "features" and features["accuracy"] == pytest.approx(res["accuracy"], abs=0.02)


def test_span_is_a_model_key_of_lbfgs_only():
    from conftest import REPO
    from streamcov.errors import ConfigError
    from streamcov.tasks.config import load_config

    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml", ['model.span="rows"'])
    assert cfg.model.learner == "lbfgs" and L.make_lbfgs(cfg.model, 100, 0).span == "rows"
    with pytest.raises(ConfigError, match=r"model.span.*not read by learner \"sgd\""):
        load_config(REPO / "pipelines" / "msr_action3d.toml", ['model.learner="sgd"', 'model.span="rows"'])
    with pytest.raises(ConfigError, match=r"model.span"):
        load_config(REPO / "pipelines" / "msr_action3d.toml", ['model.span="dual"'])
