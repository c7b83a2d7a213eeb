"""Images out of core: image store -> Dask graph -> feature store -> partial_fit SGD."""
import json
import re

import numpy as np
import pytest
import zarr

from conftest import predictions
from streamcov.data.images import ImageStoreWriter, ingest_images
from streamcov.data.imageio import skimage_textures
from streamcov.descriptors.image import ImageDescriptor, feature_moments, feature_scale
from streamcov.descriptors.pixels import get_spec
from streamcov.errors import ConfigError, IncompleteStoreError
from streamcov.kernels import sigma_from_paper004
from streamcov.stream.image import ImageSource
from streamcov.stream.runtime import dask_runtime
from streamcov.stream.source import block_bounds
from streamcov.tasks import image_eval as ev
from streamcov.tasks import run as run_pipeline

pytestmark = pytest.mark.usefixtures("one_blas_thread")


@pytest.fixture(scope="module")
def textures():
    """scikit-image's brick / grass / gravel: 3 classes x 8 patches of 32 x 32."""
    return skimage_textures(patch=32, max_per_class=8)


@pytest.fixture(scope="module")
def store(tmp_path_factory, textures):
    """The patches in an image store; in each class the first 5 are `train`, the last 3 `test`."""
    path = tmp_path_factory.mktemp("img") / "tex.zarr"
    w = ImageStoreWriter(path, source="skimage.data", chunk_pixels=4096, mode="create")
    for k, (img, lab, i) in enumerate(zip(textures.images, textures.labels, textures.ids)):
        w.append(img, i, textures.label_names[lab], split="train" if k % 8 < 5 else "test")
    return w.close()


def make_cfg(store_path, out, **tables):
    cfg = {"task": "image-stream-classification", "name": "tex_stream", "seed": 0, "output": str(out),
           "data": {"store": str(store_path)},
           "pixels": {"preset": "texture"},
           # x, y in pixel units would swamp I, |Ix|, |Iy| under one global scale
           "method": {"D": 10, "sigma1": 1.0, "gamma": 1e-3, "sigma2": 1.0, "n_components": 256,
                      "scaling": "per-feature", "fit_sample": 12},
           "model": {"loss": "hinge", "C": 10.0, "epochs": 20, "shuffle_blocks": 8},
           "split": {"kind": "store"},
           "dask": {"block_size": 5}}
    for name, table in tables.items():
        cfg[name] = {**cfg.get(name, {}), **table}
    return cfg


def features_of(res):
    return np.asarray(zarr.open_group(res["features_path"], mode="r")["X"][:])


@pytest.fixture(scope="module")
def baseline(store, tmp_path_factory):
    """The synchronous scheduler: the reference for every other run."""
    out = tmp_path_factory.mktemp("base")
    res = run_pipeline(make_cfg(store.path, out), scheduler="synchronous")
    return res, features_of(res)


def test_streamed_vectors_equal_in_memory_ones(store, textures):
    """Scale pass and log-operator vectors of the graph equal the in-memory path's.

    Both run the same code on the same frequencies; the feature scales are
    merged (Chan) over blocks in the graph and over images in memory, so
    they agree to rounding, and both round the vectors to float32: entries
    differ by at most about one float32 ulp: rtol 1e-6 (8 ulps), plus atol
    1e-6 x max|v| for entries near zero.
    """
    spec = get_spec("texture")
    desc = ImageDescriptor(spec, "operator", n_frequencies=10, sigma=sigma_from_paper004(1.0), gamma=1e-3,
                           scaling="per-feature", random_state=3)
    bounds = block_bounds(len(store), 5)
    train = np.zeros(len(store), dtype=bool)
    train[::2] = True
    with dask_runtime("threads", 2) as rt:
        src = ImageSource(store, desc).fit(train, rt, bounds)
        V = np.concatenate(rt.compute(*[t for *_, t in src.block_tasks(bounds, rt.numba_threads)]))
    scale = np.asarray(src.state["scale"])
    feats = ev.extract_features(textures.images, spec, dtype=np.float64)
    np.testing.assert_allclose(scale, feature_scale(feature_moments(feats[i] for i in np.flatnonzero(train)),
                                                    "per-feature"), rtol=1e-12)
    want = ev.approx_operator_vectors(feats, np.arange(len(store)), scale, 1.0, [1e-3], 10, "random", 3)[0]
    assert V.shape == want.shape == (24, 210) and V.dtype == np.float32
    np.testing.assert_allclose(V, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_same_result_threads_and_local_cluster(store, baseline, tmp_path, scheduler):
    """Same seed: identical features and accuracy on threads and on a 2-worker LocalCluster."""
    base, Xb = baseline
    res = run_pipeline(make_cfg(store.path, tmp_path), scheduler=scheduler, workers=2)
    assert res["task"] == "image-stream-classification"
    assert res["runtime"]["scheduler"] == scheduler
    assert res["n_train"] == 15 and res["n_test"] == 9 and res["featurized_images"] == 24
    np.testing.assert_array_equal(features_of(res), Xb)
    assert res["accuracy"] == base["accuracy"] and res["bandwidth"] == base["bandwidth"]
    assert json.loads((tmp_path / "result.json").read_text())["accuracy"] == res["accuracy"]
    # brick / grass / gravel, chance 1/3, 9 test patches: measured 6 of 9; 5 of 9 is the floor
    assert base["accuracy"] > 0.5


def test_restart_resumes_a_partial_feature_store(store, baseline, tmp_path):
    base, Xb = baseline
    cfg = make_cfg(store.path, tmp_path)
    first = run_pipeline(cfg, scheduler="threads")
    fpath = first["features_path"]
    # a run cut after some blocks: blocks 1 and 3 neither written nor flagged
    g = zarr.open_group(fpath, mode="r+")
    bounds = np.asarray(g.attrs["bounds"])
    for i in (1, 3):
        g["X"][bounds[i]:bounds[i + 1]] = 0
        g["done"][i] = 0
    again = run_pipeline(make_cfg(store.path, tmp_path), scheduler="threads")
    assert again["fit_reused"] is True and first["fit_reused"] is False
    assert again["featurized_images"] == 10
    np.testing.assert_array_equal(features_of(again), Xb)
    assert again["accuracy"] == base["accuracy"]
    # other parameters: the features are recomputed from scratch
    other = run_pipeline(make_cfg(store.path, tmp_path, method={"sigma2": 2.0}), scheduler="threads")
    assert other["featurized_images"] == 24 and other["fit_reused"] is False
    assert other["bandwidth"] == pytest.approx(2 * base["bandwidth"])
    # another sample for the median bandwidth: another map (before, fit_sample was not in the fingerprint, and
    # the features of the 12-image median were reused under a result that said 6)
    fewer = run_pipeline(make_cfg(store.path, tmp_path, method={"sigma2": 2.0, "fit_sample": 6}), scheduler="threads")
    alone = run_pipeline(make_cfg(store.path, tmp_path / "alone", method={"sigma2": 2.0, "fit_sample": 6}),
                         scheduler="threads")
    assert fewer["fit_reused"] is False and fewer["featurized_images"] == 24 and fewer["fit_images"] == 6
    assert fewer["median_distance"] == alone["median_distance"] != other["median_distance"]


def test_incomplete_store_refused_and_source_ingested(textures, tmp_path):
    from PIL import Image
    src = tmp_path / "src"
    for img, lab, i in zip(textures.images, textures.labels, textures.ids):
        d = src / textures.label_names[lab]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / (i.replace("/", "_") + ".png"))
    path = tmp_path / "cut.zarr"
    assert ingest_images(src, path, limit=10) is None   # an ingestion interrupted after 10 images
    cfg = make_cfg(path, tmp_path / "out", split={"kind": "per-class", "n_train": 5})
    with pytest.raises(IncompleteStoreError, match=r"incomplete image store \(10 images committed"):
        run_pipeline(cfg)
    # with its source the store is resumed first, as the skeleton [data] table does
    cfg["data"]["source"] = str(src)
    res = run_pipeline(cfg)
    assert res["n_images"] == 24 and res["n_train"] == 15 and res["n_test"] == 9


@pytest.mark.parametrize("change, msg", [
    ({"method": {"D": 0}}, r"method.D = 0: expected a value >= 1"),
    ({"method": {"sigma2": [1.0, 2.0]}}, r"method.sigma2 must be one number, got the list .*grid search"),
    ({"method": {"gamma": -1e-3}}, r"method.gamma = -0.001: expected a value > 0"),
    ({"method": {"name": "loge"}}, r'method.name = "loge": expected one of "approx_loghs", "qapprox_loghs" or "head"'),
    ({"method": {"sigma": 1.0}}, r"unknown key 'method.sigma' \(did you mean 'sigma[12]'\?\)"),
    ({"method": {"scaling": "unit"}}, r'method.scaling = "unit": expected one of "global" or "per-feature"'),
    ({"model": {"scale": "unit"}}, r'model.scale = "unit": expected one of "none", "center" or "standard"'),
    ({"model": {"epoch": 3}}, r"unknown key 'model.epoch' \(did you mean 'epochs'\?\)"),
    ({"model": {"learner": "exact-svm"}}, r"model.learner must be 'sgd' or 'lbfgs' here"),
    ({"model": {"C": 0}}, r"model.C = 0: expected a value > 0"),
    ({"split": {"kind": "random"}}, r'split.kind = "random": expected one of "subject-parity"'),
    ({"split": {"kind": "stratified-kfold", "n_splits": 4, "folds": [4]}}, r"split.folds = \[4\]: the protocol has 4 folds"),
    ({"split": {"kind": "stratified-kfold", "n_splits": 10}}, r"class 'brick' has only 8 rows"),
    ({"split": {"kind": "per-class"}}, r"needs split.n_train"),
    ({"split": {"kind": "per-class", "n_train": 8}}, r"class 'brick' has 8 rows; the protocol needs 9"),
    ({"dask": {"block_size": 0}}, r"dask.block_size = 0: expected a value >= 1"),
    ({"dask": {"scheduler": "gpu"}}, r'dask.scheduler = "gpu": expected one of threads, synchronous, local-cluster or a scheduler address'),
    ({"pixels": {"preset": "nope"}}, r'pixels\.preset = "nope": expected one of eth80, .*virus'),
    ({"pixels": {"preset": "fish"}}, r"uses R, G, B but image brick/0_0 is grey"),
    ({"data": {"store": "/nonexistent/x.zarr"}}, r"does not exist; create it with `streamcov ingest"),
])
def test_config_errors(store, tmp_path, change, msg):
    cfg = make_cfg(store.path, tmp_path, **change)
    with pytest.raises(ConfigError, match=msg):
        run_pipeline(cfg)


def test_config_errors_top_level(store, tmp_path):
    cfg = make_cfg(store.path, tmp_path)
    cfg["methods"] = {}
    with pytest.raises(ConfigError, match=r"unknown key 'methods' \(did you mean 'method'\?\)"):
        run_pipeline(cfg)
    cfg = make_cfg(store.path, tmp_path)
    del cfg["data"]["store"]
    with pytest.raises(ConfigError, match=r"\[data\] needs `store`"):
        run_pipeline(cfg)


def test_predict_on_the_saved_model_repeats_the_run(store, baseline, tmp_path):
    """`streamcov predict` on an image model: the same test predictions as the run that trained it."""
    import csv

    from streamcov.cli import main

    base, _ = baseline
    run_preds = predictions(base["predictions_path"])
    assert len(run_preds) == base["n_test"] == 9
    assert main(["predict", base["model_path"], str(store.path), "--out", str(tmp_path / "p.csv"),
                 "--scheduler", "synchronous"]) == 0
    rows = {r["id"]: r for r in csv.DictReader(open(tmp_path / "p.csv"))}
    assert len(rows) == len(store)   # every image of the store
    assert {i: rows[i]["predicted"] for i in run_preds} == run_preds
    from streamcov.stream.predict import predict

    s = predict(base["model_path"], store.path, tmp_path / "q.csv", scheduler="synchronous")
    assert s["evaluated_on"].startswith("test rows of fold") and s["n_test"] == 9
    assert s["accuracy"] == pytest.approx(base["accuracy"], abs=1e-12)


def test_predict_on_an_image_folder(store, baseline, textures, tmp_path):
    """An image model predicts a folder of images directly: class folders give an accuracy,
    images lying directly in the folder are predicted without one."""

    from PIL import Image

    from streamcov.stream.predict import predict

    base, _ = baseline
    by_class, flat = tmp_path / "by_class", tmp_path / "flat"
    for img, lab, i in zip(textures.images, textures.labels, textures.ids):
        d = by_class / textures.label_names[lab]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / (i.replace("/", "_") + ".png"))
        flat.mkdir(exist_ok=True)
        Image.fromarray(img).save(flat / (i.replace("/", "_") + ".png"))
    s1 = predict(base["model_path"], by_class, tmp_path / "a.csv", scheduler="synchronous")
    s2 = predict(base["model_path"], flat, tmp_path / "b.csv", scheduler="synchronous")
    assert s1["n"] == s2["n"] == 24 and s1["n_labelled"] == 24 and "accuracy" not in s2
    a = predictions(tmp_path / "a.csv", key=lambda i: i.split("/")[-1])
    b = predictions(tmp_path / "b.csv")
    assert a == b   # the same images give the same predictions, whatever the layout
    # the model was trained on the store's "train" rows; the others are its test rows
    store_preds = predictions(base["predictions_path"])
    assert {k.replace("/", "_") + ".png": v for k, v in store_preds.items()} == \
        {k: v for k, v in b.items() if k[:-4].replace("_", "/", 1) in store_preds}


def test_full_batch_learner_on_image_features(store, baseline, tmp_path):
    """learner = "lbfgs" on the same feature store: the features are the baseline's, the model loads."""
    from streamcov.stream.model import FittedPipeline

    cfg = make_cfg(store.path, tmp_path)
    cfg["model"] = {"learner": "lbfgs", "loss": "log_loss", "C": 10.0}   # epochs, shuffle_blocks: sgd's
    res = run_pipeline(cfg, scheduler="synchronous")
    np.testing.assert_array_equal(features_of(res), baseline[1])
    assert res["converged"] and res["cache"] == "memory"
    assert res["accuracy"] >= 2 / 3      # 9 test patches of 3 clearly different textures
    assert type(FittedPipeline.load(res["model_path"]).classifier).__name__ == "LBFGSClassifier"


def test_a_check_of_one_image_stops_the_run_with_the_store_and_the_image_named(store):
    """What the checks of one image's pixels raise inside a block task (a float image outside [0, 1] for the
    ConvNet, a non-finite pixel) reaches the user as a ConfigError (one line, exit 2) naming the store and the
    image's id; any other ValueError is a bug and stays what it is."""
    from streamcov.stream.image import _image_id, _named

    def float_range():
        raise ValueError("image 3: float images are taken to be in [0, 1], this one spans [935, 3.13e+03]")

    with pytest.raises(ConfigError, match=rf"^{re.escape(str(store.path))}: image 3 "
                                          rf"\({re.escape(_image_id(str(store.path), 3))}\): float images"):
        _named(str(store.path), 0, [1, 3], float_range)

    def bug():
        raise ValueError("operands could not be broadcast together")

    with pytest.raises(ValueError, match="operands could not") as info:
        _named(str(store.path), 0, [1, 3], bug)
    assert not isinstance(info.value, ConfigError)


def test_a_block_holds_one_images_pixel_features_at_a_time(tmp_path):
    """The per-pixel features are float64 numbers per pixel and feature (a 1-megapixel image of 25 features:
    200 MB): the scale pass and the operator vectors of a block compute them one image at a time, so a block of
    photographs peaks near one image's features, not the block's (measured with tracemalloc: 6 images of
    200 x 200, 1.6 MB of texture features each; the block-at-once code peaked above 9.6 MB). The numbers are
    those of each image on its own (merged moments, stacked vectors)."""
    import tracemalloc

    from streamcov.descriptors.image import image_moments, merge_moments
    from streamcov.stream.image import block_moments, block_vectors

    rng = np.random.default_rng(0)
    w = ImageStoreWriter(tmp_path / "big.zarr", source="test", chunk_pixels=1 << 16, mode="create")
    imgs = [(rng.random((200, 200)) * 255).astype(np.uint8) for _ in range(6)]
    for i, img in enumerate(imgs):
        w.append(img, f"i{i}", "a" if i % 2 else "b", split="train")
    st = w.close()
    desc = ImageDescriptor(get_spec("texture"), "operator", n_frequencies=4, sigma=1.0, gamma=1e-3,
                           scaling="per-feature", random_state=0)
    src = ImageSource(st, desc)
    args = src._args(0, 6)
    rows = np.arange(6)
    block_moments(*args, rows, desc)                 # compile outside the measurement
    one = 200 * 200 * get_spec("texture").n_features * 8
    tracemalloc.start()
    acc = block_moments(*args, rows, desc)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * one, (peak, one)
    feats = ev.extract_features(imgs, "texture", dtype=np.float64)
    want = image_moments(feats[0])
    for f in feats[1:]:
        want = merge_moments(want, image_moments(f))
    for a, b in zip(acc, want):
        np.testing.assert_array_equal(a, b)
    scale = feature_scale(acc, "per-feature")
    W = desc.frequencies_for(np.asarray(scale, dtype=np.float64))
    V = block_vectors(*args, rows, desc, scale, W)
    np.testing.assert_array_equal(V, np.vstack([desc.vectors([img], scale, W) for img in imgs]))


def test_an_image_too_small_for_a_models_stride_says_the_stride_is_the_models(tmp_path):
    """At training the fix for an image that keeps one sampled pixel is a smaller pixels.stride; at predict the
    stride is the saved model's and cannot change: the message says so."""
    w = ImageStoreWriter(tmp_path / "s.zarr", source="test", chunk_pixels=4096, mode="create")
    w.append(np.full((2, 2), 7, np.uint8) + np.eye(2, dtype=np.uint8), "tiny", "a")
    w.append(np.arange(64, dtype=np.uint8).reshape(8, 8), "big", "a")
    st = w.close()
    spec = get_spec({"features": ["I", "Ix", "Iy"], "stride": 2})
    desc = ImageDescriptor(spec, "operator", n_frequencies=4, sigma=1.0, gamma=1e-3, scaling="per-feature",
                           random_state=0)
    with pytest.raises(ConfigError, match=r"pixels.stride = 2: image tiny of 2 x 2 pixels keeps 1 sampled pixel .*"
                                          r"a covariance needs at least 2: lower the stride$"):
        ImageSource(st, desc)
    with pytest.raises(ConfigError, match=r"image tiny of 2 x 2 pixels keeps 1 sampled pixel .*: the model's stride "
                                          r"is fixed: leave such images out, or give them larger"):
        ImageSource(st, desc, state={"scale": [1.0, 1.0, 1.0]})


def test_predict_on_a_folder_leaves_out_images_too_small_for_the_models_stride(store, textures, tmp_path):
    """A folder given to ``predict`` with one image that keeps a single pixel at the model's stride: the
    other images are predicted, and that one is left out and named (as ingestion leaves out images smaller
    than 2 x 2), instead of the whole folder being refused."""
    from PIL import Image

    from streamcov.stream.predict import predict

    res = run_pipeline(make_cfg(store.path, tmp_path / "run", pixels={"preset": "texture", "stride": 4}),
                       scheduler="synchronous")
    folder = tmp_path / "flat"
    folder.mkdir()
    for img, i in zip(textures.images, textures.ids):
        Image.fromarray(img).save(folder / (i.replace("/", "_") + ".png"))
    Image.fromarray(np.arange(9, dtype=np.uint8).reshape(3, 3) * 20).save(folder / "tiny.png")
    s = predict(res["model_path"], folder, tmp_path / "p.csv", scheduler="synchronous")
    assert s["n"] == 24
    assert s["skipped"] == [{"id": "tiny.png", "reason": "image of 3 x 3 pixels keeps 1 sampled pixel at the "
                             "model's pixels.stride = 4; a covariance needs at least 2"}]
    assert any("1 image(s) of" in n and "tiny.png" in n for n in s["notes"])
    assert "tiny.png" not in predictions(tmp_path / "p.csv") and len(predictions(tmp_path / "p.csv")) == 24


def test_constant_images_are_said_by_run_and_predict(store, baseline, textures, tmp_path):
    """A store's constant images (every pixel the same: their descriptors carry nothing of their content) are
    said once by a run (a warning) and by ``predict`` (a note), from the store's record; images with texture
    give no such line."""
    from PIL import Image

    from streamcov.stream.predict import predict

    base, _ = baseline
    assert not any("constant" in w for w in base.get("warnings", []))
    path = tmp_path / "flat.zarr"
    w = ImageStoreWriter(path, source="skimage.data", chunk_pixels=4096, mode="create")
    for k, (img, lab, i) in enumerate(zip(textures.images, textures.labels, textures.ids)):
        w.append(img, i, textures.label_names[lab], split="train" if k % 8 < 5 else "test")
    w.append(np.zeros((32, 32), np.uint8), "black", "brick", split="train")
    w.append(np.full((32, 32), 128, np.uint8), "grey", "grass", split="test")
    flat = w.close()
    assert flat.constant_images == ["black", "grey"]
    said = (f"2 of the 26 images of {path} are constant, every pixel the same (black, grey): their descriptors "
            f"carry no information about their content, and the class given to them means nothing; remove or "
            f"replace them, or check the camera or scan that made them")
    res = run_pipeline(make_cfg(path, tmp_path / "run"), scheduler="synchronous")
    assert said in res["warnings"]
    assert said in predict(base["model_path"], path, tmp_path / "s.csv", scheduler="synchronous")["notes"]
    # a folder given to predict: the images named by their paths in it, and listed in the summary
    folder = tmp_path / "folder"
    folder.mkdir()
    for img, i in zip(textures.images, textures.ids):
        Image.fromarray(img).save(folder / (i.replace("/", "_") + ".png"))
    s = predict(base["model_path"], folder, tmp_path / "t.csv", scheduler="synchronous")
    assert not any("constant" in n for n in s.get("notes", [])) and "constant_images" not in s
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(folder / "black.png")
    s = predict(base["model_path"], folder, tmp_path / "u.csv", scheduler="synchronous")
    assert s["n"] == 25 and s["constant_images"] == ["black.png"]
    assert f"1 of the 25 images of {folder.resolve()} is constant, every pixel the same (black.png): " \
           f"their descriptors carry no information about their content, and the class given to them means " \
           f"nothing; remove or replace them, or check the camera or scan that made them" in s["notes"]
