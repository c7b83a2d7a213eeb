"""Bad input: the one line of the error paths of the flags, the pipeline loader, the model file and the skeleton
descriptor's settings, each matched to its full message.

The command-line cases run ``streamcov`` in-process as a user would type them and assert exit code 2 with one
``streamcov <cmd>: error: ...`` line; the Python API's cases assert the error's message.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from cli_cases import assert_one_line_error, cli
from conftest import REPO
from reference import signed_model_doc
from streamcov.errors import ConfigError, ModelError

SKELETONS = REPO / "pipelines" / "msr_action3d.toml"


def generic_archive(folder):
    """A valid ``generic`` archive (data/generic_format.md) of 4 sequences: what the reader options go with."""
    folder.mkdir(parents=True)
    rows = ["file,label,subject"]
    for i in range(4):
        (folder / f"s{i}.csv").write_text("\n".join(",".join(str(float(i + j + k)) for k in range(9))
                                                   for j in range(6)) + "\n")
        rows.append(f"s{i}.csv,{'ab'[i % 2]},{1 + i}")
    (folder / "index.csv").write_text("\n".join(rows) + "\n")
    return folder


# ------------------------------------------------------------------ flags
@pytest.mark.parametrize("option", ["=3", " =3", "  =[0]"], ids=["bare", "space", "spaces"])
def test_a_reader_option_with_an_empty_key_is_refused(tmp_path, option):
    src = generic_archive(tmp_path / "archive")
    out = tmp_path / "s.zarr"
    rc, err, _ = cli("ingest", "skeleton", "--format", "generic", src, out, "--quiet", "--option", option)
    assert_one_line_error(rc, err, rf"^streamcov ingest: error: --option {re.escape(option)}: empty key; write "
                                   rf"key=value$")
    assert not out.exists()


@pytest.mark.parametrize("assignment", [".x=1", "model..C=1", "model.=1", " =1"],
                         ids=["leading-dot", "double-dot", "trailing-dot", "blank"])
def test_a_set_with_an_empty_key_is_refused(assignment):
    rc, err, _ = cli("run", SKELETONS, "--set", assignment)
    assert_one_line_error(rc, err, rf"^streamcov run: error: --set {re.escape(assignment)}: empty key; write "
                                   rf"section\.key=value, e.g\. model\.epochs=30$")


@pytest.mark.parametrize("assignment, value", [("model.C.x=1", "model.C"), ("model.learner.kind=1", "model.learner"),
                                               ("seed.x=1", "seed"), ("descriptor.levels.a.b=2", "descriptor.levels")])
def test_a_set_below_a_value_is_refused(assignment, value):
    """A key under a key that holds a value (model.C = 100.0), not a table: there is nothing to set it in."""
    rc, err, _ = cli("run", SKELETONS, "--set", assignment)
    assert_one_line_error(rc, err, rf"^streamcov run: error: --set {re.escape(assignment)}: {re.escape(value)} is a "
                                   rf"value, not a table$")


def test_a_data_value_beside_store_is_refused(tmp_path):
    """``--store`` sets data.store: a file whose ``data`` is a value has no table to set it in."""
    pipeline = tmp_path / "p.toml"
    pipeline.write_text('task = "skeleton-classification"\ndata = 3\n')
    rc, err, _ = cli("run", pipeline, "--store", tmp_path)
    assert_one_line_error(rc, err, rf"^streamcov run: error: {re.escape(str(pipeline))}, line 2: data must be a "
                                   rf"table$")


def test_an_archive_without_its_format_is_refused(tmp_path):
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(f'task = "skeleton-classification"\noutput = "{tmp_path / "out"}"\n\n[data]\n'
                        f'store = "{tmp_path / "s.zarr"}"\nsource = "{tmp_path / "archive"}"\n')
    rc, err, _ = cli("run", pipeline)
    assert_one_line_error(rc, err, rf"^streamcov run: error: {re.escape(str(pipeline))}, line 4: \[data\] `source` "
                                   rf"needs `format` \(msr-action3d, florence3d, utkinect, generic, asf-amc, bvh, "
                                   rf"c3d\)$")
    assert not (tmp_path / "out").exists() and not (tmp_path / "s.zarr").exists()


def test_load_config_without_a_pipeline_is_refused():
    from streamcov.tasks.config import load_config

    with pytest.raises(ConfigError, match=r"^no pipeline given: pass a pipeline file, a dict or a TOML text$"):
        load_config()
    with pytest.raises(ConfigError, match=r"^no pipeline given: pass a pipeline file, a dict or a TOML text$"):
        load_config(None, ["model.C=10"])


# ------------------------------------------------------------------ model files
def _spec():
    from streamcov.stream.skeleton import SkeletonDescriptor

    return {"kind": "skeleton", "n_joints": 2, "joint_names": [], "descriptor": SkeletonDescriptor(None).as_dict()}


def _data(n=12, width=21):
    X = np.random.default_rng(0).normal(size=(n, width))
    return X, np.arange(n) % 2


def _sgd():
    from sklearn.linear_model import SGDClassifier

    return SGDClassifier(random_state=0).fit(*_data())


def test_a_model_npz_missing_an_array_is_refused(tmp_path):
    """A model.npz rewritten without one of its arrays, its description re-signed with the new file's digest (a
    crafted or mixed-up file): the array is named, not an AttributeError from the classifier."""
    from streamcov.data.integrity import file_sha256
    from streamcov.stream.model import FittedPipeline

    folder = FittedPipeline(_spec(), None, None, _sgd(), ["a", "b"]).save(tmp_path / "m")
    with np.load(folder / "model.npz") as z:
        arrays = {k: z[k] for k in z.files if k != "clf.coef_"}
    assert "clf.intercept_" in arrays
    np.savez(folder / "model.npz", **arrays)
    doc = json.loads((folder / "model.json").read_text())
    doc["arrays_sha256"] = file_sha256(folder / "model.npz")
    (folder / "model.json").write_text(json.dumps(signed_model_doc(doc)))
    with pytest.raises(ModelError, match=rf"^{re.escape(str(folder / 'model.json'))}: array 'clf\.coef_' of "
                                         rf"SGDClassifier missing from model\.npz$"):
        FittedPipeline.load(folder)


def test_a_model_of_an_unfitted_classifier_or_no_classes_is_refused():
    from sklearn.linear_model import SGDClassifier

    from streamcov.stream.model import FittedPipeline

    with pytest.raises(ModelError, match=r"^model: the classifier is not fitted or names no classes$"):
        FittedPipeline(_spec(), None, None, SGDClassifier(), ["a", "b"]).check()
    with pytest.raises(ModelError, match=r"^m\.json: the classifier is not fitted or names no classes$"):
        FittedPipeline(_spec(), None, None, _sgd(), []).check("m.json")


def test_a_classifier_whose_coefficients_overflow_is_refused():
    """Every array of the SVC is finite, but the coefficients its linear kernel gives (dual coefficients times
    support vectors) overflow: the check of the coefficients themselves catches it."""
    from sklearn.svm import SVC

    from streamcov.stream.model import FittedPipeline

    svc = SVC(kernel="linear").fit(*_data())
    svc._dual_coef_ = svc.dual_coef_ = svc._dual_coef_ * 1e300
    svc.support_vectors_ = svc.support_vectors_ * 1e300
    model = FittedPipeline(_spec(), None, None, svc, ["a", "b"])
    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.isfinite(svc.coef_).all()
        assert all(np.isfinite(v).all() for v in vars(svc).values()
                   if isinstance(v, np.ndarray) and v.dtype.kind == "f")
        with pytest.raises(ModelError, match=r"^model: the classifier has non-finite coefficients$"):
            model.check()


def test_saving_an_estimator_off_the_allow_list_or_holding_objects_is_refused(tmp_path):
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from streamcov.stream.model import FittedPipeline

    X, y = _data()
    with pytest.raises(ModelError, match=r"^LogisticRegression is not in the model allow-list$"):
        FittedPipeline(_spec(), None, None, LogisticRegression().fit(X, y), ["a", "b"]).save(tmp_path / "lr")
    scaler = StandardScaler().fit(X)
    # as fitted on a table of named columns: the names are an array of Python strings
    scaler.feature_names_in_ = np.array([f"c{i}" for i in range(X.shape[1])], dtype=object)
    with pytest.raises(ModelError, match=r"^StandardScaler\.feature_names_in_ holds Python objects; cannot store "
                                         r"it$"):
        FittedPipeline(_spec(), None, scaler, _sgd(), ["a", "b"]).save(tmp_path / "objects")


# ------------------------------------------------------------------ skeleton descriptor settings
@pytest.mark.parametrize("setting, pattern", [
    ({"ddof": 2}, r"^ddof must be 0 or 1, got 2$"),
    ({"ddof": True}, r"^ddof must be 0 or 1, got True$"),
    ({"ddof": 0.5}, r"^ddof must be 0 or 1, got 0\.5$"),
    ({"dtype": "float16"}, r"^dtype must be float64 or float32, got 'float16'$"),
    ({"dtype": np.float32}, r"^dtype must be float64 or float32, got <class 'numpy\.float32'>$"),
    ({"time": "seconds"}, r"^time must be 'frame' or 'normalized', got 'seconds'$"),
    ({"up_axis": "w"}, r"^up_axis must be one of x, y, z, auto, got 'w'$"),
    ({"up_axis": "Y"}, r"^up_axis must be one of x, y, z, auto, got 'Y'$"),
    ({"scale": "height"}, r"^scale must be 'none' or 'body', got 'height'$"),
], ids=["ddof-2", "ddof-bool", "ddof-half", "dtype-16", "dtype-class", "time", "up-axis", "up-axis-case", "scale"])
def test_skeleton_descriptor_settings_are_checked(setting, pattern):
    from streamcov.stream.skeleton import SkeletonDescriptor

    with pytest.raises(ValueError, match=pattern):
        SkeletonDescriptor(None, **setting)


def test_commands_in_messages_quote_their_paths_for_the_shell(tmp_path):
    """A message that suggests a command names its path as the shell reads it: a store in a folder with a space
    (``my stores/s.zarr``) was printed bare, and the command pasted from it got two arguments."""
    import shlex

    store = tmp_path / "my stores" / "s.zarr"
    assert cli("synth", store, "--sequences", 8, "--subjects", 2, "--classes", 2, "--quiet")[0] == 0
    chunk = sorted(p for p in (store / "frames").rglob("*") if p.is_file() and p.name != "zarr.json")[0]
    chunk.unlink()
    rc, err, _ = cli("run", "--store", store, "--output", tmp_path / "o", "--quiet", "--scheduler", "synchronous")
    assert rc == 2, err
    suggested = re.search(r"`(streamcov info --verify [^`]*)`", err)
    assert suggested, err
    assert shlex.split(suggested.group(1)) == ["streamcov", "info", "--verify", str(store)]
