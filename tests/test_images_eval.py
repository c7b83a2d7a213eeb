"""Protocols, model selection, the scalable path, the K2 random features and the pipeline task."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import DATA
from streamcov.data.imageio import skimage_textures
from streamcov.descriptors.image import feature_moments, feature_scale
from streamcov.descriptors.pixels import image_covariances
from streamcov.errors import ConfigError
from streamcov.features import GaussianRandomFeatures
from streamcov.linalg import log_vectors, sym_vec
from streamcov.tasks import image_eval as ev
from streamcov.tasks import run
from streamcov.tasks.schema import METHOD_KEYS, EvalMethod, SplitTable
from streamcov.splits import folds


def split_idx(split, labels):
    return [(n, np.flatnonzero(tr), np.flatnonzero(te)) for n, tr, te in folds(SplitTable(**split), labels,
                                                                               np.zeros(len(labels), int))]


def method_table(name, classifier=None, **kw):
    """The [method] table of ``name`` (and ``classifier``) with those of the keys ``kw`` that it reads
    (:data:`~streamcov.tasks.schema.METHOD_KEYS`; the schema refuses the others)."""
    reads = METHOD_KEYS[(name, classifier or ("1nn" if name == "stein" else "svc"))]
    return EvalMethod(name=name, **({"classifier": classifier} if classifier else {}),
                      **{k: v for k, v in kw.items() if k in reads})


pytestmark = pytest.mark.usefixtures("one_blas_thread")


@parametrize_with_checks([GaussianRandomFeatures(n_components=30, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_random_features_approximate_k2():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 700)) * 0.04
    g = GaussianRandomFeatures(n_components=20000, sigma=1.0, block_size=128, random_state=0).fit(X)
    Z = g.transform(X)
    # streamcov's convention: sigma = 1 is exp(-d^2 / 2)
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2.0)
    # each entry is a mean of 20000 terms bounded by 2: std <= sqrt(2/20000) = 0.01; 0.05 = 5 std
    assert np.abs(Z @ Z.T - K).max() < 0.05
    assert g.transform(X.astype(np.float32)).dtype == np.float32
    # blocks are regenerated from the seed: the block size only changes the order of additions
    g2 = GaussianRandomFeatures(n_components=20000, sigma=1.0, block_size=128, random_state=0).fit(X)
    np.testing.assert_array_equal(g2.transform(X), Z)
    w = g.weight_block(5)
    assert w.shape == (700 - 640, 20000)
    with pytest.raises(IndexError, match="block 6 outside the 700 input features"):
        g.weight_block(6)


@pytest.mark.parametrize("bad, msg", [
    (dict(n_components=0), "'n_components' parameter of GaussianRandomFeatures must be an int in the range"),
    (dict(sigma=-1.0), "'sigma' parameter of GaussianRandomFeatures must be a float in the range"),
    (dict(block_size=0), "'block_size' parameter of GaussianRandomFeatures must be an int in the range"),
])
def test_random_features_errors(bad, msg):
    with pytest.raises(ValueError, match=msg):
        GaussianRandomFeatures(**bad).fit(np.zeros((3, 2)))


@pytest.fixture(scope="module")
def textures():
    data = skimage_textures(patch=32, max_per_class=24)
    feats = ev.extract_features(data.images, "texture")
    raw = image_covariances(data.images, "texture")
    splits = split_idx({"kind": "per-class", "n_train": 8, "n_test": 8, "n_repeats": 1}, data.labels)
    return data, feats, raw, splits


SMALL = {"sigma1": [1.0], "gamma": [1e-3], "sigma2": [1.0], "C": [10.0]}


@pytest.mark.parametrize("method", [m for m in ev.METHODS if m != "head"])   # head: ConvNet only
def test_every_method_beats_chance_on_textures(textures, method):  # noqa: F811
    data, feats, raw, splits = textures
    # per-feature scaling: x, y in pixel units would swamp I, |Ix|, |Iy| under one global scale
    m = method_table(method, D=20, max_pixels_exact=48, scaling="per-feature", inner_folds=2, **SMALL)
    res = ev.evaluate(method, feats, data.labels, splits, m, raw_covs=raw)
    assert res["classifier"] == ("1nn" if method == "stein" else "svc")
    assert res["n_train"] == 24 and res["n_test"] == 24
    # brick / grass / gravel patches are easy: chance is 1/3; measured 0.7-1.0 across methods
    assert res["accuracy"] > 0.6


# values that differ from the defaults (what a key left out of a table takes), for every key but the head keys
OTHER = {"D": 7, "sigma1": [3.0], "gamma": [0.5], "sigma2": [8.0], "C": [0.01], "inner_folds": 3,
         "max_pixels_exact": 5, "n_components": 16, "epochs": 1, "standardize": "all", "scaling": "per-feature"}


@pytest.mark.parametrize("pair", [p for p in METHOD_KEYS if p[0] != "head"], ids="-".join)
def test_the_keys_a_method_does_not_read_change_nothing(textures, pair):
    """METHOD_KEYS is what the code reads: the keys a (name, classifier) does not read, given other values
    (past the schema, which refuses them), leave every split's accuracy and choice as they were."""
    data, feats, raw, splits = textures
    name, clf = pair
    kw = dict(D=20, max_pixels_exact=48, scaling="per-feature", inner_folds=2, n_components=256, epochs=5, **SMALL)
    base = method_table(name, clf if clf != "1nn" or name != "stein" else None, **kw)
    unread = {k: v for k, v in OTHER.items() if k not in METHOD_KEYS[pair]}
    assert unread   # every pair leaves some key unread
    other = EvalMethod.model_construct(**{**base.model_dump(), **unread})

    def result(m):
        res = ev.evaluate(name, feats, data.labels, splits[:1], m, classifier=clf, raw_covs=raw)
        return [(r["accuracy"], r["inner_cv_accuracy"], r["params"]) for r in res["splits"]]

    assert result(other) == result(base)


def test_standardize_all_and_grid_selection(textures):
    data, feats, raw, splits = textures
    grids = {"sigma1": [0.5, 1.0], "gamma": [1e-4, 1e-2], "sigma2": [0.5, 1.0], "C": [1.0, 10.0]}
    m = EvalMethod(name="approx_loghs", D=20, standardize="all", scaling="per-feature", inner_folds=2, **grids)
    res = ev.evaluate("approx_loghs", feats, data.labels, splits, m)
    p = res["splits"][0]["params"]
    assert p["sigma1"] in grids["sigma1"] and p["gamma"] in grids["gamma"] and p["C"] in grids["C"]
    assert res["accuracy"] > 0.6 and res["standardize"] == "all"


def test_scalable_sgd_path(textures):
    data, feats, raw, splits = textures
    m = EvalMethod(name="approx_loghs", classifier="sgd", scaling="per-feature", D=20, n_components=512,
                   epochs=20, inner_folds=2, **SMALL)
    res = ev.evaluate("approx_loghs", feats, data.labels, splits, m, classifier="sgd")
    assert res["classifier"] == "sgd" and res["accuracy"] > 0.6
    two = splits + split_idx({"kind": "per-class", "n_train": 8, "n_test": 8, "n_repeats": 1, "seed": 1},
                             data.labels)
    m = EvalMethod(name="qapprox_loghs", classifier="sgd", scaling="per-feature", standardize="all", D=20,
                   n_components=512, epochs=20, inner_folds=2, **SMALL)
    res = ev.evaluate("qapprox_loghs", feats, data.labels, two, m, classifier="sgd")
    assert res["n_folds"] == 2 and res["accuracy"] > 0.6


def test_scalable_path_measures_its_median_on_training_rows_of_every_class(textures, monkeypatch):
    """The bandwidth's median distance was taken over the first 500 training rows, which are in class order
    (Virus: 6 of its 15 classes, a median 3.8% below that of all rows): it is a random sample of them now."""
    data, feats, raw, splits = textures
    vectors, measured = [], []
    real_vectors, real_distances = ev.approx_operator_vectors, ev.distances
    monkeypatch.setattr(ev, "approx_operator_vectors",
                        lambda *a, **k: vectors.append(real_vectors(*a, **k)) or vectors[-1])
    monkeypatch.setattr(ev, "distances", lambda X, *a, **k: measured.append(np.array(X)) or real_distances(X, *a, **k))
    monkeypatch.setattr(ev, "MEDIAN_ROWS", 16)
    m = EvalMethod(name="approx_loghs", classifier="sgd", scaling="per-feature", D=20, n_components=64,
                   epochs=2, inner_folds=2, **SMALL)
    ev.evaluate("approx_loghs", feats, data.labels, splits[:1], m, classifier="sgd")
    _, tr_g, _ = splits[0]   # the training images, in data order (class by class); their vectors come first
    ((v,),), (rows,) = vectors, measured
    at = [int(np.flatnonzero((v == r).all(axis=1))[0]) for r in rows]
    labels = np.asarray(data.labels)
    assert len(rows) == 16 and max(at) < len(tr_g) and len(set(at)) == 16
    assert len(set(labels[tr_g[at]])) > len(set(labels[tr_g[:16]]))


@pytest.mark.filterwarnings("ignore:logm result may be inaccurate")  # its own error estimate ~1e-13
def test_relative_log_vectors_of_several_gammas_use_sym_vec_and_logm(textures):
    """The one SPD-log route, small matrices (lane solver) and large ones (LAPACK, one
    eigendecomposition for several gammas), against scipy's logm."""
    import scipy.linalg as sl
    _, _, raw, _ = textures
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 300, 150))
    big = np.einsum("nti,ntj->nij", x, x) / 300
    for C in (raw[:3], big):
        out = log_vectors(C, [1e-3, 1e-1], relative=True)
        for k, g in enumerate([1e-3, 1e-1]):
            ref = sym_vec(np.stack([sl.logm(np.eye(len(c)) + c / g).real for c in C]))
            np.testing.assert_allclose(out[k], ref, atol=1e-9 * max(1.0, np.abs(ref).max()))


def test_feature_scale():
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((50, 3)) * [1.0, 2.0, 0.0] for _ in range(4)]
    per = feature_scale(feature_moments(feats), "per-feature")
    allpix = np.vstack(feats)
    np.testing.assert_allclose(per[:2], allpix.std(0)[:2], rtol=1e-10)
    assert per[2] == 1.0   # constant feature
    glob = feature_scale(feature_moments(feats), "global")
    np.testing.assert_allclose(glob, np.sqrt(np.mean(allpix.var(0))), rtol=1e-10)
    with pytest.raises(ValueError, match="feature scaling must be 'global' or 'per-feature'"):
        feature_scale(feature_moments(feats[:1]), "max")


def test_evaluate_needs_two_training_images_per_class(textures):
    data, feats, raw, splits = textures
    with pytest.raises(ConfigError, match="every class needs at least 2 training images"):
        one = [("s", np.array([0, 24, 48]), np.array([1, 25, 49]))]
        ev.evaluate("e", feats, data.labels, one, method_table("e", **SMALL), raw_covs=raw)


def _demo_cfg(tmp_path, **m):
    return {"task": "image-classification", "name": "demo", "seed": 0, "output": str(tmp_path),
            "data": {"format": "skimage-textures", "patch": 32, "max_per_class": 16},
            "pixels": {"preset": "texture"},
            "method": {"name": "approx_loghs", "D": 10, "sigma1": 1.0, "gamma": 1e-3, "sigma2": 1.0,
                       "C": 10.0, "inner_folds": 2, "scaling": "per-feature", **m},
            "split": {"kind": "per-class", "n_train": 6, "n_test": 6, "n_repeats": 2},
            "paper_accuracy": 0.769}


def test_task_runs_and_writes_details(tmp_path):
    res = run(_demo_cfg(tmp_path))
    for key in ("accuracy", "accuracy_std", "method", "n_train", "n_test", "seconds", "n_folds"):
        assert key in res
    assert res["method"] == "approx_loghs" and res["n_train"] == 18 and res["n_folds"] == 2
    assert res["paper_accuracy"] == 0.769 and res["n_features"] == 5
    assert (tmp_path / "image_classification_details.json").exists()
    assert res["model_path"] == str(tmp_path / "model")


@pytest.mark.parametrize("method", [{}, {"classifier": "sgd", "n_components": 64, "epochs": 5},
                                    {"name": "stein", "classifier": "1nn"}])
def test_task_writes_every_test_images_prediction(tmp_path, method):
    """The in-memory task wrote no per-image predictions (a streamed run writes predictions.csv): it now writes
    fold,id,predicted,label for every test image of every split, one split's rows its test images, and each
    split's accuracy is that of its rows (svc, the scalable sgd path, 1-NN)."""
    import csv
    import json

    cfg = _demo_cfg(tmp_path, **method)
    if method.get("name") == "stein":
        cfg["method"] = {"name": "stein", "classifier": "1nn", "gamma": 1e-3, "scaling": "per-feature"}
    res = run(cfg)
    assert res["predictions_path"] == str(tmp_path / "predictions.csv")
    with open(tmp_path / "predictions.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["fold", "id", "predicted", "label"]
    data = skimage_textures(patch=32, max_per_class=16)
    label_of = {i: data.label_names[c] for i, c in zip(data.ids, data.labels)}
    details = json.loads((tmp_path / "image_classification_details.json").read_text())["splits"]
    assert [d["split"] for d in details] == ["split-0", "split-1"]
    for d in details:
        mine = [r for r in rows if r["fold"] == d["split"]]
        assert len(mine) == d["n_test"] == 18 and len({r["id"] for r in mine}) == 18
        assert all(r["label"] == label_of[r["id"]] for r in mine)
        assert np.mean([r["predicted"] == r["label"] for r in mine]) == pytest.approx(d["accuracy"], abs=1e-12)


def test_task_on_a_folder_and_a_store(tmp_path):
    from PIL import Image
    from streamcov.data.images import ingest_images
    data = skimage_textures(patch=32, max_per_class=8)
    for img, lab, i in zip(data.images, data.labels, data.ids):
        d = tmp_path / "src" / data.label_names[lab]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / (i.replace("/", "_") + ".png"))
    ingest_images(tmp_path / "src", tmp_path / "t.zarr")
    for fmt, key, path in (("folders", "source", tmp_path / "src"), ("store", "store", tmp_path / "t.zarr")):
        cfg = _demo_cfg(tmp_path / fmt, name="e")
        cfg["method"] = {k: v for k, v in cfg["method"].items() if k not in ("D", "sigma1", "gamma")}   # not read by e
        cfg["data"] = {"format": fmt, key: str(path)}
        cfg["split"] = {"kind": "stratified-kfold", "n_splits": 2}
        res = run(cfg)
        assert res["n_images"] == 24 and res["accuracy"] > 0.5
        assert not any("constant" in w for w in res.get("warnings", []))
    # a blank image among them: kept, and said by the run (its descriptor carries nothing of its content)
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(tmp_path / "src" / "brick" / "blank.png")
    res = run(cfg | {"data": {"format": "folders", "source": str(tmp_path / "src")}, "output": str(tmp_path / "b")})
    assert res["n_images"] == 25
    assert f"1 of the 25 images of {tmp_path / 'src'} is constant, every pixel the same (brick/blank.png): " \
           f"their descriptors carry no information about their content, and the class given to them means " \
           f"nothing; remove or replace them, or check the camera or scan that made them" in res["warnings"]


def test_leave_objects_out_with_one_training_object_a_class_runs_and_says_its_inner_folds_are_of_images(tmp_path):
    """Inner folds of whole objects need 2 training objects of every class; with 2 objects a class (one left for
    training in each fold) they cannot be made: the run keeps folds of images there, as before, and says so
    once, naming the folds (a refusal would have stopped a protocol that ran)."""
    from PIL import Image

    data = skimage_textures(patch=32, max_per_class=8)
    for img, lab, i in zip(data.images, data.labels, data.ids):
        if lab >= 2:
            continue
        k = int(np.sum(data.labels[:data.ids.index(i)] == lab))   # 8 patches a class: objects 1, 2 of 4 views
        d = tmp_path / "src" / data.label_names[lab] / f"{1 + k // 4}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / f"{k % 4}.png")
    cfg = _demo_cfg(tmp_path / "o", name="e")
    cfg["method"] = {"name": "e", "sigma2": 1.0, "C": 10.0, "inner_folds": 2, "scaling": "per-feature"}
    cfg["data"] = {"source": str(tmp_path / "src"), "group_level": 2}
    cfg["split"] = {"kind": "leave-objects-out"}
    res = run(cfg)
    assert res["n_folds"] == 2 and res["n_train"] == 8
    said = [w for w in res["warnings"] if w.startswith("split.kind keeps groups apart")]
    assert said == ["split.kind keeps groups apart, but a class has one group among the training images of 2 fold(s) "
                    "('object-1', 'object-2'): there the inner cross-validation is of images, views of one group on "
                    "both sides of it, and may choose for a protocol easier than the outer one; give each class 3 "
                    "groups or more"]


def test_the_files_paper_accuracy_is_not_reported_for_other_data(tmp_path):
    """A pipeline file's paper_accuracy is the figure of the file's dataset: run on other data given by a flag
    (--store, --set data.source=..., or data.max_per_class), result.json reported it beside an accuracy of
    other images. It is now left out then, unless a flag gives it too."""
    import json

    (tmp_path / "p.toml").write_text(
        'task = "image-classification"\nname = "demo"\npaper_accuracy = 0.769\n'
        f'output = "{tmp_path / "out"}"\n'
        '[data]\nformat = "skimage-textures"\npatch = 32\nmax_per_class = 12\n'
        '[pixels]\npreset = "texture"\n'
        '[method]\nname = "e"\nC = 10.0\ninner_folds = 2\n'
        '[split]\nkind = "per-class"\nn_train = 6\nn_test = 6\nn_repeats = 1\n')
    assert run(tmp_path / "p.toml")["paper_accuracy"] == 0.769
    other = run(tmp_path / "p.toml", overrides=["data.max_per_class=16"])
    assert "paper_accuracy" not in other
    assert "paper_accuracy" not in json.loads((tmp_path / "out" / "result.json").read_text())
    assert run(tmp_path / "p.toml", overrides=["data.max_per_class=16", "paper_accuracy=0.5"])["paper_accuracy"] == 0.5


def test_a_class_with_one_training_image_in_a_fold_is_named(tmp_path):
    """A class of 2 images in 2 stratified folds has 1 training image per fold: the inner cross-validation
    refused it as "class code 1 ... in a fold's training images"; it now names the class and the fold."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls, n in (("big", 20), ("tiny", 2)):
        (tmp_path / "src" / cls).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (24, 24), dtype=np.uint8)).save(tmp_path / "src" / cls / f"{i}.png")
    cfg = _demo_cfg(tmp_path / "out", name="e")
    cfg["method"] = {k: v for k, v in cfg["method"].items() if k not in ("D", "sigma1", "gamma")}
    cfg["data"] = {"format": "folders", "source": str(tmp_path / "src")}
    cfg["split"] = {"kind": "stratified-kfold", "n_splits": 2}
    with pytest.raises(ConfigError, match=r"^every class needs at least 2 training images for the inner "
                                          r"cross-validation \(method\.inner_folds\), but class 'tiny' has 1 in the "
                                          r"training images of fold 'fold-0'; give that class more images, or a "
                                          r"\[split\] that trains on more of them$"):
        run(cfg)


@pytest.mark.parametrize("change, msg", [
    ({"method": {"name": "logm"}}, r'method.name = "logm": expected one of "e", "loge", "stein", "hs", "approx_hs", "loghs", "approx_loghs", "qapprox_loghs" or "head"'),
    ({"method": {"name": "approx_loghs", "gamma": 1e-3, "mu": 1e-2}}, "method.mu must equal method.gamma"),
    ({"method": {"name": "e", "C": -1}}, r"method.C = -1: expected a value >= 1e-300"),
    ({"method": {"name": "e", "colour": 1}}, r"unknown key 'method.colour'; \[method\] takes: C, D, classifier"),
    ({"method": {"name": "e", "sigma_1": 1.0}}, r"unknown key 'method.sigma_1' \(did you mean 'sigma1'\?\)"),
    ({"data": {"format": "folders"}}, r'\[data\] with format = "folders" needs `source`'),
    ({"data": {"format": "folders", "source": "/nonexistent/x"}}, "folder not found"),
    ({"data": {"format": "csv", "source": "."}}, r'data.format = "csv": expected one of "folders", "store" or "skimage-textures"'),
    ({"pixels": {"preset": "nope"}}, r'pixels\.preset = "nope": expected one of eth80, .*virus'),
    ({"split": {"kind": "per-class"}}, r"split.kind = 'per-class' needs split.n_train"),
    ({"data": ["x"]}, r'data = \["x"\]: expected a table'),
    ({"method": {"name": "e", "scaling": "unit"}}, r'method.scaling = "unit": expected one of "global" or "per-feature"'),
    ({"method": {"name": "e", "classifier": "knn"}}, r'method.classifier = "knn": expected one of "svc", "1nn" or "sgd"'),
    ({"method": {"name": "loge", "classifier": "sgd"}}, r"method.classifier = 'sgd' \(the scalable path\) needs"),
    ({"dataset": {"format": "folders"}}, r"unknown key 'dataset'; renamed: use \[data\]"),
])
def test_task_config_errors(tmp_path, change, msg):
    cfg = _demo_cfg(tmp_path)
    cfg.update(change)
    with pytest.raises(ConfigError, match=msg):
        run(cfg)


def test_real_eth80_leave_objects_out_quick(tmp_path, monkeypatch):
    root = DATA / "eth80" / "raw"
    if not root.exists():
        pytest.skip("ETH-80 subset not available")
    cfg = {"task": "image-classification", "name": "eth80-quick", "output": str(tmp_path),
           "data": {"source": str(root), "group_level": 2},
           "pixels": {"preset": "eth80", "stride": 8},
           "method": {"name": "loge", "gamma": 1e-3, "sigma2": 1.0, "C": 10.0, "inner_folds": 2,
                      "scaling": "per-feature"},
           "split": {"kind": "leave-objects-out", "folds": [0]}}
    from streamcov import splits

    made, inner = [], splits.inner_folds

    def spy(labels, groups=None, **kw):   # the inner folds the selection gets, and the groups they were made of
        made.append((groups, inner(labels, groups, **kw)))
        return made[-1][1]

    monkeypatch.setattr(splits, "inner_folds", spy)
    res = run(cfg)
    # 8 categories, chance 12.5%; one fold of 40 test images, LogE measured about 60%
    assert res["n_test"] == 40 and res["n_train"] == 360 and res["accuracy"] > 0.3
    # the inner CV keeps each training object's views in one inner fold, as the outer protocol keeps them apart
    # (its folds were of images: 62-65 of the 72 training objects had views on both sides)
    assert len(made) == 1 and made[0][0] is not None and len(set(made[0][0])) == 72
    groups, folds = made[0]
    assert len(folds) == 2 and all(not set(groups[a]) & set(groups[b]) for a, b in folds)


def test_one_nn_selection_of_a_grouped_protocol_seeks_neighbours_outside_the_image_s_group():
    """1-NN picks its candidate by leave-one-out accuracy on the training images: under leave-objects-out an
    image's nearest neighbour was another view of its own object, so a candidate that only tells objects apart
    (views alike, classes not) won with 100%. Given the groups, the neighbours are sought in other objects."""
    from streamcov.tasks.image_eval import Candidate, select_and_test_1nn

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 12)                          # 2 classes x 4 objects x 3 views
    objects = np.repeat(np.arange(8), 3)
    views = rng.normal(size=(8, 5))[objects] + 1e-3 * rng.normal(size=(24, 5))   # objects apart, classes mixed
    classes = np.eye(5)[y] * 3 + rng.normal(size=(24, 5))                        # classes apart
    cands = [Candidate({"gamma": g}, np.linalg.norm(v[:, None] - v[None], axis=2))
             for g, v in ((1.0, views), (2.0, classes))]
    tr, te = np.flatnonzero(objects % 4 != 3), np.flatnonzero(objects % 4 == 3)
    _, params, score, _ = select_and_test_1nn(cands, y, tr, te)
    assert params == {"gamma": 1.0} and score == 1.0   # each view's neighbour: its own object
    acc, params, score, fit = select_and_test_1nn(cands, y, tr, te, groups=objects)
    assert params == {"gamma": 2.0} and score > 0.8 and acc == np.mean(fit["pred"] == y[te])


def test_in_memory_pixel_features_that_cannot_fit_are_refused(monkeypatch):
    """The in-memory task keeps every image's per-pixel features for its grid search: an archive of photographs
    that cannot fit is refused before any feature is computed, pointing to pixels.stride and the out-of-core
    task, instead of a MemoryError traceback or a kill by the operating system."""
    from streamcov import _config
    from streamcov.tasks import image_eval as ev

    images = [np.zeros((300, 200)), np.zeros((30, 20))]          # 60000 + 600 pixels, 5 texture features
    monkeypatch.setattr(_config, "total_memory", lambda: 1e6)
    # float32 features of both (60600 x 5 x 4 bytes) and the float64 ones of the two largest in flight (2 cores)
    with pytest.raises(ConfigError, match=r"the per-pixel features of 2 images \(60600 sampled pixels x 5 features, "
                                          r"kept for the grid search\): needs 3\.\d MiB of memory, this process may use "
                                          r"976\.6 KiB; raise pixels.stride, or run the out-of-core task"):
        ev.extract_features(images, "texture")
    monkeypatch.setattr(_config, "total_memory", lambda: 1e9)
    assert [f.shape for f in ev.extract_features(images, "texture")] == [(60000, 5), (600, 5)]


def test_a_degenerate_point_of_the_grid_is_left_out_not_refused():
    """A kernel that is the identity on the training images (sigma2 far below the distances) predicts the
    majority class, which can win the inner CV on unbalanced classes. Such points are left out of the selection;
    the grid is refused only when every point is so."""
    from streamcov.errors import ConfigError
    from streamcov.kernels import distances
    from streamcov.tasks.image_eval import Candidate, select_and_test_svc

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5))
    y = rng.permutation(np.array([0] * 56 + [1] * 24))
    tr, te = np.arange(60), np.arange(60, 80)
    cands = [Candidate({}, distances(X), X)]
    acc, params, cv, _ = select_and_test_svc(cands, y, tr, te, {"sigma2": [1e-3, 0.25, 0.5, 1.0, 2.0],
                                                                 "C": [1.0, 10.0, 100.0]}, n_inner=3)
    assert params["sigma2"] != 1e-3 and 0 <= cv <= 1
    with pytest.raises(ConfigError, match=r"^the kernel between the 60 training images is the identity .* for every "
                                          r"setting of the grid: nothing can be learned from it; give larger values "
                                          r"of method\.sigma2$"):
        select_and_test_svc(cands, y, tr, te, {"sigma2": [1e-3, 1e-4], "C": [1.0]}, n_inner=3)
