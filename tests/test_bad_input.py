"""Bad input, table-driven: every case is a command a user could type.

Each case builds its input, runs ``streamcov`` in-process and asserts the
documented outcome: exit code 2 with one ``streamcov <cmd>: error: ...`` line
matching a pattern that names the culprit (file and line, the pipeline key or
the flag as typed, the array and chunk), and never a traceback; or, for the
inputs that the rules in docs/bad_input.md accept (degenerate sequences
skipped and recorded, stale locks taken over, 16-bit images), the documented
result. Nothing here is timed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from cli_cases import Case, assert_one_line_error, cli, run_case
from conftest import REPO
from reference import signed_model_doc

pytestmark = pytest.mark.usefixtures("one_blas_thread")


# ------------------------------------------------------------------ inputs
SKELETON_PIPELINE = """\
task = "skeleton-classification"
name = "bad_input"
seed = 0
output = "{out}"

[data]
store = "{store}"

[descriptor]
gamma = 1e-4
normalize = true

[features]
map = "rgw"
n_components = 64
sigma = 1.0
theta = 0.7

[model]
learner = "sgd"
loss = "hinge"
epochs = 3
scale = "center"

[split]
kind = "subject-parity"

[dask]
block_size = 16
"""


def write_archive(folder: Path, n: int = 8, joints: int = 3, frames: int = 6, seed: int = 0,
                  index_rows: list[str] | None = None, files: dict[str, str] | None = None) -> Path:
    """A valid ``generic`` archive (data/generic_format.md): n sequences, 2 classes, 4 subjects."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["file,label,subject"]
    for i in range(n):
        name = f"s{i:02d}.csv"
        x = rng.normal(size=(frames, 3 * joints))
        (folder / name).write_text("\n".join(",".join(f"{v:.5f}" for v in r) for r in x) + "\n")
        rows.append(f"{name},{'ab'[i % 2]},{1 + i % 4}")
    if index_rows is not None:
        rows = index_rows
    (folder / "index.csv").write_text("\n".join(rows) + "\n")
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return folder


@dataclass
class Env:
    """What a case may use: a fresh folder, and copies of shared stores and models."""

    tmp: Path
    shared: dict

    def copy(self, key: str, dst: Path | None = None) -> Path:
        dst = dst or self.tmp / Path(self.shared[key]).name
        shutil.copytree(self.shared[key], dst)
        return dst

    def pipeline(self, text: str | None = None, store: Path | None = None, **replace) -> Path:
        text = text or SKELETON_PIPELINE.format(out=self.tmp / "out", store=store or self.shared["synth"])
        for dotted, new in replace.items():   # section__key: the key's line inside [section]
            section, _, key = dotted.rpartition("__")
            start = text.index(f"[{section}]\n") if section else 0
            m = re.compile(rf"^{re.escape(key)} = .*$", flags=re.M).search(text, start)
            assert m is not None, dotted
            text = text[:m.start()] + f"{key} = {new}" + text[m.end():]
        path = self.tmp / "p.toml"
        path.write_text(text)
        return path


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A small synthetic store, a model trained on it, an image folder, store and model."""
    from PIL import Image

    from streamcov.data.imageio import skimage_textures

    base = tmp_path_factory.mktemp("shared")
    out = {}
    assert cli("synth", base / "synth.zarr", "--sequences", 48, "--subjects", 4, "--classes", 4,
               "--chunk-frames", 512, "--quiet")[0] == 0
    out["synth"] = base / "synth.zarr"
    assert cli("synth", base / "synth2.zarr", "--sequences", 48, "--subjects", 4, "--classes", 3, "--seed", 9,
               "--chunk-frames", 512, "--quiet")[0] == 0
    out["synth2"] = base / "synth2.zarr"
    p = base / "p.toml"
    p.write_text(SKELETON_PIPELINE.format(out=base / "run", store=out["synth"]))
    rc, err, _ = cli("run", p, "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    out["model"] = base / "run" / "model"
    p.write_text(SKELETON_PIPELINE.format(out=base / "run2", store=out["synth"]).replace("seed = 0", "seed = 1"))
    rc, err, _ = cli("run", p, "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    out["model2"] = base / "run2" / "model"
    # images: 2 textures x 6 patches of 24 x 24, a folder per class
    tex = skimage_textures(("brick", "grass"), patch=24, max_per_class=6)
    for img, lab, i in zip(tex.images, tex.labels, tex.ids):
        d = base / "images" / tex.label_names[lab]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / f"{i.replace('/', '_')}.png")
    out["images"] = base / "images"
    assert cli("ingest", "images", "--format", "folders", out["images"], base / "img.zarr", "--quiet")[0] == 0
    out["img_store"] = base / "img.zarr"
    ip = base / "img.toml"
    ip.write_text(IMAGE_PIPELINE.format(out=base / "img_run", store=out["img_store"]))
    rc, err, _ = cli("run", ip, "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    out["img_model"] = base / "img_run" / "model"
    shared_paths.update(out)
    return out


shared_paths: dict = {}   # the module's shared inputs, for edits that take another model's file


IMAGE_PIPELINE = """\
task = "image-stream-classification"
name = "bad_images"
seed = 0
output = "{out}"

[data]
store = "{store}"

[pixels]
preset = "texture"

[method]
D = 8
sigma1 = 1.0
n_components = 32
scaling = "per-feature"
fit_sample = 6

[model]
epochs = 3

[split]
kind = "per-class"
n_train = 3

[dask]
block_size = 4
"""


# image-classification (in memory) on the shared image store: exact Log-HS, the default classifier svc
EVAL_PIPELINE = """\
task = "image-classification"
name = "bad_eval"
seed = 0
output = "{out}"

[data]
format = "store"
store = "{store}"

[pixels]
preset = "texture"

[method]
name = "loghs"
max_pixels_exact = 16
sigma1 = [1.0]
inner_folds = 2

[split]
kind = "per-class"
n_train = 3
"""


@pytest.fixture
def env(shared, tmp_path):
    return Env(tmp_path, shared)


# ------------------------------------------------------------------ pipeline files and --set
def old_generic_store(e):
    """A generic store whose source record lacks the archive digest, as earlier versions wrote it."""
    out = e.tmp / "g.zarr"
    assert cli("ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), out, "--quiet")[0] == 0
    meta = json.loads((out / "zarr.json").read_text())
    del meta["attributes"]["source_record"]["files"]
    (out / "zarr.json").write_text(json.dumps(meta))
    return as_format_3(out)


def rewritten(f: Path, edit: bool = True, later: bool = True) -> None:
    """``f`` rewritten in place: one digit changed, the same size, a later modification time. ``edit=False``: the
    same bytes, only the later time (as a copy without -p or an archive unpacked again gives); ``later=False``: the
    time set back to what it was."""
    st = f.stat()
    if edit:
        data = bytearray(f.read_bytes())
        i = next(i for i, b in enumerate(data) if chr(b).isdigit())
        data[i] = ord("1") if data[i] != ord("1") else ord("2")
        f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + (10**9 if later else 0)))


def touched_archive_store(edit: bool = True):
    """A generic store of an archive one of whose files was rewritten after ingestion (:func:`rewritten`)."""
    def make(e):
        src, out = write_archive(e.tmp / "a"), e.tmp / "g.zarr"
        assert cli("ingest", "skeleton", "--format", "generic", src, out, "--quiet")[0] == 0
        rewritten(src / "s00.csv", edit)
        return out
    return make


def linked_archive_store(how: str):
    """A generic store of an archive whose index lists one file kept outside its folder, ``how``: through a link
    to the file, under a linked folder (which a walk of the folder does not enter), by a path up through ``..``,
    or by its absolute path; another row gives an absolute path inside the folder. The outside file was then
    rewritten (:func:`rewritten`): the store's archive digest covers it, so its reuse is refused."""
    def make(e):
        src, out = write_archive(e.tmp / "a"), e.tmp / "g.zarr"
        (e.tmp / "ext").mkdir()
        target = e.tmp / "ext" / "s07.csv"
        (src / "s07.csv").rename(target)
        row = {"link": "s07.csv", "folder-link": "ext/s07.csv", "dotdot": "../ext/s07.csv", "absolute": str(target)}
        if how == "link":
            (src / "s07.csv").symlink_to(target)
        elif how == "folder-link":
            (src / "ext").symlink_to(e.tmp / "ext")
        index = src / "index.csv"
        index.write_text(index.read_text().replace("\ns06.csv,", f"\n{src / 's06.csv'},")
                         .replace("\ns07.csv,", f"\n{row[how]},"))
        assert cli("ingest", "skeleton", "--format", "generic", src, out, "--quiet")[0] == 0
        from streamcov.data import SequenceStore
        assert SequenceStore(out).n_sequences == 8
        rewritten(target)
        return out
    return make


def tgp_run(*sets):
    """The S-shape twin GP pipeline, small (60 points, one seed, degrees 1 and 2), with ``sets``; the
    other --set of [tgp] comes first, so that a message blaming the table's first --set would show."""
    def argv(e):
        given = {s.partition("=")[0] for s in sets}   # a key given twice is refused: ``sets`` replace the small run's
        small = (*[s for s in ("tgp.degree_grid=[1,2]", "data.n_samples=60", "data.seeds=[0]", "tgp.max_iter=10")
                   if s.partition("=")[0] not in given], *sets)
        return ["run", REPO / "pipelines" / "sshape_tgp.toml", "--output", e.tmp / "o", "--quiet",
                *[a for s in small for a in ("--set", s)]]
    return argv


def tgp_output(e) -> Path:
    """The output folder of the small S-shape twin GP run (:func:`tgp_run`)."""
    rc, err, _ = cli(*tgp_run()(e))
    assert rc == 0, err
    return e.tmp / "o"


def run_from_source(store_fn):
    """``run`` of the skeleton pipeline on the store ``store_fn`` made, with [data] source = the archive ``a``."""
    return lambda e: ["run", e.pipeline(SKELETON_PIPELINE.format(out=e.tmp / "o", store=store_fn(e)).replace(
        "[data]\n", f'[data]\nsource = "{e.tmp / "a"}"\nformat = "generic"\n')), "--quiet"]


def source_run(pipeline: str, source_fn, fmt: str | None = None):
    """``run`` of ``pipeline`` with [data] source = ``source_fn(env)`` (and ``format = fmt``), its output ``o`` and
    its store ``new/s.zarr`` in folders that do not exist yet."""
    def argv(e):
        text = pipeline.format(out=e.tmp / "o", store=e.tmp / "new" / "s.zarr").replace(
            "[data]\n", f'[data]\nsource = "{source_fn(e)}"\n' + (f'format = "{fmt}"\n' if fmt else ""))
        return ["run", e.pipeline(text), "--quiet"]
    return argv


def ingested_with(*options):
    """A generic store ``g.zarr`` of the archive ``a``, ingested with the reader ``options``."""
    def make(e):
        out = e.tmp / "g.zarr"
        assert cli("ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), out, "--quiet",
                   *[a for o in options for a in ("--option", o)])[0] == 0
        return out
    return make


def predict_damaged_folder(e, *flags):
    """``predict`` of the image model on a folder ``topredict`` of one good image and one that is not an image."""
    folder = e.tmp / "topredict"
    folder.mkdir()
    save_array(np.full((16, 16), 90, np.uint8))(folder / "ok.png")
    (folder / "bad.png").write_bytes(b"x")
    return ["predict", e.shared["img_model"], folder, "--out", e.tmp / "p.csv", "--scheduler", "synchronous", *flags]


def store_moved_into_archive(e):
    """A generic store moved, after its ingestion, into the archive folder it was written from (as a store
    written there before such an output was refused): its own files now count as files of the archive."""
    src, out = write_archive(e.tmp / "a"), e.tmp / "g.zarr"
    assert cli("ingest", "skeleton", "--format", "generic", src, out, "--quiet")[0] == 0
    return out.rename(src / "g.zarr")


def image_store_inside_its_folder(e):
    """The image pipeline with [data] source = a copy of the image folder and store = a store inside it."""
    folder = e.copy("images")
    text = IMAGE_PIPELINE.format(out=e.tmp / "o", store=folder / "s.zarr").replace(
        "[data]\n", f'[data]\nsource = "{folder}"\n')
    return e.pipeline(text)


def nothing_left_in(folder: Callable[[Env], Path], names: set):
    """The check of a refused ingestion: ``folder`` holds what it held (no store, no lock, no new folder)."""
    def check(e, err, out):
        assert {p.name for p in folder(e).iterdir()} == names, sorted(p.name for p in folder(e).iterdir())
    return check


def run_file(**replace):
    return lambda e: ["run", e.pipeline(**replace), "--quiet", "--scheduler", "synchronous"]


def run_text(edit: Callable[[str], str], *extra):
    def argv(e):
        text = edit(SKELETON_PIPELINE.format(out=e.tmp / "out", store=e.shared["synth"]))
        return ["run", e.pipeline(text), "--quiet", "--scheduler", "synchronous", *extra]
    return argv


def run_image(edit: Callable[[str], str] = lambda t: t, *sets, pipeline=None):
    """``streamcov run`` of the image pipeline (``IMAGE_PIPELINE``, or ``pipeline``) edited, with ``--set``s."""
    def argv(e):
        text = edit((pipeline or IMAGE_PIPELINE).format(out=e.tmp / "o", store=e.shared["img_store"]))
        return ["run", e.pipeline(text), "--quiet", *[a for s in sets for a in ("--set", s)]]
    return argv


def run_set_alone(*sets):
    """``run`` with ``sets`` and no --scheduler flag (one beside a --set of dask.scheduler is refused)."""
    return lambda e: ["run", e.pipeline(), "--quiet", *[a for s in sets for a in ("--set", s)]]


def run_set(*sets, extra=()):
    return lambda e: ["run", e.pipeline(), "--quiet", "--scheduler", "synchronous",
                      *[a for s in sets for a in ("--set", s)], *extra]


def run_folder(path: Path, task: str = "skeleton-classification") -> Path:
    """``path``, made the output folder of an earlier run of ``task`` (its marker)."""
    from streamcov.lock import OUTPUT_MARKER

    path.mkdir(parents=True)
    (path / OUTPUT_MARKER).write_text(json.dumps({"written_by": "streamcov run", "task": task}) + "\n")
    return path


def _empty_marker(path: Path) -> Path:
    """``path``, an output folder whose marker a full disk left empty, beside another task's features."""
    from streamcov.lock import OUTPUT_MARKER

    path.mkdir(parents=True)
    (path / OUTPUT_MARKER).write_text("")
    (path / "features.zarr").mkdir()
    return path


def _link(path: Path, target) -> Path:
    """``path``, made a symbolic link to ``target``."""
    path.symlink_to(target)
    return path


def only_the_error_line(err):
    """Nothing on stderr but the error (no note about dropped keys before it)."""
    assert len(err.splitlines()) == 1, err


def switched_to_lbfgs(err, out):
    """One note, and the run's result: lbfgs with the file's scale, no epochs."""
    assert len([ln for ln in err.splitlines() if ": note: " in ln]) == 1, err
    model = json.loads(out.strip().splitlines()[-1])["model"]
    assert (model["learner"], model["loss"], model["scale"]) == ("lbfgs", "log_loss", "center")
    assert "epochs" not in model and "max_iter" in model


def one_note_and_a_result(err, out):
    assert len([ln for ln in err.splitlines() if ": note: " in ln]) == 1, err
    assert "accuracy" in json.loads(out.strip().splitlines()[-1])


LINE = r"p\.toml, line \d+: "
TRAIN_99 = ('split.kind="subjects"', "split.train_subjects=[1, 99]")
SUBJECT_99 = (r"--set split\.train_subjects=\[1, 99\]: split\.train_subjects = \[1, 99\] names subject\(s\) \[99\] "
              r"that no row")
CONFIG = [
    Case("n_components-string", run_file(features__n_components='"many"'),
         LINE + r'features\.n_components = "many": expected an integer'),
    Case("n_components-zero", run_file(features__n_components="0"), LINE + r"features\.n_components = 0: expected"),
    Case("n_components-negative", run_file(features__n_components="-5"), LINE + r"features\.n_components = -5"),
    Case("sigma-zero", run_file(features__sigma="0"), LINE + r"features\.sigma = 0: expected a value >= 1e-20"),
    Case("sigma-nan", run_file(features__sigma="nan"), LINE + r"features\.sigma = nan"),
    Case("theta-above-one", run_file(features__theta="1.5"), LINE + r"features\.theta = 1\.5: expected"),
    Case("loss-typo", run_file(model__loss='"logloss"'), LINE + r'model\.loss = "logloss": expected one of .*"log_loss"'),
    Case("epochs-zero", run_file(model__epochs="0"), LINE + r"model\.epochs = 0: expected"),
    Case("epochs-fraction", run_file(model__epochs="2.5"), LINE + r"model\.epochs = 2\.5: expected an integer"),
    Case("C-zero", run_set("model.C=0"), r"--set model\.C=0: model\.C = 0: expected a value > 0"),
    Case("normalize-string", run_file(descriptor__normalize='"false"'),
         LINE + r'descriptor\.normalize = "false": expected true or false'),
    Case("gamma-negative", run_file(descriptor__gamma="-1e-4"), LINE + r"descriptor\.gamma = -0\.0001: expected"),
    # keys another key turns off: said in a note naming where they were given (a --set cannot remove a file's key)
    Case("sgd-eta0-under-optimal", run_text(lambda t: t.replace('scale = "center"\n',
                                                                'scale = "center"\neta0 = 0.5\n'),
                                            "--set", 'model.learning_rate="optimal"'),
         r'(?m)^streamcov run: note: model\.eta0 \(\S+p\.toml, line \d+\) is not read: model\.learning_rate = '
         r'"optimal" sets its own step sizes \(--set model\.learning_rate="optimal"\)$', rc=0,
         check=lambda e, err, out: "accuracy" in out),
    Case("sgd-C-without-penalty", run_set('model.penalty="none"', 'model.learning_rate="constant"', "model.eta0=0.1",
                                          "model.C=1e-6"),
         r'(?m)^streamcov run: note: model\.C \(--set model\.C=1e-6\) is not read: model\.penalty = "none" leaves no '
         r'penalty to weigh \(and model\.learning_rate = "constant" takes no step size from its weight\) \(--set '
         r'model\.penalty="none"\)$', rc=0),
    Case("C-beside-alpha", run_set('model.learner="lbfgs"', 'model.loss="squared_hinge"', "model.alpha=0.01",
                                   "model.C=1e6"),
         r"(?m)^streamcov run: note: model\.C \(--set model\.C=1e6\) is not read: model\.alpha = 0\.01 gives the "
         r"penalty's weight \(alpha = 1 / \(C n\)\) \(--set model\.alpha=0\.01\)$", rc=0),
    # scikit-learn's passive-aggressive steps take the hinge loss only (a traceback at fit before)
    Case("sgd-pa-with-log-loss", run_set('model.learning_rate="pa1"', 'model.loss="log_loss"'),
         r'^streamcov run: error: --set model\.loss="log_loss": model\.loss = "log_loss": model\.learning_rate = "pa1" '
         r'\(passive-aggressive steps\) works with loss "hinge" only; set model\.loss = "hinge", or another '
         r'model\.learning_rate \(e\.g\. "optimal"\)$'),
    # a map's bandwidth far below the distances between training rows: near chance accuracy without a word (the
    # exact SVM's grid warned of it); the file's RGW map is centred here, so it is fitted on a sample of rows
    Case("map-sigma-far-below-the-distances", run_set("features.center=true", "features.sigma=0.01"),
         r"(?m)^streamcov run: warning: features\.sigma: the bandwidth, sigma = 0\.01, is far below the distances "
         r"between the training rows: the kernel value of a row's nearest neighbour is \S+ \(median over \d+ rows\), "
         r"so the kernel the map approximates is nearly the identity on them", rc=0),
    # a map drawn from the width alone (rff): checked on training rows drawn for the check (it ran to chance
    # accuracy without a word; the uncentred RGW map's features come out all equal, which is an error already)
    Case("map-sigma-far-below-the-distances-unfitted", run_set('features.map="rff"', "features.sigma=0.01"),
         r"(?m)^streamcov run: warning: features\.sigma: the bandwidth, sigma = 0\.01, is far below the distances "
         r"between the training rows: the kernel value of a row's nearest neighbour is \S+ \(median over \d+ "
         r"rows\)", rc=0),
    Case("map-sigma-fine-unfitted", run_set('features.map="rff"'), r'"accuracy"', rc=0,
         check=lambda e, err, out: "features.sigma" not in err),
    # an RGW series cut short of the training rows' norms: said for a map fitted on no rows too (an uncentred map
    # is drawn from the width alone, so its own fit never saw a row: a tenth of the accuracy lost without a word),
    # in the words of the [features] table
    Case("map-series-cut-unfitted", run_set("features.sigma=0.125", "features.max_degree=3"),
         r"(?m)^streamcov run: warning: features\.max_degree = 3: the series of eq\. \(3\) is cut after degree 3, "
         r"which misses 100\.0% of the kernel's diagonal at the training row of largest norm \(\|x\|\^2 / sigma\^2 "
         r"= 64\); raise features\.max_degree to 91 or raise features\.sigma, or center the rows "
         r"\(features\.center = true\)$", rc=0),
    Case("map-series-cut-centred", run_set("features.center=true", "features.sigma=0.125", "features.max_degree=3"),
         r"(?m)^streamcov run: warning: features\.max_degree = 3: the series of eq\. \(3\) is cut after degree 3, "
         r"which misses \S+% of the kernel's diagonal at the training row of largest norm \(\|x\|\^2 / sigma\^2 "
         r"= \S+\); raise features\.max_degree to \d+ or raise features\.sigma$", rc=0,
         check=lambda e, err, out: "RGWSampler" not in err),
    Case("map-series-whole", run_set(), r'"accuracy"', rc=0, check=lambda e, err, out: "max_degree" not in err),
    Case("fit-sample-of-a-map-fitted-on-no-rows", run_set("features.fit_sample=5"),
         r'(?m)^streamcov run: note: features\.fit_sample \(--set features\.fit_sample=5\) is not read: map "rgw" with '
         r'bandwidth "absolute" and center = false is drawn from the width of the rows alone, fitted on none of them '
         r'\(\S+p\.toml, line \d+\)$', rc=0),
    Case("n-iter-no-change-without-validation", run_set("model.n_iter_no_change=2"),
         r"(?m)^streamcov run: note: model\.n_iter_no_change \(--set model\.n_iter_no_change=2\) is not read: it "
         r"counts the epochs without progress on held-out rows, and model\.validation_fraction = 0 holds none out "
         r"\(the default\)$", rc=0),
    # degree 0 keeps only the series' constant term: every feature the same for every row (chance accuracy, silent)
    Case("map-max-degree-zero", run_set("features.max_degree=0"),
         r"^streamcov run: error: --set features\.max_degree=0: features\.max_degree = 0: expected a value >= 1$"),
    Case("map-typo", run_file(features__map='"rgww"'), LINE + r'features\.map = "rgww": expected one of'),
    # SGD settings in the schema's range that the learner cannot take (scikit-learn tracebacks before)
    Case("sgd-C-overflows-alpha", run_set("model.C=1e307"),
         r"--set model\.C=1e307: model\.C = 1e\+307 gives the SGD learner alpha = 1 / \(C n\) = 0\.0 for \d+ "
         r"training rows, which it cannot take; give C between 1e-300 and 1e300"),
    # the exact SVM reads no feature map: a [features] key given for it was ignored without a word
    Case("exact-svm-features-key-given", run_set('model.learner="exact-svm"', "features.sigma=0.3"),
         r'--set features\.sigma=0\.3: features\.sigma is not read by model\.learner = "exact-svm", which computes '
         r'the exact kernel \(no feature map\): remove it, or choose a streamed learner'),
    Case("map-none-extra-key", run_set('model.learner="exact-svm"', 'features.map="none"', "features.n_componets=7"),
         r'--set features\.n_componets=7: features\.n_componets is not read by map "none" \(no feature map\): '
         r"remove it, or set features\.map to the map it belongs to$"),
    # a flag and a --set of the same setting: the flag won without a word
    Case("store-flag-and-set", lambda e: ["run", "--demo", "skeletons", "--store", e.tmp / "x.zarr", "--set",
                                          f'data.store="{e.tmp / "y.zarr"}"'],
         r'--set data\.store="\S+y\.zarr" --store \S+x\.zarr: two stores; give one$'),
    Case("output-flag-and-set", lambda e: ["run", "--demo", "skeletons", "--output", e.tmp / "a", "--set",
                                           f'output="{e.tmp / "b"}"'],
         r'--set output="\S+b" --output \S+a: two output folders; give one$',
         check=lambda e, err, out: not (e.tmp / "a").exists() and not (e.tmp / "b").exists()),
    # a source beside the generator was not read (the generator ran), without a word
    Case("skeleton-source-and-synthetic",
         lambda e: ["run", "--demo", "skeletons", "--output", e.tmp / "o", "--set", f'data.source="{e.tmp}"',
                    "--set", 'data.format="generic"'],
         r'--set data\.source="\S+": data\.source \(an archive to ingest\) and \[data\.synthetic\] \(the '
         r"generator\) are two sources of sequences: give one of them \(for the embedded demo's generator, a "
         r"pipeline file with data\.source, or --store with a store of the archive\)$"),
    # the in-memory image task read the textures and recorded data.source as its dataset
    *[Case(f"image-eval-{key}-of-another-format",
           lambda e, a=assignment: ["run", "--demo", "images", "--output", e.tmp / "o", "--set", a],
           rf'--set {re.escape(assignment)}: data\.{key} is not read with data\.format = "skimage-textures" '
           rf'\(format "{fmt}" reads it\): remove it, or set data\.format = "{fmt}"$')
      for key, assignment, fmt in (("source", 'data.source="/nonexistent"', "folders"),
                                   ("store", 'data.store="/nonexistent.zarr"', "store"))],
    # a --set of data.format drops the file's keys of the other format with a note, as the other choices do
    Case("image-eval-format-switched-by-set",
         lambda e: ["run", "--demo", "images", "--output", e.tmp / "o", "--quiet", "--set", 'data.format="folders"',
                    "--set", f'data.source="{image_folder("grey", n=4, size=24)(e)}"', "--set", "split.n_train=2",
                    "--set", "split.n_repeats=1", "--set", "method.inner_folds=2"],
         r'note: data\.textures, data\.patch \(the pipeline of --demo images \(pipelines/textures_demo\.toml\)\) do '
         r'not apply to data\.format = "folders" from --set data\.format="folders"; dropped', rc=0),
    Case("image-eval-patch-with-folders",
         lambda e: ["run", e.pipeline(MEMORY_IMAGE_PIPELINE.format(out=e.tmp / "o", source=e.tmp).replace(
             'format = "folders"', 'format = "folders"\npatch = 32'))],
         LINE + r'data\.patch is not read with data\.format = "folders" \(format "skimage-textures" reads it\): '
                r'remove it, or set data\.format = "skimage-textures"$'),
    # the same C for lbfgs trained a model of one class at chance, without a word
    Case("lbfgs-C-penalty-infinite", run_set('model.learner="lbfgs"', 'model.loss="log_loss"', "model.C=1e-320"),
         r"--set model\.C=1e-320: model\.C = 1e-320 gives the lbfgs learner the penalty 1 / \(C n\) = inf for \d+ "
         r"training rows, which it cannot take \(it would train a model that predicts one class\); give C between "
         r"1e-300 and 1e300$"),
    # sklearn keeps it in a C int: an OverflowError after the featurization
    Case("sgd-average-beyond-int32", run_set("model.average=2147483648"),
         r"--set model\.average=2147483648: model\.average = 2147483648: expected true or false or a value <= "
         r"2147483647$"),
    # a choice given a list or a table: a TypeError traceback (unhashable) from the --set's key dropping
    *[Case(f"choice-as-{name}", run_set(assignment), rf"--set {re.escape(assignment)}: {pattern}")
      for name, assignment, pattern in (
          ("list-split-kind", 'split.kind=["a"]', r'split\.kind = \["a"\]: expected one of "subject-parity"'),
          ("table-learner", "model.learner={}", r'model\.learner = \{\}: expected one of "sgd"'),
          ("table-task", "task={a=1}", r"task = \{a = 1\}: expected the name of a task as a string \(one of "
                                       r"skeleton-classification, "),
          ("list-task", 'task=["skeleton-classification"]', r'task = \["skeleton-classification"\]: expected the name '
                                                            r"of a task as a string"))],
    *[Case(f"sgd-weights-overflow-{name}", run_set(*sets),
           r"the SGD learner's weights overflowed in epoch \d+ \(alpha = .*\): lower model\.eta0 or model\.alpha, "
           r"raise model\.C, or use model\.learner = \"lbfgs\"")
      for name, sets in (("alpha", ("model.alpha=1e308",)),
                         # without a penalty: with one, eta0 alpha >= 1 is refused before training (test_training.py)
                         ("eta0", ("model.eta0=1e308", 'model.learning_rate="constant"', 'model.penalty="none"')))],
    # a key starting with a capital is named with where it was given, as the others are (it was left out: the
    # line named only model.learner, which the file had)
    Case("sgd-weights-overflow-tiny-C", run_set("model.C=1e-300"),
         r"the SGD learner's weights overflowed in epoch 1 \(alpha = .*\): lower model\.eta0 or model\.alpha, raise "
         r"model\.C, or use model\.learner = \"lbfgs\" \(given: --set model\.C=1e-300; model\.learner at \S+p\.toml, "
         r"line \d+\)$"),
    Case("learner-unknown", run_file(model__learner='"svm"'), LINE + r'model\.learner = "svm": expected one of'),
    # a [model] key that the chosen learner does not read (it would be ignored): where it was written
    Case("model-key-of-another-learner", run_text(lambda t: t.replace("epochs = 3\n", "epochs = 3\nmax_iter = 50\n")),
         r'p\.toml, line 23: model\.max_iter = 50 is not read by learner "sgd": remove it, or set model\.learner = '
         r'"lbfgs" \(learner "sgd" reads loss, C, '),
    Case("model-key-of-another-learner-set", run_set("model.tol=0.001"),
         r'--set model\.tol=0\.001: model\.tol = 0\.001 is not read by learner "sgd": remove it, or set '
         r'model\.learner = "lbfgs"'),
    Case("model-key-of-another-learner-switched", run_set('model.learner="exact-svm"', "model.C=1.0"),
         r'--set model\.C=1\.0: model\.C = 1\.0 is not read by learner "exact-svm": remove it, or set '
         r'model\.learner = "sgd" or model\.learner = "lbfgs" \(learner "exact-svm" reads sigma_grid, C_grid\)$',
         check=lambda e, err, out: only_the_error_line(err)),
    Case("model-key-of-another-learner-images", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(
        out=e.tmp / "o", store=e.shared["img_store"])), "--set", 'model.learner="lbfgs"', "--set", "model.epochs=3"],
         r'--set model\.epochs=3: model\.epochs = 3 is not read by learner "lbfgs"'),
    Case("image-learner-exact-svm", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(
        out=e.tmp / "o", store=e.shared["img_store"])), "--set", 'model.learner="exact-svm"'],
         r'--set model\.learner="exact-svm": model\.learner must be \'sgd\' or \'lbfgs\' here \(learners over the '
         r'feature store\), got \'exact-svm\''),
    Case("learner-switched-by-set-drops-file-keys", run_set('model.learner="lbfgs"', 'model.loss="log_loss"'),
         r'(?m)^streamcov run: note: model\.epochs \(\S+p\.toml\) does not apply to learner "lbfgs" from '
         r'--set model\.learner="lbfgs"; dropped$', rc=0, check=lambda e, err, out: switched_to_lbfgs(err, out)),
    Case("seed-negative", run_file(seed="-1"), LINE + r"seed = -1: expected"),
    Case("seed-string", run_file(seed='"x"'), LINE + r'seed = "x": expected an integer'),
    Case("split-kind-typo", run_file(split__kind='"subject-parity2"'), LINE + r'split\.kind = "subject-parity2"'),
    # a [split] kind that misses its key: the line of `kind`
    Case("split-subjects-without-train", run_file(split__kind='"subjects"'),
         r"p\.toml, line 26: split\.kind = 'subjects' needs split\.train_subjects = \[\.\.\]$"),
    Case("split-per-class-without-n_train", run_file(split__kind='"per-class"'),
         r"p\.toml, line 26: split\.kind = 'per-class' needs split\.n_train \(training rows per class\)$"),
    Case("block-size-zero", run_file(dask__block_size="0"), LINE + r"dask\.block_size = 0: expected"),
    Case("unknown-key", run_set("descriptor.normalise=true"), r"unknown key 'descriptor\.normalise' \(did you mean 'normalize'"),
    Case("unknown-key-in-file", run_text(lambda t: t.replace("theta = 0.7", "thetta = 0.7")),
         LINE + r"features\.thetta is not a parameter of RGWSampler \(did you mean 'theta'"),
    # the keys every map reads are offered too (they were missing from the list and from "did you mean")
    Case("features-key-typo-fit-sample", run_set("features.fitsample=10"),
         r"--set features\.fitsample=10: features\.fitsample is not a parameter of RGWSampler \(did you mean "
         r"'fit_sample'\?\); accepted: bandwidth, center, fit_sample, max_degree, n_components, sampling, sigma, theta$"),
    Case("unknown-table", run_text(lambda t: t.replace("[features]", "[featurs]")),
         LINE + r"unknown key 'featurs' \(did you mean 'features'"),
    Case("renamed-table", run_text(lambda t: t.replace("[data]", "[dataset]")),
         LINE + r"unknown key 'dataset'; renamed: use \[data\]"),
    Case("toml-syntax", run_text(lambda t: t.replace("sigma = 1.0", "sigma = = 1.0")),
         r"p\.toml, line 16, column 9: invalid TOML: invalid value"),
    Case("toml-duplicate-key", run_text(lambda t: t.replace("sigma = 1.0", "sigma = 1.0\nsigma = 2.0")),
         r"p\.toml, line 17, column 12: invalid TOML: cannot overwrite a value"),
    Case("task-typo", run_file(task='"skeleton-clasification"'), LINE.replace(r"\d+", "1") + r"unknown task 'skeleton-clasification' \(did you mean 'skeleton-classification'"),
    Case("store-missing", run_file(data__store='"/no/such/store.zarr"'), r"/no/such/store\.zarr.*(not exist|not found|no such)"),
    Case("set-empty-value", run_set("features.n_components="), r"--set features\.n_components=: empty value"),
    Case("set-no-equals", run_set("features.n_components"), r"--set features\.n_components: .*key=value"),
    Case("set-bad-literal", run_set("features.theta=0.7.1"),
         r"--set features\.theta=0\.7\.1: value '0\.7\.1' is not a TOML literal; write numbers as 2000, booleans as "
         r"true, lists as \[0, 1\] and text in double quotes$"),
    # a shell removes the double quotes of --set data.store="/x.zarr": the message writes the assignment again
    Case("set-path-unquoted-by-the-shell", run_set("data.store=/tmp/x.zarr"),
         r"""--set data\.store=/tmp/x\.zarr: value '/tmp/x\.zarr' is not a TOML literal; .* text in double quotes, """
         r"""e\.g\. --set 'data\.store="/tmp/x\.zarr"' \(in a shell, single quotes around it keep the double quotes\)$"""),
    Case("option-path-unquoted-by-the-shell", lambda e: ["ingest", "skeleton", "--format", "generic",
                                                         write_archive(e.tmp / "a"), e.tmp / "s.zarr", "--option",
                                                         "units=../m"],
         r"""--option units=\.\./m: value '\.\./m' is not a TOML literal; .*, e\.g\. --option 'units="\.\./m"' """),
    Case("set-table-as-value", run_set("features=3"), r"--set features=3: features = 3: expected a table"),
    Case("set-unknown-table", run_set("featurs.sigma=1.0"), r"--set featurs\.sigma=1\.0: unknown key 'featurs' \(did you mean 'features'"),
    # one key given two values: the later wins (a preset of --set's in a shell variable, then one of its keys), said
    # in a note (it was kept without a word); the same value twice is no news
    Case("set-twice", run_set("model.C=10", "features.sigma=1.0", "model.C=100"),
         r"(?m)^streamcov run: note: --set model\.C=100 replaces --set model\.C=10$", rc=0,
         check=lambda e, err, out: one_note_and_a_result(err, out) or json.loads(out.strip().splitlines()[-1])
         ["model"]["C"] == 100),
    Case("set-key-and-its-table", run_set("model.C=10", "model={C=100}"),
         r"(?m)^streamcov run: note: --set model=\{C=100\} replaces --set model\.C=10 \(model\.C\)$", rc=0,
         check=lambda e, err, out: one_note_and_a_result(err, out) or True),
    # an empty table merged into the file's [model] changed nothing without a word (nor cleared data.options)
    Case("set-key-and-an-empty-table", run_set("model.C=10", "model={}"),
         r"^streamcov run: error: --set model=\{\}: an empty table changes nothing: a table given by --set merges into "
         r"the file's model key by key, and a --set cannot remove a file's key; set the keys to change "
         r"\(model\.KEY=VALUE\), or edit the file$"),
    Case("set-twice-same-value", run_set("model.C=10", "model.C=10"), r'"accuracy"', rc=0,
         check=lambda e, err, out: ": note: " not in err),
    Case("pipeline-missing", lambda e: ["run", e.tmp / "nope.toml"], r"nope\.toml: pipeline file not found"),
    Case("pipeline-is-folder", lambda e: ["run", e.tmp], r": a folder, not a pipeline file"),
    Case("pipeline-not-utf8", lambda e: ["run", (e.tmp / "p.toml").write_bytes(b'seed = 1\ntask = "\xff\xfe"') and
                                          e.tmp / "p.toml"],
         r"p\.toml, line 2: not UTF-8 text \(invalid start byte at byte 17\); save the file as UTF-8$"),
    Case("pipeline-a-device", lambda e: ["run", "/dev/null"],
         r"/dev/null: not a regular file \(a device or a pipe\); give a \.toml file"),
    Case("demo-and-file", lambda e: ["run", e.pipeline(), "--demo", "images"], r"pipeline file or --demo, not both"),
    Case("store-flag-missing", lambda e: ["run", e.pipeline(), "--store", e.tmp / "none.zarr"], r"--store \S*none\.zarr: no such store"),
    Case("store-flag-image-store", lambda e: ["run", e.pipeline(), "--store", e.shared["img_store"], "--quiet"],
         r"--store \S*img\.zarr: an image store, but task 'skeleton-classification' reads skeleton stores"),
    Case("workers-zero", lambda e: ["run", e.pipeline(), "--workers", "0"], r"argument --workers: expected an integer >= 1, got 0"),
    # int() read other scripts' digits and underscores: "٢" (Arabic-Indic two) as 2 workers, "1_0" as 10
    Case("workers-non-ascii-digit", lambda e: ["run", e.pipeline(), "--workers", "\u0662"],
         r"argument --workers: expected an integer >= 1, got '\u0662'; type the digits as ASCII 0-9"),
    Case("sequences-underscore", lambda e: ["synth", e.tmp / "s.zarr", "--sequences", "1_0"],
         r"argument --sequences: expected an integer >= 1, got '1_0'; write it without '_'"),
    Case("synth-seed-non-ascii", lambda e: ["synth", e.tmp / "s.zarr", "--sequences", "4", "--seed", "\u0663"],
         r"argument --seed: expected an integer >= 0, got '\u0663'; type the digits as ASCII 0-9"),
    Case("scheduler-unknown", lambda e: ["run", e.pipeline(), "--scheduler", "gpu", "--quiet"], r"--scheduler gpu: expected one of threads, synchronous, local-cluster or a scheduler address"),
    # a port of digits that are not ASCII: '²' passed isdigit() and failed int() (a traceback)
    *[Case(f"scheduler-port-{what}", lambda e, port=port: ["run", e.pipeline(), "--scheduler", f"tcp://host:{port}",
                                                           "--quiet"],
           rf"--scheduler tcp://host:{port}: expected one of threads, synchronous, local-cluster or a scheduler address")
      for what, port in (("superscript", "²"), ("full-width", "８７８６"))],
    Case("scheduler-not-an-address", lambda e: ["run", e.pipeline(), "--scheduler", "http://host:8786", "--quiet"],
         r"--scheduler http://host:8786: expected one of threads, synchronous, local-cluster or a scheduler address"),
    Case("dask-scheduler-not-an-address", run_set_alone('dask.scheduler="foo://bar"'),
         r'--set dask\.scheduler="foo://bar": dask\.scheduler = "foo://bar": expected one of threads'),
    Case("dask-workers-with-synchronous", run_text(lambda t: t.replace("block_size = 16", 'block_size = 16\n'
                                                                         'scheduler = "synchronous"\nworkers = 3')),
         LINE + r'dask\.workers = 3 is not read with dask\.scheduler = "synchronous"'),
    # --scheduler synchronous replaces the file's scheduler: the file's dask.workers is not read (a note), a
    # --set one is refused as --workers is
    # a count of many digits started worker processes until memory ran out, with no message
    Case("workers-flag-beyond-any-machine", lambda e: ["run", e.pipeline(), "--quiet", "--workers",
                                                       "99999999999999999999"],
         r"argument --workers: expected at most 1024 workers \(this machine has \d+ cores\), got 99999999999999999999"),
    Case("dask-workers-beyond-any-machine", lambda e: ["run", e.pipeline(), "--quiet", "--set",
                                                       'dask.scheduler="local-cluster"', "--set", "dask.workers=5000"],
         r"--set dask\.workers=5000: dask\.workers = 5000: expected a value <= 1024"),
    Case("dask-workers-with-synchronous-flag", run_text(lambda t: t.replace("block_size = 16", "block_size = 16\nworkers = 3")),
         r'(?m)^streamcov run: note: dask\.workers \(\S+p\.toml\) does not apply to --scheduler synchronous \(a '
         r'synchronous run has one thread\); dropped$', rc=0, check=lambda e, err, out: one_note_and_a_result(err, out)),
    Case("dask-workers-set-with-synchronous-flag", run_set("dask.workers=3"),
         r"--set dask\.workers=3 --scheduler synchronous: dask\.workers sets the threads of --scheduler threads or the "
         r"processes of a local-cluster; a synchronous run has one thread$"),
    # a run refused by its task's own checks (after the configuration loaded) left the output folder it had
    # created, holding only its marker; one that existed, or in which the run wrote a store, stays
    Case("run-refused-leaves-no-new-output-folder", lambda e: [
        *run_set(*TRAIN_99)(e), "--output", e.tmp / "new" / "deeper" / "o"],
         SUBJECT_99, check=nothing_left_in(lambda e: e.tmp, {"p.toml"})),
    Case("run-refused-keeps-an-existing-output-folder", lambda e: [
        *run_set(*TRAIN_99)(e), "--output", (lambda d: d.mkdir() or d)(e.tmp / "o")],
         SUBJECT_99, check=nothing_left_in(lambda e: e.tmp / "o", {".streamcov-output"})),
    Case("run-refused-keeps-what-it-wrote", lambda e: ["run", e.pipeline(SKELETON_PIPELINE.format(
        out=e.tmp / "o", store="").replace('[data]\nstore = ""', "[data.synthetic]\nn_sequences = 24\nn_subjects = 4")),
        "--quiet", "--scheduler", "synchronous", *[a for s in TRAIN_99 for a in ("--set", s)]],
         SUBJECT_99, check=nothing_left_in(lambda e: e.tmp / "o", {".streamcov-output", "synthetic.zarr"})),
    Case("output-is-a-file", lambda e: ["run", e.pipeline(), "--output", (e.tmp / "f").write_text("x") and e.tmp / "f",
                                        "--quiet"], r"--output \S*/f: \S*/f is a file, not a folder"),
    Case("output-is-the-store", lambda e: ["run", e.pipeline(store=e.copy("synth")), "--output", e.tmp / "synth.zarr",
                                           "--quiet"], r"--output \S+/synth\.zarr: \S+ is a zarr store; choose an output "
                                                       r"folder outside every store"),
    Case("output-inside-a-store", lambda e: ["run", e.pipeline(), "--output", e.copy("synth") / "labels" / "out",
                                             "--quiet"],
         r"--output \S+: \S+ is inside the zarr store \S+/synth\.zarr/labels"),
    Case("output-is-a-model-folder", lambda e: ["run", e.pipeline(), "--output", e.copy("model"), "--quiet"],
         r"--output \S+/model: \S+ is a model folder \(it holds model\.json\)"),
    # a folder holding files no streamcov run wrote (they were replaced silently: a run writes results, features,
    # a model, tables and figures), the file system's root and the home folder (a run wrote into / before)
    *[Case(f"output-holds-users-{name}", lambda e, name=name, text=text: [
        "run", e.pipeline(), "--quiet", "--output",
        (lambda d: (d.mkdir(), (d / name).write_text(text)) and d)(e.tmp / "mine")],
        rf"--output \S+/mine: \S+/mine holds '{re.escape(name)}', which no streamcov run wrote; a run writes its "
        r"results, features and model there and would overwrite files of the same names: choose a new or empty "
        r"output folder$")
      for name, text in (("predictions.csv", "my own notes\n"), ("result.json", '{"mine": 1}\n'),
                         ("notes.txt", "x\n"))],
    Case("output-symlink-loop", lambda e: ["run", e.pipeline(), "--quiet", "--output",
                                           (lambda a, b: (a.symlink_to(b), b.symlink_to(a)) and a / "x")(
                                               e.tmp / "loop1", e.tmp / "loop2")],
         r"--output \S+/loop1/x: cannot use \S+/loop1/x \(.*\); choose another output folder$"),
    # an output folder of a streamcov from before the marker file (its result.json names the task) is written again
    Case("output-of-an-earlier-streamcov", lambda e: [
        "run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--output",
        (lambda d: (d.mkdir(), (d / "result.json").write_text('{"task": "skeleton-classification"}'),
                    (d / "predictions.csv").write_text("id,predicted,label\n")) and d)(e.tmp / "old")],
        r"accuracy", rc=0, check=lambda e, err, out: (e.tmp / "old" / ".streamcov-output").is_file() or 1 / 0),
    # ... and one of a run of such a streamcov killed before its result.json (features and checkpoints only)
    Case("output-of-an-earlier-killed-run", lambda e: [
        "run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--output",
        (lambda d: ((d / "features.zarr").mkdir(parents=True),
                    (d / "features.zarr" / "zarr.json").write_text('{"attributes": {"fingerprint": "{}"}}'),
                    (d / "predictions.csv").write_text("id,predicted,label\n")) and d)(e.tmp / "killed")],
        r"accuracy", rc=0),
    # a name the run writes taken by the other kind of entry: a traceback at that step, after the features
    *[Case(f"output-{what}", lambda e, make=make: [
        "run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--output",
        (lambda d: (d.mkdir(), (d / ".streamcov-output").write_text("{}"), make(d)) and d)(e.tmp / "o")],
        rf"^streamcov run: error: --output \S+/o: \S+/o/{pattern}; move or delete it, or choose another output "
        r"folder$")
      for what, make, pattern in (
          ("model-is-a-file", lambda d: (d / "model").write_text("x"),
           r"model is a file where a run writes its model \(a folder\)"),
          ("model-is-a-broken-link", lambda d: (d / "model").symlink_to(d / "gone"),
           r"model is a link to nothing where a run writes its model \(a folder\)"),
          ("checkpoints-is-a-file", lambda d: (d / "checkpoints").write_text("x"),
           r"checkpoints is a file where a run writes its checkpoints \(a folder\)"),
          # a store there: the model was saved into it, after the whole training (then refused by save)
          ("model-is-a-store", lambda d: ((d / "model").mkdir(), (d / "model" / "zarr.json").write_text("{}")),
           r"model is a zarr store where a run writes its model"),
          ("feature-store-is-a-file", lambda d: (d / "features.zarr").write_text("x"),
           r"features\.zarr is a file where a run writes a store \(a folder\)"),
          ("result-is-a-folder", lambda d: (d / "result.json").mkdir(),
           r"result\.json is a folder where a run writes its result \(a file\)"),
          ("predictions-is-a-folder", lambda d: (d / "predictions.csv").mkdir(),
           r"predictions\.csv is a folder where a run writes its predictions \(a file\)"))],
    # ... or by a link: the run wrote through it, e.g. over the model of the run whose folder it points into
    *[Case(f"output-{what}-is-a-link", lambda e, name=name: [
        "run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--output",
        (lambda d: (d.mkdir(), (d / ".streamcov-output").write_text("{}"), (d / name).symlink_to(target(e))) and d)(
            e.tmp / "o")],
        rf"^streamcov run: error: --output \S+/o: \S+/o/{re.escape(name)} is a link to \S+, and a run writes "
        rf"{written} there through it; remove the link, or choose another output folder$",
        check=lambda e, err, out: (e.tmp / "model" / "model.json").read_bytes()
        == (e.shared["model"] / "model.json").read_bytes() or pytest.fail("the linked model changed"))
      for what, name, target, written in (
          ("model", "model", lambda e: e.copy("model"), "its model"),
          ("checkpoints", "checkpoints", lambda e: (e.copy("model"), e.tmp / "model")[1], "its checkpoints"),
          ("feature-store", "features.zarr", lambda e: (e.copy("model"), e.copy("synth"))[1], "its features"))],
    # ... or a file inside its folders: written atomically (files.atomic_write), which named no path
    *[Case(f"output-{what}", lambda e, inner=inner: [
        "run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--output",
        (lambda d: ((d / inner).mkdir(parents=True), (d / ".streamcov-output").write_text("{}")) and d)(e.tmp / "o")],
        rf"^streamcov run: error: \S+/o/{re.escape(inner)}: a folder where streamcov writes a file; move or delete "
        r"it, then run the same command again$")
      for what, inner in (("checkpoint-is-a-folder", "checkpoints/odd-even.npz"),
                          ("model-json-is-a-folder", "model/model.json"))],
    Case("output-is-the-root", lambda e: ["run", e.pipeline(), "--quiet", "--output", "/"],
         r"--output /: / is the root of the file system; give a folder of its own for the run's outputs, e\.g\. "
         r"\S+/streamcov-runs/NAME$"),
    Case("output-is-home", lambda e: ["run", e.pipeline(), "--quiet", "--output", Path.home()],
         r"--output \S+: \S+ is your home folder; give a folder of its own for the run's outputs"),
    Case("name-with-nul", run_set('name="a\\u0000b"'),
         r'--set name="a\\u0000b": name holds a NUL character \(\\u0000\), which no name or path may contain; '
         r'remove it$'),
    # a key holding one, in a file or a --set table, is named as typed (the raw NUL would reach the terminal)
    Case("key-with-nul", run_text(lambda t: t.replace("[features]", '[features]\n"the\\u0000ta" = 0.7')),
         LINE + r"features\.the\\u0000ta holds a NUL character \(\\u0000\), which no name or path may contain; "
         r"remove it$"),
    Case("ingest-option-key-with-nul", lambda e: ["ingest", "skeleton", "--format", "generic",
                                                  write_archive(e.tmp / "a"), e.tmp / "s.zarr", "--option",
                                                  'roles={"hip\\u0000" = [0]}'],
         r"^streamcov ingest: error: --option roles=.*: holds a NUL character", check=lambda e, err, out: not (e.tmp / "s.zarr").exists()),
    # --output is the folder as typed: not read as TOML (a backslash or a quote is a character of the name)
    Case("output-as-typed", lambda e: ["run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--output",
                                       e.tmp / 'o"\\t\\u0041'], r'"accuracy"', rc=0,
         check=lambda e, err, out: [(e.tmp / 'o"\\t\\u0041' / "result.json").is_file(),
                                    not (e.tmp / "o\"\tA").exists()] == [True, True] or pytest.fail(out)),
    Case("scheduler-without-port", lambda e: ["run", e.pipeline(), "--scheduler", "tcp://", "--quiet"],
         r"--scheduler tcp://: expected one of threads, synchronous, local-cluster or a scheduler address "
         r"tcp://HOST:PORT$"),
    Case("dask-scheduler-without-port", run_set_alone('dask.scheduler="tcp://localhost"'),
         r'--set dask\.scheduler="tcp://localhost": dask\.scheduler = "tcp://localhost": expected one of threads'),
    # an IPv6 host without its brackets, or with one missing: Dask's ValueError as it connected, then 60 s and a
    # traceback at exit
    *[Case(f"scheduler-ipv6-{what}", lambda e, a=address: ["run", e.pipeline(), "--scheduler", a, "--quiet"],
           rf"--scheduler {re.escape(address)}: expected one of threads, synchronous, local-cluster or a scheduler "
           r"address tcp://HOST:PORT \(an IPv6 host in brackets: tcp://\[::1\]:8786\)$")
      for what, address in (("unclosed-bracket", "tcp://[::1:8786"), ("no-brackets", "tcp://::1:8786"),
                             ("empty-brackets", "tcp://[]:8786"))],
    Case("dask-scheduler-ipv6-no-brackets", run_set_alone('dask.scheduler="tls://fe80::1:8786"'),
         r'dask\.scheduler = "tls://fe80::1:8786": expected one of .* \(an IPv6 host in brackets: '
         r'tcp://\[::1\]:8786\)$'),
    # a C so small that L-BFGS cannot move: chance accuracy, said (it was silent; a large tol already warned)
    Case("lbfgs-C-too-small-to-move", run_set('model.learner="lbfgs"', 'model.loss="log_loss"', "model.C=1e-300"),
         r"(?m)^streamcov run: warning: fold 'odd-even': L-BFGS took no step \(stop: \w+\): the model is its "
         r"starting point and predicts as it does; with model\.C = 1e-300 the data term of the loss is too small to "
         r"move it in floating point: raise model\.C \(or scale the features: model\.scale\)$", rc=0),
    # with alpha, which replaces C: alpha is named, to be lowered (raising C changed nothing)
    Case("lbfgs-alpha-too-large-to-move", run_set('model.learner="lbfgs"', 'model.loss="log_loss"', "model.alpha=1e290"),
         r"(?m)^streamcov run: warning: fold 'odd-even': L-BFGS took no step \(stop: \w+\): .* with model\.alpha = "
         r"1e\+290 the data term of the loss is too small to move it in floating point: lower model\.alpha \(or "
         r"scale the features: model\.scale\)$", rc=0),
    # data.store of the wrong kind is named where it was given, as --store is
    # a --set of a scheduler key beside its flag: the flag won without a word
    # a TOML date where a number goes: shown as written (it was datetime.date(1979, 5, 27))
    Case("split-file-empty", run_set('split.kind="subject-splits-file"', 'split.file=""'),
         r'^streamcov run: error: --set split\.file="": split\.file = "": an empty path; give the TOML file of '
         r"\[\[split\]\] tables$"),
    Case("set-a-date", run_set("model.C=1979-05-27"),
         r"^streamcov run: error: --set model\.C=1979-05-27: model\.C = 1979-05-27: expected a number$"),
    Case("resume-exact-svm", run_set('model.learner="exact-svm"', 'features.map="none"', "model.sigma_grid=[1.0]",
                                     "model.C_grid=[1.0]", extra=("--resume",)),
         r'(?m)^streamcov run: note: --resume: learner "exact-svm" trains in memory and writes no checkpoints; there '
         r"is nothing to resume, and the run computes its kernel again$", rc=0),
    Case("workers-set-and-flag", lambda e: ["run", e.pipeline(), "--quiet", "--set", "dask.workers=2", "--workers", "1"],
         r"^streamcov run: error: --set dask\.workers=2 --workers 1: two worker counts; give one$"),
    Case("scheduler-set-and-flag", lambda e: ["run", e.pipeline(), "--quiet", "--set", 'dask.scheduler="synchronous"',
                                              "--scheduler", "threads"],
         r'^streamcov run: error: --set dask\.scheduler="synchronous" --scheduler threads: two schedulers; give one$'),
    Case("data-store-of-another-kind-set", lambda e: ["run", e.pipeline(), "--quiet", "--set",
                                                      f'data.store="{e.shared["img_store"]}"'],
         r'^streamcov run: error: --set data\.store="\S+img\.zarr": data\.store = \S+img\.zarr\W: an image store, '
         r"but task 'skeleton-classification' reads skeleton stores$"),
    Case("data-store-of-another-kind-file", lambda e: ["run", e.pipeline(store=e.shared["img_store"]), "--quiet"],
         r"p\.toml, line \d+: data\.store = \S+img\.zarr\W: an image store, but task 'skeleton-classification' "
         r"reads skeleton stores$"),
    # an exact-SVM bandwidth that makes the kernel the identity or a constant: chance accuracy, said
    Case("exact-svm-sigma-far-below", run_set('model.learner="exact-svm"', "model.sigma_grid=[1e-3]"),
         r"(?m)^streamcov run: warning: model\.sigma_grid: the bandwidth chosen, sigma = 0\.001, is far below the "
         r"distances between the training rows: the Gaussian kernel is the identity on them", rc=0),
    Case("exact-svm-sigma-far-above", run_set('model.learner="exact-svm"', "model.sigma_grid=[1e20]"),
         r"(?m)^streamcov run: warning: model\.sigma_grid: the bandwidth chosen, sigma = 1e\+20, is far above the "
         r"distances between the training rows: the Gaussian kernel is a constant on them", rc=0),
    # twin GP settings the schema took that failed deep inside (tracebacks before)
    Case("tgp-cv-beyond-the-rows", tgp_run("tgp.cv=31"),
         r"--set tgp\.cv=31: tgp\.cv = 31: choosing the degrees by 31-fold cross-validation needs 62 training rows, "
         r"the split gives it 30; lower tgp\.cv, set tgp\.degrees = \[d_input, d_output\], or give the split more"),
    Case("tgp-test-fraction-leaves-one-row", tgp_run("data.test_fraction=0.99"),
         r"the split leaves 1 training and 59 test rows; a twin GP needs 2 training rows and a test row at least: "
         r"lower data\.test_fraction, or raise data\.n_samples \(given: --set data\.test_fraction=0\.99; --set "
         r"data\.n_samples=60\)$"),
    # a Gegenbauer weight whose basis overflows float64 (G_2 about 1e600): a traceback from the SVD of the HSIC matrix
    # a degree of 100000 asked for 75 GiB: a MemoryError traceback, "internal error"
    Case("tgp-degrees-too-large", tgp_run("tgp.degrees=[100000,2]"),
         r"^streamcov run: error: --set tgp\.degrees=\[100000,2\]: tgp\.degrees\.0 = 100000: expected a value <= 100"),
    Case("tgp-degree-grid-too-large", tgp_run("tgp.degree_grid=[1,101]"),
         r"--set tgp\.degree_grid=\[1,101\]: tgp\.degree_grid\.1 = 101: expected a value <= 100"),
    Case("tgp-gegenbauer-weight-overflows", tgp_run("tgp.gegenbauer_weight_output=1e200", "tgp.degrees=[2,3]"),
         r"^streamcov run: error: --set tgp\.gegenbauer_weight_output=1e200: tgp\.gegenbauer_weight_output = 1e\+200: "
         r"the gegenbauer basis of degrees \(2, 3\) with weights \(0\.51, 1e\+200\) overflows float64; lower the "
         r"Gegenbauer weights \(the paper's are 0\.51 and 0\.52\) or the degrees \(tgp\.degree_grid, tgp\.degrees\)$"),
    # a lambda so small that the criterion's gradient overflows: a NaN in the kernels was a traceback; the
    # diverged rows are now predicted by the nearest training output and counted, as other divergences are
    # (whether any row falls back depends on the numpy, scipy and BLAS rounding: checked when one does)
    Case("tgp-lambda-y-tiny", tgp_run("tgp.lambda_y=1e-30", "tgp.degrees=[1,1]", 'tgp.criteria=["kl"]',
                                      'tgp.primary=["kl","gegenbauer"]'),
         r'"task": "tgp-sshape"', rc=0, check=lambda e, err, out: all(re.fullmatch(
             r"streamcov run: warning: kl, [^:]*, seed 0: TwinGaussianProcess: the criterion's minimization diverged "
             r"\(no start ended finite and near the training outputs\) for \d+ of 30 rows; their prediction is the "
             r"nearest training output", line) for line in err.splitlines() if "diverged" in line)),
    # the other side of the split: the fix is the other way (it said "lower data.test_fraction")
    Case("tgp-test-fraction-leaves-no-test-row", tgp_run("data.n_samples=20", "data.test_fraction=0.01"),
         r"the split leaves 20 training and 0 test rows; a twin GP needs 2 training rows and a test row at least: "
         r"raise data\.test_fraction, or data\.n_samples"),
    # the kernel ridge baseline's 3-fold search on 2 training rows: a traceback after the twin GPs had run
    Case("tgp-digits-two-training-rows", lambda e: ["run", REPO / "pipelines" / "digits_tgp.toml", "--output",
                                                    e.tmp / "o", "--quiet", "--set", "tgp.degrees=[1,2]", "--set",
                                                    "data.max_train=2", "--set", "data.test_fraction=0.05"],
         r'"task": "tgp-digits"', rc=0),
    # the cross-validation sample was the short side, and its key was not among the fixes
    Case("tgp-cv-max-train-too-small", tgp_run("tgp.cv_max_train=3"),
         r"tgp\.cv = 3: choosing the degrees by 3-fold cross-validation needs 6 training rows, the split gives it 3 "
         r"\(tgp\.cv_max_train\); lower tgp\.cv, set tgp\.degrees = \[d_input, d_output\], or raise "
         r"tgp\.cv_max_train"),
    Case("tgp-sshape-noise-beyond-the-curve", tgp_run("data.noise=1e200"),
         r"--set data\.noise=1e200: data\.noise = 1e\+200: expected a value <= 1000\.0$"),
    Case("tgp-gamma-squares-to-zero", tgp_run("tgp.gamma_x=1e-300"),
         r'--set tgp\.gamma_x=1e-300: tgp\.gamma_x = 1e-300: expected "median" or a value >= 1e-150'),
    Case("tgp-gegenbauer-weight-zero-unread", tgp_run('tgp.bases=["monomial"]', 'tgp.primary=["kl","monomial"]',
                                                      "tgp.gegenbauer_weight_input=0", "tgp.degrees=[1,1]",
                                                      'tgp.criteria=["kl"]'),
         # the weight is read by the Gegenbauer basis only: accepted, and said not to be read
         r'(?m)^streamcov run: note: tgp\.gegenbauer_weight_input, tgp\.gegenbauer_weight_output \(--set '
         r'tgp\.gegenbauer_weight_input=0; \S+sshape_tgp\.toml, line \d+\) are not read: tgp\.bases = \["monomial"\] '
         r'has no Gegenbauer basis \(--set tgp\.bases=\["monomial"\]\)$', rc=0,
         check=lambda e, err, out: "mae_map_kl_monomial" in out),
    # fixed degrees: the degree CV's keys are not read (the shipped files set them: a note, not a refusal)
    Case("tgp-degrees-fixed-cv-unread", tgp_run("tgp.degrees=[1,2]", "tgp.cv=4", 'tgp.criteria=["kl"]',
                                                'tgp.primary=["kl","gegenbauer"]'),
         r"(?m)^streamcov run: note: tgp\.cv \(--set tgp\.cv=4\) is not read: tgp\.degrees = \[1, 2\] fixes the "
         r"degrees \(no cross-validation\) \(--set tgp\.degrees=\[1,2\]\)$", rc=0,
         check=lambda e, err, out: json.loads(out)["degrees_kl_gegenbauer"] == [[1, 2]]),
    Case("tgp-degrees-fixed-grid-unread", tgp_run("tgp.oracle_grid=false", "tgp.degrees=[1,2]", 'tgp.criteria=["kl"]',
                                                  'tgp.primary=["kl","gegenbauer"]'),
         r"(?m)^streamcov run: note: tgp\.cv, tgp\.degree_grid \(\S+sshape_tgp\.toml, line \d+; --set "
         r"tgp\.degree_grid=\[1,2\]\) are not read: tgp\.degrees = \[1, 2\] fixes the degrees", rc=0),
    Case("tgp-gegenbauer-weight-zero", tgp_run("tgp.gegenbauer_weight_input=0"),
         r"--set tgp\.gegenbauer_weight_input=0: tgp\.gegenbauer_weight_input = 0: expected a weight > -0\.5 other "
         r"than 0$"),
    # a check over the whole [tgp] table names the key at fault, not the table's first --set
    Case("tgp-primary-names-its-set", tgp_run('tgp.primary=["kl","bogus"]'),
         r'^streamcov run: error: --set tgp\.primary=\["kl","bogus"\]: tgp\.primary must be \[criterion, basis\]'),
    # a seed listed twice drew the same data and split again: its std over "seeds" shrank toward 0 without a word
    Case("tgp-seed-twice", tgp_run("data.seeds=[0,1,0]"),
         r"--set data\.seeds=\[0,1,0\]: data\.seeds = \[0, 1, 0\]: expected each entry once; 0 is listed twice$"),
    Case("tgp-degree-twice", tgp_run("tgp.degree_grid=[1,2,2]"),
         r"--set tgp\.degree_grid=\[1,2,2\]: tgp\.degree_grid = \[1, 2, 2\]: expected each entry once; 2 is listed "
         r"twice$"),
    Case("tgp-criterion-twice", tgp_run('tgp.criteria=["hsic","kl","hsic"]'),
         r'--set tgp\.criteria=\["hsic","kl","hsic"\]: .*expected each entry once; "hsic" is listed twice$'),
    Case("tgp-digits-test-fraction", lambda e: ["run", REPO / "pipelines" / "digits_tgp.toml", "--output", e.tmp / "o",
                                                "--set", "data.test_fraction=0.999", "--quiet"],
         r"--set data\.test_fraction=0\.999: data\.test_fraction = 0\.999: leaves 1 training and 1796 test images; "
         r"the split stratified by digit needs 10 on each side$"),
    # protocols Dask reads but that need what is not there: tracebacks before
    Case("scheduler-inproc", lambda e: ["run", e.pipeline(), "--scheduler", "inproc://x", "--quiet"],
         r"--scheduler inproc://x: Dask cannot connect \(ValueError: .*\); this address needs a scheduler running "
         r"inside this process \(a notebook's Client\(processes=False\)\), or use a tcp:// address$"),
    Case("scheduler-tls-without-settings", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                                      e.tmp / "p.csv", "--scheduler", "tls://127.0.0.1:1"],
         r"--scheduler tls://127\.0\.0\.1:1: Dask cannot connect \(TypeError: .*\); this address needs the TLS "
         r"settings of Dask's configuration \(distributed\.comm\.tls: .*\), or use a tcp:// address$"),
    Case("fold-beyond-protocol", run_set("split.folds=[3]"), r"split\.folds.*3"),
    Case("splits-file-is-a-device", run_set('split.kind="subject-splits-file"', 'split.file="/dev/zero"'),
         r'--set split\.file="/dev/zero": split\.file = "/dev/zero": a device or a pipe, not a file; give the TOML file '
         r'of \[\[split\]\] tables$'),
    Case("train-subjects-absent", run_set('split.kind="subjects"', "split.train_subjects=[99]"),
         r"split\.train_subjects = \[99\] names subject\(s\) \[99\] that no row of the store has \(its subjects: "
         r"\[1, 2, 3, 4\]\)"),
    Case("train-subjects-one-absent", run_set('split.kind="subjects"', "split.train_subjects=[1, 99]"),
         r"split\.train_subjects = \[1, 99\] names subject\(s\) \[99\] that no row of the store has"),
    Case("test-subjects-empty-list", run_set('split.kind="subjects"', "split.train_subjects=[1]", "split.test_subjects=[]"),
         r"--set split\.test_subjects=\[\]: split\.test_subjects = \[\]: expected a non-empty list$"),
    # pydantic's wording of lengths, patterns and union members rewritten as plain expectations
    Case("name-with-slash", run_file(name='"a/b"'), LINE + r'name = "a/b": expected a name without / or \\$'),
    Case("name-with-backslash", run_set('name="a\\\\b"'), r'name = "a\\\\b": expected a name without / or \\$'),
    Case("name-empty-set", run_set('name=""'), r'--set name="": name = "": expected a non-empty string$'),
    Case("list-too-short", run_set('split.kind="subjects"', "split.train_subjects=[]"),
         r"split\.train_subjects = \[\]: expected a non-empty list$"),
    # a value or a list of values (a grid), given a list: the entry that is wrong, not "a number or ..."
    Case("grid-entry-below-range", run_image(lambda t: t, "method.sigma1=[1.0, -1.0]", pipeline=EVAL_PIPELINE),
         r"--set method\.sigma1=\[1\.0, -1\.0\]: method\.sigma1\.1 = -1\.0: expected a value >= 1e-20$"),
    Case("grid-entry-text", run_image(lambda t: t, 'method.sigma1=["a"]', pipeline=EVAL_PIPELINE),
         r'method\.sigma1\.0 = "a": expected a number$'),
    Case("grid-empty", run_image(lambda t: t, "method.sigma1=[]", pipeline=EVAL_PIPELINE),
         r"--set method\.sigma1=\[\]: method\.sigma1 = \[\]: expected a non-empty list$"),
    Case("grid-single-below-range", run_image(lambda t: t, "method.sigma1=-1", pipeline=EVAL_PIPELINE),
         r"method\.sigma1 = -1: expected a value >= 1e-20 or a list \[\.\.\]$"),
    Case("center-entry-negative", run_set("descriptor.center=[-1]"),
         r"descriptor\.center\.0 = -1: expected a value >= 0$"),
    Case("list-too-long", tgp_run('tgp.primary=["kl", "hsic", "monomial"]'),
         r'tgp\.primary = \["kl", "hsic", "monomial"\]: expected a list of at most 2 items$'),
    # values shown as TOML writes them, not as Python's repr ({'a': 1}, ['positions', 'positions'], True)
    Case("inline-table-for-a-number", run_set("descriptor.gamma={a = 1}"),
         r"--set descriptor\.gamma=\{a = 1\}: descriptor\.gamma = \{a = 1\}: expected a number$"),
    Case("descriptor-features-twice", run_set('descriptor.features=["positions", "positions"]'),
         r'descriptor\.features = \["positions", "positions"\] names a feature twice$'),
    Case("test-split-empty", run_set('split.kind="subjects"', "split.train_subjects=[1, 2, 3, 4]"),
         r"split: fold 'subjects' has 48 training and 0 test rows"),
    Case("image-preset-typo", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(out=e.tmp / "o", store=e.shared["img_store"])
                                                         .replace('"texture"', '"textures"'))],
         LINE + r'pixels\.preset = "textures": expected one of .* \(did you mean "texture"\?\)'),
    Case("image-D-zero", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(out=e.tmp / "o", store=e.shared["img_store"])
                                                    .replace("D = 8", "D = 0"))], LINE + r"method\.D = 0: expected"),
    # beyond memory (the map: 10^7 x the descriptor's width), not beyond the disk (the feature store: 48 rows x
    # 10^7 numbers, 3.6 GiB; 10^12 components are refused by the feature store's disk check first)
    Case("n-components-beyond-memory", run_file(features__n_components="10000000"),
         r"features\.n_components = 10000000 on \d+-dimensional descriptors: needs [\d.]+ [GT]iB of memory, "
         r"this process may use [\d.]+ GiB; lower features\.n_components"),
    # a [features] key that the map does not read: refused where it was written; a map switched by --set
    # drops the file's keys it does not read, with a note
    Case("map-key-not-read-set", run_set('features.map="rff"', "features.theta=0.5"),
         r'--set features\.theta=0\.5: features\.theta = 0\.5 is not read by map "rff": remove it, or set '
         r'features\.map = "rgw" \(map "rff" reads n_components, sigma, bandwidth, fit_sample\)$'),
    Case("map-key-not-read-in-file", run_text(lambda t: t.replace('map = "rgw"', 'map = "orf"')),
         LINE + r'features\.theta = 0\.7 is not read by map "orf": remove it, or set features\.map = "rgw"'),
    Case("map-none-with-width", run_text(lambda t: t.replace('map = "rgw"', 'map = "none"')),
         LINE + r'features\.n_components = 64 is not read by map "none": remove it, or set features\.map = "rgw" or '
         r'.* \(map "none" reads nothing\) \(also not read: features\.sigma, features\.theta\)$'),
    Case("map-switched-by-set", run_set('features.map="rff"'),
         r'(?m)^streamcov run: note: features\.theta \(\S+p\.toml\) does not apply to features\.map = "rff" from '
         r'--set features\.map="rff"; dropped$', rc=0),
    # a bandwidth whose square is 0 or infinite in floating point
    Case("sigma-underflows", run_set("features.sigma=1e-300"),
         r"--set features\.sigma=1e-300: features\.sigma = 1e-300: expected a value >= 1e-20$"),
    Case("sigma-grid-overflows", run_set('model.learner="exact-svm"', "model.sigma_grid=[1, 1e300]"),
         r"--set model\.sigma_grid=\[1, 1e300\]: model\.sigma_grid\.1 = 1e\+300: expected a value <= 1e\+20$"),
    Case("eval-sigma1-underflows", run_image(lambda t: t.replace("sigma1 = [1.0]", "sigma1 = [1e-300]"),
                                             pipeline=EVAL_PIPELINE),
         LINE + r"method\.sigma1\.0 = 1e-300: expected a value >= 1e-20$"),
    Case("validation-fraction-leaves-nothing", run_set("model.validation_fraction=0.99"),
         r"error: --set model\.validation_fraction=0\.99: model\.validation_fraction = 0\.99: leaves \d+ of \d+ "
         r"training rows to fit on; lower it"),
    # a float literal that float64 cannot hold (it read as 0 or infinity, and the run went on): where it is written
    Case("gamma-underflows-set", run_set("descriptor.gamma=1e-400"),
         r"error: --set descriptor\.gamma=1e-400: descriptor\.gamma = 1e-400: below float64's smallest positive "
         r"value \(5e-324\), so it would be read as 0; write 0 if zero is meant, or check the exponent$"),
    Case("gamma-underflows-in-file", run_file(descriptor__gamma="1e-400"),
         r"error: \S+p\.toml, line 10: descriptor\.gamma = 1e-400: below float64's smallest positive value "
         r"\(5e-324\), so it would be read as 0; write 0 if zero is meant, or check the exponent$"),
    Case("C-overflows-set", run_set("model.C=1e400"),
         r"error: --set model\.C=1e400: model\.C = 1e400: above float64's largest value \(1\.8e308\), so it would "
         r"be read as infinity; write inf if infinity is meant, or check the exponent$"),
    Case("sigma-overflows-in-file", run_file(features__sigma="-2e999"),
         r"error: \S+p\.toml, line 16: features\.sigma = -2e999: its magnitude is above float64's largest value "
         r"\(1\.8e308\), so it would be read as -infinity; write -inf if minus infinity is meant"),
    # a check against the store, after loading: the --set flag as typed, or the file and line
    Case("center-outside-the-store-set", run_set("descriptor.center=[99]"),
         r"error: --set descriptor\.center=\[99\]: descriptor\.center = \[99\]: centre joint 99 outside 0\.\.19 "
         r"\(the store has 20 joints\)$"),
    Case("center-outside-the-store-in-file", run_text(lambda t: t.replace("normalize = true\n",
                                                                         "normalize = true\ncenter = [99]\n")),
         r"error: \S+p\.toml, line 12: descriptor\.center = \[99\]: centre joint 99 outside 0\.\.19 \(the store "
         r"has 20 joints\)$"),
    # a message about the data that suspects settings: where the user gave those it names
    Case("rows-alike-names-where-the-suspects-were-given", run_set("descriptor.gamma=1e300"),
         r"error: the \d+ training rows' features are all equal to within rounding \(relative spread [\d.e+-]+\): nothing "
         r"can be learned from them; a setting swamps the data, e\.g\. descriptor\.gamma far above the "
         r"covariances, or a bandwidth \(features\.sigma\) far from the distances \(given: --set "
         r"descriptor\.gamma=1e300; features\.sigma at \S+p\.toml, line 16\)$"),
    Case("synthetic-frames-reversed", run_text(lambda t: t.replace(
        '[data]\nstore = ', '[data.synthetic]\nframes = [60, 30]\n\n[datax]\nstore = ').replace("[datax]\n", "#")),
         LINE + r"data\.synthetic\.frames = \[60, 30\]: expected \[shortest, longest\] sequence length"),
    Case("folds-empty", run_set("split.folds=[]"),
         r"--set split\.folds=\[\]: split\.folds = \[\]: expected a non-empty list$"),
    Case("folds-repeated", run_set('split.kind="stratified-kfold"', "split.n_splits=3", "split.folds=[0, 0]"),
         r"error: --set split\.folds=\[0, 0\]: split\.folds = \[0, 0\] names a fold twice"),
    # a [split] key that the kind does not read: where that key was written
    Case("split-key-of-another-kind", run_set("split.train_subjects=[1]"),
         r"error: --set split\.train_subjects=\[1\]: split\.train_subjects is not used by split\.kind = "
         r'"subject-parity" \(kinds that use it: subjects\)$', check=lambda e, err, out: only_the_error_line(err)),
    Case("split-key-of-another-kind-in-file", run_text(lambda t: t.replace('kind = "subject-parity"\n',
                                                                          'kind = "subject-parity"\nn_splits = 5\n')),
         r'error: \S+p\.toml, line 27: split\.n_splits is not used by split\.kind = "subject-parity" \(kinds that '
         r"use it: stratified-kfold, group-kfold\)$"),
    Case("split-seed-of-a-fixed-kind", run_set("split.seed=3"),
         r'error: --set split\.seed=3: split\.seed is not used by split\.kind = "subject-parity" \(kinds that use '
         r"it: stratified-kfold, per-class\)$"),
    # a choice switched by --set drops the file's keys it does not read (test_pipeline); one that --set gives stays
    Case("split-kind-set-with-an-unread-set-key", run_text(lambda t: t, '--set', 'split.kind="stratified-kfold"',
                                                           '--set', 'split.n_train=4'),
         r'error: --set split\.n_train=4: split\.n_train is not used by split\.kind = "stratified-kfold"'),
    Case("split-subjects-in-both", run_set('split.kind="subjects"', "split.train_subjects=[1, 3]",
                                           "split.test_subjects=[1, 2, 3, 4]"),
         r"error: --set split\.test_subjects=\[1, 2, 3, 4\]: subjects \[1, 3\] are in both split\.train_subjects "
         r"and split\.test_subjects"),
    Case("name-empty", run_file(name='""'), LINE + r'name = "": expected'),
    Case("name-dot-dot", run_file(name='".."'), LINE + r'name = "\.\.": expected a name, not "\." or "\.\."'),
    Case("output-placeholder-misspelt", run_file(output='"runs/{nme}"'),
         LINE + r'output = "runs/\{nme\}": expected a folder whose only placeholder is \{name\}'),
    Case("output-flag-empty", lambda e: ["run", e.pipeline(), "--output", ""], r"--output: empty path"),
    # "" was read as no source: the reader's format dropped with a note, then "unknown skeleton format None"
    Case("data-source-empty", lambda e: ["run", e.pipeline(), "--set", 'data.source=""', "--set",
                                         'data.format="generic"'],
         r'--set data\.source="": data\.source = "": expected a path, not an empty text \(leave the key out'),
    Case("output-under-a-file", lambda e: ["run", e.pipeline(), "--output",
                                           (e.tmp / "f").write_text("x") and e.tmp / "f" / "o", "--quiet"],
         r"--output \S+/f/o: cannot create the folder"),
    Case("workers-with-synchronous", lambda e: ["run", e.pipeline(), "--scheduler", "synchronous", "--workers", "3"],
         r"--workers 3 --scheduler synchronous: --workers sets the threads of --scheduler threads"),
    Case("ddof-large", run_set("descriptor.ddof=100"), r"--set descriptor\.ddof=100: descriptor\.ddof = 100: expected"),
    Case("kernel-sigma-zero", run_set("descriptor.kernel_sigma=0.0"),
         r"--set descriptor\.kernel_sigma=0\.0: descriptor\.kernel_sigma = 0\.0: expected a value >= 1e-20"),
    Case("matrix-typo", run_set('descriptor.matrix="kernel"'), r'descriptor\.matrix = "kernel": expected one of'),
    Case("rbf-with-mean-embedding", run_set('descriptor.matrix="rbf"', "descriptor.mean_weight=0.3"),
         r"error: --set descriptor\.mean_weight=0\.3: descriptor\.matrix = \"rbf\" is a Gram matrix between "
         r"coordinate series, which has no mean embedding \(rbf standardizes the series to mean 0; rbf-raw has "
         r"their means inside its distances\); set descriptor\.mean_weight = 0$"),
    # a bandwidth far from the distances between the series: every descriptor nearly the same (chance accuracy,
    # exit 0, or an error blaming descriptor.gamma and features.sigma)
    Case("rbf-raw-sigma-far-below", run_set('descriptor.matrix="rbf-raw"', "descriptor.mean_weight=0.0",
                                            "descriptor.kernel_sigma=1e-20"),
         r"error: --set descriptor\.kernel_sigma=1e-20: descriptor\.kernel_sigma = 1e-20: the kernelized covariance "
         r"\(matrix = \"rbf-raw\"\) of every window of \d+ sequences \(from .*\) is the identity \(or blocks of "
         r"ones\), to within 1e-06, so the descriptors carry nothing of the motion: sigma is far below the distances "
         r"between the coordinate series \(their median in the first window: [\d.e+-]+\); give a kernel_sigma near "
         r"them$"),
    Case("rbf-sigma-far-above", run_set('descriptor.matrix="rbf"', "descriptor.mean_weight=0.0",
                                        'descriptor.scale="none"', "descriptor.kernel_sigma=1e5"),
         r"descriptor\.kernel_sigma = 100000\.0: the kernelized covariance \(matrix = \"rbf\"\) of every window .* is "
         r"a matrix of ones, to within 1e-06, .* sigma is far above the distances"),
    Case("rbf-raw-with-mean-embedding", run_set('descriptor.matrix="rbf-raw"', "descriptor.mean_weight=1.0"),
         r"error: --set descriptor\.mean_weight=1\.0: descriptor\.matrix = \"rbf-raw\" is a Gram matrix between "
         r"coordinate series, which has no mean embedding .*; set descriptor\.mean_weight = 0$"),
    Case("pairs-joint-out-of-range", run_set("descriptor.pairs=[[1, 99]]"),
         r"descriptor\.pairs = \[\[1, 99\]\]: joint 99 outside 0\.\.\d+ \(the store has \d+ joints\)"),
    Case("pairs-unknown-name", run_set('descriptor.pairs=[["left_hnd", 0]]'),
         r'descriptor\.pairs = \[\["left_hnd", 0\]\]: "left_hnd" is neither a joint name of the store'),
    Case("pairs-not-a-pair", run_set("descriptor.pairs=[[1, 2, 3]]"), r"descriptor\.pairs"),
    Case("gamma-instead-of-sigma", run_set('features.map="rff"', "features.gamma=0.5"),
         r"features\.gamma is set by streamcov from features\.sigma .*remove it; for gamma = 0\.5 set sigma = 1\b"),
    Case("map-parameter-named", run_set('features.map="nystroem"', 'features.kernel_params="x"'),
         r"--set features\.kernel_params=\"x\": features\.kernel_params is not a parameter of GaussianNystroem"
         r"; accepted: bandwidth, fit_sample, n_components, sigma$"),
    # Nystroem's landmarks are rows of the fitting sample: more than it holds is refused, not silently fewer
    Case("nystroem-more-landmarks-than-fit-sample", run_set('features.map="nystroem"', "features.fit_sample=32"),
         r'p\.toml, line 15: features\.n_components = 64 is more than features\.fit_sample = 32, '
         r'the training rows map "nystroem" draws its landmarks from; raise features\.fit_sample to at least 64, '
         r'or lower features\.n_components$'),
    # the kernel's blocks come from the descriptor (it crashed on unpacking "x", naming features.map)
    Case("map-blocks-set", run_set('features.map="nystroem"', 'features.blocks="x"'),
         r"--set features\.blocks=\"x\": features\.blocks: the kernel's column blocks are the windows of the "
         r"descriptor's temporal pyramid, set by streamcov from descriptor\.levels and descriptor\.level_weights; "
         r"remove it$"),
    Case("pipeline-with-bom", lambda e: ["run", (e.tmp / "b.toml").write_bytes(
        b"\xef\xbb\xbf" + SKELETON_PIPELINE.format(out=e.tmp / "o", store=e.shared["synth"]).replace(
            "n_components = 64", 'n_components = "x"').encode()) and e.tmp / "b.toml"],
         r"b\.toml, line 15: features\.n_components = \"x\""),
    Case("store-flag-is-an-array", lambda e: ["run", e.pipeline(), "--store", e.shared["synth"] / "labels"],
         r"labels: an array inside the store \S+synth\.zarr, not a store; give the store's folder"),
    Case("source-differs-from-store", lambda e: ["run", e.pipeline(SKELETON_PIPELINE.format(
        out=e.tmp / "o", store=e.shared["synth"]).replace("[data]\n", f'[data]\nsource = "{write_archive(e.tmp / "B")}"\n'
                                                          f'format = "generic"\n')), "--quiet"],
         r'data\.store: \S+synth\.zarr was written with format = "synthetic", but \[data\] gives "generic"; point '
         r"data\.store at a new path"),
    Case("source-options-differ-from-store", run_from_source(ingested_with('units="mm"')),
         r'data\.store: \S+g\.zarr was written with options = \{units = "mm"\}, but \[data\] gives \{\}; point '),
    Case("store-without-archive-digest", lambda e: ["run", e.pipeline(SKELETON_PIPELINE.format(
        out=e.tmp / "o", store=old_generic_store(e)).replace("[data]\n", f'[data]\nsource = "{e.tmp / "a"}"\n'
                                                           f'format = "generic"\n')), "--quiet"],
         r"data\.store: \S+g\.zarr records no digest of its archive \(written by an earlier streamcov\), so it "
         r"cannot be checked against \S+a; point data\.store at a new path"),
    Case("archive-changed-since-store", run_from_source(touched_archive_store()),
         r"data\.store: \S+g\.zarr was written from \S+a, which has changed since \(files added, removed, or of "
         r"other contents: \d+ files then, \d+ now\); point data\.store at a new path, or delete"),
    # copied, unpacked or checked out again: new times, the same contents; the store is used, not written again
    Case("archive-with-new-times-since-store", lambda e: [  # subject parity would train on one class here
        *run_from_source(touched_archive_store(edit=False))(e), "--set", 'split.kind="subjects"', "--set",
        "split.train_subjects=[1, 2]"],
         r"(?m)^streamcov run: note: data\.store: \S+g\.zarr is used: the files of \S+a have new modification times since it was "
         r"written, but the same contents$", rc=0,
         check=lambda e, err, out: len([ln for ln in err.splitlines() if "note:" in ln]) == 1 or pytest.fail(err)),
    *[Case(f"archive-{how}-file-changed-since-store", run_from_source(linked_archive_store(how)),
           r"data\.store: \S+g\.zarr was written from \S+a, which has changed since")
      for how in ("link", "folder-link", "dotdot", "absolute")],
    # reader settings without data.source are not read (nothing is ingested): a note, then the run on the store
    Case("reader-keys-without-source", run_text(lambda t: t.replace(
        "[data]\n", '[data]\nformat = "generic"\noptions = {units = "m"}\n')),
         r'(?m)^streamcov run: note: data\.format, data\.options \(\S+p\.toml\) are not read without data\.source '
         r'\(the reader of an archive is opened only to ingest data\.source into data\.store\); dropped$', rc=0,
         check=lambda e, err, out: one_note_and_a_result(err, out)),
    Case("image-reader-keys-without-source", run_image(lambda t: t.replace(
        "[data]\n", '[data]\nexclude = ["maps", "tmp"]\ngroup_level = 2\n')),
         r'(?m)^streamcov run: note: data\.group_level, data\.exclude \(\S+p\.toml\) are not read without '
         r'data\.source .*; dropped$', rc=0, check=lambda e, err, out: one_note_and_a_result(err, out)),
    Case("reader-keys-without-source-still-checked", run_text(lambda t: t.replace("[data]\n", '[data]\nformat = "bvhx"\n')),
         LINE + r'data\.format = "bvhx": expected one of', check=lambda e, err, out: only_the_error_line(err)),
    Case("synth-seed-negative", lambda e: ["synth", e.tmp / "s.zarr", "--sequences", "10", "--seed", "-1"],
         r"argument --seed: expected an integer >= 0, got -1"),
    Case("synthetic-noise-beyond-the-body", run_text(lambda t: t.replace("[data]\nstore = ", "[data.synthetic]\n"
                                                                      "n_sequences = 8\nnoise = 1e30\n# ")),
         LINE + r"data\.synthetic\.noise = 1e\+30: expected a value <= 1000\.0$"),
    # 1e8 epochs ran practically forever; at most MAX_EPOCHS, in a file, by --set and in an image method
    Case("model-epochs-beyond-the-limit", run_text(lambda t: t.replace("epochs = 3", "epochs = 100000000")),
         LINE + r"model\.epochs = 100000000: expected a value <= 10000$"),
    Case("model-epochs-beyond-the-limit-set", run_set("model.epochs=100000000"),
         r"--set model\.epochs=100000000: model\.epochs = 100000000: expected a value <= 10000$"),
    Case("method-epochs-beyond-the-limit", lambda e: ["run", e.pipeline(EVAL_PIPELINE.format(
        out=e.tmp / "o", store=e.shared["img_store"]).replace('name = "loghs"', 'name = "approx_loghs"\n'
                                                               'classifier = "sgd"\nepochs = 20000')), "--quiet"],
         LINE + r"method\.epochs = 20000: expected a value <= 10000$"),
    # a store written where a run writes its model (an interrupted run's folder): the resumed run saved its model
    # into the store; a run's file likewise
    *[Case(f"synth-into-a-runs-{name}", (lambda n: lambda e: [
        "synth", (lambda r: (shutil.rmtree(r / n) if (r / n).is_dir() else (r / n).unlink(missing_ok=True))
                  or r / n)(copied_run(e)), "--sequences", "10"])(name),
        rf"^streamcov synth: error: \S+/run/{re.escape(name)}: where the run in \S+/run \(an output folder of "
        rf"streamcov run\) writes {what}; write the store elsewhere$",
        check=(lambda n: lambda e, err, out: not (e.tmp / "run" / n).exists() or pytest.fail(n))(name))
       for name, what in (("model", "its model"), ("result.json", "one of its own files"))],
    Case("synth-too-many-classes", lambda e: ["synth", e.tmp / "s.zarr", "--sequences", "60", "--classes", "50"],
         r"--classes 50: expected a value <= 12"),
    Case("chunk-frames-beyond-memory", lambda e: ["synth", e.tmp / "s.zarr", "--sequences", "10",
                                                   "--chunk-frames", "1000000000000"],
         # the flag as typed first (the message began "a chunk of ... rows")
         r"error: --chunk-frames 1000000000000 \(a chunk of 1000000000000 rows\): needs [\d.]+ TiB of memory.*smaller "
         r"chunk size \(--chunk-frames\)$"),
    # a store no disk holds: refused before the first sequence is made (it wrote until the disk was full)
    Case("synth-beyond-the-disk", lambda e: ["synth", e.tmp / "new" / "s.zarr", "--sequences", "10" * 8, "--quiet"],
         r"error: --sequences 1010101010101010 \(30-60 frames each\): needs about [\d.]+ PiB of disk, \S+ has "
         r"[\d.]+ \w+ free; ask for fewer sequences, or write the store elsewhere$",
         check=nothing_left_in(lambda e: e.tmp, set())),
    Case("synthetic-beyond-the-disk", lambda e: ["run", e.pipeline(store=e.tmp / "new.zarr"), "--quiet", "--set",
                                                 "data.synthetic.n_sequences=9223372036854775807"],
         r"error: --set data\.synthetic\.n_sequences=9223372036854775807: data\.synthetic\.n_sequences = "
         r"9223372036854775807 \(30-60 frames each\): needs about [\d.]+ PiB of disk"),
    # an option of one value given twice with two values: argparse kept the last without a word
    Case("synth-sequences-twice", lambda e: ["synth", e.tmp / "s.zarr", "--sequences", "3", "--sequences", "5"],
         r"^streamcov synth: error: --sequences 3 and --sequences 5: one option given twice; give it once",
         check=lambda e, err, out: not (e.tmp / "s.zarr").exists()),
    Case("ingest-option-nul", lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"),
                                         e.tmp / "s.zarr", "--option", 'units="m\\u0000x"'],
         r'^streamcov ingest: error: --option units="m\\u0000x": holds a NUL character \(\\u0000\), which no name or '
         r"option may contain; remove it$", check=lambda e, err, out: not (e.tmp / "s.zarr").exists()),
    Case("ingest-option-twice", lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"),
                                           e.tmp / "s.zarr", "--option", "center=[0]", "--option", "center=[1]"],
         r"^streamcov ingest: error: --option center=\[0\] and --option center=\[1\]: one reader option given twice; "
         r"give it once$"),
    Case("synth-out-empty", lambda e: ["synth", "", "--sequences", "10"], r"argument out: empty path"),
    Case("synth-under-a-file", lambda e: ["synth", (e.tmp / "f.txt").write_text("x") and e.tmp / "f.txt" / "x.zarr",
                                          "--sequences", "10", "--quiet"],
         r"store \S+f\.txt/x\.zarr: cannot create the folder \S+f\.txt \(\S+f\.txt is a file, not a folder\); "
         r"choose another path$"),
    # a folder named by "." or "..", and a link, as OUT: the lock is named from the path (a second name of one
    # store took a second lock: two writers mixed their chunks) and the finished store cannot replace a link (a
    # traceback that left the whole store in a hidden folder)
    Case("synth-out-dot-dot", lambda e: ["synth", e.tmp / "x" / "..", "--sequences", "10", "--quiet"],
         r"^streamcov synth: error: \S+/x/\.\.: names a folder by '\S+/x/\.\.', not a store; give the store a name "
         r"of its own, e.g. \S+/x/\.\./x\.zarr$", check=lambda e, err, out: os.listdir(e.tmp) == []),
    Case("synth-out-dangling-link", lambda e: ["synth", _link(e.tmp / "d.zarr", "nowhere.zarr"), "--sequences", "10",
                                               "--quiet"],
         r"^streamcov synth: error: \S+/d\.zarr: a symbolic link \(to nowhere\.zarr\); give the store's own path, "
         r"\S+/nowhere\.zarr$", check=lambda e, err, out: os.listdir(e.tmp) == ["d.zarr"]),
    Case("synth-out-link-loop", lambda e: ["synth", _link(e.tmp / "loop.zarr", "loop.zarr"), "--sequences", "10",
                                           "--quiet"],
         r"^streamcov synth: error: \S+/loop\.zarr: a symbolic link \(to loop\.zarr\); give the store's own path \(it "
         r"leads to no folder: a loop of links\)$"),
    Case("ingest-out-link-to-a-store", lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"),
                                                  _link(e.tmp / "l.zarr", e.copy("synth")), "--quiet"],
         r"^streamcov ingest: error: \S+/l\.zarr: a symbolic link \(to \S+synth\.zarr\); give the store's own path"),
    Case("synth-inside-a-store", lambda e: ["synth", e.copy("synth") / "inner.zarr", "--sequences", "10", "--quiet"],
         r"inner\.zarr: inside the zarr store \S+synth\.zarr; choose an output path outside every store$"),
    # a store written inside the archive it is read from: its own files would join the archive, so every later
    # run found the archive changed ("delete the store to write it again": there again), or, of images, took the
    # store for a class folder without images
    # a data store where the run writes its model, checkpoints or features: the model was written into the store,
    # or the store overwritten by the feature store (then a traceback)
    Case("data-store-is-the-runs-model", lambda e: ["run", e.pipeline(), "--quiet", "--output", e.tmp / "o", "--set",
                                                    f'data.store="{e.copy("synth", run_folder(e.tmp / "o") / "model")}"'],
         r'^streamcov run: error: --set data\.store="\S+/o/model": data\.store = "\S+/o/model" is where the run writes '
         r"its model \(--output \S+/o\): store the data elsewhere, or choose another output folder$"),
    Case("data-store-is-the-runs-features", lambda e: ["run", e.pipeline(store=e.copy(
        "synth", run_folder(e.tmp / "out") / "features.zarr")), "--quiet"],
         r'p\.toml, line \d+: data\.store = "\S+/out/features\.zarr" is where the run writes its features '
         r'\(output = "\S+/out"\)'),
    # another task's output folder: its results would lie beside that run's model and predictions
    Case("output-of-another-task", lambda e: ["run", e.pipeline(), "--quiet", "--output",
                                              run_folder(e.tmp / "o", task="kernel-approx-study")],
         r"^streamcov run: error: --output \S+/o: \S+/o holds the outputs of a run of task 'kernel-approx-study'; this "
         r"one \('skeleton-classification'\) would leave its results beside that run's: choose another output folder$"),
    # a marker left empty by a full disk named no task: the next run of another task wrote beside that one
    Case("output-with-an-empty-marker",
         lambda e: ["run", e.pipeline(), "--quiet", "--output", _empty_marker(e.tmp / "o")],
         r"^streamcov run: error: --output \S+/o: \S+/o/\.streamcov-output is empty or damaged \(written while the "
         r"disk was full\?\), so which task's outputs the folder holds is unknown; delete that file if they are this "
         r"task's \('skeleton-classification'\), or choose another output folder$"),
    Case("data-store-inside-the-runs-checkpoints", lambda e: ["run", e.pipeline(), "--quiet", "--output", e.tmp / "o",
                                                              "--store", e.copy("synth", run_folder(e.tmp / "o") /
                                                                                "checkpoints" / "s.zarr")],
         r'^streamcov run: error: --store \S+: data\.store = "\S+/o/checkpoints/s\.zarr" lies inside \S+/o/checkpoints, '
         r"where the run writes its checkpoints"),
    Case("ingest-into-its-own-archive", lambda e: ["ingest", "skeleton", "--format", "generic",
                                                   write_archive(e.tmp / "a"), e.tmp / "a" / "st" / "s.zarr", "--quiet"],
         r"error: \S+/a/st/s\.zarr: inside the folder \S+/a that it is written from; its files would become part "
         r"of that archive, which would then look changed to every later run: choose an output path outside \S+/a$",
         check=nothing_left_in(lambda e: e.tmp / "a", {f"s{i:02d}.csv" for i in range(8)} | {"index.csv"})),
    # an image store in its own image folder is no class folder (the scan skips zarr stores): reused by a run
    Case("image-store-inside-its-folder", lambda e: ["run", image_store_inside_its_folder(e), "--quiet"], r'"accuracy"',
         rc=0, check=lambda e, err, out: (lambda r: r[0] == 0 or pytest.fail(r[1]))(
             cli("run", e.tmp / "p.toml", "--quiet", "--output", e.tmp / "o2"))),
    # ... nor is a new folder made for it there (src/new/x.zarr): it was taken for a class without images,
    # which refused every later ingestion of the folder and the resume it advised
    Case("image-store-in-a-new-folder-of-its-folder", lambda e: (
        lambda folder: cli("ingest", "images", "--format", "folders", folder, folder / "new" / "x.zarr", "--quiet")[0]
        == 0 and ["ingest", "images", "--format", "folders", folder, e.tmp / "other.zarr", "--quiet"])(
            e.copy("images")), r'"images": \d+', rc=0),
    Case("run-ingests-into-its-own-archive", lambda e: ["run", e.pipeline(SKELETON_PIPELINE.format(
        out=e.tmp / "o", store=e.tmp / "a" / "g.zarr").replace(
            "[data]\n", f'[data]\nsource = "{write_archive(e.tmp / "a")}"\nformat = "generic"\n')), "--quiet"],
         r"error: \S+/a/g\.zarr: inside the folder \S+/a that it is written from"),
    Case("store-inside-its-archive", run_from_source(store_moved_into_archive),
         r"data\.store: \S+/a/g\.zarr lies inside \S+/a, the folder it was written from, so its own files make "
         r"that archive look changed; point data\.store at a path outside \S+/a \(the store is written there again\)$"),
    # data.source naming a store (the ingested store where its archive or image folder goes): read as an archive
    # ("index file not found") or as class folders ("no images in class folders"); pointed to data.store, before
    # anything is written (no output folder, no store)
    Case("skeleton-source-is-a-store", lambda e: ["run", e.pipeline(SKELETON_PIPELINE.format(
        out=e.tmp / "o", store=e.tmp / "new.zarr").replace(
            "[data]\n", f'[data]\nsource = "{e.shared["synth"]}"\nformat = "generic"\n')), "--quiet"],
         r"p\.toml, line 7: data\.source = \"\S+synth\.zarr\": a skeleton store \(written by "
         r"`streamcov ingest skeleton` "
         r"or `synth`\), not an archive to ingest; give it as data\.store = \"\S+synth\.zarr\" and remove "
         r"data\.source$", check=nothing_left_in(lambda e: e.tmp, {"p.toml"})),
    Case("image-source-is-an-image-store", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(
        out=e.tmp / "o", store=e.tmp / "new.zarr").replace("[data]\n", f'[data]\nsource = "{e.shared["img_store"]}"\n')),
        "--quiet"],
         r"p\.toml, line 7: data\.source = \"\S+img\.zarr\": an image store \(written by "
         r"`streamcov ingest images`\), not "
         r"a folder of images \(a folder per class\) to ingest; give it as data\.store = \"\S+img\.zarr\" and remove "
         r"data\.source$", check=nothing_left_in(lambda e: e.tmp, {"p.toml"})),
    Case("image-source-is-its-own-store", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(
        out=e.tmp / "o", store=e.shared["img_store"]).replace("[data]\n", f'[data]\nsource = "{e.shared["img_store"]}"\n')),
        "--quiet"],
         r"data\.source = \"\S+img\.zarr\": an image store .*; remove data\.source \(data\.store names this store "
         r"already\)$"),
    Case("image-source-is-a-skeleton-store", lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(
        out=e.tmp / "o", store=e.tmp / "new.zarr")), "--quiet", "--set", f'data.source="{e.shared["synth"]}"'],
         r"--set data\.source=\"\S+synth\.zarr\": data\.source = \"\S+synth\.zarr\": a skeleton store \(.*\), but task "
         r"'image-stream-classification' reads image stores, and data\.source takes a folder of images"),
    Case("eval-source-is-an-image-store", lambda e: ["run", e.pipeline(EVAL_PIPELINE.format(
        out=e.tmp / "o", store=e.shared["img_store"]).replace('format = "store"', 'format = "folders"').replace(
            "store = ", "source = ")), "--quiet"],
         r"p\.toml, line 8: data\.source = \"\S+img\.zarr\": an image store .*; give it as data\.store = "
         r"\"\S+img\.zarr\" with data\.format = \"store\" and remove data\.source$"),
    Case("info-verify-without-store", lambda e: ["info", "--verify"], r"--verify needs a STORE"),
    # values the schema takes that failed deeper (tracebacks), or gave a model never trained without a word
    Case("pyramid-windows-beyond-features", run_set("descriptor.levels=6", "features.n_components=32"),
         r"error: --set features\.n_components=32: features\.n_components = 32 is fewer than the 63 windows of "
         r"descriptor\.levels = 6, each of which needs its own features; raise features\.n_components, or lower "
         r"descriptor\.levels$"),
    Case("mean-weight-overflows", run_set("descriptor.mean_weight=1e300"),
         r"--set descriptor\.mean_weight=1e300: descriptor\.mean_weight = 1e\+300: expected a value <= 10000"),
    Case("lbfgs-validation-leaves-nothing", run_set('model.learner="lbfgs"', 'model.loss="log_loss"',
                                                    "model.validation_fraction=0.99"),
         r"model\.validation_fraction = 0\.99: leaves 0 of \d+ training rows to fit on; lower it"),
    Case("lbfgs-tol-above-the-gradient", run_set('model.learner="lbfgs"', 'model.loss="log_loss"', "model.tol=1e300"),
         r"accuracy", rc=0, check=lambda e, err, out: re.search(
             r"(?m)^streamcov run: warning: fold 'odd-even': L-BFGS took no step: the largest gradient entry at its "
             r"start, \S+, is already at most model\.tol = 1e\+300; the model is its starting point; lower "
             r"model\.tol$", err) or pytest.fail(err)),
    # gamma far above the covariances: every descriptor the log of nearly gamma I; an accuracy of noise before
    Case("descriptor-swamped-by-gamma", run_set("descriptor.gamma=1e20"),
         r"the \d+ training rows' features are all equal to within rounding \(relative spread \S+\): nothing can "
         r"be learned from them; a setting swamps the data, e\.g\. descriptor\.gamma far above the covariances"),
    # ... whatever the scale: unscaled rows (model.scale = "none", the sgd default) were trained on without a word
    *[Case(f"descriptor-swamped-by-gamma-unscaled-{learner}", run_set(*sets, 'model.scale="none"', "descriptor.gamma=1e20"),
           r"the \d+ training rows' features are all equal to within rounding \(relative spread \S+\): nothing can "
           r"be learned from them; a setting swamps the data, e\.g\. descriptor\.gamma far above the covariances")
      for learner, sets in (("sgd", ()), ("lbfgs", ('model.learner="lbfgs"', 'model.loss="log_loss"')))],
    Case("features-random-state", run_set("features.random_state=5"),
         r"--set features\.random_state=5: features\.random_state: the map's random draws follow the pipeline's "
         r"top-level seed \(one seed for every stage\); set seed = N instead$"),
    # a table given to --set merges into the file's table, as dotted keys would (it replaced it wholesale)
    Case("set-inline-table-merges", run_set('features={n_components=32}'), r"accuracy", rc=0,
         check=lambda e, err, out: json.loads(out.strip().splitlines()[-1])["feature_params"]["theta"] == 0.7
         or pytest.fail(out)),
    Case("set-inline-table-switches-the-map", run_set('features={map="fastfood"}'), r"accuracy", rc=0,
         check=lambda e, err, out: re.search(r"(?m)^streamcov run: note: features\.theta \(\S+p\.toml\) does not "
                                             r"apply to features\.map = \"fastfood\" from --set "
                                             r"features=\{map=\"fastfood\"\}; dropped$", err) or pytest.fail(err)),
    # paths the operating system refuses: one line, not an OSError
    Case("output-name-too-long", lambda e: ["run", e.pipeline(), "--output", e.tmp / ("a" * 300), "--quiet"],
         r"--output \S+a{300}: cannot use \S+ \(File name too long\); choose another output folder$"),
    Case("synth-name-too-long", lambda e: ["synth", e.tmp / ("a" * 300 + ".zarr"), "--sequences", "10", "--quiet"],
         r"store \S+\.zarr: cannot write there \(File name too long\); choose another path$"),
    Case("store-flag-empty", lambda e: ["run", e.pipeline(), "--store", ""],
         r"--store: empty path; give the folder of a store"),
    Case("store-flag-a-file", lambda e: ["run", e.pipeline(), "--store", e.pipeline()],
         r"--store \S+p\.toml: a file, not a store \(a store is a folder"),
    # refused by argparse as every empty path flag is (it was the schema's message)
    Case("study-out-empty", lambda e: ["study", "kernel-approx", "--out", ""],
         r"^streamcov study kernel-approx: error: argument --out: empty path; give the path to write to"),
    Case("study-merge-run-empty", lambda e: ["study", "merge", "", "--out", e.tmp / "m"],
         r"^streamcov study merge: error: argument runs: empty path; give the path to read"),
    # an empty list is an error, not the default (hours of the full study); a repeated entry too
    Case("study-datasets-empty", lambda e: ["study", "kernel-approx", "--datasets", "", "--out", e.tmp / "k"],
         r'--datasets : study\.datasets\.0 = "": expected one of "msr", "florence"'),
    Case("study-nus-empty", lambda e: ["study", "kernel-approx", "--nus", "", "--out", e.tmp / "k"],
         r"--nus : expected a comma list of integers"),
    Case("study-datasets-repeated", lambda e: ["study", "kernel-approx", "--datasets", "msr,msr", "--out", e.tmp / "k"],
         r'--datasets msr,msr: study\.datasets = \["msr", "msr"\]: expected each entry once; "msr" is listed '
         r'twice$'),
    Case("study-merge-garbage", lambda e: ["study", "merge", (e.tmp / "r").mkdir() or (e.tmp / "r" / "results.csv")
                                           .write_text("dataset,map,nu\nmsr,rgw,many\n") and e.tmp / "r",
                                           "--out", e.tmp / "m"],
         r"results\.csv: not a results\.csv of `streamcov study kernel-approx`"),
    # method.inner_folds above a class's training images (stratified folds): lowered, and said once
    Case("eval-inner-folds-lowered", run_image(lambda t: t.replace("inner_folds = 2\n", "inner_folds = 5\n"),
                                               pipeline=EVAL_PIPELINE),
         r"(?m)^streamcov run: warning: method\.inner_folds = 5, but the smallest class of a fold's training images "
         r"has 3 \(class '\w+', fold '\S+'; the inner folds are stratified\): 3 inner folds used; set "
         r"method\.inner_folds = 3 to say so$", rc=0,
         check=lambda e, err, out: (err.count("warning: method.inner_folds") == 1 and "accuracy" in out)
         or pytest.fail(err)),
    Case("eval-inner-folds-within", run_image(pipeline=EVAL_PIPELINE), r'"accuracy"', rc=0,
         check=lambda e, err, out: "inner_folds" not in err or pytest.fail(err)),
    # a [method] key that the chosen method (and classifier) does not read: where it was written, what reads it
    Case("eval-method-key-unread", run_image(lambda t: t.replace("inner_folds = 2\n", "inner_folds = 2\nepochs = 30\n"),
                                             pipeline=EVAL_PIPELINE),
         r'error: \S+p\.toml, line 18: method\.epochs = 30 is not read by method\.name = "loghs" with classifier '
         r'"svc" \(its default\): remove it, or set method\.name = "approx_loghs" or "qapprox_loghs" with '
         r'method\.classifier = "sgd" \(loghs with svc reads sigma1, gamma, mu, sigma2, C, inner_folds, '
         r'max_pixels_exact, standardize, scaling, head_weight, head_combine, head_norm\)$',
         check=lambda e, err, out: only_the_error_line(err)),
    # the in-memory operators: each image's 2D x 2D operator and its log as well as its vector are counted
    Case("eval-D-beyond-memory", run_image(lambda t: t.replace('name = "loghs"\nmax_pixels_exact = 16\n',
                                                               'name = "approx_loghs"\nD = 100000\n'),
                                           pipeline=EVAL_PIPELINE),
         r"method\.D = 100000 on \d+ images: needs [\d.]+ TiB of memory, this process may use [\d.]+ GiB; lower "
         r"method\.D, or use the out-of-core task image-stream-classification$"),
    Case("eval-method-key-unread-set", run_image(lambda t: t, "method.D=100", pipeline=EVAL_PIPELINE),
         r'error: --set method\.D=100: method\.D = 100 is not read by method\.name = "loghs" with classifier "svc" '
         r'\(its default\): remove it, or set method\.name = "approx_hs", "approx_loghs" or "qapprox_loghs" '
         r'\(loghs with svc reads '),
    Case("eval-classifier-set-with-an-unread-set-key", run_image(lambda t: t, 'method.classifier="1nn"',
                                                                 "method.inner_folds=3", pipeline=EVAL_PIPELINE),
         r'error: --set method\.inner_folds=3: method\.inner_folds = 3 is not read by method\.name = "loghs" with '
         r'classifier "1nn": remove it, or set method\.classifier = "svc" \(loghs with 1nn reads sigma1, gamma, mu, '
         r'max_pixels_exact, standardize, scaling\)$'),
    Case("eval-stein-reads-no-svm-key", run_image(lambda t: t.replace('name = "loghs"\nmax_pixels_exact = 16\n'
                                                                      'sigma1 = [1.0]\n', 'name = "stein"\n'),
                                                  pipeline=EVAL_PIPELINE),
         r'error: \S+p\.toml, line 15: method\.inner_folds = 2 is not read by method\.name = "stein" with classifier '
         r'"1nn" \(its default\): remove it, or set method\.classifier = "svc"'),
    Case("eval-head-without-head-weight", run_image(lambda t: t, 'method.head_norm="power"', pipeline=EVAL_PIPELINE),
         r'error: --set method\.head_norm="power": method\.head_norm normalises the ConvNet\'s pooled head: it needs '
         r'method\.name = "head" or method\.head_weight'),
    Case("eval-sgd-needs-approx", run_image(lambda t: t, 'method.classifier="sgd"', pipeline=EVAL_PIPELINE),
         r"error: --set method\.classifier=\"sgd\": method\.classifier = 'sgd' \(the scalable path\) needs "
         r"method\.name approx_loghs or qapprox_loghs, got 'loghs'"),
    Case("stream-method-key-unread", run_image(lambda t: t.replace("D = 8\n", 'name = "head"\nD = 8\n')),
         r'error: \S+p\.toml, line 14: method\.D = 8 is not read by method\.name = "head": remove it, or set '
         r'method\.name = "approx_loghs" or "qapprox_loghs" \(method "head" reads head_norm\) \(also not read: '
         r'method\.sigma1, method\.n_components, method\.scaling, method\.fit_sample\)$'),
    Case("stream-method-key-unread-set", run_image(lambda t: t.replace("D = 8\n", 'name = "head"\n').replace(
        'sigma1 = 1.0\nn_components = 32\nscaling = "per-feature"\nfit_sample = 6\n', ""), "method.sigma2=2.0"),
         r'error: --set method\.sigma2=2\.0: method\.sigma2 = 2\.0 is not read by method\.name = "head"'),
    # a [pixels] key that the chosen features do not read, or of the other source
    Case("pixels-gabor-without-gabor", run_image(lambda t: t.replace('preset = "texture"\n',
                                                                     'preset = "texture"\ngabor_scales = 3\n')),
         r'error: \S+p\.toml, line 11: pixels\.gabor_scales = 3 is not read: the features \(preset "texture": x, y, '
         r'I, Ix, Iy\) hold no Gabor magnitudes; remove it, or add "gabor" to pixels\.features$'),
    Case("pixels-gabor-without-gabor-set", run_image(lambda t: t, 'pixels.features=["I", "Ix"]', "pixels.gabor_fmax=0.2"),
         r'error: --set pixels\.gabor_fmax=0\.2: pixels\.gabor_fmax = 0\.2 is not read: the features '
         r'\(pixels\.features: I, Ix\) hold no Gabor magnitudes'),
    # an unknown feature name, named where it was written (it failed as "[pixels]: ..." when images were read)
    Case("pixels-unknown-feature-set", run_image(lambda t: t, 'pixels.features=["I", "|Iz|"]'),
         r'^streamcov run: error: --set pixels\.features=\["I", "\|Iz\|"\]: pixels\.features = \["I", "\|Iz\|"\]: '
         r'expected names among x, y, I, R, G, B, <C><d> with C in I/R/G/B and d in x/y/xx/yy \(e\.g\. Ix, Ryy\) '
         r'and gabor; "\|Iz\|" is not one$'),
    Case("pixels-unknown-feature-file", run_image(lambda t: t.replace('preset = "texture"\n',
                                                                      'features = ["x", "Igrad"]\n')),
         r'^streamcov run: error: \S+p\.toml, line \d+: pixels\.features = \["x", "Igrad"\]: expected names among .* '
         r'"Igrad" is not one$'),
    Case("pixels-convnet-key-handcrafted", run_image(lambda t: t, "pixels.grid=4"),
         r'error: --set pixels\.grid=4: pixels\.grid belongs to ConvNet features: add source = "cnn"$'),
    # a [descriptor] option that another option turns off
    Case("descriptor-kernel-sigma-without-rbf", run_set("descriptor.kernel_sigma=2.0"),
         r'error: --set descriptor\.kernel_sigma=2\.0: descriptor\.kernel_sigma = 2\.0 is not read: only '
         r'descriptor\.matrix = "rbf" or "rbf-raw" reads it; remove it, or set descriptor\.matrix = "rbf" or '
         r'"rbf-raw"$'),
    Case("descriptor-up-axis-without-yaw", run_text(lambda t: t.replace("normalize = true\n",
                                                                       'normalize = true\nup_axis = "z"\n')),
         r'error: \S+p\.toml, line 12: descriptor\.up_axis = "z" is not read: only descriptor\.body_frame = "yaw" '
         r'or descriptor\.mirror reads it; remove it, or set descriptor\.body_frame = "yaw" or descriptor\.mirror = true$'),
    Case("descriptor-up-axis-with-torso", run_set('descriptor.body_frame="torso"', 'descriptor.up_axis="z"'),
         r'error: --set descriptor\.up_axis="z": descriptor\.up_axis = "z" is not read: only '
         r'descriptor\.body_frame = "yaw" or descriptor\.mirror reads it; remove it, or set descriptor\.body_frame = '
         r'"yaw" or descriptor\.mirror = true$'),
    # the kernelized covariance standardizes every series: the covariance's denominator and the body size
    # cancel (tests/test_descriptor_kcov.py); their defaults stay allowed
    Case("descriptor-ddof-with-rbf", run_set('descriptor.matrix="rbf"', "descriptor.ddof=0"),
         r'error: --set descriptor\.ddof=0: descriptor\.ddof = 0 is not read: only descriptor\.matrix = "covariance" '
         r'or "rbf-raw" \(the kernelized covariance of matrix = "rbf" standardizes each coordinate series, which '
         r'cancels it\) reads it; remove it, or set descriptor\.ddof = 1 \(the same descriptor\), or '
         r'descriptor\.matrix = "covariance" or "rbf-raw"$'),
    Case("descriptor-body-scale-with-rbf", run_text(lambda t: t.replace("normalize = true\n",
                                                                       'normalize = true\nscale = "body"\n'),
                                                    "--set", 'descriptor.matrix="rbf"'),
         r'error: \S+p\.toml, line 12: descriptor\.scale = "body" is not read: only descriptor\.matrix = '
         r'"covariance" .* remove it, or set descriptor\.scale = "none" \(the same descriptor\), or '
         r'descriptor\.matrix = "covariance" or "rbf-raw"$'),
    # normalized time scales a sequence's derivatives by its length, which the standardized series cancel
    Case("descriptor-normalized-time-with-rbf", run_set('descriptor.features=["positions", "velocities"]',
                                                        'descriptor.time="normalized"', 'descriptor.matrix="rbf"',
                                                        "descriptor.mean_weight=0", 'descriptor.scale="none"'),
         r'error: --set descriptor\.time="normalized": descriptor\.time = "normalized" is not read: only '
         r'descriptor\.matrix = "covariance" or "rbf-raw" .* reads it; remove it, or set descriptor\.time = "frame" '
         r'\(the same descriptor\), or descriptor\.matrix = "covariance" or "rbf-raw"$'),
    # level weights enter the kernel; the linear learner on the descriptors themselves (map "none") ignored them
    Case("descriptor-level-weights-without-a-map", run_set("descriptor.levels=2", "descriptor.level_weights=[2, 1]",
                                                           'features.map="none"'),
         r'error: --set descriptor\.level_weights=\[2, 1\]: descriptor\.level_weights = \[2\.0, 1\.0\] weighs the '
         r'pyramid\'s levels in the kernel, but features\.map = "none" gives the linear learner the descriptors '
         r'themselves, each window with weight 1 \(its own weights choose\); set features\.map'),
    Case("descriptor-window-without-derivatives", run_set("descriptor.window=7"),
         r'error: --set descriptor\.window=7: descriptor\.window = 7 is not read: only descriptor\.features with '
         r'"velocities" or "accelerations" reads it; remove it, or add "velocities" or "accelerations" to '
         r'descriptor\.features$'),
    Case("descriptor-even-window", run_set('descriptor.features=["positions", "velocities"]', "descriptor.window=4"),
         r"error: --set descriptor\.window=4: descriptor\.window must be odd \(a centred window\), got 4$"),
    Case("image-pipeline-on-skeleton-store",
         lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(out=e.tmp / "o", store=e.shared["synth"])), "--quiet"],
         r"p\.toml, line \d+: data\.store = \S+synth\.zarr\W: a skeleton store, but task "
         r"'image-stream-classification' reads image stores$"),
]


@pytest.mark.parametrize("case", CONFIG, ids=lambda c: c.id)
def test_pipeline_files_and_set(case, env):
    run_case(case, env)


# ------------------------------------------------------------------ readers and ingest
def ingest_generic(*options, archive=None, **archive_kw):
    """``ingest skeleton --format generic`` of an archive built by ``archive(env)`` or write_archive."""
    def argv(e):
        src = archive(e) if archive else write_archive(e.tmp / "arch", **archive_kw)
        return ["ingest", "skeleton", "--format", "generic", src, e.tmp / "s.zarr", "--quiet",
                *[a for o in options for a in ("--option", o)]]
    return argv


def edit_file(name: str, text: str):
    def archive(e):
        folder = write_archive(e.tmp / "arch")
        (folder / name).write_text(text)
        return folder
    return archive


def raw_index(data: bytes, folder: str | None = None):
    """An archive whose index.csv holds ``data`` as is (and, optionally, a folder ``folder``)."""
    def archive(e):
        f = write_archive(e.tmp / "arch")
        (f / "index.csv").write_bytes(data)
        if folder:
            (f / folder).mkdir()
        return f
    return archive


def index(*rows):
    return ingest_generic(archive=lambda e: write_archive(e.tmp / "arch", index_rows=list(rows)))


def no_store(e, err, out):
    """Refused before anything was written: no store, or none presented as complete."""
    path = e.tmp / "s.zarr"
    if path.exists():
        rc, _, info = cli("info", path, "--json")
        assert rc != 0 and '"complete": false' in info.replace(" ", "").replace('"complete":false', '"complete": false')


def recorded(n_skipped: int, reason: str):
    def check(e, err, out):
        import zarr
        attrs = dict(zarr.open_group(e.tmp / "s.zarr", mode="r").attrs)
        assert attrs["complete"] and len(attrs["skipped"]) == n_skipped, attrs.get("skipped")
        assert all(re.search(reason, s["reason"]) for s in attrs["skipped"]), attrs["skipped"]
        assert f"streamcov ingest: warning: {n_skipped} sequence(s) skipped (s03: " in err, err
    return check


def msr_archive(*ids, cvpr12: str | None = None, rows: str | None = None):
    """An MSR-Action3D folder of files ``<id>_skeleton3D.txt`` holding ``rows`` (default: 2 frames), and the cvpr12
    subset's list ``cvpr12``."""
    def archive(e):
        folder = e.tmp / "msr"
        (folder / "extras").mkdir(parents=True)
        text = rows or "".join(f"{0.1 * j:.3f} {0.2 * (j % 7):.3f} 2.5 1\n" for j in range(40))
        for i in ids:
            (folder / f"{i}_skeleton3D.txt").write_text(text)
        if cvpr12 is not None:
            (folder / "extras" / "files_used_in_cvpr12_paper.txt").write_text(cvpr12)
        return folder
    return archive


def utk_archive(labels: str, recording: str = "s01_e01"):
    """A UTKinect folder: ``actionLabel.txt`` holding ``labels``, one joints file of frames 10..19 for ``recording``."""
    def archive(e):
        folder = e.tmp / "utk"
        folder.mkdir()
        rng = np.random.default_rng(0)
        (folder / f"joints_{recording}.txt").write_text("".join(
            f"{f} " + " ".join(f"{v:.4f}" for v in rng.uniform(-1, 3, 60)) + "\n" for f in range(10, 20)))
        (folder / "actionLabel.txt").write_text(labels)
        return folder
    return archive


def ingest_of(fmt: str, archive, *options):
    return lambda e: ["ingest", "skeleton", "--format", fmt, archive(e), e.tmp / "s.zarr", "--quiet",
                      *[a for o in options for a in ("--option", o)]]


IDX = r"index\.csv, line \d+: "
ROW = "s00.csv,a,1"
MSR_3_VALUES = r"a01_s01_e01_skeleton3D\.txt, line 1: expected 4 values per line \(x y z confidence\), found 3"
# a file of an archive that cannot be read says how to leave it out (errors.skip_hint)
SKIP_HINT = r"; or leave out the files that cannot be read: --on-error skip \(listed as skipped; what is stored is kept\)$"
RUN_SKIP_HINT = SKIP_HINT.replace("--on-error skip", 'data\\.on_error = "skip"')
# digits of other scripts that int() and \d read as ASCII ones ('１２' as 12): one subject could be two, or a
# look-alike file one more sample of another's
DIGITS = r"; type the digits as ASCII 0-9$"
READERS = [
    Case("index-missing", lambda e: ["ingest", "skeleton", "--format", "generic", e.tmp, e.tmp / "s.zarr"],
         r"index\.csv.*not found", check=no_store),
    Case("archive-a-file", lambda e: ["ingest", "skeleton", "--format", "generic", e.pipeline(), e.tmp / "s.zarr"],
         r"p\.toml: a file, not the archive's folder; a generic skeleton folder needs an index\.csv",
         check=no_store),
    # a listed file that exists but holds no frames to read (a link to /dev/zero): it was "not found"
    Case("index-file-is-a-device", ingest_generic(archive=lambda e: (
        lambda d: ((d / "s08.csv").symlink_to("/dev/zero"),
                   (d / "index.csv").write_text((d / "index.csv").read_text() + "s08.csv,a,1\n")) and d)(
        write_archive(e.tmp / "arch"))),
         r"index\.csv, line 10: sequence file 's08\.csv' is not a regular file \(a device, a pipe or a socket\); give "
         r"a file of the sequence's frames$", check=no_store),
    Case("index-is-a-device", ingest_generic(archive=lambda e: (
        lambda d: ((d / "index.csv").unlink(), (d / "index.csv").symlink_to("/dev/zero")) and d)(
        write_archive(e.tmp / "arch"))),
         r"index\.csv: not a regular file \(a folder, a device or a pipe\); a generic skeleton folder needs an "
         r"index\.csv", check=no_store),
    Case("index-missing-column", index("file,label", "s00.csv,a"), r"index\.csv, line 1: header lacks required column\(s\) subject"),
    Case("index-duplicated-column", index("file,label,subject,label", "s00.csv,a,1,a"), r"index\.csv, line 1: column 'label' appears twice in the header"),
    Case("index-field-count", index("file,label,subject", ROW, "s01.csv,b"), IDX + r".*2 fields.*3"),
    Case("index-empty-label", index("file,label,subject", "s00.csv,,1"), IDX + r"column 'label' is empty"),
    Case("index-subject-not-integer", index("file,label,subject", "s00.csv,a,S1"), IDX + r"column 'subject' must be an integer below 2\*\*31 \(stored as int32\), got 'S1'"),
    Case("index-subject-float", index("file,label,subject", "s00.csv,a,1.0"), IDX + r"column 'subject' must be an integer below 2\*\*31 \(stored as int32\), got '1\.0'"),
    Case("index-duplicated-id", index("file,label,subject,id", "s00.csv,a,1,x", "s01.csv,b,2,x"), IDX + r"sequence id 'x' is used twice \(first on line 2\)"),
    Case("index-file-not-found", index("file,label,subject", "s00.csv,a,1", "gone.csv,b,2"), IDX + r".*gone\.csv.*not found"),
    Case("index-subject-beyond-int32", index("file,label,subject", "s00.csv,a,99999999999999999999"),
         IDX + r"column 'subject' must be an integer below 2\*\*31 \(stored as int32\), got '99999999999999999999'"),
    *[Case(f"index-subject-{script}-digits", index("file,label,subject", ROW, f"s01.csv,b,{digits}"),
           IDX + rf"column 'subject' must be an integer below 2\*\*31 \(stored as int32\), got '{digits}'" + DIGITS,
           check=no_store) for script, digits in (("full-width", "１２"), ("arabic-indic", "١٢"))],
    Case("index-control-character", index("file,label,subject", "s00.csv,a\x00,1"),
         IDX + r"column 'label' holds a control character \('a\\x00'\); save the file as plain UTF-8 text"),
    Case("index-latin1", ingest_generic(archive=raw_index(b"file,label,subject\ns00.csv,a,1\ns01.csv,caf\xe9,2\n")),
         r"index\.csv, line 3: not a UTF-8/ASCII text file \(invalid continuation byte\); save it as UTF-8"),
    Case("index-row-is-a-folder", ingest_generic(archive=raw_index(b"file,label,subject\ns00.csv,a,1\nsub,b,2\n", folder="sub")),
         IDX + r"column 'file' names the folder 'sub'; give the path of one sequence file"),
    Case("index-no-rows", index("file,label,subject"), r"index\.csv.*no (rows|sequences)"),
    Case("sequence-ragged-row", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n1,2,3\n")),
         r"s03\.csv, line 2: expected 9 values per line \(3 joints x \(x, y, z\), comma separated, as in the first 5 "
         r"files read\), found 3"),
    Case("sequence-text-value", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n1,2,x,4,5,6,7,8,9\n")),
         r"s03\.csv, line 2: .*'x'"),
    Case("sequence-nan", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n1,2,nan,4,5,6,7,8,9\n")),
         r"s03\.csv, line 2: .*(non-finite|nan)"),
    Case("sequence-inf", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n1,2,inf,4,5,6,7,8,9\n")),
         r"s03\.csv, line 2: .*(non-finite|inf)"),
    Case("sequence-float32-overflow", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n1,2,1e39,4,5,6,7,8,9\n")),
         r"s03\.csv, line 2: .*float32"),
    Case("sequence-mixed-header", ingest_generic(archive=edit_file("s03.csv", "hip_x,2,3,4,5,6,7,8,9\n1,2,3,4,5,6,7,8,9\n")),
         r"s03\.csv, line 1: .*mixes numbers and text"),
    # two classes to the code, most often a typo to the user: said with the lines, not refused (as class folders)
    Case("index-labels-differ-only-in-case", index("file,label,subject", "s00.csv,a,1", "s01.csv,A,2", "s02.csv,a,3",
                                                   "s03.csv,A,4", "s04.csv,b,1", "s05.csv,b,2"),
         r"(?m)^streamcov ingest: warning: \S+arch/index\.csv: labels that differ only in case are different classes "
         r"here: 'A' \(line 3\) and 'a' \(line 2\); write them alike if they mean one class$", rc=0,
         check=lambda e, err, out: json.loads(out.strip().splitlines()[-1])["labels"] == 3 or pytest.fail(out)),
    Case("sequence-not-multiple-of-3", lambda e: ingest_generic()(e) if False else
         ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "arch", files={
             f"s{i:02d}.csv": "1,2,3,4\n5,6,7,8\n" for i in range(8)}), e.tmp / "s.zarr", "--quiet"],
         r"s00\.csv, line 1: 4 values per row is not a multiple of 3 \(x, y, z per joint\)$"),
    # one file of another width than most: that file's damage (skippable), named against the majority
    Case("sequence-first-file-of-another-width", ingest_generic(archive=edit_file("s00.csv", "1,2,3,4\n5,6,7,8\n")),
         r"s00\.csv, line 1: expected 9 values per line \(3 joints x \(x, y, z\), comma separated, as in 4 of the first "
         r"5 files read \(e\.g\. s01\.csv\)\), found 4; or leave out the files that cannot be read: --on-error skip"),
    # an archive refused as it is read leaves nothing: no store, no lock, no parent folder made for them (the first
    # sequence is read before the lock; the lock's folders go again when nothing was stored there)
    Case("msr-first-file-unreadable-out-in-new-folder", lambda e: [
        "ingest", "skeleton", "--format", "msr-action3d", msr_archive("a01_s01_e01", rows="1 2 3\n")(e),
        e.tmp / "new" / "deeper" / "s.zarr", "--quiet"], MSR_3_VALUES + SKIP_HINT,
         check=nothing_left_in(lambda e: e.tmp, {"msr"})),
    Case("every-sequence-skipped-out-in-new-folder", lambda e: [
        "ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "arch", frames=1),
        e.tmp / "new" / "s.zarr", "--quiet"], r"s\.zarr: every sequence was skipped, none written \(8 skipped",
         check=nothing_left_in(lambda e: e.tmp, {"arch"})),
    # ... from `run`'s [data] source too: neither the store's folder nor the output folder is left
    Case("run-source-first-file-unreadable", source_run(SKELETON_PIPELINE, msr_archive("a01_s01_e01", rows="1 2 3\n"),
                                                        "msr-action3d"),
         MSR_3_VALUES + RUN_SKIP_HINT, check=nothing_left_in(lambda e: e.tmp, {"msr", "p.toml"})),
    # a trailing comma on every row, on a later row only, and after a header: named as such, not as text or a
    # tenth column
    Case("sequence-trailing-comma", ingest_generic(archive=edit_file("s00.csv", "1,2,3,4,5,6,7,8,9,\n" * 3)),
         r"s00\.csv, line 1: row ends with a comma, which leaves an empty last field; remove the trailing comma from "
         r"every row that has one \(a row is x1,y1,z1,\.\.\.,xJ,yJ,zJ with nothing after zJ\); or leave out the files "
         r"that cannot be read: --on-error skip", check=no_store),
    Case("sequence-trailing-comma-later-row", ingest_generic(archive=edit_file(
        "s03.csv", "1,2,3,4,5,6,7,8,9\n\n1,2,3,4,5,6,7,8,8, \n")),
         r"s03\.csv, line 3: row ends with a comma, which leaves an empty last field; remove the trailing comma"),
    Case("sequence-trailing-comma-after-header", ingest_generic(archive=edit_file(
        "s00.csv", "a,b,c,d,e,f,g,h,i\n" + "1,2,3,4,5,6,7,8,9,\n" * 2)),
         r"s00\.csv, line 2: row ends with a comma, which leaves an empty last field; remove the trailing comma"),
    # a row one value short that ends with a comma lacks a value: not called a trailing comma
    Case("sequence-last-value-missing", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n1,2,3,4,5,6,7,8,\n")),
         r"s03\.csv, line 2: column 9: '' is not a number" + SKIP_HINT),
    Case("sequence-tab-separated", ingest_generic(archive=edit_file("s00.csv", "1\t2\t3\t4\t5\t6\t7\t8\t9\n" * 3)),
         r"s00\.csv, line \d: .* \(the rows look tab-separated: use commas\)"),
    Case("sequence-every-file-tab-separated", lambda e: [
        "ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "arch", files={
            f"s{i:02d}.csv": "1\t2\t3\t4\t5\t6\n" * 3 for i in range(8)}), e.tmp / "s.zarr", "--quiet"],
         r"s00\.csv, line 2: 1 values per row is not a multiple of 3 \(x, y, z per joint\) \(the rows look "
         r"tab-separated: use commas\)$"),
    Case("option-center-bool", ingest_generic("center=[true]"),
         r"--option center=\[true\]: center must be a non-empty list of distinct 0-based joint indices .* got \[True\]"),
    Case("option-joint-names-string", ingest_generic('joint_names="hip"'),
         r'--option joint_names="hip": joint_names must be a list of non-empty strings, one per joint'),
    Case("option-misspelt", ingest_generic("centre=[0]"), r"--option centre=\[0\]: 'centre' is not an option of the generic reader \(did you mean 'center'"),
    Case("option-center-out-of-range", ingest_generic("center=[99]"), r"--option center=\[99\]: center must be .* in \[0, 2\] \(the files hold 3 joints\)"),
    Case("option-center-not-list", ingest_generic('center="hip"'), r'--option center="hip": center must be a non-empty list of distinct 0-based joint indices .* got \'hip\''),
    Case("option-units-empty", ingest_generic('units=""'), r'--option units="": units must be a non-empty string'),
    Case("option-joint-names-count", ingest_generic('joint_names=["a", "b"]'), r'--option joint_names=\["a", "b"\]: joint_names has 2 names but the sequence files hold 3 joints'),
    Case("option-joint-names-repeated", ingest_generic('joint_names=["hip", "neck", "hip"]'),
         r'--option joint_names=\["hip", "neck", "hip"\]: joint_names names \'hip\' twice \(joints 0 and 2\); give '
         r'every joint its own name$'),
    Case("option-no-equals", ingest_generic("center"), r"--option center: .*key=value"),
    Case("option-empty-value", ingest_generic("center="), r"--option center=: empty value"),
    Case("source-missing", lambda e: ["ingest", "skeleton", "--format", "generic", e.tmp / "nowhere", e.tmp / "s.zarr"],
         r"nowhere: no such file or folder \(the generic archive to read\)"),
    Case("msr-on-empty-folder", lambda e: ["ingest", "skeleton", "--format", "msr-action3d", e.tmp, e.tmp / "s.zarr"],
         r"(no|not).*(sequence|skeleton|file).*found|found no"),
    Case("florence-on-empty-folder", lambda e: ["ingest", "skeleton", "--format", "florence3d", e.tmp, e.tmp / "s.zarr"],
         r"floren\w*: no skeletal_data\.mat here or in .*raw; pass the Florence 3D"),
    Case("utkinect-on-empty-folder", lambda e: ["ingest", "skeleton", "--format", "utkinect", e.tmp, e.tmp / "s.zarr"],
         r"actionLabel\.txt: label file not found"),
    *[Case(f"msr-file-name-{what}", ingest_of("msr-action3d", msr_archive("a01_s01_e01", name)),
           rf"{name}_skeleton3D\.txt: named like a skeleton file aAA_sSS_eEE_skeleton3D\.txt, but with characters "
           r"other than ASCII \(.*\); rename it with ASCII letters and digits 0-9$", check=no_store)
      for what, name in (("full-width-digit", "a01_s０1_e02"), ("long-s", "a01_ſ01_e02"))],
    Case("msr-cvpr12-id-full-width-digit", ingest_of("msr-action3d", msr_archive(
        "a01_s01_e01", "a01_s01_e02", cvpr12="a01_s01_e01\na０1_s01_e02\n"), 'subset="cvpr12"'),
         r"files_used_in_cvpr12_paper\.txt, line 2: expected a sequence id like 'a01_s01_e01', found 'a０1_s01_e02'"
         + DIGITS, check=no_store),
    Case("utkinect-bound-full-width-digits", ingest_of("utkinect", utk_archive("s01_e01\nwalk: １２ 16\n")),
         r"actionLabel\.txt, line 2: interval bounds must be two non-negative integer frame ids \(or NaN\), found "
         r"'１２' '16'" + DIGITS, check=no_store),
    Case("utkinect-recording-full-width-digit", ingest_of("utkinect", utk_archive("s０1_e01\nwalk: 12 16\n", "s０1_e01")),
         r"actionLabel\.txt, line 1: expected a recording line 'sSS_eEE' or an interval line .*, found 's０1_e01'"
         + DIGITS, check=no_store),
    Case("msr-subset-unknown", lambda e: ["ingest", "skeleton", "--format", "msr-action3d", e.tmp, e.tmp / "s.zarr",
                                          "--option", 'subset="x"'], r'--option subset="x": subset must be one of \(\'all\', \'cvpr12\'\), got \'x\''),
    Case("chunk-frames-zero", ingest_generic(extra=None) if False else
         (lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), e.tmp / "s.zarr",
                     "--chunk-frames", "0"]), r"argument --chunk-frames: expected an integer >= 1"),
    Case("format-unknown", lambda e: ["ingest", "skeleton", "--format", "bvh2", e.tmp, e.tmp / "s.zarr"],
         r"argument --format: invalid choice: 'bvh2'"),
    Case("out-is-a-file", lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"),
                                     (e.tmp / "f").write_text("x") and e.tmp / "f"], r"/f: a file, not a store folder; choose another output path"),
    Case("out-empty", lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), ""],
         r"streamcov ingest skeleton: error: argument out: empty path"),
    Case("out-is-another-folder", lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"),
                                             (e.tmp / "x").mkdir() or (e.tmp / "x" / "notes.txt").write_text("x")
                                             and e.tmp / "x"], r"/x: a folder that is not a zarr store \(it holds notes\.txt\)"),
    # documented results: fewer than 2 distinct frames are skipped and recorded
    Case("one-frame-sequence-skipped", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n")),
         r'"sequences": 7', rc=0, check=recorded(1, "1 frame")),
    Case("empty-sequence-skipped", ingest_generic(archive=edit_file("s03.csv", "")),
         r'"sequences": 7', rc=0, check=recorded(1, "no frames|0 frames")),
    Case("constant-sequence-skipped", ingest_generic(archive=edit_file("s03.csv", "1,2,3,4,5,6,7,8,9\n" * 4)),
         r'"sequences": 7', rc=0, check=recorded(1, "identical")),
]


@pytest.mark.parametrize("case", READERS, ids=lambda c: c.id)
def test_readers_and_ingest(case, env):
    run_case(case, env)


# ------------------------------------------------------------------ stores: integrity, identity, resume
def damaged(edit: Callable[[Path], None], command: str = "run"):
    """A copy of the synthetic store edited by ``edit``; then ``run`` on it (or ``info --verify``)."""
    def argv(e):
        store = e.copy("synth")
        edit(store)
        if command == "run":
            return ["run", e.pipeline(store=store), "--quiet", "--scheduler", "synchronous"]
        return ["info", store, "--verify", "--json"]
    return argv


def first_chunk(store: Path, array: str) -> Path:
    return sorted(p for p in (store / array).rglob("*") if p.is_file() and p.name != "zarr.json")[0]


def flip_byte(path: Path, at: int = 40):
    b = bytearray(path.read_bytes())
    b[min(at, len(b) - 5)] ^= 0xFF
    path.write_bytes(bytes(b))


def set_attrs(store: Path, **attrs):
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"].update(attrs)
    (store / "zarr.json").write_text(json.dumps(meta))


def as_format_3(store: Path):
    """The store as streamcov wrote it before the seal of its metadata (format version 3), so that an earlier
    store's attributes can be made by editing a new one."""
    meta = json.loads((store / "zarr.json").read_text())
    del meta["attributes"]["seal"]
    meta["attributes"]["format_version"] = 3
    (store / "zarr.json").write_text(json.dumps(meta))
    return store


def edit_codec(store: Path, array: str, **configuration):
    """Change the configuration of array's first codec (``bytes``: its byte order) in its zarr.json."""
    path = store / array / "zarr.json"
    meta = json.loads(path.read_text())
    meta["codecs"][0]["configuration"].update(configuration)
    path.write_text(json.dumps(meta))


def edit_array_meta(store: Path, array: str, **meta):
    path = store / array / "zarr.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **meta}))


def drop_crc_codec(store: Path):
    meta = json.loads((store / "frames" / "zarr.json").read_text())
    meta["codecs"] = [c for c in meta["codecs"] if c["name"] != "crc32c"]
    (store / "frames" / "zarr.json").write_text(json.dumps(meta))


def interrupted(store: Path):
    """What kill -9 mid-ingestion leaves: no completion marker, half the sequences committed."""
    import zarr

    meta = json.loads((store / "zarr.json").read_text())["attributes"]
    (unit, n), (data_unit, _) = meta["committed"].items()
    k = n // 2   # a commit point the arrays agree with: the rows of the first k items
    set_attrs(store, complete=False,
              committed={unit: k, data_unit: int(zarr.open_group(str(store), mode="r")["offsets"][k])})


def resume_with(first: list, second: list, what: str):
    """Ingest with ``first``, leave it interrupted, then run ``second`` into the same store."""
    def argv(e):
        out = e.tmp / "s.zarr"
        rc, err, _ = cli(*[a(e) if callable(a) else a for a in first], out, "--quiet")
        assert rc == 0, err
        interrupted(out)
        return [*[a(e) if callable(a) else a for a in second], out, "--quiet"]
    return argv


def archive_at(name, **kw):
    return lambda e: write_archive(e.tmp / name, **kw)


def image_folder(name, n=2, size=16, mode="L", seed=0):
    def make(e):
        from PIL import Image
        rng = np.random.default_rng(seed)
        for c in ("a", "b"):
            (e.tmp / name / c).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                arr = rng.integers(0, 255, (size, size), dtype=np.uint8)
                Image.fromarray(arr).save(e.tmp / name / c / f"{i}.png")
        return e.tmp / name
    return make


def stale_features_recomputed(e, err, out):
    """The store replaced at the same path: its features are computed again, never reused."""
    res = json.loads(out.strip().splitlines()[-1])
    assert res["featurized_sequences"] == res["n_sequences"], res


def replaced_store(e):
    store = e.tmp / "same.zarr"
    assert cli("synth", store, "--sequences", 48, "--subjects", 4, "--classes", 4, "--seed", 1, "--quiet")[0] == 0
    p = e.pipeline(store=store)
    assert cli("run", p, "--quiet", "--scheduler", "synchronous")[0] == 0
    shutil.rmtree(store)
    assert cli("synth", store, "--sequences", 48, "--subjects", 4, "--classes", 4, "--seed", 2, "--quiet")[0] == 0
    return ["run", p, "--quiet", "--scheduler", "synchronous", "--json"]


STORES = [
    Case("chunk-missing", damaged(lambda s: first_chunk(s, "frames").unlink()),
         r"synth\.zarr: array 'frames', chunk 0/0: the chunk file is missing; the store is damaged: check it with "
         r"`streamcov info --verify"),
    Case("chunk-truncated", damaged(lambda s: first_chunk(s, "frames").write_bytes(first_chunk(s, "frames").read_bytes()[:50])),
         r"synth\.zarr: array 'frames', chunk 0/0: checksum mismatch"),
    # shorter than the 4 checksum bytes (a traceback before: a seek before the file's start)
    *[Case(f"chunk-cut-to-{n}-bytes-{cmd}",
           damaged(lambda s, n=n: first_chunk(s, "labels").write_bytes(first_chunk(s, "labels").read_bytes()[:n]), cmd),
           pattern, rc=rc)
      for n in (0, 3)
      for cmd, pattern, rc in (("run", r"synth\.zarr: array 'labels', chunk 0: checksum mismatch", 2),
                               ("info", r"DAMAGED store: array 'labels', chunk 0: checksum mismatch", 3))],
    Case("chunk-bytes-flipped", damaged(lambda s: flip_byte(first_chunk(s, "frames"))),
         r"synth\.zarr: array 'frames', chunk 0/0: checksum mismatch \(its bytes changed after they were written\)"),
    Case("labels-chunk-flipped", damaged(lambda s: flip_byte(first_chunk(s, "labels"), 10)),
         r"synth\.zarr: array 'labels', chunk 0: checksum mismatch"),
    Case("labels-array-deleted", damaged(lambda s: shutil.rmtree(s / "labels")), r"synth\.zarr: array 'labels' (is )?missing"),
    Case("offsets-array-deleted", damaged(lambda s: shutil.rmtree(s / "offsets")), r"synth\.zarr: array 'offsets' (is )?missing"),
    Case("verify-flipped-chunk", damaged(lambda s: flip_byte(first_chunk(s, "frames")), "info"),
         r"DAMAGED store: array 'frames', chunk 0/0: checksum mismatch", rc=3),
    Case("verify-labels-json-garbage", damaged(lambda s: (s / "labels" / "zarr.json").write_text("{"), "info"),
         r"DAMAGED store: array 'labels': its zarr\.json cannot be read \(.*\); it was edited", rc=3),
    Case("info-labels-json-garbage", lambda e: ["info", (lambda s: (s / "labels" / "zarr.json").write_text("{") and s)(
        e.copy("synth"))], r"DAMAGED store: array 'labels': its zarr\.json cannot be read", rc=3),
    Case("labels-json-garbage", damaged(lambda s: (s / "labels" / "zarr.json").write_text("{")),
         r"synth\.zarr: array 'labels': its zarr\.json cannot be read \(.*\); it was edited: the store is damaged"),
    Case("verify-labels-deleted", damaged(lambda s: shutil.rmtree(s / "labels"), "info"),
         r"DAMAGED store: .*'labels'", rc=3),
    Case("verify-frames-shape-edited", damaged(lambda s: edit_array_meta(s, "frames", shape=[100, 60]), "info"),
         r"DAMAGED store: array 'frames' has 100 rows but the offsets cover \d+", rc=3),
    # attributes the readers index by: refused when opened (joint_names of 6 for 20 joints passed --verify, and
    # predict crashed on it; integer label names passed and predict scored 0%; float label codes passed)
    Case("verify-joint-names-cut", damaged(lambda s: set_attrs(s, joint_names=["a"] * 6), "info"),
         r"DAMAGED store: attribute joint_names \(6 names\) is not a list of 20 names, one per joint", rc=3),
    Case("joint-names-not-text", damaged(lambda s: set_attrs(s, joint_names=list(range(20)))),
         r"synth\.zarr: attribute joint_names \(20 names\) is not a list of 20 names, one per joint; the store is damaged"),
    # recorded attributes of the wrong type passed --verify (shown by info, read by predict's notes)
    *[Case(f"verify-attr-{key}-edited", damaged(lambda s, key=key, value=value: set_attrs(s, **{key: value}), "info"),
           rf"DAMAGED store: attribute {key} = .* is not {re.escape(what)}", rc=3)
      for key, value, what in (("chunk_frames", 0, "a positive integer"),
                               ("skipped", "garbage", "a list of tables (id, reason)"),
                               ("repairs", [1, 2], "a table"), ("units", 5, "a text"))],
    # zarr.json edits that would turn checks off or hide an array passed --verify: a format_version below the
    # format the arrays were written in (the manifest of format 3, the checksums of format 2), a shortened list
    *[Case(f"verify-format-version-lowered-to-{v}", damaged(lambda s, v=v: set_attrs(s, format_version=v), "info"),
           rf"DAMAGED store: format_version = {v} but the store is sealed as format 4 seals it \(zarr\.json edited\)",
           rc=3) for v in (1, 2, 3)],
    *[Case(f"verify-unsealed-format-version-lowered-to-{v}",
           damaged(lambda s, v=v: set_attrs(as_format_3(s), format_version=v), "info"),
           rf"DAMAGED store: format_version = {v} but the store holds the manifest of chunk checksums that format 3 "
           r"writes \(zarr\.json edited\)", rc=3) for v in (1, 2)],
    Case("format-version-lowered", damaged(lambda s: set_attrs(s, format_version=2)),
         r"synth\.zarr: format_version = 2 but the store is sealed as format 4 seals it \(zarr\.json edited\): the "
         r"store is damaged"),
    # edits that no chunk checksum sees (the bytes are unchanged, read otherwise) and no attribute check
    # refuses: the seal of format 4 (the digests of every array's zarr.json and of the attributes)
    Case("frames-byte-order-edited", damaged(lambda s: edit_codec(s, "frames", endian="big")),
         r"synth\.zarr: array 'frames': its zarr\.json \(data type, byte order, codecs, shape\) is not the one the "
         r"store was written with \(edited\); the store is damaged: delete it and write it again"),
    Case("verify-subjects-byte-order-edited", damaged(lambda s: edit_codec(s, "subjects", endian="big"), "info"),
         r"DAMAGED store: array 'subjects': its zarr\.json .* is not the one the store was written with", rc=3),
    Case("label-names-swapped", damaged(lambda s: set_attrs(s, label_names=(lambda n: [n[1], n[0], *n[2:]])(
        json.loads((s / "zarr.json").read_text())["attributes"]["label_names"]))),
         r"synth\.zarr: its attributes \(zarr\.json\) are not those the store was written with \(edited\); the store "
         r"is damaged"),
    Case("seal-removed", damaged(lambda s: (lambda m: ((s / "zarr.json").write_text(json.dumps(
        {**m, "attributes": {k: v for k, v in m["attributes"].items() if k != "seal"}}))))(
        json.loads((s / "zarr.json").read_text()))),
         r"synth\.zarr: its seal \(the digests of its metadata\) is missing \(zarr\.json edited\)"),
    Case("verify-arrays-list-shortened", damaged(lambda s: set_attrs(s, arrays=["frames", "offsets", "labels",
                                                                              "subjects", "split"]), "info"),
         r"DAMAGED store: array 'id_bytes' is not listed in the store's arrays attribute \(zarr\.json edited\)", rc=3),
    Case("verify-label-names-integers", damaged(lambda s: set_attrs(s, label_names=list(range(8))), "info"),
         r"DAMAGED store: attribute label_names holds 0, not a name \(a string\)", rc=3),
    Case("labels-float-codes", damaged(lambda s: edit_array_meta(s, "labels", data_type="float32")),
         r"synth\.zarr: array 'labels' is of type float32, not integer codes \(its zarr\.json was edited\)"),
    Case("verify-identity-edited", damaged(lambda s: set_attrs(s, identity="x"), "info"),
         r"DAMAGED store: the store's identity attribute is missing", rc=3),
    Case("verify-format-version-text", damaged(lambda s: set_attrs(s, format_version="3"), "info"),
         r"DAMAGED store: attribute format_version = '3' is not a format version \(an integer\)", rc=3),
    Case("info-committed-edited", lambda e: ["info", (lambda s: set_attrs(s, committed="x") or s)(e.copy("synth")),
                                             "--json"], r'"complete": true', rc=0),
    Case("zarr-json-garbage", damaged(lambda s: (s / "zarr.json").write_text("{not json")),
         r"synth\.zarr: the store's zarr\.json is damaged"),
    Case("format-version-future", damaged(lambda s: set_attrs(s, format_version=99)),
         r"synth\.zarr: store format version 99; this streamcov reads versions up to \d"),
    # `info` on a store of a newer streamcov: the line `run` gives, not "complete" (with or without --verify)
    *[Case(f"info-format-version-future{'-verify' if verify else ''}",
           lambda e, verify=verify: ["info", (lambda s: set_attrs(s, format_version=99) or s)(e.copy("synth")),
                                     *(["--verify"] if verify else [])],
           r"synth\.zarr: store format version 99; this streamcov reads versions up to \d: upgrade streamcov or "
           r"write the store again$") for verify in (False, True)],
    Case("incomplete-store", damaged(interrupted),
         r"synth\.zarr: incomplete skeleton store \(24 sequences committed.*the ingestion was interrupted, or stopped "
         r"at a file it could not read\. Re-run the command that wrote it \(`streamcov ingest`, `synth`, or `run` with "
         r"\[data\] source or a demo\) to resume it \(with --on-error skip, or data\.on_error = \"skip\", to leave "
         r"such a file out\), or start over: add --restart to `streamcov ingest` or `synth` \(mode=\"restart\" in "
         r"Python\), or delete \S+ and run the command again"),
    Case("info-not-a-store", lambda e: ["info", e.tmp], r": no zarr store here"),
    Case("info-an-image-file", lambda e: ["info", (lambda p: p.write_bytes(b"\x89PNG") and p)(e.tmp / "one.png")],
         r"one\.png: a file, not a store: a store is a folder; for images, give their folder"),
    Case("info-a-folder-of-images",
         lambda e: ["info", (lambda d: (d.mkdir(), (d / "a.png").write_bytes(b"\x89PNG")) and d)(e.tmp / "imgs")],
         r"imgs: a folder without a zarr store; ingest it first: a skeleton archive with `streamcov ingest skeleton "
         r"--format FORMAT`, images with `streamcov ingest images --format folders`"),
    # the project's other folders and files, named for what they are
    # (info describes a model folder: tests/test_training.py)
    Case("predict-a-model-folder-as-the-store", lambda e: ["predict", e.shared["model"], e.shared["model"]],
         r"/run/model: a model folder, not a store; `streamcov predict MODEL STORE` applies the model to a store$"),
    # (info describes a run's output folder: tests/test_training.py)
    Case("predict-on-a-run-folder", lambda e: ["predict", e.shared["model"], e.shared["model"].parent,
                                               "--out", e.tmp / "p.csv"],
         r"/run: the output folder of `streamcov run` \(task skeleton-classification\), not a store; the store it "
         r"read is \S+synth\.zarr, its features are in features\*\.zarr, its model in model/ \(which `streamcov info` "
         r"describes\)$"),
    # another task's output has no features and no model (it was described as a classification's)
    Case("predict-on-a-tgp-run-folder", lambda e: ["predict", e.shared["model"], tgp_output(e), "--out",
                                                   e.tmp / "p.csv"],
         r"/o: the output folder of `streamcov run` \(task tgp-sshape\), not a store: its results are in "
         r"result\.json$"),
    Case("info-describes-a-tgp-run-folder", lambda e: ["info", tgp_output(e)], r'"task": "tgp-sshape"', rc=0,
         check=lambda e, err, out: err == "" and json.loads(out)["run"]["files"]["model"] is False),
    Case("info-a-store-s-zarr-json", lambda e: ["info", e.shared["synth"] / "zarr.json"],
         r"synth\.zarr/zarr\.json: a metadata file of the store \S+synth\.zarr, not a store; give the store's "
         r"folder$"),
    Case("info-an-array-s-zarr-json", lambda e: ["info", e.shared["synth"] / "frames" / "zarr.json"],
         r"frames/zarr\.json: a metadata file of the store \S+synth\.zarr, not a store; give the store's folder$"),
    Case("info-a-study-report",
         lambda e: ["info", (lambda d: (d.mkdir(), (d / "results.csv").write_text("x\n"),
                                        (d / "table.md").write_text("x\n")) and d)(e.tmp / "m")],
         r"/m: the report of `streamcov study` \(results\.csv, table\.md\), not a store$"),
    Case("info-a-pipeline-file", lambda e: ["info", e.pipeline()], r"p\.toml: a pipeline file, not a store; "
                                                                    r"`streamcov run` runs it$"),
    Case("predict-skeleton-model-on-a-folder", lambda e: ["predict", e.shared["model"], write_archive(e.tmp / "arch"),
                                                          "--out", e.tmp / "p.csv"],
         r"arch: a folder without a zarr store; ingest it first: a skeleton archive with `streamcov ingest skeleton "
         r"--format FORMAT`"),
    Case("info-missing-path", lambda e: ["info", e.tmp / "none.zarr"], r"none\.zarr: (no zarr store here|does not exist)"),
    Case("resume-generic-other-folder",
         resume_with(["ingest", "skeleton", "--format", "generic", archive_at("A")],
                     ["ingest", "skeleton", "--format", "generic", archive_at("B", seed=1)], "path"),
         r"s\.zarr: the incomplete skeleton store was started with source_record\.path = .*A.*this ingestion has .*B.*"
         r"would mix two sources\. Start over: add --restart to `streamcov ingest` or `synth` \(mode=\"restart\" in Python\), or delete"),
    Case("resume-generic-other-options",
         resume_with(["ingest", "skeleton", "--format", "generic", archive_at("A")],
                     ["ingest", "skeleton", "--format", "generic", archive_at("A"), "--option", "center=[1]"], "opt"),
         r"s\.zarr: the incomplete skeleton store was started with source_record\.options = .*would mix two sources"),
    Case("resume-synth-other-seed",
         resume_with(["synth", "--sequences", 20, "--seed", 0], ["synth", "--sequences", 20, "--seed", 1], "seed"),
         r"s\.zarr: the incomplete skeleton store was started with .*seed.*would mix two sources"),
    Case("resume-synth-other-classes",
         resume_with(["synth", "--sequences", 20, "--classes", 4], ["synth", "--sequences", 20, "--classes", 5], "cls"),
         r"s\.zarr: the incomplete skeleton store was started with .*classes.*would mix two sources"),
    Case("resume-images-other-folder",
         resume_with(["ingest", "images", "--format", "folders", image_folder("A")],
                     ["ingest", "images", "--format", "folders", image_folder("B", seed=1)], "img"),
         r"s\.zarr: the incomplete image store was started with .*would mix two sources\. Start over: add --restart to `streamcov ingest` or `synth` \(mode=\"restart\" in Python\), or delete"),
    Case("resume-restart-is-clean",
         resume_with(["ingest", "skeleton", "--format", "generic", archive_at("A")],
                     ["ingest", "skeleton", "--format", "generic", archive_at("B", n=6, seed=1), "--restart"], "re"),
         r'"sequences": 6', rc=0),
    Case("complete-store-not-overwritten",
         lambda e: ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), e.copy("synth")],
         r"synth\.zarr: a complete store is already here; delete it or choose another output path"),
    Case("chunk-from-another-store", damaged(lambda s: shutil.copy(first_chunk(Path(shared_paths["synth2"]), "frames"),
                                                                   first_chunk(s, "frames"))),
         r"synth\.zarr: array 'frames', chunk 0/0: not the chunk this store wrote \(it is whole, but its checksum "
         r"differs from the store's manifest"),
    Case("verify-chunk-from-another-store", damaged(lambda s: shutil.copy(
        first_chunk(Path(shared_paths["synth2"]), "frames"), first_chunk(s, "frames")), "info"),
         r"DAMAGED store: array 'frames', chunk 0/0: not the chunk this store wrote", rc=3),
    Case("labels-from-another-store", damaged(lambda s: (shutil.rmtree(s / "labels"),
                                                         shutil.copytree(Path(shared_paths["synth2"]) / "labels",
                                                                         s / "labels"))),
         r"synth\.zarr: array 'labels', chunk 0: not the chunk this store wrote"),
    Case("checksum-codec-removed", damaged(drop_crc_codec),
         r"synth\.zarr: array 'frames' lost its checksum codec \(zarr\.json edited\)"),
    Case("attr-n-joints-edited", damaged(lambda s: set_attrs(s, n_joints=19)),
         r"synth\.zarr: attribute n_joints = 19 but array 'frames' has rows of \(60,\)"),
    Case("attr-complete-not-true", damaged(lambda s: set_attrs(s, complete="no")),
         r"synth\.zarr: incomplete skeleton store"),
    Case("attr-count-edited", damaged(lambda s: set_attrs(s, n_sequences=60)),
         r"synth\.zarr: attribute n_sequences = 60 but the arrays hold 48"),
    Case("attr-identity-deleted", damaged(lambda s: set_attrs(s, identity=None)),
         r"synth\.zarr: the store's identity attribute is missing"),
    Case("attr-label-names-cut", damaged(lambda s: set_attrs(s, label_names=["a", "b", "c"])),
         r"synth\.zarr: array 'labels' holds codes up to 3 but label_names names 3"),
    Case("attr-center-out-of-range", damaged(lambda s: set_attrs(s, center=[99])),
         r"synth\.zarr: attribute center = \[99\] names joints outside 0\.\.19"),
    Case("attr-center-text", damaged(lambda s: set_attrs(s, center="hip")),
         r"synth\.zarr: attribute center = 'hip' is not a non-empty list of joint indices; the store is damaged"),
    Case("attr-center-empty", damaged(lambda s: set_attrs(s, center=[])),   # would mean no centring, silently
         r"synth\.zarr: attribute center = \[\] is not a non-empty list of joint indices; the store is damaged"),
    Case("attr-roles-out-of-range", damaged(lambda s: set_attrs(s, roles={"left_hip": [4], "neck": [40]})),
         r"synth\.zarr: attribute roles holds joint indices outside 0\.\.19 \(neck = \[40\]\); the store is damaged: "
         r"delete it and write it again \(with the `streamcov ingest`, `synth` or `run` that wrote it\)$"),
    Case("verify-attr-roles-out-of-range", damaged(lambda s: set_attrs(s, roles={"neck": [40]}), "info"),
         r"DAMAGED store: attribute roles holds joint indices outside 0\.\.19", rc=3),
    Case("attr-roles-text", damaged(lambda s: set_attrs(s, roles={"neck": "2"})),
         r"synth\.zarr: attribute roles = \{'neck': '2'\} is not a table of joint index lists; the store is damaged"),
    Case("attr-n-joints-text", damaged(lambda s: set_attrs(s, n_joints="abc")),
         r"synth\.zarr: attribute n_joints = 'abc' is not an integer; the store is damaged"),
    Case("frames-dtype-edited", damaged(lambda s: edit_array_meta(s, "frames", data_type="int32")),
         # newer zarr reads the edited metadata (its fill value 0.0 as an integer), older zarr refuses it
         r"synth\.zarr: array 'frames'( is of type int32, not float32 \(its zarr\.json was edited\)|: its zarr\.json "
         r"cannot be read .*it was edited)"),
    Case("info-feature-store", lambda e: ["info", Path(shared_paths["model"]).parent / "features.zarr"],
         r"features\.zarr: a feature store \(written by `streamcov run`"),
    # a run's feature store given as a data store: called "not a streamcov store" and "a foreign store" before
    Case("store-flag-feature-store", lambda e: ["run", e.pipeline(), "--quiet", "--store",
                                                Path(shared_paths["model"]).parent / "features.zarr"],
         r"^streamcov run: error: --store \S+features\.zarr: a feature store \(written by `streamcov run` for its "
         r"learner\), but task 'skeleton-classification' reads skeleton stores$"),
    Case("data-store-feature-store", lambda e: ["run", e.pipeline(store=Path(shared_paths["model"]).parent /
                                                                   "features.zarr"), "--quiet"],
         r"features\.zarr: a feature store \(written by `streamcov run` for its learner\), but a skeleton store is "
         r"needed here"),
    Case("predict-feature-store", lambda e: ["predict", e.shared["model"], Path(shared_paths["model"]).parent /
                                             "features.zarr", "--out", e.tmp / "p.csv"],
         r"features\.zarr: a feature store \(written by `streamcov run` for its learner\), but the model in \S+ was "
         r"trained on skeleton data$"),
    Case("info-foreign-zarr", lambda e: (__import__("zarr").open_group(str(e.tmp / "f.zarr"), mode="w"),
                                         ["info", e.tmp / "f.zarr"])[1],
         r"f\.zarr: not a streamcov store \(format attribute None\)"),
    Case("archive-changed-while-interrupted",
         resume_with(["ingest", "skeleton", "--format", "generic", archive_at("A")],
                     ["ingest", "skeleton", "--format", "generic",
                      lambda e: write_archive(e.tmp / "A", seed=7, frames=9)], "changed"),
         r"s\.zarr: the archive \S+A changed since this ingestion began \(files added, removed or modified"),
    Case("store-replaced-same-path", replaced_store, r'"accuracy"', rc=0, check=stale_features_recomputed),
]


@pytest.mark.parametrize("case", STORES, ids=lambda c: c.id)
def test_stores(case, env):
    run_case(case, env)


# ------------------------------------------------------------------ models and predict
def predict_on(edit: Callable[[Path], None] | None = None, store: str | Callable = "synth", *extra):
    """``predict`` with a copy of the trained model edited by ``edit``."""
    def argv(e):
        model = e.copy("model")
        if edit is not None:
            edit(model)
        s = store(e) if callable(store) else e.shared[store]
        return ["predict", model, s, "--out", e.tmp / "p.csv", "--scheduler", "synchronous", *extra]
    return argv


def edit_json_del(key: str, signed: bool = True):
    """Delete a key of model.json; ``signed``: and take its SHA-256 again (a crafted description, refused
    by what it holds)."""
    def edit(model: Path):
        doc = json.loads((model / "model.json").read_text())
        del doc[key]
        (model / "model.json").write_text(json.dumps(signed_model_doc(doc) if signed else doc))
    return edit


def edit_json(signed: bool = True, **changes):
    """Change values of model.json (``a__b=v``: doc["a"]["b"] = v); ``signed``: and take its SHA-256 again."""
    def edit(model: Path):
        doc = json.loads((model / "model.json").read_text())
        for dotted, value in changes.items():
            node = doc
            *parents, last = dotted.split("__")
            for k in parents:
                node = node[k]
            node[last] = value
        (model / "model.json").write_text(json.dumps(signed_model_doc(doc) if signed else doc))
    return edit


def edit_npz(fn: Callable[[dict], dict]):
    """Edit the arrays and record the new file's digest: a model consistent in its files, wrong inside."""
    def edit(model: Path):
        import hashlib
        with np.load(model / "model.npz") as z:
            arrays = {k: z[k] for k in z.files}
        np.savez(model / "model.npz", **fn(arrays))
        doc = json.loads((model / "model.json").read_text())
        doc["arrays_sha256"] = hashlib.sha256((model / "model.npz").read_bytes()).hexdigest()
        (model / "model.json").write_text(json.dumps(signed_model_doc(doc)))
    return edit


def file_of(key: str, name: str):
    """Replace ``name`` (model.json or model.npz) by that of another model (``shared[key]``)."""
    def edit(model: Path):
        shutil.copy(Path(shared_paths[key]) / name, model / name)
    return edit


def coef_key(arrays: dict) -> str:
    return next(k for k in arrays if k.endswith("coef_"))


def generic_store(e):
    out = e.tmp / "g.zarr"
    assert cli("ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), out, "--quiet")[0] == 0
    return out


def predict_summary(pattern_key: str, expected):
    def check(e, err, out):
        s = json.loads(out.strip().splitlines()[-1])
        assert re.search(expected, str(s[pattern_key])), s
    return check


def link_to_kept_file(e):
    (e.tmp / "kept.csv").write_text("keep\n")
    (e.tmp / "link.csv").symlink_to(e.tmp / "kept.csv")
    return e.tmp / "link.csv"


def copied_run(e):
    """A copy of the shared run's output folder (its model, result.json, predictions.csv, marker)."""
    if not (e.tmp / "run").exists():
        shutil.copytree(e.shared["model"].parent, e.tmp / "run")
    return e.tmp / "run"


def copied_images(e):
    if not (e.tmp / "images").exists():
        shutil.copytree(e.shared["images"], e.tmp / "images")
    return e.tmp / "images"


def first_image(e):
    return sorted(copied_images(e).rglob("*.png"))[0]


MODELS = [
    Case("model-folder-missing", lambda e: ["predict", e.tmp / "nomodel", e.shared["synth"]],
         r"nomodel: no such model folder"),
    # something there that is no folder: it was "no such model folder"
    Case("model-folder-is-a-file", lambda e: ["predict", (lambda f: (f.write_text("x"), f)[1])(e.tmp / "notes.txt"),
                                              e.shared["synth"], "--out", e.tmp / "p.csv"],
         r"notes\.txt: a file, not a model folder \(a run writes its model into <output>/model\)$"),
    Case("store-is-a-device", lambda e: ["predict", e.shared["model"], "/dev/zero", "--out", e.tmp / "p.csv"],
         r"^streamcov predict: error: /dev/zero: a device or a pipe, not a store: a store is a folder$"),
    Case("info-store-is-a-device", lambda e: ["info", "/dev/zero"],
         r"^streamcov info: error: /dev/zero: a device or a pipe, not a store: a store is a folder$"),
    Case("model-folder-is-a-device", lambda e: ["predict", "/dev/null", e.shared["synth"], "--out", e.tmp / "p.csv"],
         r"/dev/null: a device or a pipe, not a model folder \(a run writes its model into <output>/model\)$"),
    Case("model-json-missing", predict_on(lambda m: (m / "model.json").unlink()), r"model\.json: missing; a model folder holds model\.json and model\.npz"),
    Case("model-json-garbage", predict_on(lambda m: (m / "model.json").write_text("{oops")), r"model\.json: not valid JSON .*damaged: train the model again"),
    Case("model-npz-truncated", predict_on(lambda m: (m / "model.npz").write_bytes((m / "model.npz").read_bytes()[:200])),
         r"model\.npz: unreadable .*damaged: train the model again"),
    Case("model-npz-bitflip", predict_on(lambda m: flip_byte(m / "model.npz", 300)),
         r"model\.npz: unreadable .*damaged: train the model again"),
    Case("model-npz-missing", predict_on(lambda m: (m / "model.npz").unlink()), r"model\.npz: missing"),
    Case("coef-wrong-width", predict_on(edit_npz(lambda a: {**a, coef_key(a): a[coef_key(a)][:, :-3]})),
         r"model: the scaler gives \d+ features but the classifier coefficients takes? \d+|gives \d+ features but"),
    Case("coef-not-finite", predict_on(edit_npz(lambda a: {**a, coef_key(a): np.full_like(a[coef_key(a)], np.nan)})),
         r"model\.json: the classifier's coef_ holds non-finite numbers; the model is damaged"),
    Case("npz-of-another-model", predict_on(file_of("model2", "model.npz")),
         r"model\.npz: not the model\.npz that model\.json was saved with \(its SHA-256 differs\)"),
    Case("json-of-another-model", predict_on(file_of("model2", "model.json")),
         r"model\.npz: not the model\.npz that model\.json was saved with"),
    Case("map-parameter-wrong-type", predict_on(edit_json(**{"feature_map__params__n_components": "64"})),
         r"model\.json: the feature map has an invalid parameter \(The 'n_components' parameter of RGWSampler must be an int"),
    Case("model-version-newer", predict_on(edit_json(version=99)), r"model\.json: .*version 99"),
    # an edit of the description itself (a descriptor setting, the protocol): its own SHA-256 no longer holds
    Case("model-json-descriptor-edited", predict_on(edit_json(signed=False, source__descriptor__gamma=0.5)),
         r"model\.json: edited after it was saved \(it is not the description its SHA-256, doc_sha256, was taken "
         r"of\); a model's description is not edited: train the model again$"),
    Case("model-json-split-edited", predict_on(edit_json(signed=False, info__split="x")),
         r"model\.json: edited after it was saved"),
    Case("model-json-version-lowered", predict_on(edit_json(signed=False, version=3, source__descriptor__gamma=0.5)),
         r"model\.json: edited after it was saved"),
    Case("model-json-digest-removed", predict_on(edit_json_del("doc_sha256", signed=False)),
         r"model\.json: edited after it was saved"),
    Case("scaler-scale-zero", predict_on(edit_json(scaler__scalars__scale_=0.0)),
         r"model\.json: the scaler's scale_ holds values <= 0; the model is damaged"),
    Case("arguments-swapped", lambda e: ["predict", e.shared["synth"], e.shared["model"]],
         r"synth\.zarr: a store, not a model folder \(the arguments are MODEL then STORE\); the model folder comes first "
         r"\(streamcov predict MODEL STORE; predict\(model_dir, store_path\) in Python\)$"),
    Case("run-folder-not-model", lambda e: ["predict", e.shared["model"].parent, e.shared["synth"]],
         r"run: a run's output folder; its model is \S+run/model"),
    Case("out-under-a-file", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                        (e.tmp / "notes.txt").write_text("x") and e.tmp / "notes.txt" / "p.csv",
                                        "--scheduler", "synchronous"], r"--out \S*notes\.txt/p\.csv: "),
    Case("class-not-allowed", predict_on(edit_json(classifier__class="os.system")), r"not in the allow-list"),
    Case("model-json-without-source", predict_on(edit_json_del("source")),
         r"model\.json: incomplete model description \(KeyError: 'descriptor'\)"),
    # a classifier's class where the scaler was: it loads, and cannot transform (a StandardScaler would
    # transform the GlobalCenterScaler's arrays the same way on some scikit-learn versions: no harm there)
    Case("scaler-of-another-class", predict_on(edit_json(scaler__class="SGDClassifier")),
         r"model\.json: the model cannot predict \(AttributeError: .*\); it is damaged or assembled from different runs"),
    Case("model-format-unknown", predict_on(edit_json(format="other")), r"model\.json: not a streamcov model"),
    Case("label-names-empty", predict_on(edit_json(label_names=[])), r"(no classes|do not index the 0 label names)"),
    Case("source-kind-unknown", predict_on(edit_json(source__kind="audio")), r"unknown source kind 'audio'"),
    # a folder to predict: an image ingest would skip has no row, and predict says so
    Case("predict-folder-skips-a-tiny-image", lambda e: ["predict", e.shared["img_model"], (lambda f: (
        f.mkdir(), save_array(np.full((16, 16), 90, np.uint8))(f / "ok.png"),
        save_array(np.zeros((1, 20), np.uint8))(f / "thin.png"), f)[-1])(e.tmp / "topredict"),
        "--out", e.tmp / "p.csv", "--scheduler", "synchronous"],
         r"(?m)^streamcov predict: note: 1 image\(s\) of \S+topredict skipped, not predicted \(thin\.png: image of "
         r"1 x 20 pixels", rc=0, check=lambda e, err, out: len((e.tmp / "p.csv").read_text().splitlines()) == 2
         or pytest.fail("rows")),
    # an image that does not decode: the stop names --on-error skip; with it, the image is named in a note
    Case("predict-folder-damaged-image", lambda e: predict_damaged_folder(e),
         r"topredict/bad\.png: cannot decode image: not an image file Pillow can read; .*; or leave out the files "
         r"that cannot be read: --on-error skip \(named in a note, without a prediction\)$"),
    Case("predict-folder-damaged-image-skipped", lambda e: predict_damaged_folder(e, "--on-error", "skip"),
         r"(?m)^streamcov predict: note: 1 image\(s\) of \S+topredict skipped, not predicted \(bad\.png: cannot be "
         r"read: \S+bad\.png: cannot decode image", rc=0,
         check=lambda e, err, out: (e.tmp / "p.csv").read_text().splitlines()[1].startswith("ok.png,")
         and len((e.tmp / "p.csv").read_text().splitlines()) == 2 or pytest.fail("rows")),
    Case("predict-store-on-error-skip", lambda e: ["predict", e.shared["img_model"], e.shared["img_store"],
                                                   "--on-error", "skip"],
         r"^streamcov predict: error: --on-error skip: only a folder of images is read file by file \(ingested for "
         r"the model\); \S+img\.zarr is a store: leave --on-error out$"),
    # not a store: refused by what it is, as without the flag
    Case("predict-missing-folder-on-error-skip", lambda e: ["predict", e.shared["img_model"], e.tmp / "none",
                                                            "--on-error", "skip"],
         r"^streamcov predict: error: \S+none: no such store or folder"),
    Case("image-model-on-skeleton-store", lambda e: ["predict", e.shared["img_model"], e.shared["synth"]],
         r"synth\.zarr: a skeleton store, but the model in .* was trained on image data"),
    Case("skeleton-model-on-image-store", lambda e: ["predict", e.shared["model"], e.shared["img_store"]],
         r"img\.zarr: an image store, but the model in .* was trained on skeleton data"),
    Case("wrong-joint-count", predict_on(None, generic_store), r"g\.zarr: 3 joints, but the model was trained on 20; use a store of the same skeleton layout"),
    Case("predict-store-missing", predict_on(None, lambda e: e.tmp / "none.zarr"), r"none\.zarr: no such store or folder"),
    Case("store-incomplete", predict_on(None, lambda e: (lambda s: interrupted(s) or s)(e.copy("synth"))),
         r"synth\.zarr: incomplete skeleton store"),
    # the predictions never replace a model's or a store's own files (and both still load afterwards)
    Case("out-is-model-json", lambda e: ["predict", e.copy("model"), e.shared["synth"], "--out",
                                         e.tmp / "model" / "model.json", "--scheduler", "synchronous"],
         r"--out \S+/model/model\.json: beside the model files of \S+/model; write the predictions elsewhere, "
         r"e\.g\. \S+/model/predictions/model\.csv$",
         check=lambda e, err, out: json.loads((e.tmp / "model" / "model.json").read_text())),
    Case("out-inside-the-store", lambda e: ["predict", e.shared["model"], e.copy("synth"), "--out",
                                            e.tmp / "synth.zarr" / "zarr.json", "--scheduler", "synchronous"],
         r"--out \S+/synth\.zarr/zarr\.json: inside the zarr store \S+/synth\.zarr; write the predictions outside "
         r"every store$", check=lambda e, err, out: cli("info", e.tmp / "synth.zarr")[0] == 0 or pytest.fail("store")),
    # nor anything that is not a regular file (renamed onto, it would become one), a run's own files, or a file
    # of the folder being predicted
    Case("out-is-a-fifo", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                     os.mkfifo(e.tmp / "fifo") or e.tmp / "fifo", "--scheduler", "synchronous"],
         r"--out \S+/fifo: a FIFO, not a regular file; the predictions would replace it by a plain file: give the "
         r"path of a regular file \(a link's target itself\) or a new one$",
         check=lambda e, err, out: stat.S_ISFIFO((e.tmp / "fifo").lstat().st_mode) or pytest.fail("fifo")),
    Case("out-is-a-link", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                     link_to_kept_file(e), "--scheduler", "synchronous"],
         r"--out \S+/link\.csv: a symbolic link, not a regular file",
         check=lambda e, err, out: ((e.tmp / "link.csv").is_symlink() and (e.tmp / "kept.csv").read_text() == "keep\n")
         or pytest.fail("link")),
    Case("out-is-a-runs-result", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                            copied_run(e) / "result.json", "--scheduler", "synchronous"],
         r"--out \S+/run/result\.json: a file of the run in \S+/run \(its own\), which the predictions would replace; "
         r"write them to a new file or elsewhere", check=lambda e, err, out: json.loads((e.tmp / "run" / "result.json")
                                                                            .read_text())),
    # the same for a run's file it has not written yet (an interrupted run: result.json became a CSV, and a CSV as
    # the lock file refused the next run), its lock file, its model folder, and its predictions (which had been
    # replaced, as a predictions CSV)
    *[Case(f"out-is-a-runs-{what}", (lambda n: lambda e: [
        "predict", e.shared["model"], e.shared["synth"], "--out",
        (lambda r: (shutil.rmtree(r / n) if (r / n).is_dir() else (r / n).unlink(missing_ok=True)) or r / n)(
            copied_run(e)) if n != "predictions.csv" else
        copied_run(e) / n, "--scheduler", "synchronous"])(name),
        rf"--out \S+/run/{re.escape(name)}: a {'folder' if name == 'checkpoints' else 'file'} of the run in "
        r"\S+/run \(its own\), which the predictions would replace; write them to a new file or elsewhere",
        check=(lambda n: lambda e, err, out: not (e.tmp / "run" / n).exists() or n == "predictions.csv"
               and (e.tmp / "run" / n).read_bytes() == (e.shared["model"].parent / n).read_bytes()
               or pytest.fail(n))(name))
       for what, name in (("unwritten-result", "result.json"), ("lock", ".streamcov.lock"),
                          ("unwritten-model-folder", "checkpoints"), ("predictions", "predictions.csv"))],
    Case("out-is-another-file-beside-a-run", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                                        (lambda p: p.write_text("mine\n") and p)(copied_run(e) / "n.txt"),
                                                        "--scheduler", "synchronous"],
         r"--out \S+/run/n\.txt: a file of the run in \S+/run \(not predictions\), which the predictions would "
         r"replace", check=lambda e, err, out: (e.tmp / "run" / "n.txt").read_text() == "mine\n" or pytest.fail("n")),
    Case("out-is-a-note-in-the-folder-predicted", lambda e: ["predict", e.shared["img_model"], copied_images(e),
                                                             "--out", (lambda p: p.write_text("mine\n") and p)(
                                                                 copied_images(e) / "labels.csv"),
                                                             "--scheduler", "synchronous"],
         r"--out \S+/labels\.csv: a file of \S+/images, the folder being predicted, which the predictions would "
         r"replace; write them to a new file or outside that folder$"),
    Case("out-is-an-image-being-predicted", lambda e: ["predict", e.shared["img_model"], copied_images(e), "--out",
                                                       first_image(e), "--scheduler", "synchronous"],
         r"--out \S+\.png: an image of \S+/images, the folder being predicted, which the predictions would replace; "
         r"write them to a new file or outside that folder$",
         check=lambda e, err, out: first_image(e).read_bytes()[:4] == b"\x89PNG" or pytest.fail("image")),
    # the same data written anew (another store identity): its rows include the training rows, and predict says so
    Case("predict-same-data-another-store", lambda e: ["predict", e.shared["model"], (lambda s: cli(
        "synth", s, "--sequences", 48, "--subjects", 4, "--classes", 4, "--chunk-frames", 512, "--quiet")[0] == 0
        and s)(e.tmp / "again.zarr"), "--out", e.tmp / "p.csv", "--scheduler", "synchronous"],
         r"(?m)^streamcov predict: note: this store was written from the same data as the model's training store "
         r"\(\S+synth\.zarr\) but is another one: its rows include the model's training rows, so this accuracy is "
         r"not a test accuracy; predict the model's own store for the test rows of its protocol$", rc=0,
         check=lambda e, err, out: json.loads(out.strip().splitlines()[-1])["includes_training_rows"] is True
         or pytest.fail(out)),
    Case("predict-other-data-no-note", lambda e: ["predict", e.shared["model"], (lambda s: cli(
        "synth", s, "--sequences", 48, "--subjects", 4, "--classes", 4, "--chunk-frames", 512, "--seed", 7,
        "--quiet")[0] == 0 and s)(e.tmp / "other.zarr"), "--out", e.tmp / "p.csv", "--scheduler", "synchronous"],
         r"accuracy", rc=0, check=lambda e, err, out: ("note:" not in err and "includes_training_rows" not in out)
         or pytest.fail(err)),
    Case("model-given-as-its-json", lambda e: ["predict", e.shared["model"] / "model.json", e.shared["synth"]],
         r"model\.json: one of a model's files; give the model's folder, \S+/run/model$"),
    Case("model-empty-path", lambda e: ["predict", "", e.shared["synth"]], r"argument model: empty path; give the path "
                                                                           r"to read"),
    Case("store-empty-path", lambda e: ["predict", e.shared["model"], ""], r"argument store: empty path"),
    Case("default-out-is-a-folder", lambda e: ["predict", (lambda m: (m / "predictions" / "synth.zarr.csv").mkdir(
        parents=True) or m)(e.copy("model")), e.shared["synth"], "--scheduler", "synchronous"],
         r"the default predictions file \S+/predictions/synth\.zarr\.csv \(choose another with --out\): a folder; "
         r"give the path of a CSV file$"),
    Case("out-is-a-folder", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out", e.tmp,
                                       "--scheduler", "synchronous"], r"--out \S+: a folder; give the path of a CSV file"),
    Case("out-empty-path", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out", ""],
         r"argument --out: empty path"),
    Case("predict-out-under-a-file", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                                e.pipeline() / "x.csv", "--scheduler", "synchronous"],
         r"--out \S+p\.toml/x\.csv: cannot create its folder \(\S+p\.toml is a file, not a folder\); choose "
         r"another path$"),
    Case("predict-out-not-writable", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--out",
                                                "/proc/streamcov.csv", "--scheduler", "synchronous"],
         r"--out /proc/streamcov\.csv: cannot write there \(.*\); choose another path$"),
    Case("predict-workers-zero", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--workers", "0"],
         r"argument --workers: expected an integer >= 1, got 0"),
    Case("predict-scheduler-unknown", lambda e: ["predict", e.shared["model"], e.shared["synth"], "--scheduler", "x"],
         r"--scheduler x: expected one of"),
    # documented results
    Case("predict-own-store-test-fold", predict_on(None, "synth"), r"on test rows of fold", rc=0,
         check=predict_summary("evaluated_on", r"^test rows of fold")),
    Case("train-accuracy-on-another-store", predict_on(None, "synth2", "--train-accuracy"),
         r"note: --train-accuracy applies only to the store the model was trained on", rc=0,
         check=predict_summary("evaluated_on", r"^every row whose label the model knows")),
    Case("predict-other-store-unknown-labels", predict_on(None, lambda e: (lambda s: s)(
        e.tmp / "o.zarr" if cli("synth", e.tmp / "o.zarr", "--sequences", 24, "--classes", 6, "--subjects", 2,
                                "--seed", 5, "--quiet")[0] == 0 else None)),
         r"accuracy", rc=0, check=predict_summary("n_unknown_labels", r"^\d+$")),
]


@pytest.mark.parametrize("case", MODELS, ids=lambda c: c.id)
def test_models_and_predict(case, env):
    run_case(case, env)


def test_predictions_written_again_beside_a_run_or_in_the_folder_predicted(shared, env):
    """The refusals above keep a run's own files and the images predicted: the same predict command, writing
    a CSV of its own into the run's folder or the image folder, runs again (the file it wrote is replaced)."""
    run = copied_run(env)
    images = copied_images(env)
    for model, data, out in ((shared["model"], shared["synth"], run / "other.csv"),
                             (shared["img_model"], images, images / "predictions.csv")):
        for _ in range(2):
            rc, err, _ = cli("predict", model, data, "--out", out, "--scheduler", "synchronous")
            assert rc == 0, err
        assert out.read_text().startswith("id,predicted,label")


def test_predictions_never_replace_a_file_with_content_that_is_not_predictions(shared, env):
    """``--out`` naming a user's file (notes, a script, another tool's CSV) is refused and the file kept; an
    empty file, or predictions an earlier run wrote, are replaced."""
    for name, text in (("notes.txt", "my notes\n"), ("r1.py", "print(1)\n"), ("other.csv", "id,score\n1,2\n")):
        out = env.tmp / name
        out.write_text(text)
        rc, err, _ = cli("predict", shared["model"], shared["synth"], "--out", out, "--scheduler", "synchronous")
        assert rc == 2 and out.read_text() == text, err
        assert re.fullmatch(rf"streamcov predict: error: --out {re.escape(str(out))}: an existing file that is not "
                            rf"a predictions CSV \(its first line is not id,predicted,label\), which the predictions "
                            rf"would replace; give a new path, or delete the file first if it may go\n", err), err
    from streamcov.errors import ConfigError
    from streamcov.stream.predict import predict

    with pytest.raises(ConfigError, match=r"^out_csv='\S+notes\.txt': an existing file that is not a predictions "
                                          r"CSV"):   # in Python, the argument as Python names it
        predict(shared["model"], shared["synth"], env.tmp / "notes.txt", scheduler="synchronous")
    for text in ("", "id,predicted,label\ns00,1,1\n", "\ufeffid,predicted,label\r\ns00,1,1\r\n"):   # + a spreadsheet's
        out = env.tmp / "p.csv"
        out.write_text(text)
        assert cli("predict", shared["model"], shared["synth"], "--out", out, "--scheduler", "synchronous")[0] == 0
        assert out.read_text().startswith("id,predicted,label\n") and len(out.read_text().splitlines()) > 2


def test_predict_removes_the_temporaries_of_its_out_file_that_killed_predicts_left(shared, env):
    """predict writes --out as a temporary and renames it; a predict killed with SIGKILL left the temporary (as
    large as the predictions) beside the user's file. The temporary's name holds host and pid: the next predict
    to that file removes those of dead processes of this host and leaves a live one's, another host's, another
    file's and the user's own files."""
    from streamcov.lock import host_tag

    out = env.tmp / "p.csv"
    host = host_tag()
    dead = env.tmp / f".p.csv.{host}-{2 ** 22 + 12345}.ab12cd_3.streamcov-tmp"   # above any pid this machine gives
    kept = [env.tmp / f".p.csv.{host}-{os.getpid()}.vajuj0se.streamcov-tmp",
            env.tmp / f".p.csv.another.host-{2 ** 22 + 12345}.h51yhagm.streamcov-tmp",
            env.tmp / f".q.csv.{host}-{2 ** 22 + 12345}.h51yhagm.streamcov-tmp", env.tmp / "p.csv.tmp"]
    for p in (dead, *kept):
        p.write_bytes(b"half written")
    rc, err, _ = cli("predict", shared["model"], shared["synth"], "--out", out, "--scheduler", "synchronous")
    assert rc == 0, err
    assert not dead.exists() and all(p.exists() for p in kept)
    assert out.read_text().startswith("id,predicted,label\n")
    assert not [p for p in env.tmp.glob(f".p.csv.{host}-{os.getpid()}.*") if p not in kept]   # its own renamed


def test_an_out_name_too_long_for_the_temporary_is_refused_before_the_work(shared, env):
    """--out of 250 characters fits the file system (255) but not its temporary (host and pid added): the
    predictions were computed, then writing them was a traceback. The folder is probed with the temporary's own
    name first."""
    out = env.tmp / ("p" * 246 + ".csv")
    rc, err, _ = cli("predict", shared["model"], shared["synth"], "--out", out, "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r"^streamcov predict: error: --out \S+\.csv: cannot write there \(File name too "
                                   r"long\); choose another path$")
    assert not list(env.tmp.glob(".p*"))


def test_a_run_on_another_store_says_it_replaces_the_earlier_results_and_no_stale_predictions_stay(shared, env):
    """A shipped file run with --store writes the file's output folder: it replaced the earlier run's results on
    another store without a word, and the earlier model's predictions (predict's default place, inside the model
    folder) stayed beside the new model, taken for its own. The run says so; the new model's folder holds no
    predictions of another model (a user's other files there stay)."""
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    model = env.tmp / "out" / "model"
    assert cli("predict", model, shared["synth"], "--scheduler", "synchronous")[0] == 0
    preds = list((model / "predictions").glob("*.csv"))
    assert len(preds) == 1
    (model / "predictions" / "notes.txt").write_text("mine\n")
    other = env.copy("synth", env.tmp / "other.zarr")
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous", "--store", other)
    assert rc == 0, err
    assert re.search(rf"(?m)^streamcov run: note: {re.escape(str(env.tmp / 'out'))}: the results of an earlier run "
                     rf"on another store \(\S+synth\.zarr\) are replaced; give --output to keep both$", err), err
    assert not preds[0].exists() and (model / "predictions" / "notes.txt").exists()
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous", "--store", other)
    assert rc == 0 and "replaced" not in err, err   # the same store again: nothing to say


def test_a_rerun_that_cannot_write_the_earlier_runs_files_is_refused_before_it_removes_anything(shared, env,
                                                                                                monkeypatch):
    """A team's shared output folder (group-writable, umask 002): another user's rerun removed the first user's
    result.json and predictions.csv, then stopped at the first user's feature store, which it cannot write. A
    path the run writes again that this user cannot write (a folder, or a file of its model, checkpoints or
    feature store) is now refused in one line before anything is removed. (The suite runs as root, whom
    access(2) lets write anything: the other user's files are those it is told are not writable.)"""
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    out = env.tmp / "out"
    kept = {p: p.read_bytes() for p in (out / "result.json", out / "predictions.csv")}
    stores = sorted(out.glob("features*.zarr"))
    assert stores and (out / "model").is_dir()
    real = os.access
    for theirs in (out / "model" / "model.json", stores[0] / "zarr.json", out / "checkpoints", out):
        monkeypatch.setattr(os, "access", lambda p, mode, *a, theirs=theirs, **k: False if Path(p) == theirs else
                            real(p, mode, *a, **k))
        rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
        assert_one_line_error(rc, err, rf"^streamcov run: error: output = \"\S+\": {re.escape(str(theirs))} cannot be "
                                       rf"written by this user \(owned by root\), and the run writes there; the "
                                       rf"earlier run's files are left as they are: choose another output folder, "
                                       rf"or ask the owner for write access$")
        assert {p: p.read_bytes() for p in kept} == kept
    # a store of another user's mode 0700: its files cannot even be listed (os.walk passed over it)
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: Path(p) != stores[0] / "zarr.json" and
                        real(p, mode, *a, **k))
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p=".": (_ for _ in ()).throw(PermissionError(
        13, "Permission denied", str(p))) if Path(p) == stores[0] else real_scandir(p))
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, rf"^streamcov run: error: output = \"\S+\": {re.escape(str(stores[0]))} cannot "
                                   rf"be written by this user \(owned by root\)")
    assert {p: p.read_bytes() for p in kept} == kept
    monkeypatch.setattr(os, "scandir", real_scandir)
    monkeypatch.setattr(os, "access", real)
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err


def test_an_earlier_result_naming_its_store_relative_to_an_unknown_folder_is_matched_from_the_output_folder(
        shared, env):
    """Runs before 2026-12-01 recorded the store as typed, relative to their working directory: the same store run
    again from another folder was called another store. Such a path is matched from the working directory and
    from the folders above the output folder; one that names no store from there still gets the note."""
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    result = env.tmp / "out" / "result.json"
    for earlier, said in ((os.path.relpath(shared["synth"], env.tmp), False),   # typed in the folder above "out"
                          ("elsewhere/" + Path(shared["synth"]).name, True)):
        doc = json.loads(result.read_text())
        doc["store"] = earlier
        result.write_text(json.dumps(doc))
        rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
        assert rc == 0, err
        assert ("on another store" in err) is said, (earlier, err)
        if said:
            assert re.search(rf"on another store \({re.escape(earlier)}\) are replaced", err), err


def test_a_run_that_reuses_every_feature_reports_no_time_per_row_and_only_the_maps_own_parameters(env):
    """A second run reused every row's features: it reported featurized_sequences 0 beside a time per sequence of
    the reuse check divided by 1 (1365 ms). Now null. feature_params listed keys the map does not read (theta,
    sampling, max_degree beside Nystroem)."""
    argv = ("run", env.pipeline(), "--quiet", "--scheduler", "synchronous", "--json", "--set",
            'features.map="nystroem"')
    first = json.loads(cli(*argv)[2].strip().splitlines()[-1])
    again = json.loads(cli(*argv)[2].strip().splitlines()[-1])
    assert first["featurized_sequences"] > 0 and first["featurize_ms_per_sequence"] > 0
    assert again["featurized_sequences"] == 0 and again["featurize_ms_per_sequence"] is None
    assert set(first["feature_params"]) == {"n_components", "sigma", "bandwidth", "fit_sample"}, first


def test_written_files_get_the_mode_open_gives_them(shared, env):
    """Models, results and predictions are written as temporary files (mode 0600) and renamed: they end with
    0666 less the umask, as a plain open gives, or keep the mode of the file they replace."""
    umask = os.umask(0o022)
    os.umask(umask)
    for f in ("result.json", "predictions.csv", "model/model.json", "model/model.npz"):
        assert stat.S_IMODE((shared["model"].parent / f).stat().st_mode) == 0o666 & ~umask, f
    out = env.tmp / "p.csv"
    out.write_text("id,predicted,label\n")   # an earlier run's predictions: replaced
    out.chmod(0o640)
    assert cli("predict", shared["model"], shared["synth"], "--out", out, "--scheduler", "synchronous")[0] == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.read_text().startswith("id,predicted,label")


# ------------------------------------------------------------------ images
def with_maps(e):
    """An image folder (2 classes of 2 images) holding 3 more images in folders named maps, at two depths."""
    folder = image_folder("imgs")(e)
    for sub, n in (("maps", 2), ("a/maps", 1)):
        (folder / sub).mkdir(parents=True)
        for i in range(n):
            shutil.copy(folder / "a" / "0.png", folder / sub / f"m{i}.png")
    return folder


def with_image(name: str, write: Callable[[Path], None], base=None):
    """An image folder (2 classes of 16 x 16) with one more file ``a/<name>`` written by ``write``."""
    def argv(e):
        folder = image_folder("imgs")(e)
        write(folder / "a" / name)
        return ["ingest", "images", "--format", "folders", folder, e.tmp / "s.zarr", "--quiet", *(base or [])]
    return argv


def png16_rgb(path: Path, h: int = 8, w: int = 8):
    """A 16-bit RGB PNG written by hand (Pillow does not write them): IHDR depth 16, colour type 2."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + np.full((w, 3), 40000, ">u2").tobytes() for _ in range(h))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def tiff16_rgb(path: Path, h: int = 8, w: int = 8):
    """A 16-bit RGB TIFF written by hand (little endian, one uncompressed strip): Pillow opens it as 8-bit RGB."""
    import struct

    pixels = np.full((h, w, 3), 40000, "<u2").tobytes()
    entries = [(256, 3, 1, w), (257, 3, 1, h), (258, 3, 3, 8 + 2 + 10 * 12 + 4), (259, 3, 1, 1), (262, 3, 1, 2),
               (273, 4, 1, 8 + 2 + 10 * 12 + 4 + 6), (277, 3, 1, 3), (278, 3, 1, h), (279, 4, 1, len(pixels)),
               (284, 3, 1, 1)]
    ifd = struct.pack("<H", len(entries)) + b"".join(struct.pack("<HHII", *e) for e in entries) + b"\0\0\0\0"
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack("<3H", 16, 16, 16) + pixels)


def save_array(arr, **kw):
    def write(path):
        from PIL import Image
        Image.fromarray(arr).save(path, **kw)
    return write


def image_files(name: str, files: dict):
    """A folder ``name`` of the files ``files`` (path in the folder: the function that writes it)."""
    def make(e):
        for rel, write in files.items():
            (e.tmp / name / rel).parent.mkdir(parents=True, exist_ok=True)
            write(e.tmp / name / rel)
        return e.tmp / name
    return make


def cut_jpeg(path: Path):
    """A JPEG cut to a third, as an interrupted copy leaves it."""
    save_array(np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8))(path)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 3])


# folders whose first image (in the ingestion's order) cannot be read, and one whose every image is skipped
NOT_A_PNG = image_files("bad", {"a/x.png": lambda p: p.write_bytes(b"not a png"),
                                "b/y.png": save_array(np.zeros((16, 16), np.uint8))})
CUT_JPEG = image_files("cut", {"a/x.jpg": cut_jpeg, "b/y.png": save_array(np.zeros((16, 16), np.uint8))})
ALL_TINY = image_files("tiny", {"a/x.png": save_array(np.zeros((1, 5), np.uint8)),
                                "b/y.png": save_array(np.zeros((1, 1), np.uint8))})
NOT_A_PNG_ERROR = r"bad/a/x\.png: cannot decode image: not an image file Pillow can read; save it as PNG, JPEG"
# a 16-bit first image into an 8-bit store; a first image skipped (1 x 5 pixels) and the next one not an image
FIRST_16BIT = image_files("b16", {"a/x.png": save_array(np.full((8, 8), 40000, np.uint16)),
                                  "b/y.png": save_array(np.zeros((16, 16), np.uint8))})
TINY_THEN_BAD = image_files("tb", {"a/x.png": save_array(np.zeros((1, 5), np.uint8)),
                                   "b/y.png": lambda p: p.write_bytes(b"not a png")})
ALL_TINY_ERROR = (r"tiny/a/x\.png: image of 1 x 5 pixels; at least 2 x 2 are needed: skipped, and so was every other "
                  r"image of \S+tiny \(2\); nothing is left to store$")


def incomplete_store_left(e, err, out):
    """The check of an ingestion refused on a later image: its store ``s.zarr`` stays, incomplete (exit 3 of
    ``info``) and holding the images read before that one (``a/0.png`` and ``a/1.png``: those of image_folder
    that come first); its lock is gone. (Fixing the image changes the archive: the store is then started over,
    test_an_ingestion_refused_on_a_later_item_keeps_those_read_before_it.)"""
    nothing_left_in(lambda e: e.tmp, {"imgs", "s.zarr"})(e, err, out)
    rc, _, info = cli("info", e.tmp / "s.zarr", "--json")
    store = json.loads(info)["store"]
    assert rc == 3 and store["complete"] is False and store["committed_images"] == 2, info


def ingest_into_new_folder(folder_fn):
    """``ingest images`` of the folder ``folder_fn`` made, into a store in folders that do not exist yet."""
    return lambda e: ["ingest", "images", "--format", "folders", folder_fn(e), e.tmp / "new" / "deeper" / "s.zarr",
                      "--quiet"]


def image_run(edit: Callable[[str], str] = lambda t: t, store: Callable | None = None):
    def argv(e):
        s = store(e) if store else e.shared["img_store"]
        text = edit(IMAGE_PIPELINE.format(out=e.tmp / "o", store=s))
        return ["run", e.pipeline(text), "--quiet", "--scheduler", "synchronous"]
    return argv


def colour_model(e) -> Path:
    """A model of the stream image task on RGB features (preset fish), trained on 2 x 4 colour images."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (e.tmp / "rgb" / c).mkdir(parents=True, exist_ok=True)
        for i in range(4):
            Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(e.tmp / "rgb" / c / f"{i}.png")
    store = e.tmp / "rgb.zarr"
    rc, err, _ = cli("ingest", "images", "--format", "folders", e.tmp / "rgb", store, "--quiet")
    assert rc == 0, err
    text = IMAGE_PIPELINE.format(out=e.tmp / "o", store=store).replace('preset = "texture"', 'preset = "fish"')
    rc, err, _ = cli("run", e.pipeline(text), "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    return e.tmp / "o" / "model"


def float_folder(name, top, n=2, size=24, seed=1):
    """Float TIFF images (Pillow mode F) with pixels from 0 to about ``top``, 2 classes of ``n``."""
    def make(e):
        from PIL import Image
        rng = np.random.default_rng(seed)
        for c in ("a", "b"):
            (e.tmp / name / c).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                arr = (rng.random((size, size)) * top).astype(np.float32)
                Image.fromarray(arr).save(e.tmp / name / c / f"{i}.tif")
        return e.tmp / name
    return make


def with_a_dot(e) -> Path:
    """The grey folder of 2 x 4 images of 24 x 24 pixels and a 1 x 1 image among them."""
    from PIL import Image

    folder = image_folder("grey", n=4, size=24)(e)
    Image.fromarray(np.zeros((1, 1), np.uint8)).save(folder / "a" / "dot.png")
    return folder


def with_micro_tif(e) -> Path:
    """The grey folder of 2 x 4 images of 24 x 24 pixels and a float TIFF of 4080s among them."""
    from PIL import Image

    folder = image_folder("grey", n=4, size=24)(e)
    Image.fromarray(np.full((24, 24), 4080.0, np.float32)).save(folder / "a" / "micro.tif")
    return folder


def trained_on(folder_fn):
    """A model of the stream image task (IMAGE_PIPELINE) trained on the images of ``folder_fn``."""
    def make(e) -> Path:
        store = e.tmp / "train.zarr"
        rc, err, _ = cli("ingest", "images", "--format", "folders", folder_fn(e), store, "--quiet")
        assert rc == 0, err
        rc, err, _ = cli("run", e.pipeline(IMAGE_PIPELINE.format(out=e.tmp / "o", store=store)), "--quiet",
                         "--scheduler", "synchronous")
        assert rc == 0, err
        return e.tmp / "o" / "model"
    return make


MEMORY_IMAGE_PIPELINE = """\
task = "image-classification"
name = "in_memory"
seed = 0
output = "{out}"

[data]
source = "{source}"
format = "folders"

[pixels]
preset = "texture"

[method]
name = "approx_loghs"
classifier = "svc"
D = 8
sigma1 = [1.0]
gamma = [1e-3]
sigma2 = [1.0]
C = [10.0]
inner_folds = 2
scaling = "per-feature"

[split]
kind = "per-class"
n_train = 2
n_repeats = 1
"""


def trained_in_memory_on(folder_fn):
    """A model of the in-memory image task (``image-classification``, MEMORY_IMAGE_PIPELINE) trained on the
    images of the folder ``folder_fn`` makes."""
    def make(e) -> Path:
        text = MEMORY_IMAGE_PIPELINE.format(out=e.tmp / "o", source=folder_fn(e))
        rc, err, _ = cli("run", e.pipeline(text), "--quiet")
        assert rc == 0, err
        return e.tmp / "o" / "model"
    return make


def predict_on(model_fn, folder_fn):
    return lambda e: ["predict", model_fn(e), folder_fn(e), "--out", e.tmp / "p.csv", "--scheduler", "synchronous"]


def predict_training_folder(model_fn, folder_fn):
    """``predict`` on the very folder the model of ``model_fn(folder_fn)`` was trained on."""
    def argv(e):
        folder = folder_fn(e)
        return ["predict", model_fn(lambda _: folder)(e), folder, "--out", e.tmp / "p.csv", "--scheduler",
                "synchronous"]
    return argv


def mixed_folder(e) -> Path:
    """The grey folder of 2 x 4 images of 24 x 24 pixels, with one of them in colour."""
    from PIL import Image

    folder = image_folder("mixed", n=4, size=24)(e)
    Image.fromarray(np.random.default_rng(5).integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(folder / "a" / "0.png")
    return folder


def in_memory_on_part_of_its_store(e) -> list:
    """``predict`` of a model of the in-memory task trained on 4 images per class of a store (data.max_per_class:
    no identity recorded), on that store."""
    store = ingested(image_folder("grey", n=6, size=24))(e)
    text = MEMORY_IMAGE_PIPELINE.format(out=e.tmp / "o", source=store).replace(
        'source = "', 'store = "').replace('format = "folders"', 'format = "store"\nmax_per_class = 4')
    rc, err, _ = cli("run", e.pipeline(text), "--quiet")
    assert rc == 0, err
    return ["predict", e.tmp / "o" / "model", store, "--out", e.tmp / "p.csv", "--scheduler", "synchronous"]


def assert_size_recorded(model: Path, height, width):
    info = json.loads((model / "model.json").read_text())["info"]
    assert info["image_size"] == {"height": height, "width": width}, info


def masked_folder(e) -> Path:
    """The grey folder of 2 x 4 images, with a folder of 3 masks in each class."""
    from PIL import Image

    folder = image_folder("masked", n=4, size=24)(e)
    for c in ("a", "b"):
        (folder / c / "masks").mkdir()
        for i in range(3):
            Image.fromarray(np.full((24, 24), 50 * i, np.uint8)).save(folder / c / "masks" / f"{i}.png")
    return folder


def hidden_masks(e) -> Path:
    """Another grey folder of 2 x 2 images whose only 'masks' folder lies in a hidden folder."""
    from PIL import Image

    folder = image_folder("other", n=2, size=24, seed=3)(e)
    (folder / ".thumbs" / "masks").mkdir(parents=True)
    Image.fromarray(np.zeros((24, 24), np.uint8)).save(folder / ".thumbs" / "masks" / "0.png")
    return folder


def trained_without_masks(folder_fn):
    """A model of the in-memory image task trained with data.exclude = ["masks"]."""
    def make(e) -> Path:
        text = MEMORY_IMAGE_PIPELINE.format(out=e.tmp / "o", source=folder_fn(e)).replace(
            'format = "folders"\n', 'format = "folders"\nexclude = ["masks"]\n')
        rc, err, _ = cli("run", e.pipeline(text), "--quiet")
        assert rc == 0, err
        return e.tmp / "o" / "model"
    return make


def masks_left_out(e, err, out):
    res = json.loads(out.strip().splitlines()[-1])
    assert res["n"] == 8 and res["excluded"] == 6 and res["includes_training_rows"] is True, res
    ids = [row.split(",")[0] for row in (e.tmp / "p.csv").read_text().splitlines()[1:]]
    assert len(ids) == 8 and not any("masks" in i for i in ids), ids


def training_rows_noted(e, err, out):
    assert json.loads(out.strip().splitlines()[-1])["includes_training_rows"] is True, out


def ingested(folder_fn, *flags):
    def make(e):
        out = e.tmp / "i.zarr"
        rc, err, _ = cli("ingest", "images", "--format", "folders", folder_fn(e), out, "--quiet", *flags)
        assert rc == 0, err
        return out
    return make


def store_attr(key, expected):
    def check(e, err, out):
        import zarr
        attrs = dict(zarr.open_group(e.tmp / "s.zarr", mode="r").attrs)
        assert re.search(expected, json.dumps(attrs[key])), attrs[key]
    return check


IMAGES = [
    # the in-memory task's images x images distance matrices: killed by the kernel (exit 139, no word) before
    Case("image-distance-matrices-too-large", lambda e: [
        "run", "--demo", "images", "--set", "data.patch=4", "--set", "method.sigma1=[0.25, 0.5, 1, 2, 4, 8]",
        "--set", "method.gamma=[1e-4, 1e-3, 1e-2, 1e-1]", "--output", e.tmp / "o"],
         r"49152 images \(24 distance matrices of 49152 x 49152\): needs \S+ \S+ of memory, this process may use "
         r"\S+ \S+; use fewer images \(data\.max_per_class; a larger data\.patch for textures\)"),
    # folders named maps (ETH-80's segmentation maps) are left out by default: said, with their count
    Case("ingest-says-what-maps-left-out", lambda e: ["ingest", "images", "--format", "folders", with_maps(e),
                                                      e.tmp / "s.zarr"],
         r"(?m)^streamcov ingest: note: 3 image\(s\) in folders named 'maps' left out \(--exclude; the default "
         r"leaves out ETH-80's segmentation maps\)$", rc=0,
         check=lambda e, err, out: json.loads(out.strip().splitlines()[-1])["excluded"] == 3 or pytest.fail(out)),
    Case("predict-says-what-maps-left-out", lambda e: ["predict", e.shared["img_model"], with_maps(e), "--out",
                                                       e.tmp / "p.csv", "--scheduler", "synchronous"],
         r"(?m)^streamcov predict: note: 3 image\(s\) in folders named 'maps' under \S+imgs left out, not "
         r"predicted \(ETH-80's segmentation maps, as `streamcov ingest images` leaves them out by default\); "
         r"rename those folders to predict their images$", rc=0,
         check=lambda e, err, out: (json.loads(out.strip().splitlines()[-1])["excluded"] == 3
                                    and len((e.tmp / "p.csv").read_text().splitlines()) == 5) or pytest.fail(out)),
    Case("folder-missing", lambda e: ["ingest", "images", "--format", "folders", e.tmp / "none", e.tmp / "s.zarr"],
         r"none: image folder not found"),
    # the folder is read before anything is written: no parent folder of the store (nor lock) left behind
    Case("folder-missing-out-in-new-folder", lambda e: ["ingest", "images", "--format", "folders", e.tmp / "none",
                                                        e.tmp / "new" / "deeper" / "s.zarr"],
         r"none: image folder not found$", check=nothing_left_in(lambda e: e.tmp, set())),
    Case("folder-empty", lambda e: ["ingest", "images", "--format", "folders", e.tmp, e.tmp / "s.zarr"],
         r": no images \(.*png"),
    # ... and from `run`'s [data] source (it made the store's folder before the ingestion read the image folder)
    Case("run-source-without-images-store-in-new-folder", source_run(
        IMAGE_PIPELINE, lambda e: (e.tmp / "empty" / "a").mkdir(parents=True) or e.tmp / "empty"),
         r"empty: no images \(.*png", check=nothing_left_in(lambda e: e.tmp, {"empty", "p.toml"})),
    Case("folder-empty-out-in-new-folder", lambda e: ["ingest", "images", "--format", "folders",
                                                      (lambda d: d.mkdir() or d)(e.tmp / "empty"),
                                                      e.tmp / "new" / "s.zarr"],
         r"empty: no images \(.*png", check=nothing_left_in(lambda e: e.tmp, {"empty"})),
    # a first image that cannot be read is read before the lock, and a store that holds no image (every image
    # skipped) is removed: nothing is left, neither an empty incomplete store nor the folders made for it
    Case("first-image-not-an-image-out-in-new-folder", ingest_into_new_folder(NOT_A_PNG), NOT_A_PNG_ERROR,
         check=nothing_left_in(lambda e: e.tmp, {"bad"})),
    Case("first-image-cut-jpeg-out-in-new-folder", ingest_into_new_folder(CUT_JPEG),
         r"cut/a/x\.jpg: cannot decode image \(.*\); the file is damaged or cut short: copy it again, or remove it "
         r"from the folder" + SKIP_HINT, check=nothing_left_in(lambda e: e.tmp, {"cut"})),
    Case("every-image-skipped-out-in-new-folder", ingest_into_new_folder(ALL_TINY), ALL_TINY_ERROR,
         check=nothing_left_in(lambda e: e.tmp, {"tiny"})),
    # ... and so is a store that holds no image when a refusal comes from the first image kept or a later one
    Case("first-image-16-bit-into-8-bit-out-in-new-folder",
         lambda e: ingest_into_new_folder(FIRST_16BIT)(e) + ["--pixel-dtype", "uint8"],
         r"b16/a/x\.png: 16-bit image but the store holds 8-bit pixels; ingest with the pixel dtype auto",
         check=nothing_left_in(lambda e: e.tmp, {"b16"})),
    Case("first-image-skipped-next-not-an-image-out-in-new-folder", ingest_into_new_folder(TINY_THEN_BAD),
         r"tb/b/y\.png: cannot decode image", check=nothing_left_in(lambda e: e.tmp, {"tb"})),
    # ... from `run`'s [data] source too: neither the store's folder nor the output folder is left
    Case("run-source-first-image-not-an-image", source_run(IMAGE_PIPELINE, NOT_A_PNG), NOT_A_PNG_ERROR,
         check=nothing_left_in(lambda e: e.tmp, {"bad", "p.toml"})),
    Case("run-source-every-image-skipped", source_run(IMAGE_PIPELINE, ALL_TINY), ALL_TINY_ERROR,
         check=nothing_left_in(lambda e: e.tmp, {"tiny", "p.toml"})),
    # a later image that cannot be read, once the store exists, leaves it incomplete, holding the images read before it
    Case("later-image-not-an-image-leaves-an-incomplete-store",
         with_image("zz.png", lambda p: p.write_bytes(b"not a png")), r"a/zz\.png: cannot decode image",
         check=incomplete_store_left),
    Case("images-out-empty", lambda e: ["ingest", "images", "--format", "folders", image_folder("imgs")(e), ""],
         r"streamcov ingest images: error: argument out: empty path"),
    Case("image-not-decodable", with_image("bad.png", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n garbage")),
         r"bad\.png: cannot decode image"),
    Case("image-truncated", with_image("cut.png", lambda p: (
        save_array(np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8))(p),
        p.write_bytes(p.read_bytes()[:2000]))),
         r"cut\.png: cannot decode image \(.*\); the file is damaged or cut short: copy it again, or remove it from "
         r"the folder" + SKIP_HINT),
    Case("images-every-class-excluded", lambda e: ["ingest", "images", "--format", "folders", image_folder("imgs")(e),
                                                   e.tmp / "s.zarr", "--exclude", "a", "--exclude", "b"],
         r"imgs: no images \(.*\) in class folders; folders named 'a', 'b' were left out \(--exclude, or data\.exclude "
         r"in a pipeline; by default maps\): leave out fewer$"),
    # a class folder without images would vanish from the store and from every model trained on it
    Case("image-class-folder-empty", lambda e: ["ingest", "images", "--format", "folders",
                                                (lambda f: ((f / "c").mkdir(), (f / "c" / "notes.txt").touch(), f)[-1])(
                                                    image_folder("imgs")(e)), e.tmp / "s.zarr"],
         r"imgs/c: a class folder with no images \(\.png, .*\): its class cannot be learned; add its images or "
         r"remove the folder$", check=no_store),
    Case("image-class-folder-only-maps", lambda e: ["ingest", "images", "--format", "folders",
                                                    (lambda f: (shutil.copytree(f / "a", f / "c" / "maps"), f)[-1])(
                                                        image_folder("imgs")(e)), e.tmp / "s.zarr"],
         r"imgs/c: a class folder with no images \(.*\) \(the folders it holds are left out: --exclude, or "
         r"data\.exclude in a pipeline; by default maps\): its class cannot be learned; add its images or remove the folder$", check=no_store),
    # a zip made on macOS leaves __MACOSX/ (resource forks, ._ files) beside the classes: not a class; and the
    # excluded-folder hint is given only for the class folder that held excluded folders
    Case("image-macosx-folder-is-not-a-class", lambda e: ["ingest", "images", "--format", "folders",
                                                          (lambda f: ((f / "__MACOSX" / "a").mkdir(parents=True),
                                                                      (f / "__MACOSX" / "a" / "._0.png").touch(),
                                                                      (f / "empty").mkdir(), f)[-1])(with_maps(e)),
                                                          e.tmp / "s.zarr"],
         r"imgs/empty: a class folder with no images \(\.png, [^()]*\): its class cannot be learned; add its images "
         r"or remove the folder$", check=no_store),
    # two classes on Linux, one folder on macOS or Windows: said, not refused (letter datasets name classes A and a)
    Case("image-classes-differ-only-in-case", lambda e: ["ingest", "images", "--format", "folders",
                                                         (lambda f: (shutil.copytree(f / "a", f / "A"), f)[-1])(
                                                             image_folder("imgs")(e)), e.tmp / "s.zarr", "--quiet"],
         r"(?m)^streamcov ingest: warning: class folders of \S+imgs that differ only in case are different classes "
         r"here: 'A' and 'a'; on a case-insensitive file system \(macOS, Windows\) they would be one folder\. Rename "
         r"them if they mean one class$", rc=0,
         check=lambda e, err, out: json.loads(out.strip().splitlines()[-1])["labels"] == 3 or pytest.fail(out)),
    Case("image-directly-under-root", lambda e: ["ingest", "images", "--format", "folders",
                                                 (lambda f: (save_array(np.zeros((8, 8), np.uint8))(f / "x.png"), f)[1])(
                                                     image_folder("imgs")(e)), e.tmp / "s.zarr"],
         r"x\.png: image directly under the root folder"),
    # --exclude names folders: a typo, an empty name or a path would leave in what it meant to leave out
    Case("exclude-names-no-folder", lambda e: ["ingest", "images", "--format", "folders", image_folder("imgs")(e),
                                               e.tmp / "s.zarr", "--exclude", "mpas"],
         r"error: --exclude mpas, or data\.exclude = \"mpas\" in a pipeline: no folder of that name under \S+imgs; "
         r"check the name \(folder names are case-sensitive\)$"),
    Case("exclude-a-path", lambda e: ["ingest", "images", "--format", "folders", image_folder("imgs")(e),
                                      e.tmp / "s.zarr", "--exclude", "a/maps"],
         r"error: --exclude a/maps, or data\.exclude = \"a/maps\" in a pipeline: a folder name to skip \(e\.g\. "
         r"maps\), not a path or an empty name$"),
    # a link to a class folder is read; hidden folders and files (.git, thumbnails) are not images of the set
    Case("linked-class-and-hidden-entries", lambda e: ["ingest", "images", "--format", "folders", (lambda f: (
        (e.tmp / "elsewhere").mkdir(), shutil.copytree(f / "a", e.tmp / "elsewhere" / "c"),
        (f / "c").symlink_to(e.tmp / "elsewhere" / "c"), shutil.copytree(f / "a", f / ".git"),
        shutil.copytree(f / "b", f / "b" / ".thumbs"), f)[-1])(image_folder("imgs")(e)), e.tmp / "s.zarr"],
         r'"images": 6, "labels": 3', rc=0),
    Case("folder-link-cycle", lambda e: ["ingest", "images", "--format", "folders", (lambda f: (
        (f / "a" / "loop").symlink_to(f), f)[-1])(image_folder("imgs")(e)), e.tmp / "s.zarr"],
         r"imgs/a/loop: a folder link that leads back to a folder it lies in \(a cycle\); remove the link$"),
    Case("folder-read-twice", lambda e: ["ingest", "images", "--format", "folders", (lambda f: (
        (f / "0_link").symlink_to(f / "b"), f)[-1])(image_folder("imgs")(e)), e.tmp / "s.zarr"],
         r"imgs/b: the same folder as \S+imgs/0_link \(one of them is a link\): its images would be read twice; "
         r"remove one of them$"),
    Case("group-level-zero", lambda e: ["ingest", "images", "--format", "folders", e.tmp, e.tmp / "s.zarr",
                                        "--group-level", "0"], r"argument --group-level: expected an integer >= 1"),
    Case("group-level-too-deep", lambda e: ["ingest", "images", "--format", "folders", image_folder("imgs")(e),
                                            e.tmp / "s.zarr", "--group-level", "3"],
         r"[ab]/0\.png: lies 1 folder level\(s\) deep but the group level \(--group-level, or "
         r"data\.group_level in a pipeline\) is 3"),
    # integers are stored as fractions of their range, floats as they are: mixed, they would lie on two scales
    Case("float-among-integer-images", with_image("micro.tif", save_array(np.full((16, 16), 4080.0, np.float32))),
         r"a/micro\.tif: float pixels from 4080 to 4080, but \S+\.png \(and maybe others\) has integer pixels, "
         r"stored as fractions of their range \(0 to 1\): the two would lie on different scales; scale the float "
         r"images to 0 to 1, or convert them to integers$"),
    # the in-memory task read the folder as it came and trained on the two scales (its model then refused it)
    Case("float-among-integer-images-in-memory",
         lambda e: ["run", e.pipeline(MEMORY_IMAGE_PIPELINE.format(out=e.tmp / "o", source=with_micro_tif(e))),
                    "--quiet"],
         r"a/micro\.tif: float pixels from 4080 to 4080, but \S+\.png \(and maybe others\) has integer pixels, "
         r"stored as fractions of their range \(0 to 1\): the two would lie on different scales; scale the float "
         r"images to 0 to 1, or convert them to integers$"),
    # Pillow reads a 16-bit colour PNG at 8 bits without a word
    Case("png-16-bit-rgb", with_image("deep_rgb.png", png16_rgb),
         r"a/deep_rgb\.png: 16-bit RGB PNG: it would be read at 8 bits; save it as 8-bit RGB, or as 16-bit grey if "
         r"its depth matters" + SKIP_HINT),
    Case("tiff-16-bit-rgb", with_image("deep_rgb.tif", tiff16_rgb),
         r"a/deep_rgb\.tif: 16-bit colour TIFF: it would be read at 8 bits; save it as 8-bit RGB, or as 16-bit grey "
         r"if its depth matters" + SKIP_HINT),
    Case("image-empty-file", with_image("empty.png", lambda p: p.write_bytes(b"")),
         r"a/empty\.png: cannot decode image: an empty file \(0 bytes\), an interrupted copy\? copy it again or "
         r"remove it" + SKIP_HINT),
    Case("image-not-an-image", with_image("notes.png", lambda p: p.write_text("hello")),
         r"a/notes\.png: cannot decode image: not an image file Pillow can read; save it as PNG, JPEG or TIFF"),
    # a photo Pillow cannot decode would otherwise be skipped, its class quietly losing it
    Case("image-heic-refused", with_image("IMG_0001.HEIC", lambda p: p.write_bytes(b"\0\0\0\x18ftypheic")),
         r"a/IMG_0001\.HEIC: \.HEIC images are not read \(Pillow has no decoder for them\); convert them to PNG or "
         r"JPEG, or move them out of the image folder$"),
    Case("pixel-dtype-too-small", with_image("deep.png", save_array(np.full((16, 16), 40000, np.uint16)),
                                             ["--pixel-dtype", "uint8"]),
         r"a/deep\.png: 16-bit image but the store holds 8-bit pixels; ingest with the pixel dtype auto "
         r"\(the default\) or uint16: --pixel-dtype, or data\.pixel_dtype in a pipeline$"),
    Case("pixel-dtype-unknown", with_image("x.png", save_array(np.zeros((16, 16), np.uint8)), ["--pixel-dtype", "int4"]),
         r"argument --pixel-dtype: invalid choice: 'int4'"),
    Case("image-multi-page-tiff", with_image("pages.tif", lambda p: __import__("PIL.Image").Image.fromarray(
        np.zeros((16, 16), np.uint8)).save(p, save_all=True, append_images=[
            __import__("PIL.Image").Image.fromarray(np.ones((16, 16), np.uint8))])),
         r"pages\.tif: 2 frames \(an animation or a multi-page file\); streamcov reads single-frame images"),
    Case("grey-image-colour-preset", image_run(lambda t: t.replace('preset = "texture"', 'preset = "fish"'),
                                               ingested(image_folder("grey"))),
         r'error: \S+p\.toml, line 10: pixels\.preset = "fish" uses R, G, B but image a/0\.png is grey; '
         r"give colour images, or features of grey images \(I and its derivatives in place of R, G, B\)$"),
    # at predict time the advice is about the images given, not the spec the model was trained with
    Case("colour-model-on-grey-images", lambda e: ["predict", colour_model(e), image_folder("grey")(e),
                                                   "--out", e.tmp / "p.csv", "--scheduler", "synchronous"],
         r"error: \S+/grey: image a/0\.png is grey, but the model's features "
         r'\(pixels\.preset = "fish"\) use R, G, B; give it colour images, or train a model on grey features for '
         r"grey ones$"),
    # integer images are read as fractions of their range, float images as they are: another scale at predict
    # time would give features 255 times off and predictions without a word
    # the in-memory task's models (trained_in_memory_on) recorded none of it: float 0..255 images were predicted
    # without a word
    *[Case(f"float-255-images-on-8-bit-{kind}model",
           predict_on(trainer(image_folder("grey", n=4, size=24)), float_folder("f255", 255.0)),
           r"error: \S+/f255: float images with pixels up to 25\d(\.\d+)? in magnitude, but the model in \S+ was "
           r"trained on uint8 images, read as fractions of their range \(0 to 1\): its features would be on another "
           r"scale; scale them to 0 to 1 \(divide 8-bit values by 255\), or train a model on images like these$")
      for kind, trainer in (("", trained_on), ("in-memory-", trained_in_memory_on))],
    *[Case(f"8-bit-images-on-float-255-{kind}model",
           predict_on(trainer(float_folder("f255", 255.0, n=4)), image_folder("grey", size=24)),
           r"error: \S+/grey: uint8 images, read as fractions of their range \(0 to 1\), but the model in \S+ was "
           r"trained on float images with pixels up to 25\d(\.\d+)? in magnitude: .*; give float images on the "
           r"model's scale \(up to 25\d(\.\d+)?\), or train a model on images like these$")
      for kind, trainer in (("", trained_on), ("in-memory-", trained_in_memory_on))],
    Case("float-unit-images-on-8-bit-model",
         predict_on(trained_on(image_folder("grey", n=4, size=24)), float_folder("f1", 1.0)),
         r'"n": 4', rc=0),
    # ... and scored the folder of its own training images as new data
    Case("in-memory-model-on-its-training-folder",
         predict_training_folder(trained_in_memory_on, image_folder("grey", n=4, size=24)),
         r"note: these are the images the model was trained on \(\S+/grey\): its training images are among them, "
         r"so this accuracy is not a test accuracy", rc=0, check=training_rows_noted),
    # a run that ingests its data.source said nothing of the images ingestion skipped (ingest warns of them)
    Case("run-says-what-its-ingestion-skipped",
         lambda e: ["run", e.pipeline(IMAGE_PIPELINE.format(out=e.tmp / "o", store=e.tmp / "new.zarr").replace(
             '[data]\n', f'[data]\nsource = "{with_a_dot(e)}"\nformat = "folders"\n')), "--scheduler", "synchronous"],
         r"(?m)^streamcov run: warning: 1 image\(s\) of the store's source were skipped when it was ingested "
         r"\(a/dot\.png: image of 1 x 1 pixels; at least 2 x 2 are needed\) and have no row here; the store "
         r"lists them \(`streamcov info \S+new\.zarr`\)$", rc=0),
    # the folders its training left out (data.exclude): their images were scored, and the folder called new data
    Case("in-memory-model-on-its-training-folder-without-its-masks",
         predict_training_folder(trained_without_masks, masked_folder),
         r"note: 6 image\(s\) in folders named 'masks' under \S+/masked left out, not predicted \(as the model's "
         r"training left out folders named 'masks': data\.exclude, or ingest images --exclude\); rename those folders "
         r"to predict their "
         r"images", rc=0, check=masks_left_out),
    # ... in a folder that has no such folder but in places never read (a hidden one): no --exclude to blame
    Case("model-without-masks-on-a-folder-without-them", lambda e: [
        "predict", trained_without_masks(masked_folder)(e), hidden_masks(e), "--out", e.tmp / "p.csv",
        "--scheduler", "synchronous"], r'"n": 4', rc=0),
    # grey and colour images together: their shapes (h, w) and (h, w, 3) made the sizes' record fail after training
    Case("in-memory-model-of-grey-and-colour-images",
         lambda e: ["predict", trained_in_memory_on(mixed_folder)(e), image_folder("grey2", size=24, seed=2)(e),
                    "--out", e.tmp / "p.csv", "--scheduler", "synchronous"], r'"n": 4', rc=0,
         check=lambda e, err, out: assert_size_recorded(e.tmp / "o" / "model", [24, 24], [24, 24])),
    # its own store, of which it used a part: not "another one" written from the same data
    Case("in-memory-model-on-part-of-its-store", in_memory_on_part_of_its_store,
         r"note: this is the model's training store, of which the model was trained on a part whose test rows are "
         r"not known here \(no identity recorded: data\.max_per_class\?\)", rc=0, check=training_rows_noted),
    # x, y in pixels: images of another size get descriptors the model never saw (chance-level, without a word)
    Case("image-size-other-than-training-noted",
         predict_on(trained_in_memory_on(image_folder("grey", n=4, size=24)), image_folder("big", size=48)),
         r"note: 4 of 4 images are of another size than the model's training images \(24 x 24 pixels; first: "
         r"a/0\.png, 48 x 48\): the descriptor's pixel coordinates \(x, y\) grow with the image, so their "
         r"predictions may be wrong; resize them", rc=0),
    Case("image-size-other-than-training-noted-stream-model",
         predict_on(trained_on(image_folder("grey", n=4, size=24)), image_folder("small", size=12)),
         r"note: 4 of 4 images are of another size than the model's training images \(24 x 24 pixels", rc=0),
    Case("image-size-as-training-no-note",
         predict_on(trained_on(image_folder("grey", n=4, size=24)), image_folder("same", size=24, seed=3)),
         r'"n": 4', rc=0, check=lambda e, err, out: "another size" not in err + out),
    Case("predict-arguments-swapped-image-folder",
         lambda e: ["predict", image_folder("grey", size=24)(e), trained_in_memory_on(image_folder("t", n=4,
                                                                                                   size=24))(e)],
         r"error: \S+/grey: not a model folder, and \S+/model is one \(the arguments are MODEL then the images or "
         r"STORE\); streamcov predict MODEL STORE$"),
    Case("stride-leaves-one-pixel", image_run(lambda t: t.replace('preset = "texture"', 'preset = "texture"\nstride = 64')),
         r"pixels\.stride = 64: image \S+ of 24 x 24 pixels keeps 1 sampled pixel .*lower the stride"),
    # documented results
    Case("sixteen-bit-auto", with_image("deep.png", save_array(np.full((16, 16), 40000, np.uint16))),
         r'"images": 5', rc=0, check=store_attr("pixel_dtype", "uint16")),
    Case("sixteen-bit-tiff-auto", with_image("deep.tif", save_array(np.full((16, 16), 40000, np.uint16))),
         r'"images": 5', rc=0, check=store_attr("pixel_dtype", "uint16")),
    Case("gif-and-webp-read", with_image("g.gif", lambda p: (
        save_array(np.full((16, 16), 7, np.uint8))(p),
        save_array(np.full((16, 16, 3), 9, np.uint8), lossless=True)(p.parent / "w.webp"))),
         r'"images": 6', rc=0),
    Case("float-tiff-auto", with_image("f.tif", save_array(np.full((16, 16), 0.5, np.float32))),
         r'"images": 5', rc=0, check=store_attr("pixel_dtype", "float32")),
    Case("tiny-image-skipped", with_image("dot.png", save_array(np.zeros((1, 1), np.uint8))),
         r'"images": 4', rc=0, check=store_attr("skipped", r"1 x 1 pixels; at least 2 x 2")),
]


@pytest.mark.parametrize("case", IMAGES, ids=lambda c: c.id)
def test_images(case, env):
    run_case(case, env)


# ------------------------------------------------------------------ protocols and degenerate training sets
def archive_store(index_rows: list[str], n: int = 8):
    """A store ingested from a generic archive with the given index rows."""
    def make(e):
        out = e.tmp / "g.zarr"
        src = write_archive(e.tmp / "a", n=n, index_rows=index_rows)
        rc, err, _ = cli("ingest", "skeleton", "--format", "generic", src, out, "--quiet")
        assert rc == 0, err
        return out
    return make


def run_on(store_fn, *sets):
    return lambda e: ["run", e.pipeline(store=store_fn(e)), "--quiet", "--scheduler", "synchronous",
                      *[a for s in sets for a in ("--set", s)]]


def has_warning(e, err, out):
    assert "streamcov run: warning: fold 'odd-even': 1 test rows of class(es) ['c']" in err, err
    res = json.loads(out.strip().splitlines()[-1])
    assert len(res["warnings"]) == 1


def splits_file(text: str):
    def argv(e):
        (e.tmp / "folds.toml").write_text(text)
        return ["run", e.pipeline(), "--quiet", "--scheduler", "synchronous", "--set",
                'split.kind="subject-splits-file"', "--set", f'split.file="{e.tmp / "folds.toml"}"']
    return argv


# subjects 1 and 3 (training, odd) hold only class a; 2 and 4 (test) hold a and b
ONE_CLASS = ["file,label,subject", "s00.csv,a,1", "s01.csv,a,3", "s02.csv,a,1", "s03.csv,a,3",
             "s04.csv,a,2", "s05.csv,b,4", "s06.csv,b,2", "s07.csv,a,4"]
UNSEEN_CLASS = ["file,label,subject", "s00.csv,a,1", "s01.csv,b,3", "s02.csv,a,3", "s03.csv,b,1",
                "s04.csv,a,2", "s05.csv,b,4", "s06.csv,c,2", "s07.csv,a,4"]
PROTOCOLS = [
    Case("one-class-training", run_on(archive_store(ONE_CLASS)),
         r"split: the training rows of fold 'odd-even' hold one class \('a'\); a classifier needs at least 2"),
    Case("splits-file-missing", splits_file("") if False else
         (lambda e: ["run", e.pipeline(), "--quiet", "--set", 'split.kind="subject-splits-file"',
                     "--set", f'split.file="{e.tmp / "none.toml"}"']), r"split\.file.*none\.toml.*(not found|no such)"),
    Case("splits-file-bad-toml", splits_file("[[split]]\ntrain = [1, 3\n"), r"folds\.toml: invalid TOML: unclosed array at the end of the file"),
    Case("splits-file-no-tables", splits_file("\n"), r"folds\.toml: no \[\[split\]\] tables; write one per fold"),
    Case("splits-file-top-level-key", splits_file("x = 1\n"),
         r"folds\.toml, line 1: unknown key 'x'; a splits file holds \[\[split\]\] tables of train_subjects and "
         r"test_subjects$"),
    Case("splits-file-keys-misspelt", splits_file("[[split]]\ntrain = [1, 3]\ntest = [2, 4]\n"),
         r"folds\.toml, line 2: \[\[split\]\] number 1: unknown key 'train' \(did you mean 'train_subjects'\?\); a "
         r"splits file holds \[\[split\]\] tables of train_subjects and test_subjects$"),
    Case("splits-file-unknown-subject", splits_file("[[split]]\ntrain_subjects = [1, 99]\ntest_subjects = [2]\n"),
         r"folds\.toml: \[\[split\]\] number 1: train_subjects names subject\(s\) \[99\] that no row of the store has "
         r"\(its subjects: .*\); the file fixes the subjects of one archive: for this store, write its own file or "
         r"--set split.kind=\"leave-one-subject-out\""),
    # the file's value as TOML writes it (it read [True])
    Case("splits-file-true-subject", splits_file("[[split]]\ntrain_subjects = [true]\ntest_subjects = [3]\n"),
         r"folds\.toml: \[\[split\]\] number 1: train_subjects = \[true\]: expected a non-empty list of subject "
         r"numbers$"),
    Case("splits-file-overlap", splits_file("[[split]]\ntrain_subjects = [1, 2]\ntest_subjects = [2, 4]\n"),
         r"folds\.toml: \[\[split\]\] number 1: subjects \[2\] are in both train_subjects and test_subjects"),
    Case("splits-file-is-a-folder", lambda e: ["run", e.pipeline(), "--quiet", "--set", 'split.kind="subject-splits-file"',
                                               "--set", f'split.file="{(e.tmp / "folds").mkdir() or e.tmp / "folds"}"'],
         r'split\.file = "\S+folds": a folder; give the TOML file of \[\[split\]\] tables'),
    Case("folds-negative", run_set("split.folds=[-1]"), r"--set split\.folds=\[-1\]: split\.folds\.0 = -1: expected"),
    # the key as typed, where it was given in front: the --set, or the file's line
    Case("per-class-too-many", run_set('split.kind="per-class"', "split.n_train=50"),
         r"error: --set split\.n_train=50: split\.n_train = 50: class 'high arm wave' has 12 rows; the protocol needs 51 "
         r"of every class \(50 train \+ >= 1 test\); lower split\.n_train to 11 or less$"),
    Case("per-class-too-many-in-the-file", run_text(lambda t: t.replace('kind = "subject-parity"\n',
                                                                        'kind = "per-class"\nn_train = 8\nn_test = 5\n')),
         r"error: \S+p\.toml, line 27: split\.n_train = 8, split\.n_test = 5: class 'high arm wave' has 12 rows; the "
         r"protocol needs 13 of every class \(8 train \+ 5 test\); lower split\.n_train or split\.n_test so that "
         r"together they are 12 or less$"),
    # the row and the id it was ingested under: 6 frames of 6 hip-relative coordinates have a singular covariance
    Case("not-spd-names-row-and-id", run_on(archive_store(["file,label,subject", "s00.csv,a,1", "s01.csv,b,3",
                                                           "s02.csv,a,2", "s03.csv,b,4"], n=4), "descriptor.gamma=0.0"),
         r"covariance of sequence 0 \(id 's00'\) \(6 frames, 6 dims\) is not positive definite \(smallest "
         r"eigenvalue .*\); increase the regularization descriptor\.gamma \(now 0\.0\) \(given: --set "
         r"descriptor\.gamma=0\.0\)$"),
    Case("not-spd-pyramid-names-row-and-id", run_on(archive_store(["file,label,subject", "s00.csv,a,1", "s01.csv,b,3",
                                                                   "s02.csv,a,2", "s03.csv,b,4"], n=4),
                                                    "descriptor.gamma=0.0", "descriptor.levels=2"),
         r"window 0 of sequence 0 \(id 's00'\) \(6 frames, 6 dims\) is not positive definite .*; increase the "
         r"regularization descriptor\.gamma \(now 0\.0\) \(given: --set descriptor\.gamma=0\.0\)$"),
    # documented: a test class absent from training is a warning in the result and on stderr
    Case("test-class-unseen-in-training", run_on(archive_store(UNSEEN_CLASS)), r"accuracy", rc=0, check=has_warning),
]


@pytest.mark.parametrize("case", PROTOCOLS, ids=lambda c: c.id)
def test_protocols(case, env):
    run_case(case, env)


# ------------------------------------------------------------------ one writer per folder
# descriptors of the lock files the live holders of held_lock keep locked, open until the process ends
_HELD_FDS: list = []


def held_lock(lock: Callable[[Env], Path], pid: int | None = None, host: str | None = None, argv=None):
    """A lock file of ``pid`` (default: a live process that is not this one) on ``host``. Held as a live
    streamcov holds it, with the kernel's flock, when its process is alive on this host (a file of this host
    that nobody holds is stale whatever pid it names: the pid may since be another process's)."""
    def make(e):
        import fcntl
        import socket
        path = lock(e)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"pid": pid or os.getppid(), "host": host or socket.gethostname(),
                                    "command": "streamcov run other.toml", "started": "2026-01-01 00:00:00"}))
        if pid is None and host is None:
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _HELD_FDS.append(fd)
        return argv(e)
    return make


def raw_lock(lock: Callable[[Env], Path], text: str | None, argv=None):
    """A lock file holding ``text`` (None: a folder in its place): one streamcov did not write."""
    def make(e):
        path = lock(e)
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.mkdir()
        else:
            path.write_text(text)
        return argv(e)
    return make


def with_pid(pid) -> str:
    import socket
    return json.dumps({"pid": pid, "host": socket.gethostname(), "command": "x", "started": "2026-01-01 00:00:00"})


def dead_pid() -> int:
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_zombie_holds_no_lock():
    """A writer killed but not yet reaped (a zombie: kill(pid, 0) still succeeds) is dead: its lock is taken
    over (before: 'being written by process N' until something reaped it, for good in a container without
    an init)."""
    import os
    import time

    from streamcov import lock

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        for _ in range(500):   # until the child has exited (it stays a zombie: nothing waits for it yet)
            if lock._zombie(pid):
                break
            time.sleep(0.01)
        assert lock._zombie(pid) and not lock._alive(pid)
        assert lock._alive(os.getpid()) and not lock._zombie(os.getpid())
    finally:
        os.waitpid(pid, 0)


def test_a_lock_of_our_own_pid_that_nobody_holds_is_stale(tmp_path):
    """A lock file naming this very process (a container restarted with the pid its killed writer had) that no
    process holds is stale: taken over (it was refused as held by the refusing process itself)."""
    import socket

    from streamcov import lock
    from streamcov.errors import StoreError

    path = tmp_path / "s.zarr.lock"
    path.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": "killed",
                                "started": "2026-01-01 00:00:00"}))
    with lock.exclusive(path, "store s"):
        assert json.loads(path.read_text())["command"] != "killed"
        # held: a second taker in this process is refused (the kernel's lock, not the pid, says so)
        with pytest.raises(StoreError, match=r"^store s is being written by process \d+"):
            with lock.exclusive(path, "store s"):
                pass
    assert not path.exists()


def test_a_lock_nobody_holds_is_stale_whatever_pid_it_names_and_a_stalled_creator_looks_again(tmp_path,
                                                                                                 monkeypatch):
    """A lock file of this host that no process holds is stale even when its pid names a live process (after a
    reboot or a container restart, pids name other processes): it was refused for good. An empty one is stale
    at once, whatever its time (a time in the future was refused until the clock caught up). A creator stalled
    between creating its file and locking it, whose file another process found empty and took over, finds its
    path taken and is refused: two processes held one lock."""
    import socket
    import subprocess
    import sys

    from streamcov import lock
    from streamcov.errors import StoreError

    path = tmp_path / "s.zarr.lock"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path.write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname(), "command": "killed",
                                    "started": "2026-01-01 00:00:00"}))
        with lock.exclusive(path, "store s"):
            assert json.loads(path.read_text())["pid"] == os.getpid()
    finally:
        sleeper.kill()
        sleeper.wait()
    path.write_text("")
    future = time.time() + 86400
    os.utime(path, (future, future))
    with lock.exclusive(path, "store s"):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    # the stall: while the creator waits between creating its file and locking it, a second taker (a thread)
    # finds the file empty and unlocked, takes it over and holds it; then the creator goes on
    import threading

    real, holding, release, seen = lock._flock, threading.Event(), threading.Event(), []

    def second():
        with lock.exclusive(path, "store s", command="second"):
            seen.append(json.loads(path.read_text())["command"])
            holding.set()
            release.wait(30)

    def stalled(fd):
        monkeypatch.setattr(lock, "_flock", real)   # once: the creator's own locking
        t = threading.Thread(target=second)
        t.start()
        assert holding.wait(30)
        stalled.thread = t
        return real(fd)

    monkeypatch.setattr(lock, "_flock", stalled)
    try:
        with pytest.raises(StoreError, match=r"^store s is being written by process \d+"):
            with lock.exclusive(path, "store s", command="first"):
                seen.append("first")   # held a file no path named, beside the second taker
    finally:
        release.set()
        stalled.thread.join(30)
    assert seen == ["second"] and not path.exists()


def test_a_creator_that_cannot_lock_its_new_file_does_not_write_it_and_info_judges_locks_as_takers_do(tmp_path,
                                                                                                      monkeypatch):
    """A creator whose first flock of its new file fails (another process locked the empty file first, judging it
    stale) wrote itself into it anyway and held a file it had no lock on: the other then took it over too. It
    now looks again, and holds the lock it ends with. And `info`'s holder of a store lock (store_writer) is
    judged as a taker judges it: a file of this host that nobody holds names no holder, whatever its pid."""
    import socket
    import subprocess
    import sys

    from streamcov import lock

    path = tmp_path / "s.zarr.lock"
    real, calls = lock._flock, []

    def first_fails(fd):
        calls.append(fd)
        return False if len(calls) == 1 else real(fd)

    monkeypatch.setattr(lock, "_flock", first_fails)
    with lock.exclusive(path, "store s"):
        monkeypatch.setattr(lock, "_flock", real)
        assert len(calls) >= 2 and not lock._unheld(path)   # held with the kernel's lock: a taker is refused
        assert lock.store_writer(tmp_path / "s.zarr")["pid"] == os.getpid()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path.write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname(), "command": "gone",
                                    "started": "2026-01-01 00:00:00"}))
        assert lock.store_writer(tmp_path / "s.zarr") is None
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("kind", ["fifo", "device-link"])
def test_a_lock_path_that_is_no_regular_file_is_not_a_lock(tmp_path, kind):
    """A fifo or a link to a device at the lock's path: refused as not a lock file (a fifo hung the old lock, a
    link to /dev/null was taken over, and each was an OSError traceback with the flock lock)."""
    from streamcov import lock
    from streamcov.errors import StoreError

    path = tmp_path / "s.zarr.lock"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/null")
    with pytest.raises(StoreError, match=r"^store s: its lock file \S+ is not one streamcov wrote"):
        with lock.exclusive(path, "store s"):
            pass


def test_another_users_lock_file_is_not_called_one_streamcov_did_not_write(tmp_path, monkeypatch):
    """Another user's live lock (written under umask 077, so 0600): it was called "not one streamcov wrote ...
    delete it and run again", and the second user deleted it while the first one's command wrote there. It is
    said to be another user's, perhaps in use, and is left in place. Root may read any file: the refusal of
    the system is simulated for the lock's path."""
    from streamcov import lock
    from streamcov.errors import StoreError

    path = tmp_path / "s.zarr.lock"
    path.write_text(json.dumps({"pid": 1, "host": "elsewhere", "command": "synth", "started": "2026-01-01 00:00:00"}))
    opener = os.open

    def refusing(file, flags, *args, **kwargs):
        if os.fspath(file) == str(path) and not flags & os.O_CREAT:   # made anew: it exists (EEXIST), as for root
            raise PermissionError(13, "Permission denied", str(file))
        return opener(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    with pytest.raises(StoreError, match=r"^store s: its lock file \S+s\.zarr\.lock cannot be read \(permission "
                                         r"denied\): another user's streamcov may be writing there now; write "
                                         r"elsewhere, or ask its owner"):
        with lock.exclusive(path, "store s"):
            pass
    assert path.exists()


def test_a_file_system_without_flock_still_locks(tmp_path, monkeypatch):
    """Where the file system has no flock (NFS without lockd: ENOLCK), the lock file's exclusive creation and
    content still exclude (it was an OSError traceback and an empty lock file left behind)."""
    import fcntl

    from streamcov import lock
    from streamcov.errors import StoreError

    def no_locks(fd, op):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    path = tmp_path / "s.zarr.lock"
    with lock.exclusive(path, "store s"):
        # since when in UTC, said so (the local time of the writer's zone, unnamed, read wrong from other zones)
        with pytest.raises(StoreError, match=rf"^store s is being written by process {os.getpid()} on \S+ since "
                                             rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC "):
            with lock.exclusive(path, "store s"):
                pass
    assert not path.exists()
    path.write_text(with_pid(dead_pid()))   # stale: taken over by its content
    with lock.exclusive(path, "store s"):
        pass
    assert not path.exists()


def test_a_stale_lock_is_taken_over_by_one_process_at_a_time(tmp_path):
    """Processes that all find a dead writer's lock take it over one at a time: the hold intervals of those that
    got it do not overlap (deleting the stale file and creating it anew let two of them hold it at once, when
    a job restarted twice after a kill -9)."""
    import subprocess
    import sys

    lock_path = tmp_path / "s.zarr.lock"
    lock_path.write_text(with_pid(dead_pid()))
    script = (f"import time, json, sys\nfrom streamcov import lock\nfrom streamcov.errors import StoreError\n"
              f"time.sleep(max(0.0, {time.time() + 2.0!r} - time.time()))\n"
              f"try:\n"
              f"    with lock.exclusive({str(lock_path)!r}, 'store s'):\n"
              f"        t0 = time.time(); time.sleep(0.4); print(json.dumps([t0, time.time()]))\n"
              f"except StoreError as exc:\n"
              f"    print(json.dumps(str(exc)))\n")
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    held = sorted(o for o in outs if isinstance(o, list))
    refused = [o for o in outs if isinstance(o, str)]
    assert held, outs
    assert all(a[1] <= b[0] for a, b in zip(held, held[1:])), held   # one holder at a time
    # (another process: one that holds the kernel's lock and has not yet written itself into the file)
    assert all(re.search(r"^store s is being written by (process \d+|another process)", r) for r in refused), refused
    assert not lock_path.exists()


def run_here(e):
    return ["run", e.pipeline(), "--quiet", "--scheduler", "synchronous"]


def ingest_here(e):
    return ["ingest", "skeleton", "--format", "generic", write_archive(e.tmp / "a"), e.tmp / "s.zarr", "--quiet"]


def lock_released(path_fn):
    def check(e, err, out):
        assert not path_fn(e).exists()
    return check


CONCURRENCY = [
    Case("output-locked-by-live-process", held_lock(lambda e: e.tmp / "out" / ".streamcov.lock", argv=run_here),
         r"output folder \S+out is being written by process \d+ on \S+ since 2026-01-01 00:00:00 "
         r"\(streamcov run other\.toml\); wait for it to finish or write elsewhere"),
    Case("store-locked-by-live-process", held_lock(lambda e: e.tmp / "s.zarr.lock", argv=ingest_here),
         r"store \S+s\.zarr is being written by process \d+"),
    Case("output-lock-on-other-host-respected",
         held_lock(lambda e: e.tmp / "out" / ".streamcov.lock", pid=dead_pid(), host="elsewhere", argv=run_here),
         r"is being written by process \d+ on elsewhere"),
    # documented: the lock of a process that died on this host is taken over, and released after
    Case("stale-output-lock-taken-over",
         held_lock(lambda e: e.tmp / "out" / ".streamcov.lock", pid=dead_pid(), argv=run_here), r"accuracy", rc=0,
         check=lock_released(lambda e: e.tmp / "out" / ".streamcov.lock")),
    Case("stale-store-lock-taken-over", held_lock(lambda e: e.tmp / "s.zarr.lock", pid=dead_pid(), argv=ingest_here),
         r'"sequences": 8', rc=0, check=lock_released(lambda e: e.tmp / "s.zarr.lock")),
    # a lock file streamcov did not write (another tool's, edited by hand, a folder): refused, saying to delete
    # it if nothing is writing (each was a traceback: int("abc"), list.get, a folder read as a file)
    *[Case(f"output-lock-not-streamcovs-{name}", raw_lock(lambda e: e.tmp / "out" / ".streamcov.lock", text,
                                                          argv=run_here),
           r"output folder \S+out: its lock file \S+\.streamcov\.lock is not one streamcov wrote \(a JSON object "
           r"with the pid and host of the writer\); if no streamcov command is writing there, delete it and run again")
      for name, text in (("pid-text", '{"pid": "abc", "host": "h"}'), ("list", "[]"), ("folder", None))],
    Case("store-lock-not-streamcovs", raw_lock(lambda e: e.tmp / "s.zarr.lock", '"x"', argv=ingest_here),
         r"store \S+s\.zarr: its lock file \S+s\.zarr\.lock is not one streamcov wrote"),
    # a pid no process can have on this host (beyond pid_t: an OverflowError; 0 and -1 name process groups,
    # which kill(pid, 0) reports alive): the lock is stale and taken over
    *[Case(f"output-lock-impossible-pid-{pid}", raw_lock(lambda e: e.tmp / "out" / ".streamcov.lock",
                                                         with_pid(pid), argv=run_here),
           r"accuracy", rc=0, check=lock_released(lambda e: e.tmp / "out" / ".streamcov.lock"))
      for pid in (99999999999, 0, -1)],
]


@pytest.mark.parametrize("case", CONCURRENCY, ids=lambda c: c.id)
def test_one_writer(case, env):
    run_case(case, env)


def test_there_are_at_least_100_cases():
    n = sum(map(len, (CONFIG, READERS, STORES, MODELS, IMAGES, PROTOCOLS, CONCURRENCY)))
    assert n >= 100 and len({c.id for t in (CONFIG, READERS, STORES, MODELS, IMAGES, PROTOCOLS, CONCURRENCY)
                             for c in t}) == n


def test_python_warnings_reach_the_user_as_one_line(tmp_path, monkeypatch):
    """A warning from a library (Pillow, scikit-learn) or from streamcov is printed in the command's own
    format, one line, not as a file, a line number and a source line; outside the command the warnings
    machinery is left as it was."""
    import warnings

    import streamcov.data.images as images

    scan = images.scan_folders

    def warn_then_scan(*args, **kwargs):
        warnings.warn("Corrupt EXIF data.\n  Expecting to read 12 bytes but only got 6.", UserWarning)
        return scan(*args, **kwargs)

    monkeypatch.setattr(images, "scan_folders", warn_then_scan)
    before = warnings.showwarning
    folder = image_folder("imgs")(type("E", (), {"tmp": tmp_path})())
    rc, err, _ = cli("ingest", "images", "--format", "folders", folder, tmp_path / "s.zarr", "--quiet")
    assert rc == 0, err
    assert err.splitlines() == ["streamcov ingest: warning: Corrupt EXIF data. Expecting to read 12 bytes "
                                "but only got 6."], err
    assert warnings.showwarning is before


def exif_folder(imgs: Path, n: int) -> Path:
    """Classes a and b of ``n`` random 16 x 12 grey PNGs, and a/phone.png, whose EXIF orientation (6) turns it."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (imgs / c).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 255, (16, 12), dtype=np.uint8)).save(imgs / c / f"{i}.png")
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(rng.integers(0, 255, (16, 12), dtype=np.uint8)).save(imgs / "a" / "phone.png", exif=exif)
    return imgs


def test_exif_orientation_read_alike_by_stores_models_and_predict(tmp_path):
    """Images are read upright by their EXIF orientation; a store or a model of an earlier streamcov read
    them as stored. Mixing the two is refused where it would change what is seen (a folder with a turned
    image), and allowed where it would not."""
    import zarr

    imgs = exif_folder(tmp_path / "imgs", 4)
    new, old = tmp_path / "new.zarr", tmp_path / "old.zarr"
    assert cli("ingest", "images", "--format", "folders", imgs, new, "--quiet")[0] == 0
    shutil.copytree(new, old)      # the same store as an earlier streamcov wrote it: no orientation recorded
    g = zarr.open_group(str(old), mode="r+")
    record = dict(g.attrs["source_record"])
    del record["orientation"]
    g.attrs["source_record"] = record
    as_format_3(old)

    def run(store, out, source=None):
        text = IMAGE_PIPELINE.format(out=out, store=store)
        if source is not None:
            text = text.replace("[data]\n", f'[data]\nsource = "{source}"\n')
        (tmp_path / "p.toml").write_text(text)
        return cli("run", tmp_path / "p.toml", "--quiet", "--scheduler", "synchronous")

    plain = tmp_path / "plain"                # an earlier store of a folder without turned images: the same
    shutil.copytree(imgs, plain)
    (plain / "a" / "phone.png").unlink()
    assert cli("ingest", "images", "--format", "folders", plain, tmp_path / "plain.zarr", "--quiet")[0] == 0
    g = zarr.open_group(str(tmp_path / "plain.zarr"), mode="r+")
    g.attrs["source_record"] = {k: v for k, v in g.attrs["source_record"].items() if k != "orientation"}
    as_format_3(tmp_path / "plain.zarr")
    rc, err, _ = run(tmp_path / "plain.zarr", tmp_path / "o_plain", source=plain)
    assert rc == 0, err
    rc, err, _ = run(old, tmp_path / "o0", source=imgs)
    assert_one_line_error(rc, err, r"data\.store: \S+old\.zarr was written by an earlier streamcov, which read "
                                   r"images without their EXIF orientation \(photos that say to be turned were "
                                   r"stored sideways\); point data\.store at a new path, or delete")
    assert run(old, tmp_path / "o_old")[0] == 0          # the old store alone: read as it was written
    assert run(new, tmp_path / "o_new")[0] == 0
    old_model, new_model = tmp_path / "o_old" / "model", tmp_path / "o_new" / "model"
    rc, err, _ = cli("predict", old_model, imgs, "--out", tmp_path / "p1.csv", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r"o_old/model: the model was trained on images read without their EXIF "
                                   r"orientation \(by an earlier streamcov, or from arrays\), but 1 image\(s\) of "
                                   r"\S+imgs carry an EXIF orientation \(first: phone\.png\), read upright now; "
                                   r"train the model again on a store ingested by this streamcov$")
    rc, err, _ = cli("predict", new_model, old, "--out", tmp_path / "p2.csv", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r"old\.zarr: written by an earlier streamcov, which read images without their "
                                   r"EXIF orientation, and 1 image\(s\) of \S+imgs carry an EXIF orientation "
                                   r"\(first: phone\.png\): they are stored sideways, but the model was trained on "
                                   r"upright images; ingest the images again$")
    assert cli("predict", new_model, imgs, "--out", tmp_path / "p3.csv", "--scheduler", "synchronous")[0] == 0
    (imgs / "a" / "phone.png").unlink()                   # nothing turned: the two readings agree
    rc, err, _ = cli("predict", old_model, imgs, "--out", tmp_path / "p4.csv", "--scheduler", "synchronous")
    assert rc == 0, err


def test_in_memory_image_model_predicts_its_own_exif_images(tmp_path):
    """A model of the in-memory image task, trained on a folder with an image that carries an EXIF orientation,
    predicts that folder (read upright both times): it recorded no orientation and was refused as a model of
    "images read without their EXIF orientation". Its training images are said to be among them."""
    imgs = exif_folder(tmp_path / "imgs", 3)
    (tmp_path / "p.toml").write_text(MEMORY_IMAGE_PIPELINE.format(out=tmp_path / "o", source=imgs))
    rc, err, _ = cli("run", tmp_path / "p.toml", "--quiet")
    assert rc == 0, err
    model = json.loads((tmp_path / "o" / "model" / "model.json").read_text())
    assert model["info"]["orientation"] == "exif" and model["info"]["pixel_scale"] == 1.0, model["info"]
    assert model["info"]["image_size"] == {"height": [12, 16], "width": [12, 16]}, model["info"]
    rc, err, out = cli("predict", tmp_path / "o" / "model", imgs, "--out", tmp_path / "p.csv", "--scheduler",
                       "synchronous")
    assert rc == 0, err
    assert json.loads(out.strip().splitlines()[-1])["includes_training_rows"] is True, out


@pytest.mark.parametrize("kwargs, pattern", [
    ({"scheduler": "tcp://"}, r"^scheduler='tcp://': expected one of threads, synchronous, local-cluster or a "
                              r"scheduler address"),
    ({"scheduler": "gpu"}, r"^scheduler='gpu': expected one of"),
    ({"workers": 0}, r"^workers=0: expected an integer >= 1"),
    ({"workers": "2"}, r"^workers='2': expected an integer >= 1"),
    ({"workers": True}, r"^workers=True: expected an integer >= 1"),
    # the Python API skipped the command line's bound: a million workers reached LocalCluster
    ({"workers": 10 ** 6}, r"^workers=1000000: expected at most 1024 workers \(this machine has \d+ cores\)"),
    ({"workers": 2, "scheduler": "synchronous"},
     r"^workers=2 scheduler='synchronous': workers sets the threads of scheduler='threads'"),
    ({"block": -4}, r"^block=-4: expected an integer >= 1 \(rows per block\)"),
    ({"block": 2.5}, r"^block=2\.5: expected an integer >= 1"),
    ({"on_error": "ignore"}, r"^on_error must be 'stop' or 'skip' \(a file that cannot be read stops the ingestion, or "
                             r"is recorded as skipped\), got 'ignore'$"),
    ({"on_error": "skip"}, r"^on_error='skip': only a folder of images is read file by file \(ingested for the "
                           r"model\); \S+synth\.zarr is a store: leave on_error out$"),
])
def test_python_predict_checks_its_runtime_arguments(shared, tmp_path, kwargs, pattern):
    """The Python API checks what the command line checks (the checks lived in the CLI alone: block=-4 was
    an IndexError, scheduler=None an AttributeError, workers=0 accepted)."""
    from streamcov.errors import ConfigError
    from streamcov.stream.predict import predict

    with pytest.raises(ConfigError, match=pattern):
        predict(shared["model"], shared["synth"], tmp_path / "p.csv", **kwargs)


def test_python_predict_and_run_defaults(shared, tmp_path):
    from streamcov.errors import ConfigError
    from streamcov.stream.predict import predict
    from streamcov.tasks.runner import run

    assert predict(shared["model"], shared["synth"], tmp_path / "p.csv", scheduler=None)["n"] > 0
    with pytest.raises(ConfigError, match=r"overrides='model\.C=1': give a list of key=value strings, e\.g\. "
                                          r"\['model\.C=1'\]"):
        run(SKELETON_PIPELINE.format(out=tmp_path / "o", store=shared["synth"]), overrides="model.C=1")
    with pytest.raises(ConfigError, match=r"^workers=-3: expected an integer >= 1"):
        run({"task": "skeleton-classification"}, workers=-3)


@pytest.mark.parametrize("argv, pattern", [
    (["--workers", "11"], r"--workers 11 \(11 worker processes of a local-cluster, at least 384 MiB each\): needs "
                          r"4\.1 GiB of memory, this process may use 4\.0 GiB; use at "
                          r"most 10 workers$"),
    (["--scheduler", "local-cluster", "--workers", "20"], r"--workers 20 \(20 worker processes"),
    (["--set", 'dask.scheduler="local-cluster"', "--set", "dask.workers=11"],
     r"--set dask\.workers=11: dask\.workers = 11 \(11 worker processes of a local-cluster, at least 384 MiB each\): "
     r"needs 4\.1 GiB of memory, this process may use 4\.0 GiB; use at most 10 workers$"),
    (["--scheduler", "local-cluster", "--set", "dask.workers=11"], r"--set dask\.workers=11: dask\.workers = 11 "),
    (["--dask-workers-in-file"], r"p\.toml, line \d+: dask\.workers = 11 \(11 worker processes"),
], ids=["workers", "local-cluster-workers", "set", "scheduler-flag-and-set", "file"])
def test_local_cluster_workers_beyond_memory(shared, tmp_path, monkeypatch, argv, pattern):
    """A local-cluster of more worker processes than the memory holds (--workers 1024 started 1024 processes,
    each paused at once by Dask beyond 80% of its share) is refused before the run starts: an earlier run's
    result stays. On a machine of 4 GiB: at most 10 workers of 384 MiB."""
    monkeypatch.setattr("streamcov._config.total_memory", lambda soft=False: 4 << 30)   # what LocalCluster divides
    out = tmp_path / "o"
    out.mkdir()
    (out / ".streamcov-output").write_text("{}")
    (out / "result.json").write_text('{"task": "skeleton-classification"}')
    text = SKELETON_PIPELINE.format(out=out, store=shared["synth"])
    if argv == ["--dask-workers-in-file"]:
        text, argv = text.replace("block_size = 16", 'block_size = 16\nscheduler = "local-cluster"\nworkers = 11'), []
    (tmp_path / "p.toml").write_text(text)
    assert_one_line_error(*cli("run", tmp_path / "p.toml", "--quiet", *argv)[:2], pattern)
    assert (out / "result.json").read_text() == '{"task": "skeleton-classification"}'


def test_local_cluster_workers_within_memory(monkeypatch):
    """A few more workers than cores, or as many as the memory holds, are a local-cluster's to run."""
    from streamcov.errors import ConfigError
    from streamcov.stream.runtime import resolve_runtime

    monkeypatch.setattr("streamcov._config.total_memory", lambda soft=False: 4 << 30)   # what LocalCluster divides
    assert resolve_runtime(None, 3) == ("local-cluster", 3)
    assert resolve_runtime("local-cluster", 10) == ("local-cluster", 10)
    assert resolve_runtime("threads", 64) == ("threads", 64)   # threads: capped at the cores by thread_plan
    with pytest.raises(ConfigError, match=r"^workers=11 \(11 worker processes of a local-cluster, at least 384 MiB "
                                          r"each\): needs 4\.1 GiB of memory, this process may use 4\.0 GiB; use at "
                                          r"most 10 workers$"):
        resolve_runtime(None, 11)


@pytest.mark.parametrize("argv, in_file, pattern", [
    (["--scheduler", "local-cluster"], False, r"--scheduler local-cluster on 3 cores \(3 worker processes of a "
     r"local-cluster, at least 384 MiB each\): needs 1\.1 GiB of memory, this process may use 1\.0 GiB; use at most 2 "
     r"workers$"),
    ([], True, r"p\.toml, line \d+: dask\.scheduler = \"local-cluster\" on 3 cores \(3 worker processes"),
], ids=["flag", "file"])
def test_local_cluster_of_a_worker_per_core_beyond_memory(shared, tmp_path, monkeypatch, argv, in_file, pattern):
    """A local-cluster without a worker count starts one worker process per core: more than the memory holds
    (many cores in a container of little memory) is refused before the run starts, as a count is."""
    monkeypatch.setattr("streamcov._config.total_memory", lambda soft=False: 1 << 30)
    monkeypatch.setattr("streamcov.stream.runtime.available_cores", lambda: 3)
    out = tmp_path / "o"
    text = SKELETON_PIPELINE.format(out=out, store=shared["synth"])
    if in_file:
        text = text.replace("block_size = 16", 'block_size = 16\nscheduler = "local-cluster"')
    (tmp_path / "p.toml").write_text(text)
    assert_one_line_error(*cli("run", tmp_path / "p.toml", "--quiet", *argv)[:2], pattern)
    assert not out.exists()


@pytest.mark.parametrize("argv, pattern", [
    (["--demo", "images", "--scheduler", "tcp://127.0.0.1:1"],
     r"--scheduler tcp://127\.0\.0\.1:1: task 'image-classification' runs in memory in this process, with no Dask "
     r"scheduler and no checkpoints to resume from; leave --scheduler out; task \"image-stream-classification\" "
     r"runs images out of core, on any scheduler$"),
    (["PIPELINES/sshape_tgp.toml", "--workers", "2", "--resume"],
     r"--workers 2 --resume: task 'tgp-sshape' runs in memory in this process, with no Dask scheduler and no "
     r"checkpoints to resume from; leave --workers and --resume out$"),
    (["PIPELINES/digits_tgp.toml", "--scheduler", "synchronous"], r"--scheduler synchronous: task 'tgp-digits' "),
])
def test_a_task_without_dask_settings_refuses_the_dask_flags(tmp_path, argv, pattern):
    """The in-memory tasks (image evaluation, the TGP experiments, the study) have no [dask] table: they ran on
    their own threads whatever --scheduler, --workers or --resume said (an address nothing listens on
    included), without a word. Refused, naming the flags as typed, before anything runs."""
    from conftest import REPO

    argv = [str(a).replace("PIPELINES", str(REPO / "pipelines")) for a in argv]
    assert_one_line_error(*cli("run", *argv, "--output", tmp_path / "o")[:2], pattern)
    assert not (tmp_path / "o").exists()


def test_total_memory_is_the_figure_dask_divides(tmp_path, monkeypatch):
    """The worker check reads the figure a LocalCluster divides among its workers (Dask's own reading of the
    machine, its container's hard and soft limits and RLIMIT_RSS); the allocation checks read the hard limits
    alone (a soft limit kills nothing). A container's limit below the machine's memory is the figure; a limit
    of "max" (none) is not."""
    from distributed.system import memory_limit

    from streamcov import _config
    from streamcov.errors import ConfigError

    assert _config.total_memory(soft=True) == memory_limit()
    assert _config.total_memory() >= memory_limit()
    for name, text in [("memory.max", "2147483648\n"), ("memory.high", "max\n"), ("memory.low", "1073741824\n")]:
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(_config, "HARD_LIMITS", (str(tmp_path / "memory.max"), str(tmp_path / "absent")))
    monkeypatch.setattr(_config, "SOFT_LIMITS", (str(tmp_path / "memory.high"), str(tmp_path / "memory.low")))
    assert _config.total_memory() == 2 << 30 and _config.total_memory(soft=True) == 1 << 30
    with pytest.raises(ConfigError, match=r"^x = 3: needs 3\.0 GiB of memory, this process may use 2\.0 GiB; lower x$"):
        _config.check_memory(3 << 30, "x = 3", "lower x")


def test_predict_on_a_local_cluster_of_a_worker_per_core_beyond_memory(tmp_path, monkeypatch):
    """`streamcov predict --scheduler local-cluster` without a count starts a worker per core: more than the
    memory holds is refused before the model is read, as for a run."""
    from streamcov.errors import ConfigError
    from streamcov.stream.predict import predict

    monkeypatch.setattr("streamcov._config.total_memory", lambda soft=False: 1 << 30)
    monkeypatch.setattr("streamcov.stream.runtime.available_cores", lambda: 3)
    with pytest.raises(ConfigError, match=r"^scheduler='local-cluster' on 3 cores \(3 worker processes of a "
                                          r"local-cluster, at least 384 MiB each\): needs 1\.1 GiB of memory, this "
                                          r"process may use 1\.0 GiB; use at most 2 workers$"):
        predict(tmp_path / "model", tmp_path / "store.zarr", scheduler="local-cluster")
    rc, err = cli("predict", tmp_path / "model", tmp_path / "store.zarr", "--scheduler", "local-cluster")[:2]
    assert_one_line_error(rc, err, r"--scheduler local-cluster on 3 cores \(3 worker processes")


# (Python call of run, its command line, the message's front in Python, on the command line): a notebook's
# user reads the keyword they typed, a shell's user the flag
ARGUMENT_SPELLINGS = [
    (dict(overrides=["model.epoch=3"]), ["--set", "model.epoch=3"],
     r"overrides item 'model\.epoch=3': unknown key 'model\.epoch'",
     r"--set model\.epoch=3: unknown key 'model\.epoch'"),
    (dict(overrides=["model.C"]), ["--set", "model.C"],
     r"overrides item 'model\.C': expected key=value", r"--set model\.C: expected key=value"),
    (dict(store="{tmp}/none.zarr"), ["--store", "{tmp}/none.zarr"],
     r"store='[^']*none\.zarr': no such store", r"--store \S*none\.zarr: no such store"),
    (dict(output=" "), ["--output", " "], r"^output: empty path", r"--output: empty path"),
    (dict(output="{tmp}/afile"), ["--output", "{tmp}/afile"],
     r"^output='[^']*afile': \S*afile is a file, not a folder", r"--output \S*afile: \S*afile is a file, not a folder"),
    (dict(workers=2, scheduler="synchronous"), ["--workers", "2", "--scheduler", "synchronous"],
     r"^workers=2 scheduler='synchronous': workers sets the threads of scheduler='threads'",
     r"--workers 2 --scheduler synchronous: --workers sets the threads of --scheduler threads"),
    (dict(scheduler="nowhere"), ["--scheduler", "nowhere"],
     r"^scheduler='nowhere': expected one of", r"--scheduler nowhere: expected one of"),
]


@pytest.mark.parametrize("kwargs, argv, python, command", ARGUMENT_SPELLINGS,
                         ids=[" ".join(c[1]).strip() for c in ARGUMENT_SPELLINGS])
def test_messages_name_arguments_as_typed(shared, tmp_path, kwargs, argv, python, command):
    """The same bad argument is named ``output='x'`` when ``run`` is called from Python and ``--output x`` by
    the ``streamcov`` command (both once read ``--output``: a notebook's user never typed a flag)."""
    from streamcov.errors import ConfigError
    from streamcov.tasks.runner import run

    (tmp_path / "afile").write_text("")
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(SKELETON_PIPELINE.format(out=tmp_path / "o", store=shared["synth"]))
    kwargs = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(ConfigError, match=python):
        run(pipeline, **kwargs)
    assert_one_line_error(*cli("run", pipeline, *[a.format(tmp=tmp_path) for a in argv])[:2],
                          "streamcov run: error: " + command.removeprefix("^"))


def test_python_open_reader_names_its_keywords(tmp_path):
    """``open_reader`` from Python names an option by its keyword (it read ``reader option.centre = [0]``); the
    command line's ``--option centre=[0]`` and a pipeline's ``data.options.centre`` are tested with them."""
    from streamcov import open_reader
    from streamcov.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^centre=\[0\]: 'centre' is not an option of the generic reader \(did you "
                                          r"mean 'center'\?\)"):
        open_reader("generic", tmp_path, centre=[0])


def test_python_predict_names_its_keywords(shared, tmp_path):
    """``predict`` from Python names ``out_csv``, the command line ``--out``."""
    from streamcov.errors import ConfigError
    from streamcov.stream.predict import predict

    with pytest.raises(ConfigError, match=r"^out_csv='[^']*': a folder; give the path of a CSV file"):
        predict(shared["model"], shared["synth"], tmp_path)
    assert_one_line_error(*cli("predict", shared["model"], shared["synth"], "--out", tmp_path)[:2],
                          r"error: --out \S+: a folder; give the path of a CSV file")
    with pytest.raises(ConfigError, match=r"^workers=0: expected an integer >= 1"):
        predict(shared["model"], shared["synth"], tmp_path / "p.csv", workers=0)


def test_python_config_takes_numpy_scalars_paths_and_tuples(tmp_path):
    """A notebook's values: np.int64 from a grid, Path objects, tuples; they were refused as "expected an
    integer" or "a quoted string". They are read as the TOML types they stand for; a wrong one still is not."""
    from streamcov.errors import ConfigError
    from streamcov.tasks.config import load_config

    cfg = load_config({"task": "skeleton-classification", "data": {"store": tmp_path / "s.zarr"},
                       "output": tmp_path / "o", "features": {"n_components": np.int64(100),
                                                               "sigma": np.float32(0.5), "center": np.bool_(True)},
                       "descriptor": {"center": (6,)}})
    assert (cfg.features.n_components, cfg.features.sigma, cfg.features.center) == (100, 0.5, True)
    assert cfg.data.store == str(tmp_path / "s.zarr") and cfg.descriptor.center == [6]
    with pytest.raises(ConfigError, match=r"features\.n_components = 2\.5: expected an integer"):
        load_config({"task": "skeleton-classification", "data": {"store": str(tmp_path / "s.zarr")},
                     "features": {"n_components": np.float64(2.5)}})


@pytest.mark.parametrize("call, error, pattern", [
    # a string is a sequence of one-letter names: exclude="12" kept class 12 and dropped 1 and 2, silently
    (lambda p: __import__("streamcov").ingest_images(p["images"], p["out"], exclude="12"), TypeError,
     r"^exclude must be a list of folder names, got '12'; write exclude=\['12'\]$"),
    (lambda p: __import__("streamcov").ingest_images(p["images"], p["out"], group_level=1.0), ValueError,
     r"^group_level must be an integer >= 1 \(folder levels that make the group\), got 1\.0$"),
    (lambda p: __import__("streamcov").ingest_images(p["images"], p["out"], group_level=True), ValueError,
     r"^group_level must be an integer >= 1"),
    # the ingestion's hints name its Python keyword (and the pipeline key), not the command's flag
    (lambda p: __import__("streamcov").ingest_images(p["images"], p["out"], group_level=2), ValueError,
     r"lies 1 folder level\(s\) deep but the group level \(group_level, or data\.group_level in a pipeline\) is 2"),
    (lambda p: __import__("streamcov").ingest_images(p["images"], p["out"], exclude=["brick", "grass"]), ValueError,
     r"were left out \(exclude, or data\.exclude in a pipeline; by default maps\): leave out fewer$"),
    (lambda p: __import__("streamcov").ingest_images(p["images"], ""), ValueError,
     r"^out: empty path; give the path of the store to write$"),
    # a folder for the reader: an AttributeError deep inside the writer
    (lambda p: __import__("streamcov").ingest(str(p["images"]), p["out"]), TypeError,
     r"^source must be a skeleton reader \(streamcov\.open_reader\), got str; open the archive first: "
     r"ingest\(open_reader\(FORMAT, '\S+images'\), out\)$"),
    # one sampled pixel per image: every descriptor was the same zero vector, silently
    (lambda p: __import__("streamcov").RegionCovariance(pixels={"features": ["I", "Ix"], "stride": 16}).fit(
        [np.random.default_rng(0).random((16, 16)) for _ in range(3)]), ValueError,
     r"^pixels\.stride = 16: image X\[0\] of 16 x 16 pixels keeps 1 sampled pixel \(3 image\(s\) like it\); a "
     r"covariance needs at least 2: lower the stride, or leave the image out$"),
    # sizes no machine holds: one line saying what to lower, not a MemoryError
    (lambda p: __import__("streamcov").SyntheticSkeletons(frames=(10**9, 10**9)), ValueError,
     r"^frames = \(1000000000, 1000000000\) \(a sequence of up to 1000000000 frames\): needs \S+ \S+ of memory, "
     r"this process may use \S+ \S+; ask for shorter sequences$"),
    (lambda p: __import__("streamcov").CovarianceOperator(n_frequencies=10**7).fit(
        [np.random.default_rng(0).random((16, 16)) for _ in range(2)]), ValueError,
     r"^n_frequencies = 10000000 \(operators of 20000000 x 20000000, vectors of 200000010000000 numbers\): needs "
     r"\S+ \S+ of memory, this process may use \S+ \S+; lower n_frequencies$"),
    # a notebook's slips that were a TypeError without the argument's name, accepted, or silently wrong
    (lambda p: __import__("streamcov").predict(p["model"], None), ValueError,
     r"^store_path=None: expected a path \(a str or pathlib\.Path\), got NoneType$"),
    (lambda p: __import__("streamcov").predict(5, p["synth"]), ValueError, r"^model_dir=5: expected a path"),
    (lambda p: __import__("streamcov").predict(p["model"], ""), ValueError,    # read as the current folder
     r"^store_path: empty path; give a store of the kind the model was trained on \(for an image model, also a "
     r"folder of images\)$"),
    (lambda p: __import__("streamcov").predict(p["model"], p["synth"], p["out"].with_suffix(".csv"),
                                               train_accuracy="no"), ValueError,   # computed it anyway
     r"^train_accuracy='no': expected True or False$"),
    (lambda p: __import__("streamcov").open_store(None), ValueError, r"^path=None: expected a path"),
    (lambda p: __import__("streamcov").open_reader("generic", 3), ValueError, r"^path=3: expected a path"),
    (lambda p: __import__("streamcov").ingest(__import__("streamcov").SyntheticSkeletons(n_sequences=8), None),
     ValueError, r"^out=None: expected a path"),
    (lambda p: __import__("streamcov").ingest(__import__("streamcov").SyntheticSkeletons(n_sequences=8), p["out"],
                                              limit=0), ValueError,    # committed one sequence and returned None
     r"^limit=0: expected an integer >= 1 \(new items before stopping\) or None$"),
    (lambda p: __import__("streamcov").ingest_images(p["images"], p["out"], limit=-1), ValueError, r"^limit=-1: "),
    (lambda p: __import__("streamcov").ingest_images(None, p["out"]), ValueError, r"^src=None: expected a path"),
    (lambda p: __import__("streamcov").load_config([1, 2]), ValueError, r"^source=\[1, 2\]: expected a path"),
    (lambda p: __import__("streamcov").load_config(REPO / "pipelines" / "synthetic.toml", "model.epochs=3"),
     ValueError, r"^overrides='model\.epochs=3': give a list of key=value strings"),   # read a letter at a time
    (lambda p: __import__("streamcov").run(REPO / "pipelines" / "synthetic.toml", overrides=[5]), ValueError,
     r"^overrides item 5: expected a key=value string"),
    (lambda p: __import__("streamcov").run(REPO / "pipelines" / "synthetic.toml", resume="no"), ValueError,
     r"^resume='no': expected True or False$"),
    (lambda p: __import__("streamcov").run(""), ValueError, r"^pipeline: empty path"),
    (lambda p: __import__("streamcov").run(REPO / "pipelines" / "synthetic.toml", text='task = "tgp-sshape"'),
     ValueError, r"^a pipeline and text=\.\.\. both given: give one pipeline"),   # the file was ignored
    (lambda p: __import__("streamcov").run(__import__("streamcov").load_config(REPO / "pipelines" / "synthetic.toml"),
                                           text='task = "tgp-sshape"'),
     ValueError, r"^a pipeline and text=\.\.\. both given: give one pipeline"),   # the text was ignored
    (lambda p: __import__("streamcov").GaussianNystroem(blocks=[5, 7]).fit(np.ones((4, 12))), ValueError,
     r"^blocks must be \[width, weight\] pairs"),   # TypeError: object of type 'int' has no len()
], ids=["exclude-a-string", "group-level-float", "group-level-bool", "group-level-too-deep",
        "every-class-excluded", "out-empty", "ingest-a-folder",
        "stride-one-pixel", "synth-frames-too-long", "operator-too-large", "predict-store-none", "predict-model-int",
        "predict-store-empty", "predict-train-accuracy-str", "open-store-none", "open-reader-int", "ingest-out-none",
        "ingest-limit-0", "ingest-images-limit-negative", "ingest-images-src-none", "load-config-list",
        "load-config-overrides-str", "run-override-int", "run-resume-str", "run-empty", "run-file-and-text", "run-config-and-text",
        "nystroem-blocks-flat"])
def test_python_api_slips_are_refused(shared, tmp_path, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call({"images": shared["images"], "out": tmp_path / "s.zarr", "model": shared["model"],
              "synth": shared["synth"]})
    assert not (tmp_path / "s.zarr").exists() and not (tmp_path / "s.csv").exists()


def test_python_ingest_images_takes_exclude_as_any_iterable(shared, tmp_path):
    """A generator of names excludes what it names (checking it must not use it up)."""
    import streamcov as sc

    store = sc.ingest_images(shared["images"], tmp_path / "s.zarr", exclude=(n for n in ["brick"]))
    assert store.label_names == ["grass"]


def test_python_image_descriptors_check_the_stride_at_transform(shared):
    """Fitted on images large enough, then given one that keeps a single pixel: refused, naming it."""
    import streamcov as sc

    rng = np.random.default_rng(0)
    est = sc.CovarianceOperator(n_frequencies=4, pixels={"features": ["I", "Ix"], "stride": 8}).fit(
        [rng.random((32, 32)) for _ in range(3)])
    with pytest.raises(ValueError, match=r"^pixels\.stride = 8: image X\[1\] of 8 x 8 pixels keeps 1 sampled pixel"):
        est.transform([rng.random((32, 32)), rng.random((8, 8))])


@pytest.mark.parametrize("named", [True, False])
def test_a_full_disk_is_one_line_and_the_store_stays_incomplete(tmp_path, monkeypatch, named):
    """ENOSPC from a write (here raised where the writer commits its chunks, as zarr raises it on a full
    disk; with the file's name, as open() gives it, or without, as write() does) is one line, exit 2, not an
    internal error; the store is left incomplete, refused as such, and the same command finishes it once
    there is room."""
    import errno

    from streamcov.data.ragged import RaggedStoreWriter

    real = RaggedStoreWriter._flush
    calls = {"n": 0}
    chunk = str(tmp_path / "s.zarr" / "frames" / "c" / "1")

    def full(self, whole_chunks_only):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", *([chunk] if named else []))
        return real(self, whole_chunks_only)

    monkeypatch.setattr(RaggedStoreWriter, "_flush", full)
    argv = ("synth", tmp_path / "s.zarr", "--sequences", 200, "--chunk-frames", 256, "--quiet")
    rc, err, _ = cli(*argv)
    assert_one_line_error(rc, err, ("^streamcov synth: error: " + (r"\S+/s\.zarr/frames/c/1: " if named else
                                                                  r"while writing \S+/s\.zarr: ")
                                    + r"no space left on the device \(or the disk quota is used up\); free space or "
                                      r"write elsewhere, then run the same command again"))
    assert cli("info", tmp_path / "s.zarr")[0] == 3   # incomplete
    monkeypatch.setattr(RaggedStoreWriter, "_flush", real)
    assert cli(*argv)[0] == 0 and cli("info", tmp_path / "s.zarr", "--verify")[0] == 0


def test_out_of_memory_is_one_line_not_a_bug(tmp_path, monkeypatch):
    """A MemoryError (numpy's "Unable to allocate ...", under a ulimit or a container's limit that the checks
    made beforehand did not foresee) ended in a traceback and "internal error: this is a bug in streamcov";
    it is one line naming what sizes the work, exit 2, also when a library wraps it."""
    from streamcov.data import synth

    def no_memory(*args, **kwargs):
        try:
            raise MemoryError("Unable to allocate 6.18 GiB for an array with shape (5798, 11, 114, 114) and data "
                              "type float64")
        except MemoryError as exc:
            raise RuntimeError("a task failed") from exc

    monkeypatch.setattr(synth.SyntheticSkeletons, "sequences", no_memory)
    rc, err, _ = cli("synth", tmp_path / "s.zarr", "--sequences", 20, "--quiet")
    assert_one_line_error(rc, err, r"^streamcov synth: error: out of memory \(MemoryError: Unable to allocate 6\.18 "
                                   r"GiB for an array with shape \(5798, 11, 114, 114\) and data type float64\); run "
                                   r"it with more memory; nothing half-written is used$")
    assert "Traceback" not in err and "internal error" not in err
    # a run is told what sizes its work, and that it continues
    from streamcov.stream import featurize

    monkeypatch.undo()
    assert cli("synth", tmp_path / "r.zarr", "--sequences", 30, "--quiet")[0] == 0
    monkeypatch.setattr(featurize, "featurize", no_memory)
    rc, err, _ = cli("run", REPO / "pipelines" / "msr_action3d.toml", "--store", tmp_path / "r.zarr", "--output",
                     tmp_path / "out", "--quiet")
    assert_one_line_error(rc, err, r"^streamcov run: error: out of memory \(MemoryError: .*\); run it with more "
                                   r"memory, or give the work less at a time: fewer rows per block \(dask\.block_size\)"
                                   r", .* the run continues with --resume; nothing half-written is used$")


@pytest.mark.parametrize("output", [True, False], ids=["--output", "the-files-output"])
def test_a_full_disk_without_a_file_name_names_where_the_command_writes(env, monkeypatch, output):
    """ENOSPC from write() has no file name: the line then names the folder the run writes, as the user gave it
    (--output, or the pipeline file whose output it is), not nothing."""
    import errno

    from streamcov.stream import featurestore

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(featurestore.FeatureStore, "open_or_create", full)
    pipeline = env.pipeline()
    extra = ("--output", env.tmp / "elsewhere") if output else ()
    rc, err, _ = cli("run", pipeline, "--quiet", *extra)
    where = (re.escape(str(env.tmp / "elsewhere")) if output else
             "the output folder of " + re.escape(str(pipeline)))
    assert_one_line_error(rc, err, rf"^streamcov run: error: while writing {where} or its data\.store: no space left "
                                   rf"on the device \(or the disk quota is used up\)")


def test_a_full_disk_under_predict_names_the_models_predictions_folder(env, monkeypatch, shared):
    """predict without --out writes into the model's predictions folder: the line named no place at all."""
    import errno

    from streamcov.stream import predict as P

    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--scheduler", "synchronous")
    assert rc == 0, err
    model = env.tmp / "out" / "model"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(P, "atomic_write", full)
    rc, err, _ = cli("predict", model, shared["synth"], "--scheduler", "synchronous")
    assert_one_line_error(rc, err, rf"^streamcov predict: error: while writing {re.escape(str(model / 'predictions'))} "
                                   rf"or the temporary folder \(an image folder's copy\): no space left on the device")


def test_a_full_disk_while_a_store_is_made_leaves_no_half_made_folder(tmp_path, monkeypatch):
    """The store is built in a hidden folder beside its path: a full disk there left `.s.zarr.creating-<pid>`,
    removed only by a later ingestion at the same path (not by one written elsewhere, as the line advises)."""
    import errno

    from streamcov.data import ragged
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    real = ragged._move_into_place

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ragged, "_move_into_place", full)
    with pytest.raises(OSError, match=r"No space left on device"):
        ingest(SyntheticSkeletons(n_sequences=5), tmp_path / "s.zarr")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(ragged, "_move_into_place", real)
    assert ingest(SyntheticSkeletons(n_sequences=5), tmp_path / "s.zarr").n_sequences == 5


def test_coordinates_float32_rounds_away_are_said_at_ingestion(tmp_path):
    """Coordinates near 1e6 (a world frame far from its origin) moving by tenths are stored as float32 in steps
    of 0.06: the descriptors saw that rounding without a word. Ingestion says how many sequences, how much, and
    what to do; a store of ordinary coordinates gets no such line."""
    index = ["file,label,subject", *[f"s{i:02d}.csv,{'ab'[i % 2]},{1 + i // 2 % 4}" for i in range(8)]]
    far = write_archive(tmp_path / "far", n=8, joints=3, index_rows=index)
    for f in far.glob("s*.csv"):   # 1e6 plus the archive's values (about 1 apart), five decimals kept
        rows = [[float(v) + 1e6 for v in r.split(",")] for r in f.read_text().split()]
        f.write_text("\n".join(",".join(f"{v:.5f}" for v in r) for r in rows) + "\n")
    rc, err, _ = cli("ingest", "skeleton", "--format", "generic", far, tmp_path / "far.zarr", "--quiet")
    assert rc == 0
    assert re.search(r"(?m)^streamcov ingest: warning: 8 sequence\(s\) lie so far from the origin that storing them "
                     r"as float32 rounds their coordinates by up to 0\.0312, over 0\.1% of their motion \(first: "
                     r"s00, rounding 0\.0312 against a range of \S+\); the descriptors see that rounding: translate "
                     r"the coordinates nearer the origin before ingesting", err), err
    near = write_archive(tmp_path / "near", n=8, joints=3, index_rows=index)
    rc, err, _ = cli("ingest", "skeleton", "--format", "generic", near, tmp_path / "near.zarr", "--quiet")
    assert rc == 0 and "warning" not in err, err


def test_a_store_of_one_joint_is_refused_by_a_hip_relative_descriptor(tmp_path):
    """A generic store of one joint (its centre, joint 0, by default): removing the centre left a 0 x 0
    covariance, and the run ended in a ZeroDivisionError (an internal error); in Python the numba kernel wrote
    past buffers sized from it (heap corruption, varying results). One line naming the key and the two ways out;
    with raw coordinates the same store runs."""
    import streamcov as sc

    index = ["file,label,subject", *[f"s{i:02d}.csv,{'ab'[i % 2]},{1 + i // 2 % 4}" for i in range(12)]]
    arch = write_archive(tmp_path / "arch", n=12, joints=1, index_rows=index)   # both classes in every subject
    assert cli("ingest", "skeleton", "--format", "generic", arch, tmp_path / "s.zarr", "--quiet")[0] == 0
    base = ("run", REPO / "pipelines" / "synthetic.toml", "--store", tmp_path / "s.zarr", "--quiet")
    rc, err, _ = cli(*base, "--output", tmp_path / "o1")
    assert_one_line_error(rc, err, r"^streamcov run: error: descriptor\.center: its joint 0 is the store's only "
                                   r"joint, and no joint is left once it is removed; set descriptor\.center = "
                                   r"\"none\" \(raw coordinates\), or ingest the skeletons with their other joints$")
    assert not (tmp_path / "o1" / "model").exists()
    assert cli(*base, "--output", tmp_path / "o2", "--set", 'descriptor.center="none"')[0] == 0
    X = [np.random.default_rng(0).normal(size=(30, 3))]
    for _ in range(3):   # the heap corruption showed on some calls only
        with pytest.raises(ValueError, match=r"^center \[0\]: the only joint is the centre, and no joint is left "
                                             r"once it is removed"):
            sc.LogCovariance(center=(0,)).fit_transform(X)
    assert sc.LogCovariance(center=None).fit_transform(X).shape == (1, 6)


def test_an_ingestion_refused_on_a_later_item_keeps_those_read_before_it(tmp_path):
    """A sequence or image that cannot be read, after others were read but before any chunk was committed:
    those read before it are committed (each was whole), and the incomplete store holds them, for the same
    command to resume after them when the error was not the archive's (a full disk, a dropped network drive).
    Fixing the file changes the archive, so that resume is refused (it would mix two versions of it) and
    --restart, as the message says, writes the store from the start."""
    from streamcov.data.images import ImageStore
    from streamcov.data.skeletons import SequenceStore

    arch = write_archive(tmp_path / "arch")
    good = (arch / "s03.csv").read_text()
    (arch / "s03.csv").write_text("1,2,3,4,5,6,7,8,9\n1,2,x,4,5,6,7,8,9\n")
    argv = ("ingest", "skeleton", "--format", "generic", arch, tmp_path / "s.zarr", "--quiet")
    assert_one_line_error(*cli(*argv)[:2], r"s03\.csv, line 2: .*'x'")
    rc, _, info = cli("info", tmp_path / "s.zarr", "--json")
    assert rc == 3 and json.loads(info)["store"]["committed_sequences"] == 3, info   # s00, s01, s02
    (arch / "s03.csv").write_text(good)
    assert_one_line_error(*cli(*argv)[:2], r"s\.zarr: the archive \S+arch changed since this ingestion began .* "
                                           r"Start over: add --restart to `streamcov ingest`")
    assert cli(*argv, "--restart")[0] == 0
    assert sorted(SequenceStore(tmp_path / "s.zarr").ids()) == [f"s{i:02d}" for i in range(8)]

    folder = image_folder("imgs")(Env(tmp_path, {}))
    (folder / "a" / "zz.png").write_bytes(b"not a png")
    argv = ("ingest", "images", "--format", "folders", folder, tmp_path / "i.zarr", "--quiet")
    assert_one_line_error(*cli(*argv)[:2], r"imgs/a/zz\.png: cannot decode image")
    rc, _, info = cli("info", tmp_path / "i.zarr", "--json")
    assert rc == 3 and json.loads(info)["store"]["committed_images"] == 2, info   # a/0.png, a/1.png
    (folder / "a" / "zz.png").unlink()
    save_array(np.zeros((16, 16), np.uint8))(folder / "a" / "zz.png")
    assert_one_line_error(*cli(*argv)[:2], r"i\.zarr: the archive \S+imgs changed since this ingestion began")
    assert cli(*argv, "--restart")[0] == 0
    assert sorted(ImageStore(tmp_path / "i.zarr").ids()) == ["a/0.png", "a/1.png", "a/zz.png", "b/0.png", "b/1.png"]


def test_on_error_skip_resumes_past_a_damaged_file_and_records_it(tmp_path, capsys):
    """A file that is damaged or not of the format stops the ingestion with its error, which names the way to
    leave it out; `--on-error skip` then resumes after the sequences (images) already stored, records the
    damaged file's among the store's skipped ones with the error and completes the store with every readable
    one: the same store as a fresh ingestion with the option. The choice is not part of the store's source
    record, so the resume is not refused."""
    from streamcov.data.images import ImageStore, ingest_images
    from streamcov.data.readers import open_reader
    from streamcov.data.skeletons import SequenceStore, ingest

    arch = write_archive(tmp_path / "arch")
    (arch / "s03.csv").write_text("1,2,3,4,5,6,7,8,9\n1,2,x,4,5,6,7,8,9\n")
    (arch / "s06.csv").write_bytes(b"1,2,3,4,5,6,7,8,9\n\xff\xfe not UTF-8\n")
    argv = ("ingest", "skeleton", "--format", "generic", arch, tmp_path / "s.zarr", "--quiet")
    assert_one_line_error(*cli(*argv)[:2], r"s03\.csv, line 2: .*'x'.*" + SKIP_HINT)
    rc, err, out = cli(*argv, "--on-error", "skip")
    assert rc == 0, err
    assert re.search(r"^streamcov ingest: warning: 2 sequence\(s\) skipped \(s03: cannot be read: \S+s03\.csv, "
                     r"line 2: .*; s06: cannot be read: \S+s06\.csv", err, flags=re.M), err
    assert json.loads(out)["skipped"] == 2
    resumed = SequenceStore(tmp_path / "s.zarr")
    assert sorted(resumed.ids()) == ["s00", "s01", "s02", "s04", "s05", "s07"]
    assert [s["id"] for s in resumed.attrs["skipped"]] == ["s03", "s06"]
    fresh = ingest(open_reader("generic", arch), tmp_path / "f.zarr", on_error="skip")
    assert fresh.attrs["skipped"] == resumed.attrs["skipped"] and fresh.ids() == resumed.ids()
    for a, b in zip(fresh.sequences(), resumed.sequences()):
        np.testing.assert_array_equal(a, b)
    assert cli("info", tmp_path / "s.zarr", "--verify")[0] == 0

    folder = image_folder("imgs")(Env(tmp_path, {}))
    (folder / "a" / "0.png").rename(folder / "a" / "00.png")
    (folder / "a" / "0.png").write_bytes(b"not a png")   # the first image: read before the lock
    (folder / "b" / "5.png").write_bytes(b"\x89PNG\r\n\x1a\n cut short")
    argv = ("ingest", "images", "--format", "folders", folder, tmp_path / "i.zarr", "--quiet")
    assert_one_line_error(*cli(*argv)[:2], r"imgs/a/0\.png: cannot decode image.*" + SKIP_HINT)
    assert not (tmp_path / "i.zarr").exists()   # refused on the first image, before anything was written
    rc, err, out = cli(*argv, "--on-error", "skip")
    assert rc == 0, err
    assert "2 image(s) skipped (a/0.png: cannot be read: " in err and "b/5.png: cannot be read: " in err, err
    store = ImageStore(tmp_path / "i.zarr")
    assert sorted(store.ids()) == ["a/00.png", "a/1.png", "b/0.png", "b/1.png"]
    assert sorted(s["id"] for s in store.attrs["skipped"]) == ["a/0.png", "b/5.png"]
    with pytest.raises(ValueError, match=r"^on_error must be 'stop' or 'skip' \(a file that cannot be read stops "
                                         r"the ingestion, or is recorded as skipped\), got 'ignore'$"):
        ingest_images(folder, tmp_path / "j.zarr", on_error="ignore")
    with pytest.raises(ValueError, match=r"^on_error must be 'stop' or 'skip' .*, got True$"):
        ingest(open_reader("generic", arch), tmp_path / "j.zarr", on_error=True)
    duck = type("Duck", (), {"info": fresh.attrs, "sequences": lambda self: iter(())})()   # not a SkeletonReader
    with pytest.raises(TypeError, match=r"^on_error='skip' needs a reader of streamcov\.open_reader, which reads one "
                                        r"file at a time; Duck cannot skip a file$"):
        ingest(duck, tmp_path / "j.zarr", on_error="skip")
    capsys.readouterr()


def test_on_error_skip_of_a_pipeline_file(tmp_path):
    """`[data] on_error = "skip"` of a pipeline that ingests its source: the stop names the key, and with it the
    run ingests the readable sequences and records the others; without `source` the key is not read (dropped
    with the reader's keys, a note)."""
    from streamcov.data.skeletons import SequenceStore

    rows = ["file,label,subject"] + [f"s{i:02d}.csv,{'ab'[i // 2 % 2]},{1 + i % 4}" for i in range(16)]
    arch = write_archive(tmp_path / "a", n=16, index_rows=rows)   # both classes in every subject's parity
    (arch / "s05.csv").write_text("1,2,3,4,5,6,7,8,9\n1,2\n")   # a row cut short (a first row of another width
    # than the first file's is not skipped: the odd one may be the first file)
    text = SKELETON_PIPELINE.format(out=tmp_path / "o", store=tmp_path / "s.zarr").replace(
        "[data]\n", f'[data]\nsource = "{arch}"\nformat = "generic"\n')
    (tmp_path / "p.toml").write_text(text)
    assert_one_line_error(*cli("run", tmp_path / "p.toml", "--quiet")[:2],
                          r"s05\.csv, line 2: .*" + RUN_SKIP_HINT)
    rc, err, _ = cli("run", tmp_path / "p.toml", "--quiet", "--set", 'data.on_error="skip"')
    assert rc == 0, err
    store = SequenceStore(tmp_path / "s.zarr")
    assert len(store.ids()) == 15 and [s["id"] for s in store.attrs["skipped"]] == ["s05"]
    assert store.attrs["skipped"][0]["reason"].startswith(f"cannot be read: {arch / 's05.csv'}, line 2: ")
    assert_one_line_error(*cli("run", tmp_path / "p.toml", "--quiet", "--set", 'data.on_error="ignore"')[:2],
                          r'^streamcov run: error: --set data\.on_error="ignore": data\.on_error = "ignore": expected '
                          r'one of "stop" or "skip"$')
    # without a source the reader is not opened: the key is dropped with the reader's keys, and said
    text = SKELETON_PIPELINE.format(out=tmp_path / "o2", store=tmp_path / "s.zarr").replace(
        "[data]\n", '[data]\non_error = "skip"\n')
    (tmp_path / "q.toml").write_text(text)
    rc, err, _ = cli("run", tmp_path / "q.toml", "--quiet")
    assert rc == 0 and re.search(r"note: data\.on_error \(\S+q\.toml\) is not read without data\.source", err), err


def test_a_write_that_fails_inside_a_commit_is_not_tried_again(tmp_path, monkeypatch):
    """An error raised while a chunk's items are being committed (here by the ids' write, as a dropped network
    drive raises it) leaves the store at its last commit point: those items were taken off the pending list,
    and committing the rest then would have put their rows under other ids (a complete store whose sequence
    held another's frames, which --verify passed). The resumed ingestion completes the store with every
    sequence's own frames."""
    import errno

    from streamcov.data.ragged import RaggedStoreWriter
    from streamcov.data.skeletons import SequenceStore, ingest
    from streamcov.data.synth import SyntheticSkeletons

    real = RaggedStoreWriter._append_ids
    calls = {"n": 0}

    def flaky(self, k, ids):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.EIO, "Input/output error")
        return real(self, k, ids)

    src = SyntheticSkeletons(n_sequences=20, n_subjects=2, n_classes=2, seed=0)
    monkeypatch.setattr(RaggedStoreWriter, "_append_ids", flaky)
    with pytest.raises(OSError, match="Input/output error"):
        ingest(src, tmp_path / "s.zarr", chunk_frames=100)
    monkeypatch.setattr(RaggedStoreWriter, "_append_ids", real)
    store = ingest(src, tmp_path / "s.zarr", chunk_frames=100)
    assert store.n_sequences == 20
    for i, sid in enumerate(store.ids()):
        seq = src.generate_sequence(int(sid.split("_")[1]))
        np.testing.assert_array_equal(store.sequence(i), seq.frames.astype(np.float32), err_msg=sid)
    assert cli("info", tmp_path / "s.zarr", "--verify")[0] == 0
    assert isinstance(SequenceStore(tmp_path / "s.zarr"), SequenceStore)


def test_the_disk_check_counts_only_the_sequences_a_limit_lets_through(tmp_path):
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    assert ingest(SyntheticSkeletons(n_sequences=10 ** 13), tmp_path / "s.zarr", limit=5) is None


def test_a_synthetic_store_larger_than_the_free_disk_is_refused_before_it_is_made(tmp_path, monkeypatch):
    """The generator's store size is known up front: 400 sequences of 30-60 frames are about 4.3 MB of float32
    frames (the store measured 4.06 MB), refused where 1 MiB is free, written where 100 MiB are."""
    import collections
    import shutil as sh

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.errors import ConfigError

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(sh, "disk_usage", lambda p: usage(2 ** 40, 0, 2 ** 20))
    with pytest.raises(ConfigError, match=r"^n_sequences=400 \(30-60 frames each\): needs about 4\.\d MiB of disk, "
                                          r"\S+ has 1\.0 MiB free; ask for fewer sequences, or write the store "
                                          r"elsewhere$"):
        ingest(SyntheticSkeletons(n_sequences=400), tmp_path / "a" / "s.zarr")
    assert not (tmp_path / "a").exists()
    monkeypatch.setattr(sh, "disk_usage", lambda p: usage(2 ** 40, 0, 100 * 2 ** 20))
    assert ingest(SyntheticSkeletons(n_sequences=400), tmp_path / "a" / "s.zarr").n_sequences == 400


def test_an_image_too_large_for_memory_is_refused_before_any_work(monkeypatch):
    """A 13000 x 13000 photograph passes Pillow's decompression-bomb limit, but its per-pixel features need
    about 100 bytes per pixel: on a 16 GiB machine the streamed path and predict ran out of memory halfway
    (a MemoryError traceback, or the kernel's kill). Refused when the source is built, naming the image."""
    from types import SimpleNamespace

    import streamcov._config as cfg
    from streamcov.errors import ConfigError
    from streamcov.descriptors.pixels import get_spec
    from streamcov.stream.image import _check_image_memory

    monkeypatch.setattr(cfg, "total_memory", lambda: 16 << 30)
    store = SimpleNamespace(path="s.zarr", shapes=np.array([[16, 16, 1], [13000, 13000, 1], [20, 20, 1]]),
                            id_of=["a.png", "big.png", "c.png"].__getitem__)
    spec = get_spec("texture")
    with pytest.raises(ConfigError, match=r"^s\.zarr: image 1 \(big\.png\) of 13000 x 13000 pixels \(its per-pixel "
                                          r"features\): needs 1\d\.\d GiB of memory, this process may use 16\.0 GiB; "
                                          r"raise pixels\.stride, downscale such images, or leave them out$"):
        _check_image_memory(store, spec, trained=False)
    with pytest.raises(ConfigError, match=r"; downscale such images, or leave them out$"):
        _check_image_memory(store, spec, trained=True)
    store.shapes[1] = [4000, 4000, 1]   # 16 megapixels: about 1.7 GiB, let through
    _check_image_memory(store, spec, trained=False)
    # ... unless the runtime's threads each hold one: 16 of them need about 27 GiB
    store.shapes = np.array([[4000, 4000, 1]] * 20)
    store.id_of = [f"p{i}.png" for i in range(20)].__getitem__
    _check_image_memory(store, spec, trained=False, parallelism=8)
    with pytest.raises(ConfigError, match=r"of 4000 x 4000 pixels \(its per-pixel features, 16 images at a time "
                                          r"\(one per thread\)\): needs 2\d\.\d GiB of memory, this process may use "
                                          r"16\.0 GiB; raise pixels\.stride, downscale such images, or leave them "
                                          r"out; or run fewer threads \(workers or dask\.workers\)$"):
        _check_image_memory(store, spec, trained=False, parallelism=16)


def test_same_source_ignores_grouping_and_the_path_but_not_the_files():
    """An image model trained with group_level = 2 (ETH-80) and its folder given to predict (read with group
    level 1, unlabelled) are the same data, and so is a copy of the folder elsewhere with the same files (the
    digest); another digest of the files is not, nor another folder where records have no digest. The same
    archive read with other reader options is the same archive, not the same data."""
    from streamcov.stream.predict import _same_archive, _same_source

    trained = {"format": "folders", "path": "/d/eth80", "group_level": 2, "exclude": ["maps"], "unlabelled": False,
               "files": {"count": 3, "digest": "ab"}, "orientation": "exif"}
    given = {**trained, "group_level": 1, "unlabelled": True}
    assert _same_source(trained, given)
    assert not _same_source(trained, {**given, "files": {"count": 3, "digest": "cd"}})
    assert _same_source(trained, {**given, "path": "/d/other"})
    old = {k: v for k, v in trained.items() if k != "files"}
    assert not _same_source(old, {**old, "path": "/d/other"}) and _same_source(old, dict(old))
    assert not _same_source({}, {}) and not _same_source(None, given)
    msr = {"format": "msr-action3d", "path": "/d/msr", "options": {}, "files": {"count": 3, "digest": "ab"}}
    cvpr12 = {**msr, "path": "/e/msr", "options": {"subset": "cvpr12"}}
    assert not _same_source(msr, cvpr12) and _same_archive(msr, cvpr12) and not _same_archive(msr, dict(msr))
    assert not _same_archive(msr, {**cvpr12, "files": {"count": 3, "digest": "cd"}})



def test_an_error_raised_from_none_over_a_full_disk_is_not_called_one():
    """``raise ... from None`` while handling ENOSPC says the new error is not the disk's: an internal error
    is not reported as a full disk (the chain is followed only where it was kept)."""
    import errno

    from streamcov.cli import _no_space

    def raised(suppress: bool):
        try:
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError:
                if suppress:
                    raise KeyError("x") from None
                raise KeyError("x")
        except KeyError as exc:
            return exc

    assert _no_space(raised(False)) is not None and _no_space(raised(True)) is None


@pytest.mark.parametrize("exc, pattern", [
    (PermissionError(13, "Permission denied"), r"cannot read it \(permission denied\); make it readable"),
    (OSError("image file is truncated (3 bytes not processed)"),
     r"cannot decode image \(OSError: image file is truncated.*\); the file is damaged or cut short"),
    (OSError("decoder jpeg2k not available"),
     r"cannot decode image \(OSError: decoder jpeg2k not available\); a variant of the format this Pillow cannot "
     r"read, or a damaged file: save it as PNG, JPEG or TIFF"),
    (OSError("decoder error -2"), r"cannot decode image \(OSError: decoder error -2\); the file is damaged"),
])
def test_image_read_errors_say_what_to_do(tmp_path, monkeypatch, exc, pattern):
    """The advice follows the error: unreadable for want of permission (not testable by file mode as root),
    damaged, or a format Pillow cannot decode here."""
    import PIL.Image

    from streamcov.data.imageio import read_image
    from streamcov.errors import FormatError

    path = tmp_path / "x.png"
    path.write_bytes(b"\x89PNG")

    def fail(*a, **k):
        raise exc

    monkeypatch.setattr(PIL.Image, "open", fail)
    with pytest.raises(FormatError, match=r"x\.png: " + pattern):
        read_image(path)


def test_atomic_write_survives_a_file_system_without_modes(tmp_path, monkeypatch):
    """fchmod refused (FAT, a mount owned by another user): the file is still written, and no descriptor is
    left open."""
    import streamcov.files as m

    def refuse(fd, mode):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(m.os, "fchmod", refuse)
    before = len(os.listdir("/proc/self/fd"))
    m.atomic_write_text(tmp_path / "r.json", "{}")
    assert (tmp_path / "r.json").read_text() == "{}" and len(os.listdir("/proc/self/fd")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]



def test_atomic_write_onto_a_folder(tmp_path):
    """A folder where a file is written (a checkpoint, model.json, a fold's saved result made a folder by hand):
    one line naming it, and no temporary file left; it was an IsADirectoryError traceback."""
    import streamcov.stream.model as m
    from streamcov.errors import ConfigError

    (tmp_path / "odd-even.npz").mkdir()
    with pytest.raises(ConfigError, match=r"odd-even\.npz: a folder where streamcov writes a file; move or delete "
                                          r"it, then run the same command again$"):
        m.atomic_write_npz(tmp_path / "odd-even.npz", {"a": np.zeros(2)})
    assert [p.name for p in tmp_path.iterdir()] == ["odd-even.npz"]


@pytest.mark.parametrize("damage", ["cut", "flipped"])
@pytest.mark.parametrize("fmt, options", [("TIFF", {"compression": "tiff_lzw"}), ("PNG", {}), ("WEBP", {}),
                                          ("BMP", {})])
def test_damaged_images_read_by_pillow_are_called_damaged(tmp_path, fmt, options, damage):
    """Real files, cut to a third or with bytes flipped after the first 40, as Pillow meets them: every message
    says the file may be damaged and to copy it again (not only "save it as PNG" for a file that is a PNG), or
    the image decodes (a flip inside uncompressed pixels is a valid image)."""
    import io

    from PIL import Image

    from streamcov.data.imageio import read_image
    from streamcov.errors import FormatError

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8)).save(buf, fmt, **options)
    data = bytearray(buf.getvalue())
    if damage == "cut":
        data = data[:len(data) // 3]
    else:
        for k in range(40, len(data) // 2):
            data[k] ^= 0x77
    path = tmp_path / f"x.{fmt.lower()}"
    path.write_bytes(bytes(data))
    try:
        read_image(path)
    except FormatError as exc:
        assert "damaged" in str(exc) and "copy it again" in str(exc), str(exc)


def test_any_damage_to_an_image_reads_or_is_the_files_own_fault(tmp_path):
    """600 images of nine formats and modes, each damaged by 1 to 6 random cuts, byte changes, deletions and
    insertions (seeded): every one decodes, or is one FormatError that on_error="skip" may leave out (the file's
    own fault). Pillow's parsers of damaged TIFF and GIF files raise TypeError and IndexError, which ended the
    ingestion as an internal error even with --on-error skip."""
    import io
    import random
    import warnings

    from PIL import Image

    from streamcov.data.imageio import read_image
    from streamcov.errors import FormatError, file_fault

    rng, rnd = np.random.default_rng(0), random.Random(1)
    goods = []
    for fmt, mode in [("PNG", "L"), ("JPEG", "RGB"), ("TIFF", "RGB"), ("BMP", "RGB"), ("GIF", "L"), ("WEBP", "RGB"),
                      ("PPM", "RGB"), ("TGA", "RGB"), ("TIFF", "I;16")]:
        a = rng.integers(0, 255, (24, 24, 3) if mode == "RGB" else (24, 24), dtype=np.uint8)
        buf = io.BytesIO()
        (Image.fromarray(a.astype(np.uint16) * 200) if mode == "I;16" else Image.fromarray(a)).save(buf, fmt)
        goods.append((fmt, buf.getvalue()))
    outcomes = {"read": 0, "refused": 0}
    for k in range(600):
        fmt, data = rnd.choice(goods)
        b = bytearray(data)
        for _ in range(rnd.randint(1, 6)):
            if len(b) < 2:
                break
            op, i = rnd.random(), rnd.randrange(len(b))
            if op < 0.25:
                b = b[:max(i, 1)]
            elif op < 0.7:
                b[i] = rnd.randrange(256)
            elif op < 0.85:
                del b[i:i + rnd.randint(1, 16)]
            else:
                b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))
        path = tmp_path / f"x{k}.{fmt.lower()}"
        path.write_bytes(bytes(b))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # Pillow's warnings about damaged metadata, given again with the path
                read_image(path)
            outcomes["read"] += 1
        except FormatError as exc:
            assert file_fault(exc), f"{path} ({fmt}): {exc}"
            outcomes["refused"] += 1
    assert outcomes["refused"] > 300 and outcomes["read"] > 50, outcomes   # both outcomes were met


def test_inner_folds_warning_names_the_value_used():
    """method.inner_folds lowered by the sgd classifier's cap (when given) or a small class; 1nn reads none."""
    from streamcov.tasks.image_eval import inner_folds_warning
    from streamcov.tasks.schema import EvalMethod

    labels = np.array([0] * 6 + [1] * 6)
    split = [("s", np.r_[0:4, 6:10], np.r_[4:6, 10:12])]   # 4 training images per class
    given = EvalMethod(name="approx_loghs", classifier="sgd", inner_folds=5)
    assert inner_folds_warning(given, "sgd", split, labels, ["a", "b"]) == (
        "method.inner_folds = 5, but the sgd classifier uses at most 3: 3 inner folds used; set "
        "method.inner_folds = 3 to say so")
    # the default (5) capped for sgd is the classifier's own setting: nothing to say
    assert inner_folds_warning(EvalMethod(name="approx_loghs", classifier="sgd"), "sgd", split, labels, "ab") is None
    small = [("s", np.r_[0:2, 6:10], np.r_[4:6, 10:12]), ("t", np.r_[0:4, 6:10], np.r_[4:6, 10:12])]
    assert inner_folds_warning(EvalMethod(name="e"), "svc", small, labels, ["a", "b"]) == (
        "method.inner_folds = 5, but the smallest class of a fold's training images has 2 (class 'a', fold 's'; "
        "the inner folds are stratified): 2 to 4 inner folds used (by outer fold)")
    assert inner_folds_warning(EvalMethod(name="e", inner_folds=4), "svc", split, labels, ["a", "b"]) is None
    assert inner_folds_warning(EvalMethod(name="e"), "1nn", small, labels, ["a", "b"]) is None


def test_case_twins_names_each_group_once_and_three_at_most():
    from streamcov.errors import case_twins

    assert case_twins(["a", "b", "c"]) == ""
    assert case_twins(["b", "A", "a", "A"]) == "'A' and 'a'"
    assert case_twins(["Walk", "walk", "WALK"], {"walk": " (line 2)"}) == "'WALK' and 'Walk' and 'walk' (line 2)"
    many = case_twins([x for c in "abcd" for x in (c, c.upper())])
    assert many == "'A' and 'a'; 'B' and 'b'; 'C' and 'c' ..."


def test_did_you_mean_offers_the_closest_choice_or_nothing():
    from streamcov.errors import did_you_mean, toml_value

    assert did_you_mean("normalise", ["center", "normalize", "scale"]) == " (did you mean 'normalize'?)"
    assert did_you_mean("xyz", ["center", "normalize"]) == ""
    assert did_you_mean({"a": 1}, ["skeleton-classification"]) == ""   # a table typed for a name: no hint
    assert did_you_mean("textures", ["texture", "rgb"], show=toml_value) == ' (did you mean "texture"?)'
    # the cutoff is difflib's ratio: "train" is 0.53 of "train_subjects", offered only below the default 0.6
    assert did_you_mean("train", ["train_subjects"]) == ""
    assert did_you_mean("train", ["train_subjects"], cutoff=0.5) == " (did you mean 'train_subjects'?)"
    # another case only: one letter is too short for difflib's ratio (model.c for model.C had no hint)
    assert did_you_mean("c", ["C", "alpha", "tol"]) == " (did you mean 'C'?)"
    assert did_you_mean("LOSS", ["loss", "C"]) == " (did you mean 'loss'?)"


@pytest.mark.parametrize("value", ["text", 'a "quoted" \\ path', "/s/img.zarr", True, False, 3, 0.5, 1e-5,
                                   [1, "x", [True]], {"subset": "cvpr12", "a b": [0.25], "n.m": {"k": 1}}])
def test_toml_value_is_read_back_by_toml_as_the_value(value):
    """A value a message shows beside its key is what a pipeline file would hold: TOML reads it back as the value
    (strings escaped, keys that are not bare quoted); numpy scalars as the numbers they hold."""
    import tomllib

    import numpy as np
    from streamcov.errors import toml_value

    assert tomllib.loads(f"x = {toml_value(value)}")["x"] == value
    if isinstance(value, (bool, int, float)):
        assert toml_value(np.array(value)[()]) == toml_value(value)
    assert toml_value(None) == "(not set)"


@pytest.mark.parametrize("value", ["0", "-1", "four", ""])
def test_numba_num_threads_environment(value, monkeypatch):
    """NUMBA_NUM_THREADS that numba cannot use: 0 or a negative count made `import numba` fail (a traceback,
    exit 1); text or an empty value was a warning quoting numba's traceback."""
    monkeypatch.setenv("NUMBA_NUM_THREADS", value)
    rc, err, _ = cli("info", "--threads")
    assert_one_line_error(rc, err, rf"^streamcov info: error: environment variable NUMBA_NUM_THREADS={value!r}: "
                                   r"expected an integer >= 1 \(the threads of numba's kernels\); set it to a count "
                                   r"\(this process may use \d+ cores\) or unset it$")


def test_info_of_a_store_does_not_check_numba(shared, monkeypatch):
    """``info STORE`` reads the store's files only: it describes the store whatever numba's environment says;
    with ``--threads`` (numba's settings shown) the environment is checked as for every other command."""
    monkeypatch.setenv("NUMBA_NUM_THREADS", "0")
    rc, err, out = cli("info", shared["synth"], "--json")
    assert rc == 0, err
    assert json.loads(out)["store"]["complete"] is True
    assert_one_line_error(*cli("info", shared["synth"], "--threads")[:2],
                          r"^streamcov info: error: environment variable NUMBA_NUM_THREADS='0': ")


@pytest.mark.parametrize("variable, value, pattern", [
    ("NUMBA_NUM_THREADS", "0", r"environment variable NUMBA_NUM_THREADS='0': expected an integer >= 1"),
    ("NUMBA_THREADING_LAYER", "bogus", r"environment variable NUMBA_THREADING_LAYER='bogus': numba cannot start it "
                                       r"\(The threading layer requested 'bogus' is unknown to Numba\.\); unset it, "
                                       r"or name a layer numba has here \(workqueue is built in; streamcov runs its "
                                       r"kernels one at a time under it\)$"),
])
def test_numba_environment_in_a_new_process(variable, value, pattern, tmp_path):
    """As a user's shell starts streamcov (numba reads its variables as it is imported): NUMBA_NUM_THREADS=0
    failed `import numba`; an unknown NUMBA_THREADING_LAYER failed the first kernel of a run, after the
    store was written (a traceback, exit 1, both)."""
    import subprocess
    import sys

    env = {**os.environ, variable: value, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", "import sys; from streamcov.cli import main; "
                        "sys.exit(main(['synth', '--sequences', '2', '--quiet', sys.argv[1]]))",
                        str(tmp_path / "x.zarr")], env=env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(p.returncode, p.stderr, r"^streamcov synth: error: " + pattern)
    assert not any(tmp_path.iterdir())


def test_numba_environment_of_the_workers(tmp_path):
    """A cluster's workers read their own environment (another machine, a job script, the nannies'
    pre-spawn-environ): a threading layer they cannot start failed the first kernel there, after the store was
    written; now the run is refused before it starts, naming the worker and the variable."""
    import dask

    from streamcov.errors import ConfigError
    from streamcov.stream.runtime import dask_runtime

    before = os.environ.get("NUMBA_THREADING_LAYER")
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": {"NUMBA_THREADING_LAYER": "bogus"}}):
            with pytest.raises(ConfigError, match=r"^Dask worker tcp://127\.0\.0\.1:\d+ \(and 1 other worker\(s\)\): "
                               r"environment variable NUMBA_THREADING_LAYER='bogus': numba cannot start it \(The "
                               r"threading layer requested 'bogus' is unknown to Numba\.\); unset it, or name a "
                               r"layer"):
                with dask_runtime("local-cluster", 2):
                    pass
    finally:   # Dask's nannies copy pre-spawn-environ into the environment of the process that hosts them: this one
        if before is None:
            os.environ.pop("NUMBA_THREADING_LAYER", None)
        else:
            os.environ["NUMBA_THREADING_LAYER"] = before


@pytest.mark.parametrize("lost", ["CommClosedError", "OSError"])
def test_worker_lost_during_the_numba_check_is_one_line(lost):
    """A worker lost while it answers the check of its environment (client.run) is the cluster's doing: one line
    that says so, not an internal error."""
    from distributed.comm.core import CommClosedError

    from streamcov.errors import StreamcovError
    from streamcov.stream.runtime import _check_workers

    class Client:
        def scheduler_info(self, n_workers=5):
            return {"workers": {"tcp://127.0.0.1:1": {"status": "running"}}}

        def run(self, func, *args, **kwargs):
            raise (CommClosedError("in <TCP (closed) ConnectionPool.run local=tcp://127.0.0.1:1>: Stream is closed")
                   if lost == "CommClosedError" else OSError("Timed out trying to connect"))

    with pytest.raises(StreamcovError, match=rf"^a Dask worker was lost while the run checked the workers' "
                                             rf"environment \({lost}: .+\); check the cluster's workers .* and "
                                             rf"run the command again$"):
        _check_workers(Client(), 5.0)


@pytest.mark.parametrize("error", [OSError("libtbb.so.12: cannot open shared object file"),
                                   ImportError("numpy.core.multiarray failed to import")])
def test_numba_that_cannot_be_imported_is_a_problem_not_a_lost_worker(monkeypatch, error):
    """A worker whose numba import fails (a damaged install, a library it loads missing) answers the numba
    check with its problem: the OSError it raised was taken for a worker lost as it answered."""
    import builtins

    from streamcov._config import numba_environment_problem

    real = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "numba":
            raise error
        return real(name, *args, **kwargs)

    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing)
    problem = numba_environment_problem()
    assert re.fullmatch(rf"numba cannot be imported \({type(error).__name__}: {re.escape(str(error))}\); install it "
                        rf"again in this environment \(pip install --force-reinstall numba\)", problem), problem


def test_half_made_client_closed():
    """A scheduler address Dask refuses as it connects (inproc:// naming no scheduler, tls:// without its
    settings): the one line, then the end of the process. The client Dask left half made held the exit for
    60 s and printed a traceback from its __del__."""
    import subprocess
    import sys

    code = ("from streamcov.errors import StreamcovError\n"
            "from streamcov.stream.runtime import dask_runtime\n"
            "try:\n"
            "    with dask_runtime('inproc://nothing'):\n"
            "        pass\n"
            "except StreamcovError as exc:\n"
            "    print(exc)\n")
    p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, timeout=40)
    assert "Dask cannot connect" in p.stdout, p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("value", ["abc", "", "-5s"])
def test_dask_connect_timeout_not_a_duration(env, value):
    """Dask's connect timeout, which streamcov reads to give up on an address, set to something that is not a
    duration (DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=abc, or in a Dask configuration file): a KeyError or
    IndexError traceback."""
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": value}):
        rc, err, _ = cli("predict", env.shared["model"], env.shared["synth"], "--out", env.tmp / "p.csv",
                         "--scheduler", "tcp://127.0.0.1:1")
    assert_one_line_error(rc, err, rf"^streamcov predict: error: Dask's setting distributed\.comm\.timeouts\.connect "
                                   rf"= {re.escape(repr(value))} \(from the environment variable "
                                   r"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT or a Dask configuration file\): "
                                   r"expected a duration such as 30s; correct or remove it$")
    assert not (env.tmp / "p.csv").exists()


@pytest.mark.parametrize("key, value, expected", [
    ("distributed.comm.timeouts.connect", "abc", r"expected a duration such as 30s; correct or remove it"),
    ("distributed.comm.timeouts.tcp", "abc", r"expected a duration such as 30s; correct or remove it"),
    ("distributed.worker.memory.target", "abc", r"expected a fraction of the worker's memory limit \(a number above 0 "
                                                 r"and at most 1\) or false; correct or remove it"),
    ("distributed.worker.memory.pause", 1.5, r"expected a fraction of the worker's memory limit"),
    # a fraction below what an idle worker holds: every worker paused at once, and the run waited forever
    ("distributed.worker.memory.pause", 0.0001, r"each of the 2 workers would pause above \S+ \S+ of its \S+ \S+, "
                                                r"less than the 307\.20 MiB a worker holds before any task, so no "
                                                r"task would run; give more than \S+ \(Dask's default is "
                                                r"0\.8\), or false, or fewer workers$"),
    ("distributed.worker.memory.terminate", 0.001, r"each of the 2 workers would be restarted above \S+ \S+ of its "
                                                    r"\S+ \S+, less than the 307\.20 MiB"),
    ("temporary-directory", "/proc/1", r"the workers cannot write their files there; give a folder this user can "
                                        r"write, or remove it"),
])
def test_dask_settings_a_local_cluster_cannot_start_with(env, key, value, expected):
    """Dask's settings (environment variables DASK_..., or Dask configuration files) that a LocalCluster
    (--workers N) cannot start with: a timeout that is not a duration was a KeyError traceback, a memory fraction
    of "abc" was called "out of memory" (Dask multiplies it by the memory limit), an unwritable temporary
    directory "Cluster failed to start". One line naming the setting and its variable, before any work."""
    import dask

    variable = "DASK_" + key.upper().replace(".", "__").replace("-", "_")
    with dask.config.set({key: value}):
        rc, err, _ = cli("predict", env.shared["model"], env.shared["synth"], "--out", env.tmp / "p.csv",
                         "--workers", "2")
    assert_one_line_error(rc, err, rf"^streamcov predict: error: Dask's setting {re.escape(key)} = "
                                   rf"{re.escape(repr(value))} \(from the environment variable {variable} or a Dask "
                                   rf"configuration file\): {expected}")
    assert not (env.tmp / "p.csv").exists()


def test_a_local_cluster_that_fails_to_start_is_one_line(env, monkeypatch):
    """Dask's LocalCluster raises "Cluster failed to start" (its cause in __cause__) when its processes cannot
    start: a traceback. One line with the cause and the count (which may come from --workers, dask.workers or
    the cores; the first version named "--workers None" for a count it was not given)."""
    import distributed

    from streamcov._config import available_cores

    def failing(*args, **kwargs):
        try:
            raise OSError(28, "No space left on device")
        except OSError as exc:
            raise RuntimeError("Cluster failed to start") from exc

    monkeypatch.setattr(distributed, "LocalCluster", failing)
    for flags, n in ((("--workers", "2"), 2), (("--scheduler", "local-cluster"), available_cores())):
        rc, err, _ = cli("predict", env.shared["model"], env.shared["synth"], "--out", env.tmp / "p.csv", *flags)
        assert_one_line_error(rc, err, rf"^streamcov predict: error: Dask's local cluster of {n} worker processes "
                                       r"failed to start \(OSError: \[Errno 28\] No space left on device\); check "
                                       r"Dask's settings .*or use fewer workers or the threads scheduler$")
    assert not (env.tmp / "p.csv").exists()


def test_links_a_run_does_not_write_through_are_accepted(tmp_path):
    """A store the run only reads (e.g. its ``--store``) linked into the output folder, and a link at
    ``result.json`` (which a run removes before writing a new file), are not refused; the links a run writes
    through (model, checkpoints, feature stores) are, by the cases above."""
    from streamcov.errors import ConfigError
    from streamcov.tasks.runner import _check_own_names

    out = tmp_path / "o"
    out.mkdir()
    (tmp_path / "data.zarr").mkdir()
    (tmp_path / "old.json").write_text("{}")
    (out / "data.zarr").symlink_to(tmp_path / "data.zarr")
    (out / "result.json").symlink_to(tmp_path / "old.json")
    _check_own_names(out, "--output o")
    (out / "features-fold0.zarr").symlink_to(tmp_path / "data.zarr")
    with pytest.raises(ConfigError, match=r"^--output o: \S+/features-fold0\.zarr is a link to \S+/data\.zarr, and a "
                                          r"run writes its features there through it; remove the link"):
        _check_own_names(out, "--output o")


def test_an_error_under_an_open_progress_bar_starts_its_own_line(tmp_path, monkeypatch):
    """The in-memory image task read the folder under a progress bar, and an image it could not decode
    stopped it with the bar open: the error followed the bar's text on one line (``\\rread x: 0%|...|
    streamcov run: error: ...``), so a line-based search for the error missed it. The bar is now closed
    first (by the error too), as the stream task and predict did."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in "ab":
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (16, 16), dtype=np.uint8)).save(tmp_path / "imgs" / c / f"{i}.png")
    (tmp_path / "imgs" / "b" / "notes.png").write_text("not an image")
    monkeypatch.setattr("streamcov._config.BAR_DISABLE", False)   # drawn as on a terminal: stderr is captured
    rc, err, _ = cli("run", REPO / "pipelines" / "eth80_e.toml", "--set", f'data.source="{tmp_path / "imgs"}"',
                     "--set", "data.group_level=1", "--output", tmp_path / "o")   # not --quiet: the bars are drawn
    assert "read imgs:" in err, err                                              # the bar was there
    assert_one_line_error(rc, err, r"imgs/b/notes\.png: cannot decode image")
    assert [ln for ln in err.split("\n") if ln.startswith("streamcov run: error: ")], repr(err)


@pytest.mark.parametrize("signame, status, said", [("SIGTERM", 143, "terminated"),
                                                   ("SIGHUP", 129, "hung up (SIGHUP)")])
def test_sigterm_undoes_what_ctrl_c_undoes(env, signame, status, said):
    """SIGTERM (timeout, a batch scheduler) left predict's temporary copy of an image folder behind; it now
    interrupts the command as Ctrl-C does, which removes it, and the exit status is 143 (128 + SIGTERM). So does
    SIGHUP (the terminal or SSH session closed), which had ended the command at once: 129."""
    import subprocess
    import sys

    folder = image_folder("imgs", n=2, size=24)(env)
    tmp = env.tmp / "tmpdir"
    tmp.mkdir()
    # the signal arrives while the folder's temporary store exists: as the prediction on it starts
    code = ("import os, signal, time, sys\n"
            "import streamcov.stream.predict as P\n"
            "def stop(*a, **k):\n"
            f"    os.kill(os.getpid(), signal.{signame})\n"
            "    time.sleep(30)\n"
            "P._predict = stop\n"
            "from streamcov.cli import main\n"
            f"sys.exit(main(['predict', {str(env.shared['img_model'])!r}, {str(folder)!r}, '--out', "
            f"{str(env.tmp / 'p.csv')!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp)})
    assert proc.returncode == status and proc.stderr.strip().splitlines()[-1] == f"streamcov predict: {said}", \
        proc.stderr
    assert not any(p.name.startswith("streamcov-predict-") for p in tmp.iterdir()), list(tmp.iterdir())


def test_a_host_programs_sigterm_handler_is_kept():
    """A program that calls streamcov's main with a SIGTERM handler of its own (a job runner's graceful shutdown)
    keeps it: the command's handler replaced it, and the host never saw its signal."""
    import signal

    from streamcov import cli as C

    import time

    seen = []
    orig = signal.signal(signal.SIGTERM, lambda *a: seen.append(a[0]))   # (pytest's runner may hold one too)
    try:
        with C._sigterm_interrupts():
            assert signal.getsignal(signal.SIGTERM) is not C._terminated
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
        # with the default handler in place, the command's own handler runs, and is taken back afterwards
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with C._sigterm_interrupts():
            assert signal.getsignal(signal.SIGTERM) is C._terminated
            with pytest.raises(C.Terminated):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)   # the handler raises at the next bytecode
            # a later one ends the process at once (test_a_sigterm_echo_is_ignored_and_a_later_one_ends_at_once)
            assert signal.getsignal(signal.SIGTERM) not in (C._terminated, signal.SIG_DFL, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, orig)


@pytest.mark.parametrize("signame, then", [("SIGTERM", "SIGTERM"), ("SIGHUP", "SIGHUP"), ("SIGTERM", "SIGHUP"),
                                           ("SIGHUP", "SIGTERM")])
def test_a_sigterm_echo_is_ignored_and_a_later_one_ends_at_once(signame, then):
    """GNU timeout (and a kill of a job's process group) sends SIGTERM to the command and then to its whole group,
    microseconds apart: the second found the default action back and killed the process without its cleanup or
    its line (1 run in 6-10 under `timeout`). A SIGTERM within SIGTERM_ECHO seconds of the first is ignored; a
    later one still ends the process at once. A closed terminal's SIGHUP comes twice too (the kernel's and the
    shell's): the same rule; and across the two (systemd's stop sends SIGTERM and then SIGHUP at once: the
    second's Terminated, raised inside the first's cleanup, cut it short)."""
    import signal
    import subprocess
    import sys

    code = ("import os, signal, time\n"
            "from streamcov import cli as C\n"
            f"S, T = signal.{signame}, signal.{then}\n"
            "with C._sigterm_interrupts():\n"
            "    try:\n"
            "        os.kill(os.getpid(), S); time.sleep(5)\n"
            "    except C.Terminated as exc:\n"
            "        print(exc.signum == S, flush=True)\n"
            "    os.kill(os.getpid(), T); time.sleep(0.2)\n"
            "    print('survived the echo', flush=True)\n"
            "    from streamcov._config import SIGTERM_ECHO; time.sleep(SIGTERM_ECHO)\n"
            "    os.kill(os.getpid(), T); time.sleep(5)\n"
            "    print('not reached', flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout == "True\nsurvived the echo\n" and done.returncode == -getattr(signal, then), \
        (done.stdout, done.stderr[-2000:])


def test_a_hangup_ends_the_command_unless_nohup_ignores_it():
    """SIGHUP (its terminal or SSH session closed) ended a command at once, without what Ctrl-C undoes; it is now
    the command's Terminated, exit 129. A command started under nohup (or a shell's `trap '' HUP`), which ignores
    SIGHUP so that it outlives its terminal, still ignores it: only a default action is replaced."""
    import signal

    from streamcov import cli as C

    orig = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with C._sigterm_interrupts():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.2)   # ignored: the command goes on
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with C._sigterm_interrupts():
            assert signal.getsignal(signal.SIGHUP) is C._terminated
            with pytest.raises(C.Terminated) as caught:
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(5)   # the handler raises at the next bytecode
        assert (caught.value.status, caught.value.said) == (129, "hung up (SIGHUP)")
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, orig)


def test_stderr_of_a_terminal_that_hung_up_goes_to_devnull():
    """A terminal that hung up (the SSH session closed while SIGHUP is ignored, as under `trap '' HUP`) fails
    every write with EIO: the next warning or progress bar ended the run with a traceback. stderr is then
    pointed at /dev/null, as for a piped stderr whose reader has gone; another OSError still raises."""
    import errno
    import pty

    from streamcov import cli as C

    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w")
    try:
        os.close(master)   # the terminal hangs up
        with pytest.raises(OSError, match="Input/output error"):
            stream.write("a note\n")
            stream.flush()
        wrapped = C._ReaderMayLeave(stream)
        wrapped.write("a note\n")
        wrapped.flush()
        assert os.path.samefile(f"/proc/self/fd/{stream.fileno()}", os.devnull)
        wrapped.write("later\n")
        wrapped.flush()

        class Full:
            def write(self, text):
                raise OSError(errno.ENOSPC, "No space left on device")

        with pytest.raises(OSError, match="No space"):
            C._ReaderMayLeave(Full()).write("x")
    finally:
        stream.close()


def test_stdout_of_a_terminal_that_hung_up_goes_to_devnull_and_the_command_ends_as_it_would(env):
    """With SIGHUP ignored (`trap '' HUP`) and stdout on a terminal that hung up, the command's next line on stdout
    raised EIO, and a command that had done its work ended with "internal error: this is a bug" and exit 1. stdout
    now goes to /dev/null and the command ends with its own status. A stdout pipe whose reader ended is another
    matter (exit 141, tests/test_synth.py), not this one's."""
    import pty
    import subprocess
    import sys

    from streamcov import cli as C

    master, slave = pty.openpty()
    os.close(master)   # hung up before the command writes
    try:
        proc = subprocess.run([sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN)"
                               "\nfrom streamcov.cli import main\n"
                               f"sys.exit(main(['info', {str(env.shared['synth'])!r}]))"],
                              stdout=slave, stderr=subprocess.PIPE, text=True, timeout=120, cwd=REPO)
    finally:
        os.close(slave)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    with pytest.raises(BrokenPipeError):   # stdout's own rule for a pipe: not turned into /dev/null here
        C._ReaderMayLeave(type("Pipe", (), {"write": lambda self, t: (_ for _ in ()).throw(BrokenPipeError())})(),
                          C._hung_up).write("x")


def test_a_second_sigterm_delivery_is_not_reported_as_a_traceback(monkeypatch):
    """SIGTERM delivered twice before Python ran the handler: Python reported the second as "OSError: Signal 15
    ignored due to race condition" with a traceback of the C call it interrupted (threadpoolctl's), before the
    command's one line. While a command runs that report is dropped; any other unraisable error still goes to the
    hook there was, which is put back after."""
    import signal
    import sys
    from types import SimpleNamespace

    from streamcov import cli as C

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(str(u.exc_value)))
    orig = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with C._sigterm_interrupts():
            sys.unraisablehook(SimpleNamespace(exc_value=OSError(f"Signal {int(signal.SIGTERM)} ignored due to race "
                                                                 f"condition")))
            sys.unraisablehook(SimpleNamespace(exc_value=OSError("something else")))
        assert seen == ["something else"]
        sys.unraisablehook(SimpleNamespace(exc_value=OSError("after")))
        assert seen == ["something else", "after"]
    finally:
        signal.signal(signal.SIGTERM, orig)


@pytest.mark.parametrize("learner", ["sgd", "lbfgs"])
def test_a_run_without_resume_says_it_starts_over_a_cut_training(env, learner):
    """A run killed during training, run again without --resume, trained from the start without a word although
    the fold's checkpoint was there: a note now names it and --resume. Not said for a fold that finished (its
    result is saved beside its checkpoint), nor with --resume, which continues it."""
    text = SKELETON_PIPELINE.format(out=env.tmp / "out", store=env.shared["synth"])
    if learner == "lbfgs":
        text = text.replace('learner = "sgd"\nloss = "hinge"\nepochs = 3', 'learner = "lbfgs"\nmax_iter = 5')
    pipeline = env.pipeline(text)
    rc, err, _ = cli("run", pipeline, "--quiet")
    assert rc == 0, err
    ck = env.tmp / "out" / "checkpoints"
    assert (ck / "odd-even.npz").is_file() and (ck / "odd-even.result.json").is_file(), sorted(ck.iterdir())
    rc, err, _ = cli("run", pipeline, "--quiet")
    assert rc == 0 and "did not finish" not in err, err
    (ck / "odd-even.result.json").unlink()   # as a kill during the fold's training leaves it
    rc, err, _ = cli("run", pipeline, "--quiet")
    assert rc == 0, err
    notes = [ln for ln in err.splitlines() if "did not finish" in ln]
    assert notes == [f"streamcov run: note: {ck / 'odd-even.npz'}: the checkpoint of a training of fold odd-even that did not "
                     f"finish; fold odd-even is trained from the start (add --resume to continue it)"], err
    (ck / "odd-even.result.json").unlink()
    rc, err, _ = cli("run", pipeline, "--quiet", "--resume")
    assert rc == 0 and "did not finish" not in err, err


def test_a_run_removes_the_temporary_files_a_kill_left(env):
    """atomic_write writes .<name>.<8 characters>.streamcov-tmp, then renames it: a kill -9 left such files (a
    model.npz as large as the model) through later runs, --resume included. A run removes them once it holds the
    output's lock: of its own files in its folder (predict --out may write another file there, its temporary
    included), any in its checkpoints and model folders; a user's files stay, whatever their names."""
    rc, err, _ = cli("run", env.pipeline(), "--quiet")
    assert rc == 0, err
    out = env.tmp / "out"
    (out / "checkpoints").mkdir(exist_ok=True)
    left = [out / ".result.json.ab12cd_3.streamcov-tmp", out / "checkpoints" / ".fold-0.npz.vajuj0se.streamcov-tmp",
            out / "model" / ".model.npz.h51yhagm.streamcov-tmp", out / "..streamcov-output.k2j4h5g6.streamcov-tmp",
            out / ".image_classification_details.json.abcdefgh.streamcov-tmp",
            out / "predictions.csv.tmp"]   # the marker's and details' temporaries; an earlier streamcov's name
    kept = [out / "download_2024.tmp", out / "checkpoint.tmp", out / ".new.csv.abcdefgh.streamcov-tmp"]
    for p in left + kept:
        p.write_bytes(b"half written")
    rc, err, _ = cli("run", env.pipeline(), "--quiet", "--resume")
    assert rc == 0, err
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)


def test_predict_removes_copies_of_image_folders_that_killed_predicts_left(tmp_path, monkeypatch):
    """A predict killed with SIGKILL left its copy of the image folder (every pixel) in the temporary folder;
    the next predict removes the copies whose process is gone, and leaves a live one's."""
    import tempfile

    from streamcov.stream import predict as P

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    from streamcov.lock import host_tag

    here = f"{P.COPY_PREFIX}{host_tag()}"
    dead = tmp_path / f"{here}-{2 ** 22 + 12345}-abcd1234"   # above any pid this machine gives
    live = tmp_path / f"{here}-{os.getpid()}-efgh5678"
    elsewhere = tmp_path / f"{P.COPY_PREFIX}another.host-{2 ** 22 + 12345}-ijkl9012"   # a shared temporary folder
    other = tmp_path / "streamcov-predict-notes"
    for d in (dead, live, elsewhere, other):
        (d / "input.zarr").mkdir(parents=True)
    P._remove_stale_copies()
    assert not dead.exists() and live.exists() and elsewhere.exists() and other.exists()


GEGENBAUER_FAILED = (r"^tgp\.gegenbauer_weight_output = 10000000000\.0: could not factor the kernel matrix even after a "
                     r"diagonal shift; lower the Gegenbauer weights \(the paper's are 0\.51 and 0\.52\), or raise "
                     r"tgp\.lambda_x and tgp\.lambda_y$")
LAMBDAS_FAILED = (r"^tgp\.lambda_x = 0\.001, tgp\.lambda_y = 0\.001: could not factor the kernel matrix even after a "
                  r"diagonal shift; raise tgp\.lambda_x and tgp\.lambda_y$")


@pytest.mark.parametrize("bases, failing, pattern", [
    (["monomial", "gegenbauer"], "gegenbauer", GEGENBAUER_FAILED),
    (["monomial", "gegenbauer"], "monomial", LAMBDAS_FAILED),
    (["monomial", "gegenbauer"], None, LAMBDAS_FAILED),
    (["monomial"], "monomial", LAMBDAS_FAILED)], ids=["gegenbauer", "monomial-beside-gegenbauer", "no-map", "monomial"])
def test_a_kernel_matrix_no_shift_factors_is_one_line_naming_its_keys(monkeypatch, bases, failing, pattern):
    """A kernel matrix that no diagonal shift made positive definite (gegenbauer_weight_output = 1e10 on the
    S-shape with recent numpy and scipy) was a LinAlgError traceback; the line names the keys that set it: the
    larger Gegenbauer weight (where it was given) when the Gegenbauer map's fit failed, the lambdas when another
    fit did (the weights were named whenever the Gegenbauer basis was in the run). (Forced here: whether that
    weight fails depends on the libraries' rounding.)"""
    from streamcov.errors import ConfigError
    from streamcov.tasks import tgp as tasks

    real = tasks.TwinGaussianProcess.fit

    def fit(self, X, Y):
        if self.kernel_transform == failing or (failing is None and self.kernel_transform is None):
            raise np.linalg.LinAlgError("could not factor the kernel matrix even after a diagonal shift")
        return real(self, X, Y)

    monkeypatch.setattr(tasks.TwinGaussianProcess, "fit", fit)
    t = {"bases": bases, "gegenbauer_weight_input": 0.51, "gegenbauer_weight_output": 1e10,
         "lambda_x": 1e-3, "lambda_y": 1e-3, "gamma_x": 1.0, "gamma_y": 1.0, "n_starts": 1, "max_iter": 5,
         "criteria": ["kl"], "degree_grid": [1, 2], "degrees": [1, 1], "cv": 2, "cv_max_train": None,
         "oracle_grid": False}
    rng = np.random.default_rng(0)
    X, Y = rng.uniform(size=(12, 1)), rng.uniform(size=(12, 1))
    with pytest.raises(ConfigError, match=pattern):
        tasks._evaluate(X[:8], Y[:8], X[8:], Y[8:], t, 0)


def test_another_users_private_store_or_model_is_one_line(shared, env, monkeypatch):
    """A store or model of another user kept private (umask 077): Path.exists() and is_file() raise
    PermissionError instead of answering, and info, run --store, predict and synth ended in an "internal error"
    traceback. One line naming the file, exit 2, nothing written. The tests run as root, who may read anything:
    the refusal of the system is simulated for every path below one folder."""
    import pathlib
    import shutil

    private = env.tmp / "private"
    private.mkdir()
    shutil.copytree(shared["synth"], private / "s.zarr")
    shutil.copytree(shared["model"], private / "model")
    stat = pathlib.Path.stat

    def refusing(self, *args, **kwargs):
        if self == private or private in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return stat(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "stat", refusing)
    said = rf"{re.escape(str(private))}(/\S+)?: permission denied \(Permission denied\); give this user access to it"
    for argv in (("info", private / "s.zarr"),
                 ("predict", private / "model", shared["synth"], "--out", env.tmp / "p.csv"),
                 ("run", env.pipeline(), "--store", private / "s.zarr", "--output", env.tmp / "o"),
                 ("synth", private / "s.zarr", "--sequences", 48)):
        rc, err, _ = cli(*argv)
        assert_one_line_error(rc, err, rf"^streamcov {argv[0]}: error: " + said)
    assert not (env.tmp / "o").exists() and not (env.tmp / "p.csv").exists()


def test_a_bug_met_while_a_permission_error_was_handled_is_still_a_bug(monkeypatch, tmp_path):
    """The permission-denied line is for a file the system refused: a streamcov error raised while handling one
    (its __context__), or a refusal that names no file, stays an internal error with its traceback."""
    from streamcov import cli as cli_module

    def handled_then_bug(args):
        try:
            raise PermissionError(13, "Permission denied", str(tmp_path / "f"))
        except PermissionError:
            raise TypeError("a bug in the handler")   # noqa: B904 (its __context__ is the PermissionError)

    def no_file(args):
        raise PermissionError(1, "Operation not permitted")

    for func in (handled_then_bug, no_file):
        monkeypatch.setattr(cli_module, "_cmd_info", func)
        rc, err, _ = cli("info", tmp_path)
        assert rc == 1 and "internal error: this is a bug" in err and "Traceback" in err, err
        assert "permission denied (" not in err


@pytest.mark.parametrize("action", ["ignore", "error"])
def test_a_runs_warning_is_a_line_whatever_the_warning_filters(env, action):
    """The result's warnings go through Python's warnings (RunWarning, for notebooks): with PYTHONWARNINGS=ignore
    the command would have lost them, and with -W error a finished run would have ended as an internal error. The
    command prints each one line, as before, and exits 0."""
    import warnings

    argv = run_set('model.learner="lbfgs"', 'model.loss="log_loss"', "model.C=1e-300")(env)
    with warnings.catch_warnings():
        warnings.simplefilter(action)
        rc, err, out = cli(*argv)
    assert rc == 0 and "Traceback" not in err, err
    assert re.search(r"(?m)^streamcov run: warning: fold 'odd-even': L-BFGS took no step", err), err
    assert json.loads(out.strip().splitlines()[-1])["warnings"]


def test_no_progress_bar_in_a_log_file(tmp_path):
    """With stderr a file (a batch job's log), the bars are not drawn: tqdm wrote a carriage-return update
    several times a second onto one line (about 1 MB an hour)."""
    import subprocess
    import sys

    log = tmp_path / "log"
    with open(log, "w") as fh:
        rc = subprocess.call([sys.executable, "-m", "streamcov.cli", "synth", str(tmp_path / "s.zarr"),
                              "--sequences", "300"], stdout=subprocess.DEVNULL, stderr=fh)
    assert rc == 0 and "ingest s.zarr" not in log.read_text(), log.read_text()[:300]


def test_an_input_path_with_a_name_longer_than_the_file_system_allows_is_one_line(shared, env):
    """Python 3.11's Path.exists() and is_dir() raise ENAMETOOLONG instead of answering False: every command
    given an input path with a name of more than 255 bytes (a store, a model, a pipeline file, a source folder,
    a splits file) was a traceback. One line naming the path, exit 2, nothing written."""
    long = env.tmp / ("x" * 300)
    said = re.escape(str(long)) + r"[^ ]*: a file or folder name in this path is longer than the file system allows " \
                                  r"\(File name too long\); give a shorter path$"
    for argv in (("info", long), ("run", long), ("predict", long, shared["synth"]),
                 ("predict", shared["model"], long, "--out", env.tmp / "p.csv"),
                 ("run", env.pipeline(), "--store", long, "--output", env.tmp / "o"),
                 ("run", env.pipeline(), "--set", 'split.kind="subject-splits-file"', "--set",
                  f'split.file="{long / "s.txt"}"', "--output", env.tmp / "o")):
        rc, err, _ = cli(*argv)
        assert_one_line_error(rc, err, rf"^streamcov {argv[0]}: error: " + said)
    assert not (env.tmp / "o").exists() and not (env.tmp / "p.csv").exists()
