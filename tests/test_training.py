"""Checkpoints and exact resume, pickle-free models, early stopping, bounded prefetch."""
import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, RGW_SETS
from reference import signed_model_doc
from streamcov.errors import ModelError
from streamcov.stream.model import FittedPipeline
from streamcov.tasks.config import load_config
from streamcov.stream.predict import predict as predict_store
from streamcov.tasks import run as run_pipeline
from streamcov.stream.sgd import iter_blocks
from streamcov.data.skeletons import ingest
from streamcov.data.synth import SyntheticSkeletons


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("syn") / "syn.zarr"
    return ingest(SyntheticSkeletons(n_sequences=240, n_subjects=6, n_classes=8, seed=3), path,
                  chunk_frames=2048)


# the incremental learner, with the settings msr_action3d.toml had before its learner became lbfgs
SGD_SETS = ['model.learner="sgd"', 'model.loss="log_loss"', 'model.learning_rate="optimal"', "model.C=100.0",
            "model.average=false"]


# one covariance a sequence where the descriptor is not what a test is about (resume, checkpoints, caches): the
# pipeline file's three-level pyramid (7 windows) multiplies the featurization; tests of a model's pyramid add
# PYRAMID
ONE_LEVEL, PYRAMID = "descriptor.levels=1", "descriptor.levels=3"


def cfg_for(store, out, *extra):
    return load_config(REPO / "pipelines" / "msr_action3d.toml",
                         [f'output="{out}"', ONE_LEVEL, *RGW_SETS, "features.n_components=256", *SGD_SETS,
                          "model.epochs=4", "dask.block_size=40", "model.checkpoint_blocks=2",
                          *extra], store=store.path)


def lbfgs_cfg_for(store, out, *extra):
    """The pipeline file's own learner (lbfgs, squared hinge), on a small map and few iterations."""
    return load_config(REPO / "pipelines" / "msr_action3d.toml",
                       [f'output="{out}"', ONE_LEVEL, *RGW_SETS, "features.n_components=256", "model.max_iter=30",
                        "dask.block_size=40",
                        *extra], store=store.path)


CFG = {"sgd": cfg_for, "lbfgs": lbfgs_cfg_for}


def coef_of(out):
    return FittedPipeline.load(out / "model").classifier.coef_


# 6 blocks with training rows: shuffle groups of 1 (6 partial_fit calls per epoch) or of 2
# (3 calls); the crash call is mid-epoch, after a within-epoch checkpoint (every 2 blocks).
@pytest.mark.parametrize("group,crash_call", [(1, 9), (2, 8)])
def test_resume_after_crash_gives_the_same_model(synth_store, tmp_path, monkeypatch, group, crash_call):
    grouped = f"model.shuffle_blocks={group}"
    ref = run_pipeline(cfg_for(synth_store, tmp_path / "ref", grouped), scheduler="synchronous")
    from sklearn.linear_model import SGDClassifier
    original = SGDClassifier.partial_fit
    calls = {"n": 0}

    def crashing(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == crash_call:
            raise KeyboardInterrupt("simulated crash")
        return original(self, *a, **k)

    monkeypatch.setattr(SGDClassifier, "partial_fit", crashing)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(cfg_for(synth_store, tmp_path / "cut", grouped), scheduler="synchronous")
    monkeypatch.setattr(SGDClassifier, "partial_fit", original)
    ck = tmp_path / "cut" / "checkpoints" / "odd-even.npz"
    assert ck.is_file()
    state = json.loads(np.load(ck)["checkpoint_json"].tobytes().decode())["state"]
    assert 0 < state["pos"] < 6  # the crash came after a within-epoch checkpoint
    resumed = run_pipeline(cfg_for(synth_store, tmp_path / "cut", grouped), scheduler="synchronous",
                           resume=True)
    assert resumed["featurized_sequences"] == 0   # features were complete: not recomputed
    np.testing.assert_array_equal(coef_of(tmp_path / "cut"), coef_of(tmp_path / "ref"))
    assert resumed["accuracy"] == ref["accuracy"]


@pytest.mark.parametrize("learner", ["sgd", "lbfgs"])
def test_resume_ignores_checkpoints_of_other_parameters_and_says_so(synth_store, tmp_path, capsys, learner):
    cfg_for = CFG[learner]
    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    capsys.readouterr()
    other = run_pipeline(cfg_for(synth_store, tmp_path, "model.C=1.0"), scheduler="synchronous", resume=True)
    assert re.search(r"note: resume=True: .*odd-even\.npz was written for other settings .* fold odd-even trained "
                     r"from the start", capsys.readouterr().err)
    fresh = run_pipeline(cfg_for(synth_store, tmp_path / "fresh", "model.C=1.0"), scheduler="synchronous")
    assert other["accuracy"] == fresh["accuracy"]
    np.testing.assert_array_equal(coef_of(tmp_path), coef_of(tmp_path / "fresh"))
    # the same settings again: the checkpoint is used (the finished fold is not trained again), no note
    run_pipeline(cfg_for(synth_store, tmp_path, "model.C=1.0"), scheduler="synchronous", resume=True)
    assert "note: resume=True" not in capsys.readouterr().err


@pytest.mark.parametrize("other", ["another-runs-model", "exact-svm-model", "no-model"])
def test_resume_does_not_report_a_saved_fold_beside_another_model(synth_store, tmp_path, capsys, other):
    """The last fold's saved result is reused by --resume only beside the model that fold saved (its
    fingerprint in model.json, the model.npz it was saved with): a model folder another run left there
    (other settings, the exact SVM of another pipeline into the same folder) or none is trained again, with
    a note (before: result.json reported the first run's settings and accuracy beside the other model)."""
    import shutil

    ref = run_pipeline(lbfgs_cfg_for(synth_store, tmp_path), scheduler="synchronous")
    ref_coef = coef_of(tmp_path)
    if other == "no-model":
        shutil.rmtree(tmp_path / "model")
    else:
        elsewhere = tmp_path / "elsewhere"
        cfg = (lbfgs_cfg_for(synth_store, elsewhere, "model.C=1.0") if other == "another-runs-model" else
               load_config(REPO / "pipelines" / "msr_action3d_exact.toml", [f'output="{elsewhere}"',
                                                                            "model.sigma_grid=[1.0]",
                                                                            "model.C_grid=[1.0]"],
                           store=synth_store.path))
        run_pipeline(cfg, scheduler="synchronous")
        shutil.rmtree(tmp_path / "model")
        shutil.copytree(elsewhere / "model", tmp_path / "model")
    capsys.readouterr()
    again = run_pipeline(lbfgs_cfg_for(synth_store, tmp_path), scheduler="synchronous", resume=True)
    assert re.search(r"note: resume=True: \S+model is not the model fold odd-even saved \(missing, another run's, "
                     r"or damaged\); fold odd-even is trained again", capsys.readouterr().err)
    assert again["accuracy"] == ref["accuracy"]
    np.testing.assert_array_equal(coef_of(tmp_path), ref_coef)
    # its own model: reused, no note
    run_pipeline(lbfgs_cfg_for(synth_store, tmp_path), scheduler="synchronous", resume=True)
    assert "note: resume=True" not in capsys.readouterr().err


def test_resume_does_not_reuse_a_fold_whose_rows_changed(synth_store, tmp_path, capsys):
    """A splits file edited between runs (two subjects swapped between training and test: the same sizes)
    gives the fold other rows; its saved result is not reused (before: the fingerprint held the file's path
    only, and --resume reported the first split's accuracy and test rows)."""
    splits = tmp_path / "splits.toml"
    sets = ['split.kind="subject-splits-file"', f'split.file="{splits}"', 'features.center=false']
    splits.write_text("[[split]]\ntrain_subjects = [1, 2, 3]\ntest_subjects = [4, 5, 6]\n")
    run_pipeline(lbfgs_cfg_for(synth_store, tmp_path / "o", *sets), scheduler="synchronous")
    splits.write_text("[[split]]\ntrain_subjects = [4, 2, 3]\ntest_subjects = [1, 5, 6]\n")
    capsys.readouterr()
    again = run_pipeline(lbfgs_cfg_for(synth_store, tmp_path / "o", *sets), scheduler="synchronous", resume=True)
    fresh = run_pipeline(lbfgs_cfg_for(synth_store, tmp_path / "fresh", *sets), scheduler="synchronous")
    assert again["accuracy"] == fresh["accuracy"] and again["n_test"] == fresh["n_test"]
    np.testing.assert_array_equal(coef_of(tmp_path / "o"), coef_of(tmp_path / "fresh"))
    test_rows = np.isin(synth_store.subjects, [1, 5, 6])
    ids = [line.split(",")[1] for line in (tmp_path / "o" / "predictions.csv").read_text().splitlines()[1:]]
    assert sorted(ids) == sorted(np.asarray(synth_store.ids())[test_rows].tolist())
    # predict on the model's own store reads the protocol as it is now: the fold's rows are not those it was
    # trained with once the file changes again, so the accuracy is not called a test accuracy
    assert predict_store(tmp_path / "o" / "model", synth_store.path)["evaluated_on"].startswith("test rows of fold")
    splits.write_text("[[split]]\ntrain_subjects = [1, 2, 3]\ntest_subjects = [4, 5, 6]\n")
    got = predict_store(tmp_path / "o" / "model", synth_store.path, train_accuracy=True)
    assert got["evaluated_on"] == ("every row whose label the model knows (fold split-1 of the model's protocol now "
                                   "gives other training and test rows than it was trained with)")
    assert got["includes_training_rows"] is True and "train_accuracy" not in got
    assert re.search(r"now gives fold split-1 other rows than the model was trained with \(the splits file was "
                     r"edited\?\): this accuracy includes its training rows", got["notes"][0])
    assert len(got["notes"]) == 2
    # --train-accuracy cannot be given there: said (it was left out without a word)
    assert got["notes"][1] == ("train_accuracy=True: the model's training rows on this store are not known (see "
                               "evaluated_on), so no training accuracy is given")


def test_predict_tells_an_exact_svm_models_moved_or_unrecorded_fold(synth_store, tmp_path):
    """The exact SVM's model recorded no digest of its fold's rows, and predict took a missing one as the rows
    unchanged: after a splits file swapped training and test subjects, predict scored the model's training rows
    and called them "test rows of fold split-1". It records them now, as the streamed learners do; a model that
    records none (saved by an earlier streamcov) is scored on every labelled row, said to include its
    training rows."""
    import json

    from reference import signed_model_doc

    splits = tmp_path / "splits.toml"
    splits.write_text("[[split]]\ntrain_subjects = [1, 2, 3]\ntest_subjects = [4, 5, 6]\n")
    cfg = load_config(REPO / "pipelines" / "msr_action3d_exact.toml",
                      [f'output="{tmp_path / "o"}"', "model.sigma_grid=[1.0]", "model.C_grid=[1.0]",
                       'split.kind="subject-splits-file"', f'split.file="{splits}"'], store=synth_store.path)
    result = run_pipeline(cfg, scheduler="synchronous")
    model = tmp_path / "o" / "model"
    got = predict_store(model, synth_store.path)
    assert got["evaluated_on"] == "test rows of fold split-1 (the model's protocol)"
    assert got["accuracy"] == result["accuracy"] and got["n_test"] == result["n_test"]
    splits.write_text("[[split]]\ntrain_subjects = [4, 5, 6]\ntest_subjects = [1, 2, 3]\n")
    got = predict_store(model, synth_store.path)
    assert got["evaluated_on"] == ("every row whose label the model knows (fold split-1 of the model's protocol now "
                                   "gives other training and test rows than it was trained with)")
    assert got["includes_training_rows"] is True
    splits.write_text("[[split]]\ntrain_subjects = [1, 2, 3]\ntest_subjects = [4, 5, 6]\n")
    doc = json.loads((model / "model.json").read_text())
    del doc["info"]["rows_sha256"]   # a model of an earlier streamcov
    (model / "model.json").write_text(json.dumps(signed_model_doc(doc)))
    got = predict_store(model, synth_store.path, train_accuracy=True)
    assert got["evaluated_on"].startswith("every row whose label the model knows (the model records no digest of "
                                          "fold split-1's rows: it was saved by a streamcov from before it recorded "
                                          "one")
    assert got["includes_training_rows"] is True and got["n_labelled"] == synth_store.n_sequences
    assert "train_accuracy" not in got and len(got["notes"]) == 2
    assert got["notes"][0].startswith("this is the model's training store, and its rows include the model's training "
                                      "rows")
    assert got["notes"][1] == ("train_accuracy=True: the model's training rows on this store are not known (see "
                               "evaluated_on), so no training accuracy is given")


def _msr_archive(folder, cvpr12):
    """A small MSR-Action3D archive (actions 1-3 of subjects 1-6) whose cvpr12 list names the ids ``cvpr12``."""
    from test_readers import _msr_text

    folder.mkdir()
    rng = np.random.default_rng(0)
    for a in (1, 2, 3):
        for s in range(1, 7):
            X = rng.standard_normal((12, 20, 3)).cumsum(0) * 0.05 + rng.standard_normal((20, 3))
            (folder / f"a{a:02d}_s{s:02d}_e01_skeleton3D.txt").write_text(_msr_text(X))
    (folder / "extras").mkdir()
    (folder / "extras" / "files_used_in_cvpr12_paper.txt").write_text("\n".join(cvpr12) + "\n")
    return folder


MSR_IDS = [f"a{a:02d}_s{s:02d}_e01" for a in (1, 2, 3) for s in range(1, 7)]


def _model_of(arch, out):
    """The exact SVM (one sigma, one C) trained on ``arch`` read in full, subject parity: odd subjects train."""
    from streamcov.data.readers import open_reader

    store = ingest(open_reader("msr-action3d", arch), out / "trained.zarr")
    sets = [f'output="{out}/run"', "descriptor.levels=1", "model.sigma_grid=[1.0]", "model.C_grid=[10.0]"]
    res = run_pipeline(load_config(REPO / "pipelines" / "msr_action3d_exact.toml", sets, store=store.path),
                       scheduler="synchronous")
    return store, res["model_path"]


def test_predict_knows_its_training_data_by_the_archive_not_the_path(tmp_path):
    """A store of the model's archive is its training data wherever the archive lies: the files' contents, not
    the path (a copy elsewhere was scored as other data without a word) nor the files' times (a copy that does not
    keep them was too); read with a subset option, when the subset holds training rows (their ids, read from the
    model's training store)."""
    import os
    import shutil

    from streamcov.data.readers import open_reader

    arch = _msr_archive(tmp_path / "msr", cvpr12=MSR_IDS[:6])   # action 1 of every subject: 3 training rows
    trained, model = _model_of(arch, tmp_path)
    # another path, the same files, new modification times (`cp -r` without -p)
    shutil.copytree(arch, tmp_path / "copy", copy_function=shutil.copy)
    for f in (tmp_path / "copy").rglob("*.txt"):
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**11))
    copy = ingest(open_reader("msr-action3d", tmp_path / "copy"), tmp_path / "copy.zarr")
    assert copy.attrs["source_record"]["files"]["digest"] != trained.attrs["source_record"]["files"]["digest"]
    got = predict_store(model, copy.path, tmp_path / "copy.csv", scheduler="synchronous")
    assert got["includes_training_rows"] is True and got["evaluated_on"] == "every row whose label the model knows"
    assert got["notes"] == [f"this store was written from the same data as the model's training store "
                            f"({trained.path}) but is another one: its rows include the model's training rows, so "
                            f"this accuracy is not a test accuracy; predict the model's own store for the test rows "
                            f"of its protocol"]
    subset = ingest(open_reader("msr-action3d", tmp_path / "copy", subset="cvpr12"), tmp_path / "subset.zarr")
    got = predict_store(model, subset.path, tmp_path / "subset.csv", scheduler="synchronous")
    assert got["includes_training_rows"] is True
    assert got["notes"] == [f"this store was read from the same archive as the model's training store "
                            f"({trained.path}), with subset='cvpr12': 3 of its 6 rows are the model's training rows, "
                            f"so this accuracy is not a test accuracy; predict the model's own store for the test "
                            f"rows of its protocol"]
    # without the training store, which rows it trained on is not known: said so
    trained.path.rename(tmp_path / "moved.zarr")
    got = predict_store(model, subset.path, tmp_path / "subset.csv", scheduler="synchronous")
    assert "includes_training_rows" not in got
    assert got["notes"] == [f"this store was read from the same archive as the model's training store "
                            f"({trained.path}), with subset='cvpr12': its rows may include the model's training rows "
                            f"(which ones is not known: that store is not there as the model recorded it), so this "
                            f"accuracy may not be a test accuracy"]


def test_predict_on_a_subset_of_test_rows_of_the_archive_says_nothing(tmp_path):
    """A subset of the model's archive that holds none of its training rows (the even, test subjects) is test
    data: no note."""
    from streamcov.data.readers import open_reader

    arch = _msr_archive(tmp_path / "msr", cvpr12=[i for i in MSR_IDS if int(i[5:7]) % 2 == 0])
    _, model = _model_of(arch, tmp_path)
    subset = ingest(open_reader("msr-action3d", arch, subset="cvpr12"), tmp_path / "subset.zarr")
    got = predict_store(model, subset.path, tmp_path / "subset.csv", scheduler="synchronous")
    assert "includes_training_rows" not in got and "notes" not in got and got["accuracy"] >= 0


def test_the_same_store_under_another_path_reuses_its_features(synth_store, tmp_path, monkeypatch):
    """A store is known in the features' fingerprint by its identity, not by the path it was given as:
    given relative from its folder, the same features are reused (before: every sequence featurized again)."""
    first = run_pipeline(lbfgs_cfg_for(synth_store, tmp_path), scheduler="synchronous")
    monkeypatch.chdir(synth_store.path.parent)
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml",
                      [f'output="{tmp_path}"', ONE_LEVEL, *RGW_SETS, "features.n_components=256",
                       "model.max_iter=30", "dask.block_size=40"], store=synth_store.path.name)
    again = run_pipeline(cfg, scheduler="synchronous")
    assert first["featurized_sequences"] == synth_store.n_sequences and again["featurized_sequences"] == 0
    assert again["accuracy"] == first["accuracy"]


def test_an_interrupted_run_leaves_no_earlier_result(synth_store, tmp_path, monkeypatch):
    """result.json and predictions.csv of an earlier run into the same folder go when a run starts: one
    stopped half-way does not leave them looking like its own."""
    from streamcov.tasks import classify

    run_pipeline(lbfgs_cfg_for(synth_store, tmp_path), scheduler="synchronous")
    assert (tmp_path / "result.json").is_file() and (tmp_path / "predictions.csv").is_file()

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(classify, "_incremental", stop)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(lbfgs_cfg_for(synth_store, tmp_path, "model.C=1.0"), scheduler="synchronous")
    assert not (tmp_path / "result.json").exists() and not (tmp_path / "predictions.csv").exists()


def _truncated(ck, learner):
    ck.write_bytes(ck.read_bytes()[:200])                          # not a zip any more


def _edited(ck, learner):
    """Its arrays edited by hand (the coefficients negated, or L-BFGS's point): whole and of the right
    settings; only the SHA-256 it records of its arrays tells it apart (before: --resume continued from it,
    and the run saved a model of accuracy 0)."""
    with np.load(ck) as z:
        arrays = {k: z[k] for k in z.files}
    key = "clf.coef_" if learner == "sgd" else "state.x"
    arrays[key] = -arrays[key]
    np.savez(ck, **arrays)


@pytest.mark.parametrize("damage", [_truncated, _edited])
@pytest.mark.parametrize("learner", ["sgd", "lbfgs"])
def test_resume_from_a_damaged_checkpoint_trains_from_the_start(synth_store, tmp_path, capsys, learner, damage):
    cfg_for = CFG[learner]
    ref = run_pipeline(cfg_for(synth_store, tmp_path / "ref"), scheduler="synchronous")
    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    damage(tmp_path / "checkpoints" / "odd-even.npz", learner)
    (tmp_path / "checkpoints" / "odd-even.result.json").unlink()   # the fold is not finished
    capsys.readouterr()
    again = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous", resume=True)
    assert re.search(r"note: resume=True: .*odd-even\.npz .* or is damaged; fold odd-even trained from the start",
                     capsys.readouterr().err)
    assert again["accuracy"] == ref["accuracy"]
    np.testing.assert_array_equal(coef_of(tmp_path), coef_of(tmp_path / "ref"))


def _resealed(edit):
    """Edit a fold's saved result and write its SHA-256 again, as a tool that knew the format would."""
    from streamcov.stream.model import doc_sha256_of

    def damage(text):
        doc = json.loads(text)
        edit(doc)
        doc["doc_sha256"] = doc_sha256_of(doc)
        return json.dumps(doc)
    return damage


@pytest.mark.parametrize("damage", [
    lambda t: t[:40],
    lambda t: t.replace('"predicted": [', '"predicted": [0, '),
    lambda t: t.replace('"accuracy": ', '"accuracy": 0.99, "was": '),
    _resealed(lambda d: d["result"].update(accuracy=0.99)),
    _resealed(lambda d: d.update(predicted=[99] * len(d["predicted"]))),
    _resealed(lambda d: d.update(predicted=[-1] * len(d["predicted"]))),
    _resealed(lambda d: d.update(predicted=[0] * len(d["predicted"]))),
], ids=["truncated", "one-prediction-too-many", "accuracy-edited", "accuracy-edited-resealed",
        "codes-out-of-range", "negative-codes", "predictions-edited-resealed"])
def test_resume_with_a_damaged_fold_result_runs_the_fold_again(synth_store, tmp_path, capsys, damage):
    """A finished fold's saved result is reused by --resume only as it was written: its own SHA-256, class
    codes in range and the accuracy its predictions give (each is the only check a case trips, but the
    first: an edit of the file without a new SHA-256)."""
    ref = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    done = tmp_path / "checkpoints" / "odd-even.result.json"
    done.write_text(damage(done.read_text()))
    capsys.readouterr()
    again = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous", resume=True)
    assert re.search(r"note: resume=True: .*odd-even\.result\.json is damaged or was edited \(or written by an "
                     r"earlier streamcov\); fold odd-even is run again", capsys.readouterr().err)
    assert again["accuracy"] == ref["accuracy"] and json.loads(done.read_text())["result"]["accuracy"] == ref["accuracy"]


def test_a_damaged_fit_in_a_feature_store_is_computed_again(synth_store, tmp_path, capsys):
    ref = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    ref_coef = coef_of(tmp_path)
    # a fitted array of the map (the centred maps' mean rows)
    chunk = sorted((tmp_path / "features.zarr" / "fit").glob("*/c/0"))[0]
    data = bytearray(chunk.read_bytes())
    data[100:107] = b"garbage"
    chunk.write_bytes(bytes(data))
    capsys.readouterr()
    again = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    assert re.search(rf"note: .*features\.zarr: array 'fit/{re.escape(chunk.parent.parent.name)}', chunk 0: checksum "
                     r"mismatch .*; the feature store is computed again", capsys.readouterr().err)
    assert again["featurized_sequences"] == synth_store.n_sequences and not again["fit_reused"]
    assert again["accuracy"] == ref["accuracy"]
    np.testing.assert_array_equal(coef_of(tmp_path), ref_coef)   # the same fit and features, computed again


@pytest.mark.parametrize("array", ["fit", "X"])
def test_an_edited_zarr_json_in_a_feature_store_is_computed_again(synth_store, tmp_path, capsys, array):
    """A byte order edited in the zarr.json of a fitted array or of X: the chunks' bytes and checksums are
    unchanged, so only the digests of the zarr.json recorded when the arrays were written tell it apart
    (before: the fit read as non-finite numbers, was reused, and the saved model could never be used)."""
    import json

    ref = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    ref_coef = coef_of(tmp_path)
    fs = tmp_path / "features.zarr"
    meta = sorted((fs / "fit").glob("*/zarr.json"))[0] if array == "fit" else fs / "X" / "zarr.json"
    name = meta.parent.relative_to(fs).as_posix()
    doc = json.loads(meta.read_text())
    doc["codecs"][0]["configuration"]["endian"] = "big"
    meta.write_text(json.dumps(doc))
    capsys.readouterr()
    again = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    assert re.search(rf"note: .*features\.zarr: array '{re.escape(name)}': its zarr\.json \(data type, byte order, "
                     r"codecs, shape\) is not the one the feature store was written with \(edited\); the feature "
                     r"store is computed again", capsys.readouterr().err)
    assert again["featurized_sequences"] == synth_store.n_sequences and not again["fit_reused"]
    assert again["accuracy"] == ref["accuracy"]
    np.testing.assert_array_equal(coef_of(tmp_path), ref_coef)


def test_a_feature_chunk_copied_from_another_run_is_computed_again(synth_store, tmp_path, capsys):
    """A whole chunk of X copied in from another run's feature store (another sigma) decodes with a valid
    checksum: the checksum recorded when the block was written tells it apart, so that block is computed
    again, with a note, and the run gives its own figures (before: the other run's features were used,
    featurized_sequences 0, and the accuracy changed)."""
    a, b = tmp_path / "a", tmp_path / "b"
    ref = run_pipeline(cfg_for(synth_store, a), scheduler="synchronous")
    ref_coef = coef_of(a)
    run_pipeline(cfg_for(synth_store, b, "features.sigma=3.0"), scheduler="synchronous")
    assert not np.array_equal(coef_of(b), ref_coef)
    chunk = a / "features.zarr" / "X" / "c" / "1" / "0"
    theirs = (b / "features.zarr" / "X" / "c" / "1" / "0").read_bytes()
    assert theirs != chunk.read_bytes()
    chunk.write_bytes(theirs)
    capsys.readouterr()
    again = run_pipeline(cfg_for(synth_store, a), scheduler="synchronous")
    assert re.search(r"note: \S+features\.zarr: block\(s\) \[1\] are not as this feature store wrote them \(a "
                     r"chunk of X copied from another store or damaged, .*\): computed again", capsys.readouterr().err)
    assert again["featurized_sequences"] == 40 and again["accuracy"] == ref["accuracy"]
    np.testing.assert_array_equal(coef_of(a), ref_coef)


@pytest.mark.parametrize("array", ["done", "crc"])
def test_a_damaged_done_flag_or_block_checksum_recomputes_the_block(synth_store, tmp_path, capsys, array):
    """The per-block flags and checksums are checksummed too: an emptied chunk of either (before: a zstd
    traceback from the unchecked done array) makes that block count as not done, computed again with a note."""
    ref = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    ref_coef = coef_of(tmp_path)
    (tmp_path / "features.zarr" / array / "c" / "2").write_bytes(b"")
    capsys.readouterr()
    again = run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    assert re.search(r"note: \S+features\.zarr: block\(s\) \[2\] are not as this feature store wrote them",
                     capsys.readouterr().err)
    assert again["featurized_sequences"] == 40 and again["accuracy"] == ref["accuracy"]
    np.testing.assert_array_equal(coef_of(tmp_path), ref_coef)


def test_a_damaged_feature_chunk_says_the_feature_store_is_a_cache(synth_store, tmp_path):
    from streamcov.errors import StoreError

    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    chunk = tmp_path / "features.zarr" / "X" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[1000:1007] = b"garbage"
    chunk.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"array 'X', chunk 0/0: checksum mismatch .* it is a cache of `streamcov "
                                         r"run`: delete .*features\.zarr and run again"):
        run_pipeline(cfg_for(synth_store, tmp_path, "model.C=3.0"), scheduler="synchronous")


def test_model_round_trip_and_predict(synth_store, tmp_path):
    res = run_pipeline(cfg_for(synth_store, tmp_path, "model.scale=\"standard\"", PYRAMID), scheduler="synchronous")
    model = FittedPipeline.load(tmp_path / "model")
    # the pipeline's pyramid descriptor: one RGW map per window, concatenated
    assert model.scaler is not None and type(model.feature_map).__name__ == "BlockSumFeatures"
    assert type(model.feature_map.block0_).__name__ == "RGWSampler"
    summary = predict_store(tmp_path / "model", synth_store.path, tmp_path / "p.csv",
                            scheduler="synchronous")
    assert summary["n"] == synth_store.n_sequences
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "id,predicted,label" and len(lines) == synth_store.n_sequences + 1
    # predictions on the test subjects reproduce the run's accuracy
    import csv
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    test = synth_store.subjects % 2 == 0
    acc = np.mean([r["predicted"] == r["label"] for r, t in zip(rows, test) if t])
    assert acc == pytest.approx(res["accuracy"], abs=1e-12)
    # on its own store the summary scores the model on its protocol's test rows, not on every row
    assert summary["evaluated_on"].startswith("test rows of fold")
    assert summary["accuracy"] == pytest.approx(res["accuracy"], abs=1e-12)
    assert summary["n_test"] == int(test.sum()) and "train_accuracy" not in summary


def test_a_model_draws_its_projections_again_from_the_seed(synth_store, tmp_path, monkeypatch):
    """The random projections of the map (1.5 GB at nu = 20000 on the shipped descriptor) are not in
    model.npz: loading draws them again from the seed and checks each against the SHA-256 it was saved with;
    other draws are refused with one line; a model saved with them (format version 2) still loads."""
    import csv

    from streamcov.stream import model as M

    run_pipeline(cfg_for(synth_store, tmp_path / "a", PYRAMID), scheduler="synchronous")
    doc = json.loads((tmp_path / "a" / "model" / "model.json").read_text())
    with np.load(tmp_path / "a" / "model" / "model.npz") as z:
        names = set(z.files)
    drawn = doc["map_redraw"]["sha256"]
    assert drawn and all(k.endswith(("projections_", "scale_", "degrees_", "group_start_")) for k in drawn)
    assert not names & set(drawn) and any(k.endswith("mean_") for k in names)   # the data's mean row is kept
    first = predict_store(tmp_path / "a" / "model", synth_store.path, tmp_path / "a.csv", scheduler="synchronous")
    # the same model with every array in the file, as version 2 wrote it
    monkeypatch.setattr(M, "_leave_out_drawn", lambda fmap, arrays: None)
    run_pipeline(cfg_for(synth_store, tmp_path / "b", PYRAMID), scheduler="synchronous")
    with np.load(tmp_path / "b" / "model" / "model.npz") as z:
        assert set(drawn) <= set(z.files)
    second = predict_store(tmp_path / "b" / "model", synth_store.path, tmp_path / "b.csv", scheduler="synchronous")
    assert first["accuracy"] == second["accuracy"]
    assert list(csv.reader(open(tmp_path / "a.csv"))) == list(csv.reader(open(tmp_path / "b.csv")))
    key = sorted(drawn)[0]
    doc["map_redraw"]["sha256"][key] = "0" * 64     # what another numpy drawing other numbers looks like
    (tmp_path / "a" / "model" / "model.json").write_text(json.dumps(signed_model_doc(doc)))
    with pytest.raises(ModelError, match=rf"model\.json: the feature map's {re.escape(key[4:])} drawn again from its "
                                         r"seed differs from the one the model was trained with .*train the model "
                                         r"again"):
        FittedPipeline.load(tmp_path / "a" / "model")


def test_predict_defaults_and_train_accuracy(synth_store, tmp_path):
    """Without --out the predictions go to <model>/predictions/<store>.csv; --train-accuracy adds the
    accuracy on the fold's training rows; a copy of the store under another identity is scored on every row."""
    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    s = predict_store(tmp_path / "model", synth_store.path, scheduler="synchronous", train_accuracy=True)
    assert s["predictions"] == str(tmp_path / "model" / "predictions" / f"{synth_store.path.name}.csv")
    assert (tmp_path / "model" / "predictions" / f"{synth_store.path.name}.csv").is_file()
    test = synth_store.subjects % 2 == 0
    assert s["n_train"] == int((~test).sum()) and 0 <= s["train_accuracy"] <= 1
    import csv
    rows = list(csv.DictReader(open(s["predictions"])))
    right = np.array([r["predicted"] == r["label"] for r in rows])
    assert s["train_accuracy"] == pytest.approx(right[~test].mean(), abs=1e-12)


def test_two_stores_of_one_folder_name_keep_their_predictions_apart(synth_store, tmp_path):
    """The default file is named by the store's folder: a second store of that name (2024-01/store.zarr,
    2024-02/store.zarr) replaced the first one's predictions without a word. It now gets a name of its own, and
    a note says so; the same store again replaces its own file."""
    import shutil

    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    stores = []
    for month in ("2024-01", "2024-02"):
        stores.append(tmp_path / month / synth_store.path.name)
        shutil.copytree(synth_store.path, stores[-1])
    first = predict_store(tmp_path / "model", stores[0], scheduler="synchronous")
    plain = tmp_path / "model" / "predictions" / f"{synth_store.path.name}.csv"
    assert first["predictions"] == str(plain) and not first.get("notes")
    second = predict_store(tmp_path / "model", stores[1], scheduler="synchronous")
    other = Path(second["predictions"])
    assert other.parent == plain.parent and other.name.startswith(synth_store.path.name + "-") and plain.is_file()
    assert second["notes"] == [f"{plain} holds the predictions of another store, {stores[0].resolve()}; these go to "
                               f"{other.name}"]
    again = predict_store(tmp_path / "model", stores[0], scheduler="synchronous")
    assert again["predictions"] == str(plain) and not again.get("notes")
    # --out onto the default place drops the record of the file it replaced; a file without a record (an
    # earlier streamcov's) is taken over once, with a note (it stayed stale, every later predict going elsewhere)
    predict_store(tmp_path / "model", stores[1], plain, scheduler="synchronous")
    taken = predict_store(tmp_path / "model", stores[0], scheduler="synchronous")
    assert taken["predictions"] == str(plain) and taken["notes"] == [
        f"{plain} records no store (written with --out, or by an earlier streamcov): replaced by the predictions of "
        f"{stores[0].resolve()}"]
    assert not predict_store(tmp_path / "model", stores[0], scheduler="synchronous").get("notes")
    # a model trained again removes both, and what they record
    run_pipeline(cfg_for(synth_store, tmp_path, "model.C=2.0"), scheduler="synchronous")
    assert not (tmp_path / "model" / "predictions").exists()


@pytest.mark.parametrize("where", ["run", "copied"])
def test_same_named_stores_predicted_together_keep_their_predictions_apart(synth_store, tmp_path, monkeypatch, where):
    """Two predicts of two stores of one folder name started together both found the plain file absent, and the
    later write replaced the earlier's predictions without a word. The default file is chosen again under the
    lock: here the other predict writes the plain file after this one chose it and before it writes. A model
    outside a run's folder (copied elsewhere) takes the lock of its predictions folder."""
    import shutil

    from streamcov.stream import predict as predict_mod

    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    model = tmp_path / "model"
    if where == "copied":
        model = tmp_path / "elsewhere" / "model"
        shutil.copytree(tmp_path / "model", model)
    stores = []
    for month in ("2024-01", "2024-02"):
        stores.append(tmp_path / month / synth_store.path.name)
        shutil.copytree(synth_store.path, stores[-1])
    real, fired = predict_mod._check_out, []

    def check_out(*args, **kwargs):
        real(*args, **kwargs)
        if not fired:   # the other predict, started at the same moment, writes first
            fired.append(None)
            fired[0] = predict_store(model, stores[0], scheduler="synchronous")

    monkeypatch.setattr(predict_mod, "_check_out", check_out)
    second = predict_store(model, stores[1], scheduler="synchronous")
    plain = model / "predictions" / f"{synth_store.path.name}.csv"
    assert fired[0]["predictions"] == str(plain) and not fired[0].get("notes")
    assert Path(second["predictions"]).name.startswith(synth_store.path.name + "-")
    assert second["notes"] == [f"{plain} holds the predictions of another store, {stores[0].resolve()}; these go to "
                               f"{Path(second['predictions']).name}"]
    assert predict_mod._recorded_source(plain) == str(stores[0].resolve())
    assert predict_mod._recorded_source(Path(second["predictions"])) == str(stores[1].resolve())
    assert not list(plain.parent.glob(".streamcov.lock"))


def test_model_loading_never_runs_code(synth_store, tmp_path):
    run_pipeline(cfg_for(synth_store, tmp_path), scheduler="synchronous")
    doc = json.loads((tmp_path / "model" / "model.json").read_text())
    doc["classifier"]["class"] = "os.system"
    (tmp_path / "model" / "model.json").write_text(json.dumps(signed_model_doc(doc)))
    with pytest.raises(ModelError, match="not in the allow-list"):
        FittedPipeline.load(tmp_path / "model")
    # an npz holding a pickled object array is refused
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object))
    bad = tmp_path / "bad"
    bad.mkdir()
    doc.update(feature_map=None, scaler=None, arrays_sha256=None)   # no digest: the npz is read
    doc["classifier"]["class"] = "SGDClassifier"
    (bad / "model.json").write_text(json.dumps(signed_model_doc(doc)))
    np.savez(bad / "model.npz", **{"clf.coef_": np.array([{"x": 1}], dtype=object)})
    with pytest.raises(ModelError, match="allow_pickle"):
        FittedPipeline.load(bad)
    with pytest.raises(ModelError, match="no such model folder"):
        FittedPipeline.load(tmp_path / "nothing")


def test_early_stopping_on_validation_split(synth_store, tmp_path):
    res = run_pipeline(cfg_for(synth_store, tmp_path, "model.epochs=60", "model.validation_fraction=0.2",
                               "model.n_iter_no_change=2"), scheduler="synchronous")
    assert res["epochs_run"] < 60
    assert res["n_train"] == int((synth_store.subjects % 2 == 1).sum())


class SlowReader:
    def __init__(self, n):
        self.loaded = 0
        self.consumed = 0
        self.max_ahead = 0
        self.lock = threading.Lock()
        self.n = n

    def read_block(self, i):
        with self.lock:
            self.loaded += 1
            self.max_ahead = max(self.max_ahead, self.loaded - self.consumed)
        return np.full((3, 2), i)


def test_prefetch_is_bounded_when_the_learner_is_slow():
    r = SlowReader(30)
    seen = []
    for i, X in iter_blocks(r, range(30), prefetch=2):
        time.sleep(0.01)  # a learner slower than the reader
        seen.append(i)
        with r.lock:
            r.consumed += 1
    assert seen == list(range(30))
    # queue of 2 + the block the reader holds while waiting + the one being consumed
    assert r.max_ahead <= 4, r.max_ahead


def test_prefetch_reader_errors_reach_the_learner():
    class Broken:
        def read_block(self, i):
            if i == 3:
                raise OSError("chunk 3 unreadable")
            return np.zeros((1, 1))
    with pytest.raises(OSError, match="chunk 3 unreadable"):
        for _ in iter_blocks(Broken(), range(10), prefetch=2):
            pass


@pytest.mark.parametrize("extra", [(), ("model.validation_fraction=0.2", "model.n_iter_no_change=2")])
def test_sgd_rows_cached_in_memory_give_the_same_model(synth_store, tmp_path, extra):
    """cache = "memory" reads and scales the training rows once; every partial_fit call is the same."""
    runs = {c: run_pipeline(cfg_for(synth_store, tmp_path / c, f'model.cache="{c}"', *extra),
                            scheduler="synchronous") for c in ("stream", "memory")}
    a = np.load(tmp_path / "stream" / "model" / "model.npz")
    b = np.load(tmp_path / "memory" / "model" / "model.npz")
    assert sorted(a.files) == sorted(b.files)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a.files)
    assert runs["stream"]["epochs_run"] == runs["memory"]["epochs_run"]
    # the result says where the rows were (the lbfgs result did; the sgd result did not)
    assert runs["stream"]["cache"] == "stream" and runs["memory"]["cache"] == "memory"


@pytest.mark.parametrize("n_classes", [2, 3, 4, 7])
def test_linear_svc_models_of_any_class_count_save_and_load(tmp_path, n_classes):
    """The ConvNet head's classifier is SVC(kernel="linear"): one coefficient row per pair of classes
    (k (k - 1) / 2), which the model check took for damage from 4 classes on (3 pairs of 3 classes and the one
    row of 2 had hidden it); other classifiers keep one row or one per class."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    from streamcov.stream.skeleton import SkeletonDescriptor

    rng = np.random.default_rng(n_classes)
    X = rng.normal(size=(12 * n_classes, 21))
    y = np.arange(len(X)) % n_classes
    spec = {"kind": "skeleton", "n_joints": 2, "joint_names": [], "descriptor": SkeletonDescriptor(None).as_dict()}
    names = [f"c{i}" for i in range(n_classes)]
    clf = SVC(kernel="linear", C=1.0).fit(X, y)
    assert clf.coef_.shape[0] == max(1, n_classes * (n_classes - 1) // 2)
    folder = FittedPipeline(spec, None, None, clf, names).save(tmp_path / "svc")
    again = FittedPipeline.load(folder)
    np.testing.assert_array_equal(again.predict_codes(X), clf.predict(X))
    if n_classes >= 4:
        # a one-vs-rest model with that many rows is still damage
        bad = LogisticRegression().fit(X, y)
        bad.coef_ = np.zeros((n_classes * (n_classes - 1) // 2, 21))
        with pytest.raises(ModelError, match=rf"{n_classes * (n_classes - 1) // 2} coefficient rows for "
                                             rf"{n_classes} classes"):
            FittedPipeline(spec, None, None, bad, names).check()


def test_a_run_that_saved_no_model_says_why_when_its_model_is_asked_for(tmp_path):
    """A method that compares images pairwise saves no model; its result.json says so (model_note), and
    `predict` on that run's model folder repeats the note instead of only 'no such model folder'."""
    (tmp_path / "result.json").write_text(json.dumps({"model_path": None, "model_note": "method 'stein' compares "
                                                      "images pairwise (no vector per image): no model is saved"}))
    with pytest.raises(ModelError, match=r"model: no such model folder \(a run writes its model into <output>/model\)"
                                         r"; .*result.json says: method 'stein' compares images pairwise"):
        FittedPipeline.load(tmp_path / "model")
    with pytest.raises(ModelError, match=r"elsewhere: no such model folder \(a run writes its model into "
                                         r"<output>/model\)$"):
        FittedPipeline.load(tmp_path / "nothing" / "elsewhere")


def test_model_load_and_save_name_a_bad_folder(tmp_path):
    """The Python API's load and save refuse what is not a folder path with one line naming the keyword
    (``None`` or a number was a bare TypeError), and save names the file that stands where the folder would
    be (a bare FileExistsError or NotADirectoryError)."""
    from sklearn.svm import SVC

    from streamcov.errors import ConfigError
    from streamcov.stream.skeleton import SkeletonDescriptor

    for bad, pattern in [(None, r"^folder=None: expected a path \(a str or pathlib\.Path\), got NoneType$"),
                         (5, r"^folder=5: expected a path \(a str or pathlib\.Path\), got int$"),
                         ("", r"^folder: empty path; give the model folder of a run \(<output>/model\)$")]:
        with pytest.raises(ConfigError, match=pattern):
            FittedPipeline.load(bad)
    X = np.random.default_rng(0).normal(size=(8, 21))
    spec = {"kind": "skeleton", "n_joints": 2, "joint_names": [], "descriptor": SkeletonDescriptor(None).as_dict()}
    model = FittedPipeline(spec, None, None, SVC(kernel="linear").fit(X, np.arange(8) % 2), ["a", "b"])
    with pytest.raises(ConfigError, match=r"^folder=None: expected a path"):
        model.save(None)
    (tmp_path / "f").write_text("")
    for target in (tmp_path / "f", tmp_path / "f" / "model"):
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(target))}: cannot save the model there "
                                              rf"\({re.escape(str(tmp_path / 'f'))} is a file, not a folder\); "
                                              rf"choose another folder$"):
            model.save(target)
    assert (tmp_path / "f").read_text() == ""
    # a store in the folder (written into an interrupted run's model folder): the model is not mixed into it
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    store = ingest(SyntheticSkeletons(n_sequences=6), tmp_path / "model").path
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(store))}: a skeleton store, not a model folder; the "
                                          r"model's files would be mixed into it: move the store elsewhere, or save "
                                          r"the model in another folder$"):
        model.save(store)
    assert not (store / "model.json").exists()


def test_predict_on_more_of_the_same_synthetic_data_names_its_training_rows(synth_store, tmp_path):
    """The generator's sequence i depends on its settings and i alone: a store of the same settings with more
    sequences starts with the training store's rows (scored as new data without a word before), one with
    fewer is its start. The note counts the training rows among them, by id."""
    out = tmp_path / "o"
    run_pipeline(lbfgs_cfg_for(synth_store, out), scheduler="synchronous")
    kw = dict(n_subjects=6, n_classes=8, seed=3)
    big = ingest(SyntheticSkeletons(n_sequences=300, **kw), tmp_path / "big.zarr", chunk_frames=2048)
    for i in (0, 239):   # the first 240 rows are the training store's, sequence by sequence
        np.testing.assert_array_equal(big.sequence(i), synth_store.sequence(i))
    train = int((synth_store.subjects % 2 == 1).sum())
    got = predict_store(out / "model", big.path, tmp_path / "big.csv", scheduler="synchronous")
    assert got["includes_training_rows"] is True
    assert got["notes"] == [f"this store was generated with the same settings as the model's training store "
                            f"({synth_store.path}) but 300 sequences instead of 240: {train} of its 300 rows are the "
                            f"model's training rows, so this accuracy is not a test accuracy; generate it with "
                            f"another seed for new data"]
    other = ingest(SyntheticSkeletons(n_sequences=300, n_subjects=6, n_classes=8, seed=4), tmp_path / "other.zarr",
                   chunk_frames=2048)
    got = predict_store(out / "model", other.path, tmp_path / "other.csv", scheduler="synchronous")
    assert "includes_training_rows" not in got and "notes" not in got


def test_every_task_reports_the_papers_accuracy(synth_store, tmp_path):
    """paper_accuracy, accepted by every task's schema, was reported by the image tasks only (the skeleton and
    TGP tasks dropped it without a word)."""
    res = run_pipeline(lbfgs_cfg_for(synth_store, tmp_path / "o", "paper_accuracy=0.851"), scheduler="synchronous")
    assert res["paper_accuracy"] == 0.851
    assert json.loads((tmp_path / "o" / "result.json").read_text())["paper_accuracy"] == 0.851


# ------------------------------------------------------------ SGD divergence
def test_learned_nothing_is_no_better_than_the_most_frequent_class():
    from streamcov.tasks.classify import learned_nothing

    y = np.array([0] * 60 + [1] * 30 + [2] * 10)
    assert learned_nothing(np.zeros(100, int), y) == (0.6, 0.6)      # always the most frequent class
    assert learned_nothing(np.full(100, 2), y) == (0.1, 0.6)         # worse
    # two standard errors of 0.6 over 100 rows: 0.098; 0.69 is within them, 0.71 beyond
    near = np.where(np.arange(100) < 69, y, (y + 1) % 3)
    assert learned_nothing(near, y) == pytest.approx((0.69, 0.6))
    good = np.where(np.arange(100) < 71, y, (y + 1) % 3)
    assert learned_nothing(good, y) is None
    assert learned_nothing(y, y) is None and learned_nothing(np.zeros(0, int), np.zeros(0, int)) is None
    # four rows: two standard errors of 0.5 are 0.5; the margin stops half way to 1, so a perfect fit passes
    four = np.array([0, 1, 0, 1])
    assert learned_nothing(four, four) is None
    assert learned_nothing(np.array([0, 1, 1, 1]), four) == (0.75, 0.5)   # at the margin: not shown to be better
    assert learned_nothing(np.zeros(4, int), four) == (0.5, 0.5)


@pytest.mark.parametrize("sets", [('model.loss="squared_error"', "model.C=1e6"),          # diverged (norm 1e15)
                                  # eta alpha = 100 / 120: a sixth of the weights kept at each step
                                  ('model.learning_rate="constant"', "model.C=1.0", "model.eta0=100")])
def test_a_run_whose_model_learned_nothing_says_so(synth_store, tmp_path, sets):
    """SGD that diverged, or whose steps keep a tenth of the weights each time (eta alpha near 1, just below the
    refused 1): chance accuracy and a saved model, without a word before."""
    from streamcov.errors import RunWarning

    with pytest.warns(RunWarning, match=r"it learned nothing"):
        res = run_pipeline(cfg_for(synth_store, tmp_path, *sets), scheduler="synchronous")
    assert any(re.search(r"^fold '\S+': the model predicts \S+% of \d+ of its own training rows, no better than "
                         r"always naming their most frequent class \(\S+%\): it learned nothing; its steps may "
                         r"diverge", w) for w in res.get("warnings", [])), res.get("warnings")


def test_a_sound_run_is_not_said_to_have_learned_nothing(synth_store, tmp_path):
    for learner, cfg in (("sgd", cfg_for), ("lbfgs", lbfgs_cfg_for)):
        res = run_pipeline(cfg(synth_store, tmp_path / learner), scheduler="synchronous")
        assert not any("learned nothing" in w for w in res.get("warnings", [])), (learner, res.get("warnings"))


def test_steps_that_zero_the_weights_are_refused(synth_store, tmp_path):
    """eta alpha >= 1 at every step: each step multiplies the weights by max(0, 1 - eta alpha) = 0 before its
    update, so the model is the last row's step alone (chance accuracy, silently, before)."""
    from streamcov.errors import ConfigError
    from streamcov.stream.sgd import make_sgd
    from streamcov.tasks.schema import ModelTable

    m = ModelTable(learner="sgd", loss="log_loss", learning_rate="constant", eta0=1e6, C=1.0)
    for rate in ("constant", "adaptive", "pa1", "pa2"):   # eta is eta0 at every step under each
        with pytest.raises(ConfigError, match=rf'^model\.eta0 = 1e\+06: with model\.learning_rate = "{rate}" every '
                                              r"step multiplies the weights by max\(0, 1 - eta alpha\) = 0 \(alpha = "
                                              r"0\.01\), so the model would be one row's step; give model\.eta0 well "
                                              r"below 100 \(each step keeps 1 - eta alpha of the weights\)$"):
            make_sgd(m.model_copy(update={"learning_rate": rate, "loss": "hinge"}), 100, 0)
    inv = m.model_copy(update={"learning_rate": "invscaling", "eta0": 1e6, "epochs": 4})
    with pytest.raises(ConfigError, match=r"even at its last step \(eta0 / T\^0\.5 = 5e\+04 after T = 400\)\), .* "
                                          r"give model\.eta0 well below 2e\+03 "):
        make_sgd(inv, 100, 0)
    make_sgd(m.model_copy(update={"eta0": 99.0}), 100, 0)   # below 1 / alpha: taken
    make_sgd(m.model_copy(update={"penalty": "l1"}), 100, 0)   # no l2 part: no shrinking
    from cli_cases import cli
    rc, err, _ = cli("run", REPO / "pipelines" / "msr_action3d.toml", "--store", synth_store.path, "--quiet",
                     "--output", tmp_path / "c", *[a for v in (*SGD_SETS, 'model.learning_rate="constant"',
                                                               "model.eta0=1e6") for a in ("--set", v)])
    assert rc == 2 and re.search(r"(?m)^streamcov run: error: --set model\.eta0=1e6: model\.eta0 = 1e\+06: with "
                                 r'model\.learning_rate = "constant" every step', err), err


@pytest.mark.parametrize("random_state", [None, 5])
def test_a_map_drawn_from_no_seed_keeps_its_arrays_in_the_model(tmp_path, random_state):
    """A map fitted with random_state None cannot be drawn again from its parameters: its drawn arrays stay in
    the file (loading drew other maps and blamed the installation); an integer seed leaves them out."""
    from sklearn.linear_model import SGDClassifier

    from streamcov.features import BlockSumFeatures
    from streamcov.stream.model import FittedPipeline
    from streamcov.stream.skeleton import SkeletonDescriptor

    X = np.random.default_rng(0).standard_normal((12, 6))
    y = np.arange(12) % 2
    fmap = BlockSumFeatures(map_params={"map": "rgw", "sigma": 2.0}, blocks=[[2, 1.0], [4, 0.5]], n_components=16,
                            random_state=random_state).fit(X)
    clf = SGDClassifier(random_state=0).fit(fmap.transform(X), y)
    spec = {"kind": "skeleton", "n_joints": 2, "joint_names": [], "descriptor": SkeletonDescriptor(None).as_dict()}
    folder = FittedPipeline(spec, fmap, None, clf, ["a", "b"]).save(tmp_path / "m")
    doc = json.loads((folder / "model.json").read_text())
    assert (doc.get("map_redraw") is None) == (random_state is None)
    back = FittedPipeline.load(folder)
    np.testing.assert_array_equal(back.feature_map.transform(X), fmap.transform(X))


def _model_folder(tmp_path):
    """``(output folder, model.json's SHA-256, the predictions CSV in the model folder)`` of a run's output
    folder holding a model."""
    from streamcov.lock import OUTPUT_MARKER
    from streamcov.stream import predict as predict_mod

    out = tmp_path / "out"
    (out / "model").mkdir(parents=True)
    (out / OUTPUT_MARKER).write_text("{}")
    (out / "model" / "model.json").write_text('{"trained": 1}')
    return out, predict_mod._model_sha(out / "model"), out / "model" / "predictions" / "s.csv"


def test_predictions_go_into_a_model_folder_only_for_the_model_predicted_with(tmp_path):
    """predict beside a run that trained the same output folder again: the run removed the earlier model's
    predictions, then predict wrote its CSV of the earlier model into the new model's folder (4 of 4 trials).
    The write into the model folder holds the output folder's lock (a run writing there refuses it) and checks
    that model.json is still the one loaded; a CSV elsewhere (--out) is the user's to keep."""
    import fcntl
    import json
    import os
    import socket

    from streamcov.errors import ModelError, StoreError
    from streamcov.lock import OUTPUT_LOCK
    from streamcov.stream import predict as predict_mod

    out, sha, csv = _model_folder(tmp_path)

    def write(fh):
        fh.write("id,predicted,label\n")

    (out / "model" / "model.json").write_text('{"trained": 2}')   # a run saved its new model meanwhile
    with pytest.raises(ModelError, match=r"^\S+model: the model was replaced \(trained again\) while these "
                                         r"predictions were computed with the earlier one; nothing was written: "
                                         r"predict again$"):
        predict_mod._write_predictions(sha, out / "model", csv, write)
    assert not csv.exists()
    predict_mod._write_predictions(sha, out / "model", tmp_path / "elsewhere.csv", write)   # --out elsewhere
    assert (tmp_path / "elsewhere.csv").read_text() == "id,predicted,label\n"
    (out / "model" / "model.json").write_text('{"trained": 1}')
    fd = os.open(out / OUTPUT_LOCK, os.O_CREAT | os.O_WRONLY)   # a run writing the folder now
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps({"pid": os.getppid(), "host": socket.gethostname(), "command": "streamcov run",
                                 "started": "2026-01-01 00:00:00"}).encode())
        with pytest.raises(StoreError, match=r"^output folder \S+out is being written by process \d+"):
            predict_mod._write_predictions(sha, out / "model", csv, write)
    finally:
        os.close(fd)
    (out / OUTPUT_LOCK).unlink()
    predict_mod._write_predictions(sha, out / "model", csv, write)
    assert csv.read_text() == "id,predicted,label\n" and not (out / OUTPUT_LOCK).exists()


def test_a_second_predict_of_one_model_waits_for_the_first_ones_write(tmp_path, monkeypatch):
    """Two predicts of one model ending at the same moment: the second was refused by the first's lock after
    all its work. It now waits for another predict's write (a CSV: a moment), up to PREDICTIONS_WAIT; a run
    holding the folder is still refused at once (test above)."""
    import threading
    import time

    from streamcov.errors import StoreError
    from streamcov.lock import OUTPUT_LOCK, output_lock
    from streamcov.stream import predict as predict_mod

    out, sha, csv = _model_folder(tmp_path)
    held, release = threading.Event(), threading.Event()

    def first():   # the other predict, in the middle of its write
        with output_lock(out, predict_mod.PREDICTIONS_WRITER):
            held.set()
            release.wait(10)

    t = threading.Thread(target=first)
    t.start()
    held.wait(10)
    threading.Timer(0.3, release.set).start()
    t0 = time.monotonic()
    predict_mod._write_predictions(sha, out / "model", csv, lambda fh: fh.write("id,predicted,label\n"))
    t.join()
    assert csv.read_text() == "id,predicted,label\n" and time.monotonic() - t0 >= 0.25
    assert not (out / OUTPUT_LOCK).exists()
    # a predict's write that does not end within the wait is refused, naming the holder
    monkeypatch.setattr(predict_mod, "PREDICTIONS_WAIT", 0.2)
    held.clear(), release.clear()
    t = threading.Thread(target=first)
    t.start()
    held.wait(10)
    try:
        with pytest.raises(StoreError, match=r"is being written by process \d+ .*\(streamcov predict \(writing "
                                             r"predictions into the model's folder\)\)"):
            predict_mod._write_predictions(sha, out / "model", csv, lambda fh: fh.write("x\n"))
    finally:
        release.set()
        t.join()
    assert csv.read_text() == "id,predicted,label\n"


def test_a_predict_refused_by_a_lock_released_that_moment_tries_again(tmp_path, monkeypatch):
    """The other predict released the lock between this one's refused attempt and its look at the lock file:
    the file was gone, which was taken for a holder other than a predict, and the predictions refused."""
    from streamcov import lock
    from streamcov.errors import StoreError
    from streamcov.stream import predict as predict_mod

    out, sha, csv = _model_folder(tmp_path)
    real, calls = lock.output_lock, []

    def released_meanwhile(folder, command=None):
        calls.append(command)
        if len(calls) == 1:   # refused by a holder that is gone by the time the lock file is read
            raise StoreError(f"output folder {folder} is being written by process 1 (streamcov predict)")
        return real(folder, command)

    monkeypatch.setattr(lock, "output_lock", released_meanwhile)
    predict_mod._write_predictions(sha, out / "model", csv, lambda fh: fh.write("id,predicted,label\n"))
    assert csv.read_text() == "id,predicted,label\n" and len(calls) == 2


def test_an_interrupted_run_leaves_no_earlier_details(tmp_path, monkeypatch):
    """An image run's details (image_classification_details.json: its accuracy, settings, splits) of an earlier
    run go when a run starts, as result.json does: a run stopped by a full disk left the earlier run's accuracy
    there, or a file of 0 bytes."""
    import json
    from types import SimpleNamespace

    from conftest import REPO
    from streamcov.lock import OUTPUT_MARKER
    from streamcov.tasks import runner
    from streamcov.tasks.config import load_config

    out = tmp_path / "o"
    out.mkdir()
    (out / OUTPUT_MARKER).write_text(json.dumps({"written_by": "streamcov run", "task": "image-classification"}))
    for name in ("result.json", "image_classification_details.json"):
        (out / name).write_text(json.dumps({"summary": {"accuracy": 0.97}}))

    def stop(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "get_task", lambda task: SimpleNamespace(run=stop))
    with pytest.raises(OSError, match=r"No space left on device"):
        runner.run(load_config(REPO / "pipelines" / "textures_demo.toml", [f'output="{out}"']))
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER]


def test_the_same_store_from_another_working_directory_is_not_another_store(synth_store, tmp_path, monkeypatch,
                                                                          capsys):
    """result.json recorded the store as the pipeline gave it, relative to the working directory of that run: a
    run of the same store from another folder was told that the results of "another store" were replaced. It
    records the store's absolute path."""
    folder = synth_store.path.parent
    monkeypatch.chdir(folder)
    first = run_pipeline(load_config(REPO / "pipelines" / "msr_action3d.toml",
                                     [f'output="{tmp_path / "o"}"', ONE_LEVEL, "features.n_components=64",
                                      "model.max_iter=20"], store=synth_store.path.name), scheduler="synchronous")
    assert first["store"] == str(synth_store.path)
    monkeypatch.chdir(folder.parent)
    capsys.readouterr()
    run_pipeline(load_config(REPO / "pipelines" / "msr_action3d.toml",
                             [f'output="{tmp_path / "o"}"', ONE_LEVEL, "features.n_components=64",
                              "model.max_iter=20"], store=f"{folder.name}/{synth_store.path.name}"),
                 scheduler="synchronous")
    assert "another store" not in capsys.readouterr().err


def test_resume_with_nothing_to_resume_says_so(synth_store, tmp_path, capsys):
    """--resume into a folder holding no checkpoint, finished fold or feature store (a requeued job started from
    another folder, whose relative output resolved elsewhere) trained from the start without a word."""
    run_pipeline(cfg_for(synth_store, tmp_path / "fresh"), scheduler="synchronous", resume=True)
    assert re.search(rf"note: resume=True: {re.escape(str(tmp_path / 'fresh'))} holds nothing to resume \(no "
                     r"checkpoint, finished fold or feature store\); the run starts from the beginning",
                     capsys.readouterr().err)
    run_pipeline(cfg_for(synth_store, tmp_path / "fresh"), scheduler="synchronous", resume=True)
    assert "nothing to resume" not in capsys.readouterr().err   # its checkpoints and features are there now


def test_a_marker_naming_no_task_is_given_the_runs(synth_store, tmp_path):
    """A marker that is a JSON object naming no task was left as it was: every later run of any task was then
    accepted in the folder. The run writes its own task there."""
    from streamcov.lock import OUTPUT_MARKER

    out = tmp_path / "o"
    out.mkdir()
    (out / OUTPUT_MARKER).write_text("{}")
    run_pipeline(cfg_for(synth_store, out), scheduler="synchronous")
    assert json.loads((out / OUTPUT_MARKER).read_text())["task"] == "skeleton-classification"


def test_a_classifier_fitted_on_label_strings_is_refused_by_save_and_check(tmp_path):
    """A model's classifier predicts codes that index its label names. One fitted on the label strings
    themselves was saved without a word, and its load (every predict) was numpy's "no loop matching
    'minimum'" traceback from the class check. Refused in one line, by save (nothing written) and by check,
    which load calls."""
    from sklearn.linear_model import SGDClassifier

    from streamcov.stream.skeleton import SkeletonDescriptor

    X = np.random.default_rng(0).normal(size=(12, 21))
    spec = {"kind": "skeleton", "n_joints": 2, "joint_names": [], "descriptor": SkeletonDescriptor(None).as_dict()}
    said = (r"the classifier's classes are <U1 values \(a, b\), not the integer codes of the label names; fit it "
            r"on integer codes \(the index of each row's label in label_names\)$")
    strings = FittedPipeline(spec, None, None, SGDClassifier(random_state=0).fit(X, np.array(["a", "b"] * 6)),
                             ["a", "b"])
    with pytest.raises(ModelError, match=r"^the model to save: " + said):
        strings.save(tmp_path / "m")
    assert not (tmp_path / "m").exists()
    with pytest.raises(ModelError, match=r"^model\.json: " + said):
        strings.check("model.json")
    codes = FittedPipeline(spec, None, None, SGDClassifier(random_state=0).fit(X, np.array([0, 1] * 6)), ["a", "b"])
    codes.save(tmp_path / "m")
    assert FittedPipeline.load(tmp_path / "m").label_names == ["a", "b"]
    # codes held as floats (0.0, 1.0) are codes: saved, loaded and predicted as before
    floats = FittedPipeline(spec, None, None, SGDClassifier(random_state=0).fit(X, np.array([0.0, 1.0] * 6)),
                            ["a", "b"])
    floats.save(tmp_path / "f")
    assert set(FittedPipeline.load(tmp_path / "f").predict_codes(X).tolist()) <= {0, 1}
    clf = SGDClassifier(random_state=0).fit(X, np.array([0, 1] * 6))
    clf.classes_ = np.array([0.5, 1.0])   # as a crafted model.npz may hold them
    halves = FittedPipeline(spec, None, None, clf, ["a", "b"])
    with pytest.raises(ModelError, match=r"classes are float64 values \(0\.5, 1\.0\), not the integer codes"):
        halves.check("model.json")


def test_features_and_finished_folds_of_other_code_are_computed_again(synth_store, tmp_path, monkeypatch, capsys):
    """The fingerprint held a hand-kept version, not the code: after a `git pull` or an edit of a kernel (or
    another numpy), a run into the same output folder reused the features and the finished folds the old code
    had computed, without a word. The digest of the modules that shape the numbers and the libraries' versions
    are part of it now: the same code reuses everything; other feature code computes the features again, with a
    note, and other learner code trains again; an edit elsewhere (the command line) keeps both."""
    from streamcov import _config

    cfg = cfg_for(synth_store, tmp_path / "out")
    first = run_pipeline(cfg, scheduler="synchronous")
    again = run_pipeline(cfg, scheduler="synchronous", resume=True)
    assert again["featurized_sequences"] == 0 and again["fit_reused"] and again["accuracy"] == first["accuracy"]
    assert "cli.py" not in str(_config.CODE_PARTS["features"] + _config.CODE_PARTS["learners"])
    capsys.readouterr()
    for part, other in (("features", {"streamcov": "0" * 64}), ("features", {"numpy": "0.0"}),
                        ("learners", {"streamcov": "1" * 64})):
        monkeypatch.setattr(_config, "_CODE_IDENTITY", {**_config._CODE_IDENTITY,
                                                        part: {**_config.code_identity(part), **other}})
        redone = run_pipeline(cfg, scheduler="synchronous", resume=True)
        err = capsys.readouterr().err
        if part == "features":
            assert redone["featurized_sequences"] == synth_store.n_sequences and not redone["fit_reused"], other
            assert "these features were computed by other code" in err, err
        else:   # the features kept, the finished fold trained again (said by --resume's note)
            assert redone["featurized_sequences"] == 0 and "was written for other settings" in err, err
        assert redone["accuracy"] == first["accuracy"]   # this code computed the same again


def test_a_model_records_its_training_store_by_an_absolute_path(synth_store, tmp_path, monkeypatch):
    """A store given by a relative path was recorded as typed, and predict resolved it from its own working
    folder: the model's own store predicted from another folder was taken for another store of the same data
    (its training rows said to be among the rows, or not knowable). The model records the absolute path."""
    import shutil

    shutil.copytree(synth_store.path, tmp_path / "s.zarr")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml",
                      ['output="out"', ONE_LEVEL, *RGW_SETS, "features.n_components=64", "dask.block_size=40"],
                      store="s.zarr")
    res = run_pipeline(cfg, scheduler="synchronous")
    assert FittedPipeline.load(res["model_path"]).info["store_path"] == str(tmp_path / "s.zarr")
    # and the configuration the result records (run again from anywhere)
    assert (res["config"]["data"]["store"], res["config"]["output"]) == (str(tmp_path / "s.zarr"),
                                                                         str(tmp_path / "out"))
    here = predict_store(res["model_path"], "s.zarr", tmp_path / "here.csv", scheduler="synchronous")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    there = predict_store(res["model_path"], tmp_path / "s.zarr", tmp_path / "there.csv", scheduler="synchronous")
    same = lambda got: {k: v for k, v in got.items() if k not in ("predictions", "seconds", "store")}   # noqa: E731
    assert same(there) == same(here)
    assert "includes_training_rows" not in there and there["accuracy"] == res["accuracy"], there


def test_a_runs_warnings_reach_a_notebook(synth_store, tmp_path):
    """A run's warnings of its learner (here a model that learned nothing, from a map's bandwidth far below the
    distances) were only listed in the result's "warnings": ``streamcov run`` printed them, a notebook's
    ``run(...)`` said nothing. They are given to Python's warnings too (RunWarning), each once."""
    from streamcov.errors import RunWarning

    cfg = cfg_for(synth_store, tmp_path / "out", "features.sigma=0.01", "model.epochs=1")
    with pytest.warns(RunWarning, match=r"^fold 'odd-even': the model predicts .* it learned nothing") as got:
        res = run_pipeline(cfg, scheduler="synchronous")
    assert [str(w.message) for w in got if w.category is RunWarning] == res["warnings"] and res["warnings"]


def test_the_summary_of_several_folds_gives_rows_per_fold_to_the_nearest():
    """Folds of 67, 67 and 66 test rows were summarized as 66 (the mean cut down); the nearest count, each fold's
    own in "folds"."""
    from streamcov.tasks.classify import _summarize

    per = [{"fold": f, "accuracy": a, "n_train": 200 - t, "n_test": t} for f, a, t in
           (("0", 0.5, 67), ("1", 0.75, 67), ("2", 1.0, 66))]
    out = _summarize(per)
    assert (out["n_train"], out["n_test"], out["n_folds"], out["folds"]) == (133, 67, 3, per)
    assert out["accuracy"] == 0.75 and out["accuracy_std"] == pytest.approx(np.std([0.5, 0.75, 1.0]))


def test_a_result_records_the_configuration_it_ran_and_runs_it_again(synth_store, tmp_path):
    """result.json held the model's and the map's settings only: a run's [descriptor], [split] or dask.block_size
    (which changes SGD's model) could not be told from it, nor the versions that ran it. It records the
    configuration as run (``--set`` applied, paths resolved), the versions and the code's digest, and when (UTC);
    ``run(result["config"])`` in another folder gives the same model."""
    from streamcov import __version__
    from streamcov._config import code_identity

    res = run_pipeline(cfg_for(synth_store, tmp_path / "a", "dask.block_size=48", "descriptor.gamma=1e-3"),
                       scheduler="synchronous")
    saved = json.loads((tmp_path / "a" / "result.json").read_text())
    assert saved["config"]["dask"]["block_size"] == 48 and saved["config"]["descriptor"]["gamma"] == 1e-3
    assert saved["config"]["data"]["store"] == str(synth_store.path)
    assert saved["versions"]["streamcov"] == __version__ and saved["versions"]["code_sha256"] == \
        code_identity("package")["streamcov"] and saved["versions"]["numpy"] == np.__version__
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", saved["started_utc"])
    assert saved["started_utc"] <= saved["finished_utc"]
    again = run_pipeline(saved["config"], output=tmp_path / "b", scheduler="synchronous")
    assert again["accuracy"] == res["accuracy"]
    assert again["config"] == {**saved["config"], "output": str(tmp_path / "b")}
    np.testing.assert_array_equal(coef_of(tmp_path / "b"), coef_of(tmp_path / "a"))


def test_info_describes_a_model_folder_and_verify_reads_every_array(synth_store, tmp_path, monkeypatch):
    """`streamcov info MODEL` says what the model is and what it was trained on, from its description checked
    against its SHA-256; --verify loads the model as predict does (exit 3 and DAMAGED on a damaged array file);
    an edited description is refused with one line (exit 2)."""
    from cli_cases import assert_one_line_error, cli

    run_pipeline(cfg_for(synth_store, tmp_path / "o"), scheduler="synchronous")
    model = tmp_path / "o" / "model"
    doc = json.loads((model / "model.json").read_text())
    loaded = FittedPipeline.load(model)
    rc, err, out = cli("info", model, "--json")
    assert rc == 0 and err == "", err
    got = json.loads(out)["model"]
    assert got["path"] == str(model) and got["format_version"] == 4
    assert (got["task"], got["pipeline"], got["fold"], got["seed"]) == ("skeleton-classification", "msr_action3d",
                                                                        "odd-even", 0)
    assert got["classes"] == loaded.label_names and got["n_classes"] == 8
    assert got["source"] == doc["source"] and got["source"]["descriptor"]["levels"] == 1
    assert got["classifier"]["class"] == type(loaded.classifier).__name__
    assert got["classifier"]["params"] == doc["classifier"]["params"]
    assert got["classifier"]["n_features_in_"] == loaded.classifier.n_features_in_ == 256
    assert got["feature_map"]["class"] == type(loaded.feature_map).__name__
    assert got["feature_map"]["params"]["n_components"] == 256
    assert got["scaler"]["class"] == type(loaded.scaler).__name__
    assert got["trained_on"]["store"] == str(Path(synth_store.path).absolute())
    assert got["trained_on"]["store_id"] == synth_store.identity["id"]
    assert got["trained_on"]["split"]["kind"] == "subject-parity"
    assert got["checked"] == "the description (its SHA-256); --verify also reads and checks every array"
    rc, err, out = cli("info", model, "--verify", "--json")
    assert rc == 0 and err == "", err
    assert json.loads(out)["model"]["checked"].endswith("every array read and checked (its SHA-256), the model "
                                                        "loaded as predict loads it")
    with monkeypatch.context() as m:   # --verify loads the model as predict does: numba's environment is checked
        m.setenv("NUMBA_NUM_THREADS", "0")
        assert cli("info", model, "--json")[0] == 0
        assert_one_line_error(*cli("info", model, "--verify")[:2], r"environment variable NUMBA_NUM_THREADS='0'")
    data = bytearray((model / "model.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (model / "model.npz").write_bytes(bytes(data))
    rc, err, out = cli("info", model, "--json")   # the description alone is sound
    assert rc == 0 and err == "", err
    rc, err, out = cli("info", model, "--verify", "--json")
    assert rc == 3, err
    assert re.fullmatch(rf"{re.escape(str(model))}: DAMAGED model: \S+model\.npz: (unreadable|not the model\.npz "
                        rf"that model\.json was saved with).*: train the model again\n", err), err
    assert json.loads(out)["model"]["problems"] == [err.split(": DAMAGED model: ", 1)[1].rstrip("\n")]
    doc["label_names"][0] = "renamed"
    (model / "model.json").write_text(json.dumps(doc))
    for verify in ((), ("--verify",)):   # not damage that --verify finds: the model's description is refused
        assert_one_line_error(*cli("info", model, *verify)[:2], r"model\.json: edited after it was saved \(it is "
                                                                r"not the description its SHA-256, doc_sha256, was "
                                                                r"taken of\)")
    (tmp_path / "npz-only").mkdir()
    (tmp_path / "npz-only" / "model.npz").write_bytes(bytes(data))
    assert_one_line_error(*cli("info", tmp_path / "npz-only")[:2], r"npz-only/model\.json: missing; a model folder "
                                                                   r"holds model\.json and model\.npz")
    del doc["doc_sha256"]
    doc["version"] = 3   # a model saved before descriptions recorded their SHA-256: described, and said so
    (model / "model.json").write_text(json.dumps(doc))
    rc, err, out = cli("info", model, "--json")
    assert rc == 0 and err == "", err
    assert json.loads(out)["model"]["checked"] == ("not the description (format version 3 records no SHA-256 of "
                                                   "it); --verify also reads and checks every array")


def test_info_describes_a_run_folder_finished_stopped_under_way_or_damaged(synth_store, tmp_path, monkeypatch):
    """`streamcov info RUN`: a finished run's figures from its result.json (each fold's too) and which of its
    files are there; --verify loads its model as predict does (DAMAGED, exit 3, on a damaged array file). A run
    without result.json (written last) is INCOMPLETE (exit 3): under way while a process holds the folder's
    lock, else stopped; a result.json that is not a result is DAMAGED (exit 3). One line on stderr each."""
    from cli_cases import assert_one_line_error, cli
    from streamcov.lock import output_lock

    out = tmp_path / "o"
    res = run_pipeline(cfg_for(synth_store, out), scheduler="synchronous")
    rc, err, text = cli("info", out, "--json")
    assert rc == 0 and err == "", err
    got = json.loads(text)["run"]
    saved = json.loads((out / "result.json").read_text())
    assert got["path"] == str(out) and got["complete"] is True and got["task"] == "skeleton-classification"
    assert (got["pipeline"], got["accuracy"], got["seconds"]) == (saved["pipeline"], res["accuracy"], saved["seconds"])
    assert got["store"] == saved["store"] and got["finished_utc"] == saved["finished_utc"]
    assert got["streamcov"] == saved["versions"]["streamcov"]
    folds = saved.get("folds") or [saved]   # one fold: its figures are the result's own
    assert [f["accuracy"] for f in got.get("folds", [got])] == [f["accuracy"] for f in folds]
    assert got["files"] == {"model": True, "predictions": True,
                            "feature_stores": sorted(p.name for p in out.glob("features*.zarr"))}
    assert got["files"]["feature_stores"] and "model" not in got and "verified" not in got
    rc, err, text = cli("info", out, "--verify", "--json")
    assert rc == 0 and err == "", err
    got = json.loads(text)["run"]
    assert got["verified"] == "model" and got["model"]["path"] == str(out / "model")
    assert got["model"]["checked"].endswith("the model loaded as predict loads it")
    with monkeypatch.context() as m:   # --verify loads the run's model as predict does: numba's environment first
        m.setenv("NUMBA_NUM_THREADS", "0")
        assert cli("info", out, "--json")[0] == 0
        assert_one_line_error(*cli("info", out, "--verify")[:2], r"environment variable NUMBA_NUM_THREADS='0'")
    npz = out / "model" / "model.npz"
    sound = npz.read_bytes()
    data = bytearray(sound)
    data[len(data) // 2] ^= 0xFF
    npz.write_bytes(bytes(data))
    assert cli("info", out)[0] == 0   # without --verify the arrays are not read
    rc, err, text = cli("info", out, "--verify", "--json")
    assert rc == 3 and err.count("\n") == 1, err
    assert err.startswith(f"{out / 'model'}: DAMAGED model: ") and "Traceback" not in err, err
    assert json.loads(text)["run"]["model"]["problems"] == [err.split(": DAMAGED model: ", 1)[1].rstrip("\n")]
    npz.write_bytes(sound)
    result_text = (out / "result.json").read_text()
    # a result's fields do not replace the description's own (no traceback, no false DAMAGED)
    (out / "result.json").write_text(json.dumps({**saved, "problems": True, "complete": "no", "files": 3}))
    rc, err, text = cli("info", out, "--json")
    assert rc == 0 and err == "", err
    got = json.loads(text)["run"]
    assert got["complete"] is True and "problems" not in got and got["files"]["model"] is True
    (out / "result.json").write_text(result_text)
    (out / "model").rename(out / "model-away")
    (out / "model").mkdir()   # a model folder with no model in it, and none at all where the result names one
    rc, err, text = cli("info", out, "--verify", "--json")
    assert rc == 3 and err == f"{out / 'model'}: DAMAGED model: the run's model folder holds neither model.json nor " \
                              f"model.npz\n", err
    (out / "model").rmdir()
    rc, err, text = cli("info", out, "--verify", "--json")
    assert rc == 3 and re.fullmatch(rf"{re.escape(str(out / 'model'))}: DAMAGED model: the run's model folder is "
                                    rf"missing \(result\.json names \S+model\)\n", err), err
    (out / "model-away").rename(out / "model")
    (out / "result.json").unlink()
    (out / "result.json").mkdir()
    rc, err, text = cli("info", out, "--json")
    assert rc == 3 and err == (f"{out}: DAMAGED run (task skeleton-classification): result.json is not a run's "
                               f"result (a folder)\n"), err
    (out / "result.json").rmdir()
    (out / "result.json").write_text("[1, 2]")
    rc, err, text = cli("info", out, "--json")
    assert rc == 3 and err == (f"{out}: DAMAGED run (task skeleton-classification): result.json is not a run's "
                               f"result (a JSON list)\n"), err
    assert json.loads(text)["run"]["complete"] is False
    (out / "result.json").unlink()   # as a run leaves its folder until it finishes
    rc, err, text = cli("info", out, "--json")
    assert rc == 3 and re.fullmatch(rf"{re.escape(str(out))}: INCOMPLETE run \(task skeleton-classification\): no "
                                    rf"result\.json, which a run writes last: it was stopped before it finished; run "
                                    rf"it again \(with --resume a training continues from its checkpoints\)\n",
                                    err), err
    assert json.loads(text)["run"]["complete"] is False
    with output_lock(out):   # a run holds it from its start to its end
        rc, err, text = cli("info", out, "--json")
    assert rc == 3 and re.fullmatch(rf"{re.escape(str(out))}: INCOMPLETE run \(task skeleton-classification\): "
                                    rf"under way, in process \d+ on \S+ since .+ \(.+\)\n", err), err
    assert json.loads(text)["run"]["being_written_by"]["pid"] > 0
    (out / ".streamcov-output").unlink()   # an earlier version's run folder (no marker): told by its checkpoints
    assert (out / "checkpoints").is_dir() and cli("info", out)[0] == 3
    stranger = tmp_path / "mine"
    stranger.mkdir()
    (stranger / "result.json").write_text('{"foo": 1}')   # not a run's: refused as a store, as before
    assert cli("info", stranger)[0] == 2


def test_info_describes_a_version_1_model_and_odd_parts_without_a_traceback(tmp_path):
    """A version 1 model kept its descriptor at the top of model.json: info shows it as the source spec that load
    builds from it; parts whose tables are not tables (not written by any streamcov) are shown without them."""
    from cli_cases import assert_one_line_error, cli
    from streamcov.stream.model import FORMAT

    doc = {"format": FORMAT, "version": 1, "descriptor": {"gamma": 1e-3, "normalize": True, "ddof": 1,
                                                          "dtype": "float64", "other": 5},
           "center": [0], "n_joints": 20, "feature_map": None, "scaler": None,
           "classifier": {"class": "SGDClassifier", "params": {"alpha": 1e-4}, "scalars": [1], "tuples": "x",
                          "estimators": [2], "arrays": {}},
           "label_names": ["a", "b"]}
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_text(json.dumps(doc))
    (model / "model.npz").write_bytes(b"")
    rc, err, out = cli("info", model, "--json")
    assert rc == 0 and err == "", err
    got = json.loads(out)["model"]
    assert got["source"] == {"kind": "skeleton", "n_joints": 20, "descriptor": {
        "center": [0], "gamma": 1e-3, "normalize": True, "ddof": 1, "dtype": "float64"}}
    assert got["classifier"] == {"class": "SGDClassifier", "params": {"alpha": 1e-4}}
    assert got["feature_map"] is None and got["n_classes"] == 2 and got["task"] is None
    assert got["checked"].startswith("not the description (format version 1 records no SHA-256 of it)")
    rc, err, out = cli("info", model, "--verify")
    assert rc == 3 and err.startswith(f"{model}: DAMAGED model: "), err
    del doc["n_joints"]   # an incomplete description: refused alike with --verify or without
    (model / "model.json").write_text(json.dumps(doc))
    for verify in ((), ("--verify",)):
        assert_one_line_error(*cli("info", model, *verify)[:2], r"model\.json: incomplete model description "
                                                                r"\(KeyError: 'n_joints'\)")
