"""Bad input: entries named twice in a pipeline's lists, colour features on grey images named by their key,
the image formats ingestion reads, and paths that are files or empty.

Each case runs ``streamcov`` in-process, as a user would type it, and asserts exit code 2 with one
``streamcov <cmd>: error: ...`` line (the full message), or the documented result (docs/bad_input.md).
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from cli_cases import assert_one_line_error, cli
from conftest import REPO
from test_bad_input import EVAL_PIPELINE, IMAGE_PIPELINE

pytestmark = pytest.mark.usefixtures("one_blas_thread")

TEXTURES_DEMO = REPO / "pipelines" / "textures_demo.toml"
IMAGE_STREAM = REPO / "pipelines" / "virus_approx_loghs_stream.toml"
SKELETONS = REPO / "pipelines" / "msr_action3d.toml"


# ------------------------------------------------------------------ a list that names an entry twice
@pytest.mark.parametrize("argv, pattern", [
    # two classes of the same patches: trained and scored as if they differed (34% accuracy, exit 0 before)
    (["run", "--demo", "images", "--set", 'data.textures=["brick","brick"]'],
     r'^streamcov run: error: --set data\.textures=\["brick","brick"\]: data\.textures = \["brick", "brick"\]: '
     r'expected each entry once; "brick" is listed twice$'),
    (["run", TEXTURES_DEMO, "--set", 'data.textures=["grass","brick","grass"]'],
     r'^streamcov run: error: --set data\.textures=\["grass","brick","grass"\]: data\.textures = \["grass", '
     r'"brick", "grass"\]: expected each entry once; "grass" is listed twice$'),
    # a channel twice: every image's covariance is singular; in-memory and streamed image tasks alike
    (["run", TEXTURES_DEMO, "--set", 'pixels.features=["R","R","G"]'],
     r'^streamcov run: error: --set pixels\.features=\["R","R","G"\]: pixels\.features = \["R", "R", "G"\]: '
     r'expected each entry once; "R" is listed twice$'),
    (["run", IMAGE_STREAM, "--set", 'pixels.features=["R","R","G"]'],
     r'^streamcov run: error: --set pixels\.features=\["R","R","G"\]: pixels\.features = \["R", "R", "G"\]: '
     r'expected each entry once; "R" is listed twice$'),
    # bars are ignored: |Ix| is Ix
    (["run", TEXTURES_DEMO, "--set", 'pixels.features=["I","Ix","|Ix|"]'],
     r'^streamcov run: error: --set pixels\.features=\["I","Ix","\|Ix\|"\]: pixels\.features = \["I", "Ix", '
     r'"\|Ix\|"\]: expected each entry once; "Ix" is listed twice$'),
    # a subject twice: refused as a splits file refuses it, in its words
    (["run", SKELETONS, "--set", 'split={kind="subjects", train_subjects=[1,1,3], test_subjects=[2,4]}'],
     r'^streamcov run: error: --set split=\{kind="subjects", train_subjects=\[1,1,3\], test_subjects=\[2,4\]\}: '
     r"split\.train_subjects = \[1, 1, 3\] names subject\(s\) \[1\] more than once; list each subject once$"),
    (["run", SKELETONS, "--set", 'split={kind="subjects", train_subjects=[1,3], test_subjects=[2,4,2,4]}'],
     r'^streamcov run: error: --set split=\{kind="subjects", train_subjects=\[1,3\], test_subjects=\[2,4,2,4\]\}: '
     r"split\.test_subjects = \[2, 4, 2, 4\] names subject\(s\) \[2, 4\] more than once; list each subject once$"),
], ids=["textures-demo", "textures-file", "features-eval", "features-stream", "features-bars", "train-subjects",
        "test-subjects"])
def test_an_entry_named_twice_is_refused(argv, pattern):
    rc, err, _ = cli(*argv)
    assert_one_line_error(rc, err, pattern)


def test_entries_named_twice_in_a_file_name_their_line(tmp_path):
    text = TEXTURES_DEMO.read_text().replace('textures = ["brick", "grass", "gravel"]',
                                             'textures = ["brick", "grass", "brick"]')
    p = tmp_path / "p.toml"
    p.write_text(text)
    rc, err, _ = cli("run", p)
    assert_one_line_error(rc, err, r'^streamcov run: error: \S+p\.toml, line 10: data\.textures = \["brick", "grass", '
                                   r'"brick"\]: expected each entry once; "brick" is listed twice$')
    p.write_text('task = "skeleton-classification"\n\n[data]\nstore = "s.zarr"\n\n'
                 '[split]\nkind = "subjects"\ntrain_subjects = [1, 3, 3]\n')
    rc, err, _ = cli("run", p)
    assert_one_line_error(rc, err, r"^streamcov run: error: \S+p\.toml, line 8: split\.train_subjects = \[1, 3, 3\] "
                                   r"names subject\(s\) \[3\] more than once; list each subject once$")


def test_a_feature_spec_refuses_a_feature_named_twice():
    from streamcov.descriptors.pixels import FeatureSpec

    with pytest.raises(ValueError, match=r"^feature spec lists 'G' twice; list each feature once$"):
        FeatureSpec(features=("R", "G", "|G|"))


# ------------------------------------------------------------------ colour features on grey images
def grey_folder(root, n=2, size=16):
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 255, (size, size), dtype=np.uint8)).save(root / c / f"{i}.png")
    return root


GREY_FIX = r"give colour images, or features of grey images \(I and its derivatives in place of R, G, B\)$"


def test_colour_features_on_grey_images_name_pixels_features(tmp_path):
    """The key that chose the colour features, as written (a list was called "spec 'custom'")."""
    store = tmp_path / "g.zarr"
    rc, err, _ = cli("ingest", "images", "--format", "folders", grey_folder(tmp_path / "grey"), store, "--quiet")
    assert rc == 0, err
    p = tmp_path / "p.toml"
    # image-stream-classification
    p.write_text(IMAGE_PIPELINE.format(out=tmp_path / "o", store=store)
                 .replace('preset = "texture"', 'features = ["x", "R", "G", "B"]'))
    rc, err, _ = cli("run", p, "--quiet", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r'^streamcov run: error: \S+p\.toml, line 10: pixels\.features = \["x", "R", "G", '
                                   r'"B"\] uses R, G, B but image a/0\.png is grey; ' + GREY_FIX)
    # image-classification, from the folder
    p.write_text(EVAL_PIPELINE.format(out=tmp_path / "o2", store=store)
                 .replace('format = "store"', 'format = "folders"')
                 .replace(f'store = "{store}"', f'source = "{tmp_path / "grey"}"')
                 .replace('preset = "texture"', 'features = ["I", "Rx"]'))
    rc, err, _ = cli("run", p, "--quiet")
    assert_one_line_error(rc, err, r'^streamcov run: error: \S+p\.toml, line 11: pixels\.features = \["I", "Rx"\] uses '
                                   r"R, G, B but image a/0\.png is grey; " + GREY_FIX)


def test_pipeline_key_names_a_preset_or_its_features():
    from dataclasses import replace

    from streamcov.descriptors.pixels import get_spec, pipeline_key

    assert pipeline_key(get_spec("fish")) == 'pixels.preset = "fish"'
    assert pipeline_key(get_spec(["R", "G"])) == 'pixels.features = ["R", "G"]'
    # a preset whose features a list replaced: the list chose them
    assert pipeline_key(replace(get_spec("fish"), features=("R", "I"))) == 'pixels.features = ["R", "I"]'


# ------------------------------------------------------------------ image formats read by ingestion
def _rng_image(shape, dtype=np.uint8, top=256, seed=0):
    return np.random.default_rng(seed).integers(0, top, shape, dtype=dtype)


# (file name, array written by Pillow, the dtype of the store, whether the format keeps the array exactly)
NEW_FORMATS = [
    ("x.jfif", _rng_image((12, 10, 3)), "uint8", False),
    ("x.JPE", _rng_image((12, 10)), "uint8", False),          # extensions in any case
    ("x.jpe", _rng_image((12, 10, 3)), "uint8", False),
    ("x.pgm", _rng_image((12, 10)), "uint8", True),
    ("x16.pgm", _rng_image((12, 10), np.uint16, 65536), "uint16", True),   # 16-bit grey keeps its depth
    ("x.ppm", _rng_image((12, 10, 3)), "uint8", True),
    ("x.PBM", _rng_image((12, 10), top=2).astype(bool), "uint8", True),    # 1-bit: read as 0 and 255
    ("x.pnm", _rng_image((12, 10, 3)), "uint8", True),
    ("x.tga", _rng_image((12, 10, 3)), "uint8", True),
    ("g.TGA", _rng_image((12, 10)), "uint8", True),
]


def save_image(array, path) -> None:
    """``array`` saved by Pillow; a 16-bit PGM written by hand (a P5 header, big-endian samples), which Pillow
    writes only from version 11 (the declared floor is 10.3)."""
    if array.dtype == np.uint16:
        path.write_bytes(b"P5\n%d %d\n65535\n" % (array.shape[1], array.shape[0]) + array.astype(">u2").tobytes())
    else:
        Image.fromarray(array).save(path)


def pillow_pixels(path) -> np.ndarray:
    """The pixels as Pillow decodes them, in the modes a store holds (1-bit as 8-bit grey)."""
    with Image.open(path) as im:
        return np.asarray(im.convert("L") if im.mode == "1" else im)


@pytest.mark.parametrize("name, array, dtype, exact", NEW_FORMATS, ids=[n for n, *_ in NEW_FORMATS])
def test_an_image_format_pillow_reads_is_ingested(tmp_path, name, array, dtype, exact):
    """Files of these extensions were skipped without a word; their pixels are stored as Pillow decodes them."""
    src = tmp_path / "src"
    for c, k in (("a", 0), ("b", 1)):
        (src / c).mkdir(parents=True)
        other = ~array if array.dtype == bool else array[::-1].copy()
        save_image(array if k == 0 else other, src / c / name)
    rc, err, _ = cli("ingest", "images", "--format", "folders", src, tmp_path / "s.zarr", "--quiet")
    assert rc == 0, err
    from streamcov.data.images import open_image_store

    store = open_image_store(tmp_path / "s.zarr")
    assert store.ids() == [f"a/{name}", f"b/{name}"] and store.pixel_dtype == dtype
    for i, c in enumerate("ab"):
        got, want = store.image(i), pillow_pixels(src / c / name)
        assert got.dtype == np.dtype(dtype) and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if exact:
        first = array.astype(np.uint8) * 255 if array.dtype == bool else array
        np.testing.assert_array_equal(store.image(0), first)


def test_a_sixteen_bit_colour_ppm_is_refused(tmp_path):
    """Pillow reads a 16-bit PPM at 8 bits without a word, as it does a 16-bit colour PNG."""
    src = tmp_path / "src"
    for c in "ab":
        (src / c).mkdir(parents=True)
        Image.fromarray(_rng_image((8, 8))).save(src / c / "ok.png")
    rgb16 = _rng_image((8, 8, 3), np.uint16, 65536)
    (src / "a" / "deep.ppm").write_bytes(b"P6\n8 8\n65535\n" + rgb16.astype(">u2").tobytes())
    rc, err, _ = cli("ingest", "images", "--format", "folders", src, tmp_path / "s.zarr", "--quiet")
    assert_one_line_error(rc, err, r"^streamcov ingest: error: \S+/a/deep\.ppm: 16-bit colour PPM \(maxval 65535\): it "
                                   r"would be read at 8 bits; save it as 8-bit RGB, or as 16-bit grey if its depth "
                                   r"matters; or leave out the files that cannot be read: --on-error skip")


@pytest.mark.parametrize("helper", ["_ppm_maxval", "_refuse_deep_colour_png"])
def test_a_bug_in_the_own_checks_of_read_image_is_not_called_a_damaged_image(tmp_path, monkeypatch, helper):
    """read_image reads Pillow's TypeError, IndexError, ... as a damaged file (Pillow's parsers raise them on
    damaged TIFF and GIF files); streamcov's own checks run inside that handling, so an error of their code would
    have been reported as a damaged image (and skipped under on_error="skip"): it is an internal error instead."""
    from streamcov.data import imageio

    def broken(*args):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(imageio, helper, broken)
    path = tmp_path / ("x.ppm" if helper == "_ppm_maxval" else "x.png")
    Image.fromarray(_rng_image((8, 8, 3))).save(path)
    with pytest.raises(RuntimeError, match=r"^streamcov's broken failed \(IndexError: tuple index out of range\)$"):
        imageio.read_image(path)


def test_a_store_that_left_out_such_files_is_not_taken_for_the_folder(tmp_path, monkeypatch):
    """A store's digest covers the images it read: one written when .ppm files were skipped is refused as
    written from a folder that has changed (the .ppm images are now read), not used without them."""
    from streamcov.data import imageio

    src = grey_folder(tmp_path / "src", n=3)
    Image.fromarray(_rng_image((16, 16, 3))).save(src / "a" / "more.ppm")
    store = tmp_path / "s.zarr"
    with monkeypatch.context() as m:
        m.setattr(imageio, "IMAGE_EXTENSIONS", tuple(e for e in imageio.IMAGE_EXTENSIONS if e != ".ppm"))
        rc, err, _ = cli("ingest", "images", "--format", "folders", src, store, "--quiet")
        assert rc == 0, err
    p = tmp_path / "p.toml"
    p.write_text(IMAGE_PIPELINE.format(out=tmp_path / "o", store=store).replace(
        f'store = "{store}"', f'store = "{store}"\nsource = "{src}"'))
    rc, err, _ = cli("run", p, "--quiet", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r"^streamcov run: error: \S+p\.toml, line 7: data\.store: \S+s\.zarr was written "
                                   r"from \S+src, which has changed since \(files added, removed, or of other contents: "
                                   r"6 files then, 7 now\); point data\.store at a new path, or delete \S+s\.zarr to "
                                   r"write it again from \[data\]$")


# ------------------------------------------------------------------ paths: a file for a folder, an empty one
def test_a_file_given_for_the_image_folder_is_named_a_file(tmp_path):
    f = tmp_path / "one.png"
    Image.fromarray(_rng_image((8, 8))).save(f)
    rc, err, _ = cli("ingest", "images", "--format", "folders", f, tmp_path / "x.zarr")
    assert_one_line_error(rc, err, r"^streamcov ingest: error: \S+/one\.png: a file, not a folder; give the folder "
                                   r"that holds the images \(a folder per class\)$")
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize("argv, command", [
    (["info", ""], "info"),
    (["info", "", "--verify"], "info"),
    (["ingest", "images", "--format", "folders", "", "x.zarr"], "ingest images"),
])
def test_an_empty_path_is_refused(argv, command):
    """``info ""`` described the current folder ("a folder without a zarr store"); refused as ingest and
    predict refuse an empty path."""
    rc, err, _ = cli(*argv)
    assert_one_line_error(rc, err, rf"^streamcov {command}: error: argument (store|src): empty path; give the path "
                                   rf"to read \(see `streamcov {command} --help`\)$")


def test_a_demo_line_is_named_by_its_demo(tmp_path):
    """An error at a line of an embedded pipeline names the demo and its shipped copy, whose line it is (it
    named "<pipeline text>", a text the user does not have, one line below the file's)."""
    import re

    rc, err, _ = cli("run", "--quiet", "--output", tmp_path / "o", "--set", "data.synthetic.n_subjects=1",
                     "--set", "data.synthetic.n_sequences=4")
    assert_one_line_error(rc, err, r"\(given: split\.kind at the embedded default pipeline "
                                   r"\(pipelines/synthetic\.toml\), line \d+\)$")
    line = int(re.search(r"line (\d+)\)$", err.strip()).group(1))
    assert (REPO / "pipelines" / "synthetic.toml").read_text().splitlines()[line - 1].startswith("kind = ")


# ------------------------------------------------------------------ image-classification's datasets
def test_a_texture_scikit_image_lacks_is_refused(tmp_path):
    from streamcov.data.imageio import skimage_textures
    from streamcov.errors import ConfigError

    fix = r"; give names of images bundled with scikit-image \(brick, grass, gravel, \.\.\.\)$"
    with pytest.raises(ConfigError, match=r"^data\.textures: skimage\.data has no image 'bricks' \(did you mean "
                                          r"'brick'\?\)" + fix):
        skimage_textures(("grass", "bricks"), patch=16, max_per_class=1)
    rc, err, _ = cli("run", "--demo", "images", "--set", 'data.textures=["brick","nope"]', "--output", tmp_path / "o",
                     "--quiet")
    assert_one_line_error(rc, err, r'^streamcov run: error: --set data\.textures=\["brick","nope"\]: data\.textures: '
                                   r"skimage\.data has no image 'nope'" + fix)
    assert not (tmp_path / "o").exists()
    # names of skimage.data that are no bundled image: a setting, a function of other arguments, a stack of
    # faces, the download of everything (these were tracebacks: "'str' object is not callable", ...)
    for name, said in (("data_dir", r"skimage\.data has no image 'data_dir'"),
                       ("download_all", r"skimage\.data has no image 'download_all'"),
                       ("file_hash", r"skimage\.data\.file_hash cannot be loaded here \(.*fname.*\)"),
                       ("lfw_subset", r"skimage\.data\.lfw_subset is not an image \(an array of shape \(200, 25, 25\), "
                                      r"float64\)")):
        with pytest.raises(ConfigError, match=r"^data\.textures: " + said + fix):
            skimage_textures(("brick", name), patch=16, max_per_class=1)
    # bundled images of booleans (horse) are images
    assert len(skimage_textures(("horse", "camera"), patch=64, max_per_class=3).images) == 6


def test_a_texture_scikit_image_would_download_is_refused(tmp_path, monkeypatch):
    """Images of skimage.data that are not bundled are fetched on first use, with the optional pooch and a
    network: without them, a ModuleNotFoundError traceback. One line now, naming the image and the loader's
    reason. (Simulated: whether pooch and the file are at hand differs between machines.)"""
    import skimage.data

    from streamcov.data.imageio import skimage_textures
    from streamcov.errors import ConfigError

    def eagle():
        raise ModuleNotFoundError("The requested file is part of the scikit-image distribution, but requires the "
                                  "installation of an optional dependency, pooch.")

    monkeypatch.setattr(skimage.data, "eagle", eagle)
    with pytest.raises(ConfigError, match=r"^data\.textures: skimage\.data\.eagle cannot be loaded here \(The "
                                          r"requested file .* pooch\.\); give names of images bundled"):
        skimage_textures(("brick", "eagle"), patch=16, max_per_class=1)


def test_a_folder_whose_images_are_all_too_small_is_refused(tmp_path):
    """Images under 2 x 2 pixels are skipped with a warning, as ingestion skips them; when none is left, the
    folder is refused by name."""
    import re

    from streamcov.data.imageio import load_folders
    from streamcov.errors import FormatError

    tiny = grey_folder(tmp_path / "tiny", size=1)
    refusal = "^" + re.escape(f"{tiny}: every image is smaller than 2 x 2 pixels, the least a covariance of pixel "
                              f"features needs; give images of at least that size") + "$"
    with pytest.warns(UserWarning, match=r"4 image\(s\) of \S+tiny skipped, smaller than 2 x 2 pixels"), \
            pytest.raises(FormatError, match=refusal):
        load_folders(tiny)
    p = tmp_path / "p.toml"
    p.write_text(EVAL_PIPELINE.format(out=tmp_path / "o", store="")
                 .replace('format = "store"\nstore = ""', f'format = "folders"\nsource = "{tiny}"'))
    rc, err, _ = cli("run", p, "--quiet")
    assert_one_line_error(rc, err, "^streamcov run: error: " + refusal[1:])


HUGE = "9223372036854775808"   # 2^63: beyond numpy's int64


@pytest.mark.parametrize("argv, said", [
    (("run", REPO / "pipelines" / "synthetic.toml", "--set", f"data.synthetic.n_sequences={HUGE}"),
     rf"--set data\.synthetic\.n_sequences={HUGE}: data\.synthetic\.n_sequences = {HUGE} \(30-60 frames each\): "
     r"needs about [\d.]+ PiB of disk, .*; ask for fewer sequences, or write the store elsewhere$"),
    (("run", "--demo", "images", "--set", f"pixels.stride={HUGE}"),
     rf"--set pixels\.stride={HUGE}: pixels\.stride = {HUGE}: image \S+ of 64 x 64 pixels keeps 1 sampled pixel "
     r"\(\d+ image\(s\) like it\); a covariance needs at least 2: lower the stride$"),
    (("run", REPO / "pipelines" / "sshape_tgp.toml", "--set", f"data.n_samples={HUGE}"),
     rf"data\.n_samples = {HUGE}: expected a value <= 100000$"),
    (("run", "--demo", "images", "--set", "split.n_repeats=1000000000000000000000000000000"),
     r"split\.n_repeats = 1000000000000000000000000000000: expected a value <= 10000$"),
    (("study", "kernel-approx", "--seeds", "100000000000000000000000"),
     r"^streamcov study: error: --seeds 100000000000000000000000: study\.seeds = 100000000000000000000000: "
     r"expected a value <= 10000$"),
    (("study", "kernel-approx", "--gram-seeds", "20000"),
     r"study\.gram_seeds = 20000: expected a value <= 10000$"),
])
def test_counts_beyond_any_machine_are_one_line(tmp_path, argv, said):
    """Counts of 2^63 and beyond: the generator's length (OverflowError), the pixel stride (int64 overflow) and
    the S-shape's sample count (numpy's "Maximum allowed dimension exceeded") were tracebacks; 1e30 repeats of a
    split built their row masks until memory ran out, and 1e23 study seeds ran on without a word. One line each,
    before any work."""
    out = tmp_path / "o"
    flag = ("--out",) if argv[0] == "study" else ("--output",)
    rc, err, _ = cli(*argv, *flag, out, "--quiet")
    assert_one_line_error(rc, err, said)
    assert not out.exists()


@pytest.mark.parametrize("sets, said", [
    (("method.gamma=1e20",), r"--set method\.gamma=1e20: method\.gamma = 1e\+20: far above the covariance operators "
                             r"\(every entry of log\(I \+ C / gamma\) is below 1e-12, largest [\d.e-]+\): I \+ C / gamma is "
                             r"I to within rounding and its logarithm is rounding noise; lower method\.gamma$"),
    (("method.sigma2=1e20",), r"the kernel between the 60 training images is a constant \(every value within 1e-06 of "
                              r"1\) for every setting of the grid: nothing can be learned from it; a setting swamps the "
                              r"data, e\.g\. method\.gamma far above the covariances, or method\.sigma2 far above the "
                              r"distances \(given: .*--set method\.sigma2=1e20\)$"),
    (("method.sigma2=1e-19",), r"the kernel between the 60 training images is the identity \(every value between two "
                               r"images below 1e-06\) for every setting of the grid: nothing can be learned from it; "
                               r"give larger values of method\.sigma2 \(given: --set method\.sigma2=1e-19\)$"),
    (("method.C=5e-324",), r"--set method\.C=5e-324: method\.C = 5e-324: expected a value >= 1e-300"),
])
def test_in_memory_image_settings_that_leave_nothing_to_learn_are_one_line(tmp_path, sets, said):
    """The in-memory image task reported chance accuracy, exit 0, for settings that leave the SVM nothing to
    learn: gamma so far above the operators that log(I + C / gamma) is the rounding of I, a kernel that is a
    constant or the identity on every training pair for every grid point, C = 5e-324 (every dual coefficient
    0). The streamed paths refuse the same; now this one does, in one line."""
    argv = ["run", "--demo", "images", "--set", "split.n_repeats=1"]
    for s in sets:
        argv += ["--set", s]
    rc, err, _ = cli(*argv, "--output", tmp_path / "o", "--quiet")
    assert_one_line_error(rc, err, r"^streamcov run: error: " + said)
    rc, err, out = cli("run", "--demo", "images", "--set", "split.n_repeats=1", "--set", "method.gamma=1e5",
                       "--output", tmp_path / "ok", "--quiet")
    assert rc == 0, err   # a large gamma that leaves C / gamma above rounding is fine


def test_rows_alike_name_the_keys_of_the_task_that_runs():
    """The message of training rows all alike suspects the regularization and the bandwidth: it named the
    skeleton task's keys (descriptor.gamma, features.sigma) in image-stream runs, which have method.gamma and
    method.sigma2."""
    from streamcov.errors import ConfigError
    from streamcov.preprocessing import check_rows_differ, suspects_named

    mean, m2 = np.ones(3), np.zeros(3)
    with pytest.raises(ConfigError, match=r"e\.g\. descriptor\.gamma far above the covariances, or a bandwidth "
                                          r"\(features\.sigma\) far from the distances$"):
        check_rows_differ(10, mean, m2)
    with suspects_named("method.gamma", "method.sigma2"), \
            pytest.raises(ConfigError, match=r"e\.g\. method\.gamma far above the covariances, or a bandwidth "
                                             r"\(method\.sigma2\) far from the distances$"):
        check_rows_differ(10, mean, m2)
