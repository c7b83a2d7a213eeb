"""Saved models edited by hand and signed again with the project's own digests (they are unkeyed): every
one is refused in one line (a ModelError, exit 2), before anything of it crashes the process, reads past
an array, predicts one class for every row, or fills the memory."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from cli_cases import assert_one_line_error, cli
from streamcov.data.integrity import file_sha256
from streamcov.errors import ModelError
from streamcov.stream.model import FittedPipeline, doc_sha256_of, dump_estimator, read_checkpoint
from streamcov.stream.source import block_bounds

pytestmark = pytest.mark.usefixtures("one_blas_thread")

PIPELINE = Path(__file__).resolve().parents[1] / "pipelines" / "synthetic.toml"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny synthetic store, a random-feature model (rgw, SGD) and an exact-SVM model trained on it."""
    base = tmp_path_factory.mktemp("crafted")
    store = base / "s.zarr"
    assert cli("synth", store, "--sequences", 24, "--subjects", 4, "--classes", 3, "--quiet")[0] == 0
    common = ("--store", store, "--quiet", "--scheduler", "synchronous")
    rc, err, _ = cli("run", PIPELINE, *common, "--output", base / "rgw", "--set", "features.n_components=16",
                     "--set", "model.epochs=2")
    assert rc == 0, err
    rc, err, _ = cli("run", PIPELINE, *common, "--output", base / "svm", "--set", "features.map=none",
                     "--set", "model.learner=exact-svm", "--set", "model.sigma_grid=[1.0]",
                     "--set", "model.C_grid=[10.0]")
    assert rc == 0, err
    return {"store": store, "rgw": base / "rgw" / "model", "svm": base / "svm" / "model", "rgw_run": base / "rgw"}


def craft(src: Path, dst: Path, edit, resave: bool = False, save=None) -> Path:
    """A copy of the model at ``src`` in ``dst``, ``edit(doc, arrays)`` applied, signed again as save() signs."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "model.json").read_text())
    with np.load(dst / "model.npz") as z:
        arrays = {k: z[k] for k in z.files}
    edit(doc, arrays)
    if save is not None:
        save(dst / "model.npz", arrays)
    elif resave:
        np.savez(dst / "model.npz", **arrays)
    doc["arrays_sha256"] = file_sha256(dst / "model.npz")
    doc["doc_sha256"] = doc_sha256_of(doc)
    (dst / "model.json").write_text(json.dumps(doc))
    return dst


def refused(models, model: Path, pattern: str) -> None:
    """``model`` is refused by load (a ModelError matching ``pattern``) and by predict (one line, exit 2)."""
    with pytest.raises(ModelError, match=pattern):
        FittedPipeline.load(model)
    assert_one_line_error(*cli("predict", model, models["store"], "--out", model.parent / "p.csv")[:2],
                          pattern)


def setter(key: str, value):
    def edit(doc, arrays):
        arrays[key] = value(arrays[key]) if callable(value) else value
    return edit


# ------------------------------------------------------------------ 1. arrays compiled code indexes
@pytest.mark.parametrize("edit, pattern", [
    (setter("clf.svc_._dual_coef_", np.zeros((2, 0))),
     r"the classifier is inconsistent \(svc _dual_coef_ of shape \(2, 0\), not \(2, \d+\) for 3 classes"),
    (setter("clf.svc_._dual_coef_", lambda a: a[:, :1].copy()),
     r"the classifier is inconsistent \(svc _dual_coef_ of shape \(2, 1\), not \(2, \d+\)"),
    (setter("clf.svc_.support_", lambda a: a + 1000),
     r"the classifier is inconsistent \(svc support_ indices outside the 12 training rows\)"),
    (setter("clf.svc_._n_support", lambda a: a + 1),
     r"the classifier is inconsistent \(svc has \d+ support indices but _n_support counts \d+\)"),
    (setter("clf.svc_._intercept_", np.zeros(1)),
     r"svc _intercept_ holds 1 numbers, not 3 \(one per pair of its 3 classes\)"),
    (setter("clf.support_vectors_", lambda a: a[:1].copy()),
     r"the classifier is inconsistent \(support_vectors_ of shape \(1, \d+\) \(float64\) for \d+ support vectors"),
], ids=["dual-coef-empty", "dual-coef-narrow", "support-out-of-range", "n-support", "intercept", "support-vectors"])
def test_exact_svm_internals_are_checked_before_libsvm(models, tmp_path, edit, pattern):
    refused(models, craft(models["svm"], tmp_path / "m", edit, resave=True), pattern)


def every_map_array(models):
    """An edit storing every array of the map (map_redraw null), as a model of a seedless map keeps them."""
    def edit(doc, arrays):
        drawn: dict = {}
        dump_estimator(FittedPipeline.load(models["rgw"]).feature_map, "map.", drawn)
        arrays.update(drawn)
        doc["map_redraw"] = None
    return edit


@pytest.mark.parametrize("change", [
    lambda g: g[::-1].copy(),
    lambda g: np.concatenate([g[:-1], [10 ** 9]]),
    lambda g: g[:5].copy(),
], ids=["not-increasing", "past-the-projections", "too-short"])
def test_map_group_starts_are_checked_before_the_numba_kernel(models, tmp_path, change):
    whole = every_map_array(models)

    def edit(doc, arrays):
        whole(doc, arrays)
        arrays["map.group_start_"] = change(arrays["map.group_start_"])
    refused(models, craft(models["rgw"], tmp_path / "m", edit, resave=True),
            r"the model cannot predict \(ValueError: RGWSampler: the fitted group starts \(int64 array of shape "
            r"\(\d+,\)\) do not split its \d+ projections into 16 features")


def test_a_model_keeping_every_map_array_still_predicts(models, tmp_path):
    model = craft(models["rgw"], tmp_path / "m", every_map_array(models), resave=True)
    rc, err, _ = cli("predict", model, models["store"], "--out", tmp_path / "p.csv")
    assert rc == 0, err


# ------------------------------------------------------------------ 2. the provenance predict reads
def info(key, value, where="info"):
    def edit(doc, arrays):
        doc[where][key] = value
    return edit


@pytest.mark.parametrize("edit, pattern", [
    (info("block", -5), r"model\.json: info\.block = -5 is not a whole number of rows >= 1; the model's description "
                        r"is damaged: train the model again$"),
    (info("block", 0.5), r"info\.block = 0\.5 is not a whole number of rows >= 1"),
    (info("block", "abc"), r"info\.block = 'abc' is not a whole number of rows >= 1"),
    (info("seed", "abc"), r"info\.seed = 'abc' is not a whole number"),
    (info("split", "abc"), r"info\.split = 'abc' is not a \[split\] table"),
    (info("split", {"kind": "nope"}), r"info\.split\.kind = 'nope' is not a kind of split \(subject-parity, "),
    (info("image_size", {"height": 5}), r"info\.image_size = \{'height': 5\} is not a table of height and width"),
    (info("pixel_scale", "x"), r"info\.pixel_scale = 'x' is not a finite number"),
    (info("store_path", 5), r"info\.store_path = 5 is not a string"),
    (info("joint_names", 5, "source"), r"the skeleton descriptor is invalid \(ValueError: joint_names must be a list "
                                       r"of joint names, got 5\)"),
], ids=["block-negative", "block-fraction", "block-string", "seed", "split-string", "split-kind", "image-size",
        "pixel-scale", "store-path", "joint-names"])
def test_provenance_of_the_wrong_form_is_refused(models, tmp_path, edit, pattern):
    refused(models, craft(models["rgw"], tmp_path / "m", edit), pattern)


def test_a_split_table_its_protocol_cannot_read_is_refused_on_the_training_store(models, tmp_path):
    """A ``[split]`` table of a known kind whose values the protocol cannot read (edited): predict on the
    model's training store, where it reads the table to find the test rows, says so in one line."""
    model = craft(models["rgw"], tmp_path / "m",
                  info("split", {"kind": "subjects", "train_subjects": 5, "test_subjects": [2]}))
    FittedPipeline.load(model)   # the kind is one of the protocols: the rest is read by the protocol
    rc, err, _ = cli("predict", model, models["store"], "--out", tmp_path / "p.csv", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r"^streamcov predict: error: the model's model\.json: info\.split cannot be read "
                                   r"as a \[split\] table \(\w+Error: .*\); the model's description is damaged: "
                                   r"train the model again$")


def test_block_bounds_refuses_blocks_below_one():
    for block in (0, -5, 0.5):
        with pytest.raises(ValueError, match="block must be a whole number of rows >= 1"):
            block_bounds(10, block)
    assert block_bounds(10, 4).tolist() == [0, 4, 8, 10]


# ------------------------------------------------------------------ 3. classes, scalars, dtypes
@pytest.mark.parametrize("edit, resave, pattern", [
    (setter("clf.classes_", np.array([0, 0, 1])), True,
     r"the classifier's classes \[0, 0, 1\] are not distinct and in increasing order"),
    (setter("clf.classes_", np.array([2, 1, 0])), True,
     r"the classifier's classes \[2, 1, 0\] are not distinct and in increasing order"),
    (lambda doc, arrays: doc["scaler"]["scalars"].update(scale_=float("inf")), False,
     r"the scaler's scale_ holds non-finite numbers; the model is damaged: train it again$"),
    (setter("clf.coef_", lambda a: a.astype(str)), True,
     r"the classifier's coef_ holds <U\d+ values, not numbers; the model is damaged: train it again$"),
], ids=["classes-twice", "classes-unsorted", "scalar-inf", "coef-strings"])
def test_classes_scalars_and_dtypes_are_checked(models, tmp_path, edit, resave, pattern):
    refused(models, craft(models["rgw"], tmp_path / "m", edit, resave=resave), pattern)


# ------------------------------------------------------------------ 4. model.npz's size, before reading it
def test_a_member_the_description_does_not_name_is_refused_unread(models, tmp_path):
    model = craft(models["rgw"], tmp_path / "m", lambda doc, arrays: None,
                  save=lambda path, arrays: np.savez_compressed(path, **arrays, extra=np.zeros(2 ** 20)))
    refused(models, model, r"model\.npz: holds 'extra\.npy', which model\.json does not name; a model\.npz holds "
                           r"the arrays of its model alone: train the model again$")


def test_a_member_larger_than_memory_is_refused_unread(models, tmp_path, monkeypatch):
    import streamcov._config as config

    model = craft(models["rgw"], tmp_path / "m", setter("clf.coef_", np.zeros((3, 2 ** 17))), resave=True)
    monkeypatch.setattr(config, "total_memory", lambda soft=False: 2 ** 20)
    with pytest.raises(ModelError, match=r"model\.npz: its arrays take 3\.0 MiB, more than the 1\.0 MiB of memory "
                                         r"this process may use"):
        FittedPipeline.load(model)


def test_a_member_whose_size_is_not_its_array_is_refused(models, tmp_path):
    import zipfile

    def save(path, arrays):
        np.savez(path, **arrays)
        with zipfile.ZipFile(path, "a") as zf:   # a header promising 10**12 numbers, in a few bytes
            header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
            header["shape"] = (10 ** 12,)
            import io
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, header)
            zf.writestr("clf.t_.npy", buf.getvalue() + b"\0" * 8)

    def edit(doc, arrays):
        doc["classifier"]["arrays"]["t_"] = "clf.t_"
    refused(models, craft(models["rgw"], tmp_path / "m", edit, save=save),
            r"model\.npz: member 'clf\.t_\.npy' declares \d+ bytes but holds a float64 array of shape "
            r"\(1000000000000,\)")


# ------------------------------------------------------------------ 5. files that are not regular files
@pytest.mark.timeout(120)   # a regression waits on the pipe
@pytest.mark.parametrize("name", ["model.json", "model.npz"])
@pytest.mark.parametrize("what", ["fifo", "dev-zero"])
def test_a_model_file_that_is_not_a_regular_file_is_refused_without_reading(models, tmp_path, name, what):
    model = tmp_path / "m"
    shutil.copytree(models["rgw"], model)
    (model / name).unlink()
    if what == "fifo":
        os.mkfifo(model / name)
    else:
        (model / name).symlink_to("/dev/zero")
    refused(models, model, rf"m/{name}: not a regular file \(a pipe, a device or a link to one\); a model folder "
                           rf"holds model\.json and model\.npz as files: train the model again$")


@pytest.mark.timeout(120)   # a regression waits on the pipe
def test_file_sha256_refuses_a_pipe(tmp_path):
    os.mkfifo(tmp_path / "p")
    with pytest.raises(OSError, match="not a regular file"):
        file_sha256(tmp_path / "p")


# ------------------------------------------------------------------ 6. JSON nested too deeply
def test_a_model_json_nested_too_deeply_is_refused(models, tmp_path):
    model = tmp_path / "m"
    shutil.copytree(models["rgw"], model)
    (model / "model.json").write_text("[" * 100000 + "]" * 100000)
    refused(models, model, r"m/model\.json: nested too deeply to be a model's description \(not a streamcov "
                           r"model\); train the model again$")


def test_a_checkpoint_nested_too_deeply_is_a_damaged_checkpoint(models, tmp_path):
    deep = np.frombuffer(("[" * 100000 + "]" * 100000).encode(), dtype=np.uint8)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_checkpoint({"checkpoint_json": deep})
    # and run --resume starts the fold again instead of a traceback
    run = tmp_path / "run"
    shutil.copytree(models["rgw_run"], run)
    checkpoints = sorted((run / "checkpoints").glob("*.npz"))
    assert checkpoints
    for ck in checkpoints:
        with np.load(ck) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["checkpoint_json"] = deep
        np.savez(ck, **arrays)
    for done in (run / "checkpoints").glob("*.result.json"):
        done.unlink()
    rc, err, _ = cli("run", PIPELINE, "--store", models["store"], "--output", run, "--set",
                     "features.n_components=16", "--set", "model.epochs=2", "--quiet", "--scheduler", "synchronous",
                     "--resume")
    assert rc == 0, err
    assert "Traceback" not in err


def test_fastfood_index_arrays_are_checked_before_the_numba_kernel():
    from streamcov.features import FastfoodSampler

    X = np.random.default_rng(0).standard_normal((5, 6))
    fmap = FastfoodSampler(n_components=16, random_state=0).fit(X)
    fmap.transform(X)
    fmap.permutations_ = fmap.permutations_ + 10 ** 6
    with pytest.raises(ValueError, match=r"permutations_ indices outside 0\.\.7"):
        fmap.transform(X)
    fmap.permutations_ = fmap.permutations_[:, :2].copy()
    with pytest.raises(ValueError, match=r"permutations_ is not a \(2, 8\) array of indices"):
        fmap.transform(X)


@pytest.mark.parametrize("saved", [False, "deprecated", None])
def test_an_svc_model_loads_where_scikit_learn_removed_probability(saved, monkeypatch):
    """scikit-learn 1.9 deprecated SVC's ``probability`` (default "deprecated") and removes it in 1.11: every
    SVC-based model (the exact SVM's, the images') stored it, and would have been refused there as "incomplete
    model description (TypeError: ... unexpected keyword argument 'probability')". It is no longer written, and a
    stored default (False before 1.9, "deprecated" after; None: not written) is dropped by a scikit-learn whose
    SVC does not take it. probability=True, which asked for what that SVC cannot do, is still refused."""
    import sklearn.svm

    from streamcov.stream.model import dump_estimator, load_estimator

    X = np.random.default_rng(0).normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(int)
    arrays: dict = {}
    desc = dump_estimator(sklearn.svm.SVC(kernel="linear").fit(X, y), "clf.", arrays)
    assert "probability" not in desc["params"]
    if saved is not None:
        desc["params"]["probability"] = saved   # as an earlier streamcov, or scikit-learn 1.9-1.10, wrote it
    want = sklearn.svm.SVC.decision_function(load_estimator(desc, arrays), X)

    class SVC(sklearn.svm.SVC):   # scikit-learn 1.11's: no probability parameter
        def __init__(self, *, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0, shrinking=True, tol=1e-3,
                     cache_size=200, class_weight=None, verbose=False, max_iter=-1, decision_function_shape="ovr",
                     break_ties=False, random_state=None):
            super().__init__(C=C, kernel=kernel, degree=degree, gamma=gamma, coef0=coef0, shrinking=shrinking,
                             tol=tol, cache_size=cache_size, class_weight=class_weight, verbose=verbose,
                             max_iter=max_iter, decision_function_shape=decision_function_shape,
                             break_ties=break_ties, random_state=random_state)

    monkeypatch.setattr(sklearn.svm, "SVC", SVC)
    got = load_estimator(desc, arrays)
    assert type(got) is SVC
    np.testing.assert_array_equal(got.decision_function(X), want)
    desc["params"]["probability"] = True
    with pytest.raises(TypeError, match="unexpected keyword argument 'probability'"):
        load_estimator(desc, arrays)
