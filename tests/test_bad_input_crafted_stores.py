"""Crafted input: stores edited and sealed again with the project's own functions (so no checksum sees the edit),
special files where a store's metadata should be, and files or flags nested thousands deep. Each is one error
line (exit 2), never a traceback, a hang or a wrong result."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_cases import assert_one_line_error, cli
from conftest import REPO
from test_bad_input import SKELETON_PIPELINE

from streamcov.errors import StoreError

DAMAGED = r"; the store is damaged: delete it and write it again"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A tiny skeleton store and a tiny image store."""
    from PIL import Image

    from streamcov.data.imageio import skimage_textures

    base = tmp_path_factory.mktemp("crafted")
    assert cli("synth", base / "s.zarr", "--sequences", 12, "--subjects", 4, "--classes", 3,
               "--chunk-frames", 512, "--quiet")[0] == 0
    tex = skimage_textures(("brick", "grass"), patch=24, max_per_class=2)
    for img, lab, i in zip(tex.images, tex.labels, tex.ids):
        d = base / "images" / tex.label_names[lab]
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(d / f"{i.replace('/', '_')}.png")
    assert cli("ingest", "images", "--format", "folders", base / "images", base / "i.zarr", "--quiet")[0] == 0
    return {"skeleton": base / "s.zarr", "image": base / "i.zarr"}


def crafted(src: Path, dst: Path, edit) -> Path:
    """A copy of the store ``src`` at ``dst``, ``edit(group, attrs)`` applied, then sealed again as its writer
    seals it (the manifest of chunk checksums and the seal of the metadata)."""
    import zarr

    from streamcov.data import integrity

    shutil.copytree(src, dst)
    g = zarr.open_group(str(dst), mode="r+")
    attrs = dict(g.attrs)
    edit(g, attrs)
    g.attrs.update(attrs)
    integrity.write_manifest(g, dst, list(attrs["arrays"]))
    return dst


def _set(name, change):
    def edit(g, attrs):
        a = g[name][:]
        change(a)
        g[name][:] = a
    return edit


# ------------------------------------------------------------------ ids


def test_id_offsets_edited_and_resealed_refused(stores, tmp_path):
    s = crafted(stores["skeleton"], tmp_path / "x.zarr", _set("id_offsets", lambda io: io.__setitem__(5, io[10])))
    pattern = (r"x\.zarr: array 'id_offsets' is not non-decreasing from 0 to the \d+ bytes of array 'id_bytes' "
               r"\(ids cut from the wrong bytes\)" + DAMAGED)
    rc, err, _ = cli("run", _pipeline(tmp_path, s), "--quiet")
    assert_one_line_error(rc, err, pattern)
    rc, err, _ = cli("info", "--verify", s)
    assert rc == 3 and "Traceback" not in err
    assert "DAMAGED store: array 'id_offsets' is not non-decreasing from 0" in err, err


def test_id_offsets_ending_before_the_bytes_refused(stores, tmp_path):
    s = crafted(stores["skeleton"], tmp_path / "x.zarr", _set("id_offsets", lambda io: io.__setitem__(-1, io[-1] - 1)))
    from streamcov.data.skeletons import open_store
    with pytest.raises(StoreError, match=r"array 'id_offsets' is not non-decreasing from 0 to the"):
        open_store(s)


def test_id_not_utf8_refused(stores, tmp_path):
    s = crafted(stores["skeleton"], tmp_path / "x.zarr", _set("id_bytes", lambda b: b.__setitem__(15, 0xFF)))
    pattern = r"x\.zarr: the id of item 1 \(bytes 12\.\.24 of array 'id_bytes'\) is not UTF-8" + DAMAGED
    rc, err, _ = cli("run", _pipeline(tmp_path, s), "--quiet")
    assert_one_line_error(rc, err, pattern)
    rc, err, _ = cli("info", "--verify", s)
    assert rc == 3 and "Traceback" not in err
    assert "DAMAGED store: the id of item 1 (bytes 12..24 of array 'id_bytes') is not UTF-8" in err, err


# ------------------------------------------------------------------ frames, shapes, pixel attributes


def _pipeline(tmp_path, store) -> Path:
    p = tmp_path / "p.toml"
    p.write_text(SKELETON_PIPELINE.format(out=tmp_path / "run", store=store))
    return p


def test_nan_frame_of_a_resealed_store_is_a_store_error(stores, tmp_path):
    s = crafted(stores["skeleton"], tmp_path / "x.zarr", _set("frames", lambda f: f.__setitem__((100, 0), np.nan)))
    rc, err, _ = cli("run", _pipeline(tmp_path, s), "--quiet", "--scheduler", "synchronous")
    assert_one_line_error(rc, err, r"x\.zarr: sequence \d+ \('syn_\d+'\) holds a non-finite value \(NaN or infinity\) "
                                   r"at frame \d+, column 0, which ingestion refuses: the store was edited" + DAMAGED)


@pytest.mark.parametrize("shape", [(-24, -24, 1), (10, 10, 1), (24, 24, 0), (24, 12, 2)])
def test_image_shapes_edited_and_resealed_refused(stores, tmp_path, shape):
    from streamcov.data.images import open_image_store

    s = crafted(stores["image"], tmp_path / "x.zarr", _set("shapes", lambda a: a.__setitem__(1, shape)))
    pattern = (rf"x\.zarr: array 'shapes' gives image 1 the shape \({shape[0]}, {shape[1]}, {shape[2]}\) \(height, "
               rf"width, channels: each at least 1, channels 1 or 3\) for its \d+ pixels" + DAMAGED)
    with pytest.raises(StoreError, match=pattern):
        open_image_store(s)
    rc, err, _ = cli("info", "--verify", s)
    assert rc == 3 and "Traceback" not in err
    assert "DAMAGED store: array 'shapes' gives image 1 the shape" in err, err


@pytest.mark.parametrize("value", ["x", None, -1.0, [1]])
def test_pixel_max_not_a_number_refused(stores, tmp_path, value):
    from streamcov.data.images import open_image_store

    def edit(g, attrs):
        attrs["pixel_dtype"], attrs["pixel_max"] = "float32", value
    s = crafted(stores["image"], tmp_path / "x.zarr", edit)
    with pytest.raises(StoreError, match=r"x\.zarr: attribute pixel_max = .* is not the largest pixel magnitude "
                                         r"\(a finite number >= 0\)" + DAMAGED):
        open_image_store(s)


# ------------------------------------------------------------------ special files, deep nesting


def _streamcov(*argv, timeout=60):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "streamcov", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_fifo_as_store_zarr_json_refused_without_hanging(tmp_path):
    (tmp_path / "sF").mkdir()
    os.mkfifo(tmp_path / "sF" / "zarr.json")
    done = _streamcov("info", tmp_path / "sF")   # a hang is a TimeoutExpired: a failure, not a stuck suite
    assert_one_line_error(done.returncode, done.stderr,
                          r"sF: the store's zarr\.json is not a regular file \(a pipe, a device or a folder\); a "
                          r"store's zarr\.json is a JSON file: write the store again$")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_fifo_as_an_array_zarr_json_refused_without_hanging(stores, tmp_path):
    from streamcov.data.skeletons import open_store

    s = tmp_path / "x.zarr"
    shutil.copytree(stores["skeleton"], s)
    (s / "offsets" / "zarr.json").unlink()
    os.mkfifo(s / "offsets" / "zarr.json")
    pattern = (r"x\.zarr: array 'offsets': its zarr\.json is not a regular file \(a pipe, a device or a folder\); a "
               r"store's zarr\.json is a JSON file: write the store again$")
    done = _streamcov("info", "--verify", s)
    assert_one_line_error(done.returncode, done.stderr, pattern)
    with pytest.raises(StoreError, match=pattern):   # as run and predict open it
        open_store(s)


def test_store_zarr_json_nested_too_deeply(stores, tmp_path):
    s = tmp_path / "x.zarr"
    shutil.copytree(stores["skeleton"], s)
    meta = s / "zarr.json"
    text = meta.read_text()
    assert '"units": "m"' in text
    meta.write_text(text.replace('"units": "m"', '"units": ' + "[" * 100000 + "]" * 100000, 1))
    rc, err, _ = cli("info", s)
    assert_one_line_error(rc, err, r"x\.zarr: the store's zarr\.json is nested too deeply to be read \(edited\); "
                                   r"write the store again$")
    rc, err, _ = cli("run", _pipeline(tmp_path, s), "--quiet")
    assert_one_line_error(rc, err, r"x\.zarr: the store's zarr\.json is nested too deeply to be read")


DEEP = r"nested too deeply \(tables or arrays more than 64 levels within each other\)"


@pytest.mark.parametrize("text", ["v = " + "[" * 5000 + "]" * 5000, "[" + ".".join(["a"] * 900) + "]"],
                         ids=["array-5000", "table-900"])
def test_pipeline_file_nested_too_deeply(tmp_path, text):
    p = tmp_path / "deep.toml"
    p.write_text(text + "\n")
    rc, err, _ = cli("run", p)
    assert_one_line_error(rc, err, r"deep\.toml: " + DEEP + r"; a pipeline's tables and values lie a few levels "
                                   r"deep: check the file$")


@pytest.mark.parametrize("assignment, pattern", [
    ("features.n_components=" + "[" * 3000 + "3" + "]" * 3000, "the value is " + DEEP),
    ("features.n_components=" + "[" * 70 + "3" + "]" * 70, "the value is " + DEEP),
    (".".join(["a"] * 3000) + "=1", "the key has 3000 parts, " + DEEP),
    ("features=" + "{a=" * 600 + "1" + "}" * 600, "the value is " + DEEP),
], ids=["array-3000", "array-70", "key-3000", "table-600"])
def test_set_nested_too_deeply(stores, tmp_path, assignment, pattern):
    rc, err, _ = cli("run", _pipeline(tmp_path, stores["skeleton"]), "--set", assignment)
    assert_one_line_error(rc, err, r"^streamcov run: error: --set .*: " + pattern)
    assert len(err) < 600, len(err)   # the flag is cut: a value thousands of brackets deep was a line of 10,000


# ------------------------------------------------------------------ splits files


@pytest.mark.parametrize("text, pattern", [
    ("split = " + "[" * 3000 + "]" * 3000, DEEP + r"; a splits file holds \[\[split\]\] tables"),
    ("split = [1, 2]", r"\[\[split\]\] number 1 is 1, not a table; write one \[\[split\]\] table per fold"),
    ('split = ["a b"]', r"\[\[split\]\] number 1 is \"a b\", not a table; write one \[\[split\]\] table per fold"),
], ids=["deep", "numbers", "text"])
def test_splits_file_entries_not_tables(stores, tmp_path, text, pattern):
    f = tmp_path / "splits.toml"
    f.write_text(text + "\n")
    rc, err, _ = cli("run", _pipeline(tmp_path, stores["skeleton"]), "--set", 'split.kind="subject-splits-file"',
                     "--set", f'split.file="{f}"')
    assert_one_line_error(rc, err, r"splits\.toml: " + pattern)
