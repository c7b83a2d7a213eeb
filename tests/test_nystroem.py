"""GaussianNystroem: one landmark set for a Gaussian kernel or a sum of them over column blocks."""
import os

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from reference import block_sum_gram, nystroem_features
from streamcov.features import GaussianNystroem
from streamcov.features.registry import for_fit_rows, make_feature_map

BLOCKS = [[3, 1 / 3], [3, 1 / 3], [4, 1 / 3]]


@parametrize_with_checks([GaussianNystroem(n_components=5)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture
def rows():
    return np.random.default_rng(3).standard_normal((40, 10))


@pytest.mark.parametrize("blocks", [None, BLOCKS])
def test_matches_the_reference(rows, blocks):
    """The features are k(X, L) K_LL^{-1/2} of the reference (eigendecomposition, pairwise loops)."""
    est = GaussianNystroem(n_components=15, sigma=1.3, blocks=blocks, random_state=0).fit(rows)
    L = rows[est.component_indices_]
    ref = nystroem_features(rows, L, blocks or [[10, 1.0]], 1.3)
    np.testing.assert_allclose(est.transform(rows), ref, rtol=1e-7, atol=1e-9)


def test_every_row_a_landmark_gives_the_exact_gram(rows):
    """More landmarks asked than rows: every row is one, and Z Z^T is the exact kernel of the rows."""
    est = GaussianNystroem(n_components=1000, sigma=2.0, blocks=BLOCKS, random_state=1).fit(rows)
    Z = est.transform(rows)
    assert Z.shape == (40, 40) and est.get_feature_names_out().shape == (40,)
    np.testing.assert_allclose(Z @ Z.T, block_sum_gram(rows, rows, BLOCKS, 2.0), atol=1e-10)


def test_out_of_sample_is_the_projection_onto_the_landmarks(rows):
    """z(x).z(y) = k(x, L) K_LL^-1 k(L, y) for rows that are not landmarks; on landmarks it is k itself."""
    est = GaussianNystroem(n_components=12, sigma=1.0, blocks=BLOCKS, random_state=2).fit(rows[:30])
    L = est.components_
    new = rows[30:]
    K_LL = block_sum_gram(L, L, BLOCKS, 1.0)
    k_xL = block_sum_gram(new, L, BLOCKS, 1.0)
    np.testing.assert_allclose(est.transform(new) @ est.transform(new).T,
                               k_xL @ np.linalg.solve(K_LL, k_xL.T), atol=1e-9)
    ZL = est.transform(L)
    np.testing.assert_allclose(ZL @ ZL.T, K_LL, atol=1e-10)


def test_one_landmark_set_serves_every_block(rows):
    """The sum's map is not a map per block: the same landmark rows for all, weights in the kernel."""
    est = GaussianNystroem(n_components=8, sigma=1.0, blocks=BLOCKS, random_state=0).fit(rows)
    assert est.components_.shape == (8, 10)
    np.testing.assert_array_equal(est.components_, rows[est.component_indices_])
    assert np.all(np.diff(est.component_indices_) > 0)


def test_repeated_rows_do_not_blow_up():
    """Landmarks that repeat make K_LL singular: the null directions are dropped, not divided by ~0."""
    base = np.random.default_rng(0).standard_normal((5, 4))
    X = np.vstack([base, base])
    est = GaussianNystroem(n_components=10, sigma=1.0, random_state=0).fit(X)
    Z = est.transform(X)
    assert np.isfinite(Z).all() and np.abs(Z).max() < 10
    np.testing.assert_allclose(Z @ Z.T, block_sum_gram(X, X, [[4, 1.0]], 1.0), atol=1e-8)


def test_float32_stays_float32(rows):
    est = GaussianNystroem(n_components=10, random_state=0).fit(rows.astype(np.float32))
    assert est.components_.dtype == np.float32
    Z = est.transform(rows.astype(np.float32))
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, GaussianNystroem(n_components=10, random_state=0).fit(rows).transform(rows),
                               atol=1e-4)


def test_blocks_must_cover_the_columns(rows):
    with pytest.raises(ValueError, match="blocks cover 10 columns, the input has 9"):
        GaussianNystroem(blocks=BLOCKS).fit(rows[:, :9])
    with pytest.raises(ValueError, match=r"blocks must be \[width, weight\] pairs with width >= 1 and weight > 0"):
        GaussianNystroem(blocks=[[5, 0.5], [5, -0.5]]).fit(rows)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        GaussianNystroem().fit(np.where(rows > 2, np.nan, rows))
    est = GaussianNystroem(blocks=BLOCKS).fit(rows)
    with pytest.raises(ValueError, match="X has 9 features"):
        est.transform(rows[:, :9])


def test_registry_builds_one_map_of_the_sum():
    """features.map = "nystroem" with pyramid blocks is one GaussianNystroem over all blocks, sigma as given."""
    fmap = make_feature_map({"map": "nystroem", "n_components": 50, "sigma": 0.5, "blocks": BLOCKS}, seed=4)
    assert isinstance(fmap, GaussianNystroem)
    assert fmap.blocks == BLOCKS and fmap.sigma == 0.5 and fmap.n_components == 50


def test_landmarks_are_capped_by_the_fitted_rows():
    """A file's n_components above the training rows means every row: the width is known before the fit."""
    p = {"map": "nystroem", "n_components": 2048}
    assert for_fit_rows(p, 291)["n_components"] == 291
    assert for_fit_rows(p, 5000) is p
    rgw = {"map": "rgw", "n_components": 2048}
    assert for_fit_rows(rgw, 10) is rgw


def test_width_is_the_landmarks_once_fitted(rows):
    """What feature stores and models read as the map's width (registry.output_dim)."""
    from streamcov.features.registry import output_dim

    est = GaussianNystroem(n_components=100)
    assert output_dim(est, 10) == 100
    assert output_dim(est.fit(rows), 10) == 40


def test_the_fitted_map_is_the_same_bits_whatever_blas_threads_the_process_has():
    """A Nystroem fit (K_LL's products and eigendecomposition) rounds with BLAS's thread count: the map a run
    fits on its driver must not depend on what the process had set (a CLI run against the same pipeline in a
    notebook whose BLAS another library limited gave features differing in the last bits)."""
    from threadpoolctl import threadpool_limits

    from streamcov.features.registry import fit_feature_map

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: BLAS runs one thread whatever the limit")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3000))
    params = {"map": "nystroem", "n_components": 500, "sigma": 30.0}
    with threadpool_limits(2, "blas"):
        a, _ = fit_feature_map(params, 0, X.shape[1], X)
    with threadpool_limits(1, "blas"):
        b, _ = fit_feature_map(params, 0, X.shape[1], X)
    np.testing.assert_array_equal(a.normalization_, b.normalization_)


def test_the_fitted_map_does_not_depend_on_when_scipy_was_loaded(tmp_path):
    """numpy and scipy each bring their own OpenBLAS; a process that limited BLAS before it loaded scipy.linalg
    (a CLI run: featurization first) and one that loaded it first (a notebook, the test process) must fit the
    same map: the limiter (_config.blas_threads) covers scipy's BLAS whichever was loaded first."""
    import subprocess
    import sys

    code = """
import sys, hashlib
import numpy as np
from streamcov._config import blas_threads
if sys.argv[1] == "early":
    import scipy.linalg
with blas_threads(1):
    np.ones((4, 4)) @ np.ones((4, 4))
from streamcov.features.registry import fit_feature_map
X = np.random.default_rng(0).standard_normal((300, 3000))
m, _ = fit_feature_map({"map": "nystroem", "n_components": 500, "sigma": 30.0}, 0, 3000, X)
print(hashlib.sha256(m.normalization_.tobytes()).hexdigest())
"""
    out = [subprocess.run([sys.executable, "-c", code, when], capture_output=True, text=True, timeout=300)
           for when in ("early", "late")]
    assert all(o.returncode == 0 for o in out), [o.stderr[-500:] for o in out]
    assert out[0].stdout == out[1].stdout


def test_fitted_on_its_landmarks_alone_the_map_is_the_same_bits(rows):
    """landmark_indices names the rows fit reads: fitted on those rows only (what the out-of-core driver
    computes), the landmarks are the same rows in the same order, so the map and its features are the same
    bits."""
    whole = GaussianNystroem(n_components=12, sigma=1.3, blocks=BLOCKS, random_state=4).fit(rows)
    read = whole.landmark_indices(len(rows))
    np.testing.assert_array_equal(read, whole.component_indices_)
    alone = GaussianNystroem(n_components=12, sigma=1.3, blocks=BLOCKS, random_state=4).fit(rows[read])
    assert alone.components_.tobytes() == whole.components_.tobytes()
    assert alone.normalization_.tobytes() == whole.normalization_.tobytes()
    assert alone.transform(rows).tobytes() == whole.transform(rows).tobytes()


def _driver_source(tmp_path, pyramid: bool):
    """A generated store's skeleton source (positions and velocities in a two-level pyramid, or the plain
    covariance) and its training rows."""
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.stream.skeleton import skeleton_source

    store = ingest(SyntheticSkeletons(n_sequences=90, seed=2), tmp_path / "s.zarr", chunk_frames=700)
    opts = dict(features=["positions", "velocities"], levels=2, overlap=True, mean_weight=1.0) if pyramid else {}
    source = skeleton_source(store, "store", 1e-2, True, **opts)
    return source, np.arange(source.n) % 3 != 0


def _featurize_holding(tmp_path, monkeypatch, source, train, params):
    """featurize of ``source`` with ``params`` (a fit sample of 60, the bandwidth checked on its first 5 rows),
    the row counts each rows_of call of the driver held, the fit sample's rows and every row, computed alike."""
    from streamcov.features import registry
    from streamcov.stream import featurize as F
    from streamcov.stream.runtime import dask_runtime
    from streamcov.stream.source import block_bounds

    monkeypatch.setattr(registry, "BANDWIDTH_CHECK_ROWS", 5)   # the first 5 of the sample, here
    held = []
    rows_of = F.rows_of
    monkeypatch.setattr(F, "rows_of", lambda *a, **k: (lambda r: held.append(len(r)) or r)(rows_of(*a, **k)))
    bounds = block_bounds(source.n, 16)
    with dask_runtime("threads", 2) as rt:
        feat = F.featurize(source, params, seed=7, train=train, path=tmp_path / "f.zarr", runtime=rt,
                           bounds=bounds, fit_sample=60)
        sample = rows_of(source, F.fit_sample_rows(train, 60, 7), bounds, rt)
        every = rows_of(source, np.arange(source.n), bounds, rt)
    # block by block, as the driver transforms (a GEMM's last bits depend on its shape)
    transformed = (lambda fmap: np.concatenate([F._transform(fmap, every[b0:b1])
                                                for b0, b1 in zip(bounds[:-1], bounds[1:])]))
    return feat, held, sample, transformed


@pytest.mark.parametrize("pyramid", [False, True])
def test_the_driver_holds_only_the_landmarks_of_the_fit_sample(tmp_path, monkeypatch, pyramid):
    """featurize holds the descriptors of the landmark rows (12 of a fit sample of 60) and of the rows the
    bandwidth is checked on, and computes only those: its map, component_indices_ included, and its feature store
    are the bits of a map fitted on the whole sample (a row's bits do not depend on the rows computed with it: the
    eigensolver's lanes are independent; when they were not, a pyramid's rows differed in the last bit, and
    L-BFGS made that another model)."""
    from streamcov.features.registry import fit_feature_map

    source, train = _driver_source(tmp_path, pyramid)
    params = {"map": "nystroem", "n_components": 12, "sigma": 1.0}
    feat, held, sample, transformed = _featurize_holding(tmp_path, monkeypatch, source, train, params)
    want = np.union1d(feat.feature_map.component_indices_, np.arange(5))
    assert held == [len(want)] and len(want) < 60
    whole, _ = fit_feature_map(params, 7, source.dim, sample)
    for name in ("components_", "normalization_", "component_indices_"):
        assert getattr(feat.feature_map, name).tobytes() == getattr(whole, name).tobytes(), name
    stored = feat.store.read_blocks(0, feat.store.n_blocks)
    assert stored.tobytes() == transformed(whole).astype(stored.dtype).tobytes()


@pytest.mark.parametrize("pyramid", [False, True])
def test_the_driver_holds_no_fit_sample_for_a_centred_map(tmp_path, monkeypatch, pyramid):
    """A centred RGW map reads only the mean of its fit sample: featurize sums the sample's rows as their blocks
    come and holds only the rows the bandwidth is checked on (5 of 60 here; 2048 of MSR-Action3D's pyramid
    descriptors were 1.2 GB held for one mean). Its map (the mean of every block) and its feature store are the
    bits of a map fitted on the whole sample held at once. Not so (the sample held, as before) with two views
    (the mirror), a median bandwidth, a Maclaurin map, or a block one column wide, whose means numpy gives in
    other bits."""
    from streamcov.features.registry import fit_feature_map, fit_reads_mean_only

    source, train = _driver_source(tmp_path, pyramid)
    params = {"map": "rgw", "n_components": 40, "sigma": 1.0, "center": True, "theta": 0.7,
              "sampling": "stratified"}
    if pyramid:
        params["blocks"] = [[int(w), float(c)] for w, c in source.kernel_blocks]
    assert fit_reads_mean_only(params, source.dim) and not fit_reads_mean_only({**params, "views": 2}, source.dim)
    assert not fit_reads_mean_only({**params, "bandwidth": "median"}, source.dim)
    assert not fit_reads_mean_only({**params, "map": "maclaurin"}, source.dim)
    assert not fit_reads_mean_only({**params, "blocks": [[1, 1.0], [source.dim - 1, 1.0]]}, source.dim)
    assert not fit_reads_mean_only({k: v for k, v in params.items() if k != "blocks"}, 1)
    feat, held, sample, transformed = _featurize_holding(tmp_path, monkeypatch, source, train, params)
    assert held == [5]
    whole, _ = fit_feature_map(params, 7, source.dim, sample)
    maps = ([(getattr(feat.feature_map, f"block{b}_"), getattr(whole, f"block{b}_"))
             for b in range(whole.n_blocks_)] if pyramid else [(feat.feature_map, whole)])
    for got, want in maps:
        assert got.mean_.tobytes() == want.mean_.tobytes()
        assert got.projections_.tobytes() == want.projections_.tobytes()
    stored = feat.store.read_blocks(0, feat.store.n_blocks)
    assert stored.tobytes() == transformed(whole).astype(stored.dtype).tobytes()


def test_the_nested_benchmark_features_from_precomputed_distances_are_the_maps(rows):
    """benchmarks/nested_selection.py builds the features of every fold from one kernel between all rows;
    with every fit row a landmark they give the map's Gram matrix (blocks and views, as the skeleton files)."""
    import sys

    from conftest import REPO
    from streamcov.kernels import block_distances, block_kernel

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from nested_selection import nystroem_features as from_kernel
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    blocks = [[2, 0.5], [3, 0.5]]   # two views of 5 columns
    fit = np.zeros(len(rows), dtype=bool)
    fit[::3] = True
    K = block_kernel(block_distances(rows, None, blocks, 2), blocks, 0.7, 2)
    Z = from_kernel(K, fit, np.arange(len(rows)))
    est = GaussianNystroem(n_components=1000, sigma=0.7, blocks=blocks, views=2, random_state=0).fit(rows[fit])
    Zm = est.transform(rows)
    # the same algebra on kernels computed in another order: equal to rounding (1e-12 on values of order 1)
    np.testing.assert_allclose(Z @ Z.T, Zm @ Zm.T, atol=1e-12)
    np.testing.assert_allclose(Z, Zm, atol=1e-10)   # the same features: K_LL^{-1/2} does not depend on eigh's signs
