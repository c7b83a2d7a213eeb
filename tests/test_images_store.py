"""Image folders and zarr image stores: round trip, resume, errors naming the file."""
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from PIL import Image

from streamcov.data.imageio import load_folders, read_image, scan_folders
from streamcov.errors import ConfigError, FormatError
from streamcov.data.images import (ImageStoreWriter, ingest_images, open_image_store)
from streamcov.errors import IncompleteStoreError, StoreError
from conftest import DATA


def _make_tree(root: Path):
    """class a: grey PNG + RGB JPEG(skipped check of values) in nested folders; class b: BMP, TIFF, 16-bit."""
    rng = np.random.default_rng(0)
    imgs = {}
    (root / "a" / "obj1").mkdir(parents=True)
    (root / "a" / "obj2" / "maps").mkdir(parents=True)
    (root / "b" / "obj1").mkdir(parents=True)
    g = rng.integers(0, 256, (7, 9), dtype=np.uint8)
    Image.fromarray(g).save(root / "a" / "obj1" / "img2.png")
    imgs["a/obj1/img2.png"] = g
    c = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    Image.fromarray(c).save(root / "a" / "obj1" / "img10.png")
    imgs["a/obj1/img10.png"] = c
    p = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    Image.fromarray(p).save(root / "a" / "obj2" / "x.bmp")
    imgs["a/obj2/x.bmp"] = p
    Image.fromarray(p).save(root / "a" / "obj2" / "maps" / "x-map.png")   # excluded folder
    t = rng.integers(0, 256, (3, 8), dtype=np.uint8)
    Image.fromarray(t).save(root / "b" / "obj1" / "t.tif")
    imgs["b/obj1/t.tif"] = t
    rgba = rng.integers(0, 256, (4, 4, 4), dtype=np.uint8)
    Image.fromarray(rgba, mode="RGBA").save(root / "b" / "obj1" / "alpha.png")
    imgs["b/obj1/alpha.png"] = rgba[:, :, :3]
    (root / "b" / "notes.txt").write_text("not an image")
    return imgs


def test_scan_and_load_folders(tmp_path):
    imgs = _make_tree(tmp_path)
    entries = scan_folders(tmp_path, group_level=2)
    # natural order: img2 before img10; the maps folder and the .txt file are skipped
    assert [e.id for e in entries] == ["a/obj1/img2.png", "a/obj1/img10.png", "a/obj2/x.bmp",
                                       "b/obj1/alpha.png", "b/obj1/t.tif"]
    data = load_folders(tmp_path, group_level=2)
    assert data.label_names == ["a", "b"] and data.group_names == ["a/obj1", "a/obj2", "b/obj1"]
    assert list(data.labels) == [0, 0, 0, 1, 1] and list(data.groups) == [0, 0, 1, 2, 2]
    for i, name in enumerate(data.ids):
        np.testing.assert_array_equal(data.images[i], imgs[name])


def test_store_round_trip_and_resume(tmp_path):
    imgs = _make_tree(tmp_path / "src")
    out = tmp_path / "s.zarr"
    # interrupted after 2 images (small chunks so commits happen mid-way)
    assert ingest_images(tmp_path / "src", out, group_level=2, chunk_pixels=50, limit=2) is None
    with pytest.raises(IncompleteStoreError, match="incomplete image store .*2 images committed"):
        open_image_store(out)
    store = ingest_images(tmp_path / "src", out, group_level=2, chunk_pixels=50)
    assert len(store) == store.n_images == 5 and store.ids() == [e.id for e in scan_folders(tmp_path / "src", 2)]
    ref = load_folders(tmp_path / "src", group_level=2)
    back = store.to_image_set()
    assert back.label_names == ref.label_names and back.group_names == ref.group_names
    np.testing.assert_array_equal(back.labels, ref.labels)
    np.testing.assert_array_equal(back.groups, ref.groups)
    for i, name in enumerate(store.ids()):
        np.testing.assert_array_equal(store.image(i), imgs[name])
        np.testing.assert_array_equal(back.images[i], imgs[name])
    assert store.attrs["complete"] is True and store.attrs["n_images"] == 5
    with pytest.raises(StoreError, match="a complete store is already here"):
        ingest_images(tmp_path / "src", out)
    with pytest.raises(IndexError, match="image 5 out of range"):
        store.image(5)


@pytest.mark.parametrize("array, edit", [
    ("shapes", {"endian": "big"}),       # read as 687865856 x 687865856 pixels: "needs 5.6e10 PiB" before
    ("pixels", None),                    # pixels retyped to int8: same bytes, other numbers
])
def test_edited_array_metadata_is_refused(tmp_path, array, edit):
    """The seal of format 4: an array's zarr.json edited in a way no chunk checksum sees (the chunks'
    bytes are unchanged, decoded otherwise) is refused on opening, naming the array."""
    import json

    _make_tree(tmp_path / "src")
    out = tmp_path / "s.zarr"
    ingest_images(tmp_path / "src", out, group_level=2)
    assert open_image_store(out).attrs["format_version"] == 4
    path = out / array / "zarr.json"
    meta = json.loads(path.read_text())
    if edit is None:
        meta["data_type"] = "int8"
    else:
        meta["codecs"][0]["configuration"].update(edit)
    path.write_text(json.dumps(meta, indent=4))
    with pytest.raises(StoreError, match=rf"s\.zarr: array '{array}': its zarr\.json \(data type, byte order, "
                                         rf"codecs, shape\) is not the one the store was written with \(edited\); "
                                         rf"the store is damaged: delete it and write it again"):
        open_image_store(out)


def test_store_restart_and_sixteen_bit(tmp_path):
    src = tmp_path / "src"
    (src / "c").mkdir(parents=True)
    a16 = (np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000)
    Image.fromarray(a16).save(src / "c" / "deep.png")
    # auto (the default): a 16-bit image makes a 16-bit store, and an 8-bit one beside it is scaled exactly
    Image.fromarray(np.full((3, 4), 200, dtype=np.uint8)).save(src / "c" / "shallow.png")
    auto = ingest_images(src, tmp_path / "auto.zarr")
    assert auto.attrs["pixel_dtype"] == "uint16"
    np.testing.assert_array_equal(auto.image(0), a16)
    np.testing.assert_array_equal(auto.image(1), np.full((3, 4), 200 * 257))
    (src / "c" / "shallow.png").unlink()
    with pytest.raises(FormatError, match=r"c/deep.png: 16-bit image but the store holds 8-bit pixels; ingest "
                                          r"with the pixel dtype auto \(the default\) or uint16: pixel_dtype, or "
                                          r"data.pixel_dtype in a pipeline$"):
        ingest_images(src, tmp_path / "s8.zarr", pixel_dtype="uint8")
    assert not (tmp_path / "s8.zarr").exists()   # refused on its first image: no empty store is left
    store = ingest_images(src, tmp_path / "s16.zarr", pixel_dtype="uint16")
    np.testing.assert_array_equal(store.image(0), a16)
    # an interrupted uint16 ingestion (stopped after its first image): resuming with another dtype is refused
    assert ingest_images(src, tmp_path / "s8.zarr", pixel_dtype="uint16", limit=1) is None
    with pytest.raises(StoreError, match='started with pixel_dtype = "uint16", this ingestion has "float32"; '
                                         "resuming would mix two sources. Start over: add --restart"):
        ingest_images(src, tmp_path / "s8.zarr", pixel_dtype="float32")
    store = ingest_images(src, tmp_path / "s8.zarr", pixel_dtype="float32", mode="restart")
    np.testing.assert_allclose(store.image(0), a16 / 65535.0, rtol=1e-6)


def test_read_errors_name_the_file(tmp_path):
    bad = tmp_path / "k" / "broken.png"
    bad.parent.mkdir()
    bad.write_bytes(b"not a png at all")
    with pytest.raises(FormatError, match=r"broken.png: cannot decode image"):
        read_image(bad)
    with pytest.raises(FormatError, match=r"broken.png: cannot decode image"):
        ingest_images(tmp_path, tmp_path / "s.zarr")
    with pytest.raises(FormatError, match="missing.png: file not found"):
        read_image(tmp_path / "missing.png")
    f32 = tmp_path / "f.tif"      # 32-bit float grey (scientific TIFF) is read as float32
    Image.fromarray(np.full((2, 2), 0.25, np.float32)).save(f32)
    got = read_image(f32)
    assert got.dtype == np.float32 and np.array_equal(got, np.full((2, 2), 0.25, np.float32))
    nan = tmp_path / "nan.tif"
    Image.fromarray(np.full((2, 2), np.nan, np.float32)).save(nan)
    with pytest.raises(FormatError, match=r"nan.tif: float image with NaN or infinite pixels"):
        read_image(nan)
    i32 = tmp_path / "i.tif"
    Image.fromarray(np.zeros((2, 2), np.int32)).save(i32)
    with pytest.raises(FormatError, match=r"i.tif: unsupported image mode 'I'"):
        read_image(i32)
    loose = tmp_path / "loose"
    loose.mkdir()
    Image.fromarray(np.zeros((2, 2), np.uint8)).save(loose / "top.png")
    with pytest.raises(FormatError, match="top.png: image directly under the root folder"):
        scan_folders(loose)
    with pytest.raises(ConfigError, match="image folder not found"):
        scan_folders(tmp_path / "nowhere")
    (tmp_path / "empty" / "c").mkdir(parents=True)
    with pytest.raises(ConfigError, match="no images"):
        scan_folders(tmp_path / "empty")
    with pytest.raises(ValueError, match="group_level must be an integer >= 1"):
        scan_folders(tmp_path, group_level=0)


def test_writer_and_store_errors(tmp_path):
    with pytest.raises(ValueError, match="pixel_dtype must be one of"):
        ImageStoreWriter(tmp_path / "x.zarr", "src", pixel_dtype="int64")
    with pytest.raises(ValueError, match="mode must be create, resume or restart"):
        ImageStoreWriter(tmp_path / "x.zarr", "src", mode="append")
    with pytest.raises(ValueError, match=r"^chunk_pixels=0: expected an integer >= 1 \(pixels per chunk\)$"):
        ImageStoreWriter(tmp_path / "x.zarr", "src", chunk_pixels=0)
    w = ImageStoreWriter(tmp_path / "w.zarr", "src")
    with pytest.raises(ValueError, match=r"img7: expected a grey \(h, w\) or RGB \(h, w, 3\) image, got shape \(2, 2, 2\)"):
        w.append(np.zeros((2, 2, 2), np.uint8), "img7", "c")
    with pytest.raises(ValueError, match="img8: float64 pixels cannot be stored as uint8; ingest with the pixel dtype auto "
                                        r"\(the default\) or float32: pixel_dtype, or data.pixel_dtype in a pipeline$"):
        w.append(np.zeros((2, 2)), "img8", "c")
    assert w.append(np.zeros((2, 2), np.uint8), "ok", "c") and not w.append(np.zeros((2, 2), np.uint8), "ok", "c")
    with pytest.raises(StoreError, match="an incomplete image store is here"):
        w.flush()
        ImageStoreWriter(tmp_path / "w.zarr", "src", mode="create")
    with pytest.raises(StoreError, match="no image was written"):
        ImageStoreWriter(tmp_path / "none.zarr", "src").close()
    with pytest.raises(StoreError, match="does not exist"):
        open_image_store(tmp_path / "nothing.zarr")
    with pytest.raises(ValueError, match="format must be 'folders'"):
        ingest_images(tmp_path, tmp_path / "y.zarr", format="csv")


def test_real_virus_store_matches_folders(tmp_path):
    src = DATA / "virus_kylberg" / "raw" / "3"
    if not src.exists():
        pytest.skip("Virus dataset not available")
    # one class folder: its 5 image sets play the role of classes here
    store = ingest_images(src, tmp_path / "v.zarr", chunk_pixels=1 << 14)
    ref = load_folders(src)
    assert len(store) == 100 and store.ids() == ref.ids
    assert all(np.array_equal(a, b) for a, b in zip(store.images(), ref.images))


def test_cli_ingest_images_interrupted_then_resumed(tmp_path, capsys):
    """`streamcov ingest images`: an interrupted store is reported incomplete by
    `streamcov info` (exit 3) and the same command completes it, every image once."""
    import json

    from streamcov.cli import main

    imgs = _make_tree(tmp_path / "src")
    out = tmp_path / "im.zarr"
    assert ingest_images(tmp_path / "src", out, group_level=2, chunk_pixels=50, limit=2) is None
    capsys.readouterr()
    assert main(["info", str(out), "--json"]) == 3
    captured = capsys.readouterr()
    assert "INCOMPLETE" in captured.err and "2 images" in captured.err
    assert json.loads(captured.out)["store"]["complete"] is False
    with pytest.raises(IncompleteStoreError, match="incomplete image store"):
        open_image_store(out)
    assert main(["ingest", "images", "--format", "folders", "--group-level", "2", "--quiet",
                 str(tmp_path / "src"), str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["images"] == len(imgs) and summary["labels"] == 2
    store = open_image_store(out)
    assert sorted(store.ids()) == sorted(imgs)
    for i, image_id in enumerate(store.ids()):
        np.testing.assert_array_equal(np.squeeze(store.image(i)), np.squeeze(imgs[image_id]))
    assert main(["info", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["store"]["n_images"] == len(imgs)


def test_cli_ingest_images_bad_file_names_it(tmp_path, capsys):
    from streamcov.cli import main

    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "broken.png").write_bytes(b"not a png")
    assert main(["ingest", "images", "--format", "folders", "--quiet", str(tmp_path / "src"),
                 str(tmp_path / "x.zarr")]) == 2
    assert "broken.png" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_name_that_is_not_utf8_is_one_line(tmp_path, capsys, where):
    """A latin-1 name (an old zip archive's "caf\xe9") could not be stored as an id or a class: a traceback of
    ingest, of the in-memory run after every feature was computed, and of predict."""
    import os

    from streamcov.cli import main

    src = tmp_path / "src"
    for c in "ab":
        (src / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(src / c / f"{i}.png")
    if where == "file":
        os.rename(src / "a" / "0.png", os.fsencode(src / "a") + b"/caf\xe9.png")
        shown = r"a/caf\\xe9\.png"
    else:
        os.rename(src / "b", os.fsencode(src) + b"/caf\xe9")
        shown = r"caf\\xe9/0\.png"
    assert main(["ingest", "images", "--format", "folders", "--quiet", str(src), str(tmp_path / "x.zarr")]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"^streamcov ingest: error: \S+src/{shown}: its file or folder name is not UTF-8 \(ids, class "
                     rf"names and the archive's digests, which cover every file under it, are UTF-8\); rename it, "
                     rf"e\.g\. convmv -f latin1 -t utf8 -r --notest FOLDER, or move it out of the folder$",
                     err.strip()), err
    assert not (tmp_path / "x.zarr").exists()


def test_oversized_and_linked_images_are_named(tmp_path, monkeypatch):
    """PIL's decompression-bomb guard and a dangling link each give the file and what to do."""
    big = tmp_path / "c" / "big.png"
    big.parent.mkdir()
    Image.fromarray(np.zeros((64, 64), np.uint8)).save(big)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)   # 4096 pixels > 2 x the limit: PIL refuses
    with pytest.raises(FormatError, match=r"big\.png: too large to decode safely .*cut it into tiles"):
        read_image(big)
    monkeypatch.undo()
    (tmp_path / "c" / "gone.png").symlink_to(tmp_path / "nowhere.png")
    with pytest.raises(FormatError, match=r"gone\.png: a broken link \(its target does not exist\)"):
        scan_folders(tmp_path)


def test_in_memory_folders_skip_what_ingestion_skips(tmp_path):
    """An image smaller than 2 x 2 pixels is skipped in memory as in a store, with a warning naming it."""
    for c in "ab":
        (tmp_path / c).mkdir()
        Image.fromarray(np.full((8, 8), 7, np.uint8)).save(tmp_path / c / "ok.png")
    Image.fromarray(np.zeros((1, 20), np.uint8)).save(tmp_path / "a" / "thin.png")
    with pytest.warns(UserWarning, match=r"1 image\(s\) of \S+ skipped, smaller than 2 x 2 pixels \(a/thin\.png: "
                                         r"1 x 20 pixels\)"):
        s = load_folders(tmp_path)
    assert s.ids == ["a/ok.png", "b/ok.png"] and list(s.labels) == [0, 1]
    store = ingest_images(tmp_path, tmp_path.parent / f"{tmp_path.name}.zarr")
    assert store.ids() == s.ids and [k["id"] for k in store.attrs["skipped"]] == ["a/thin.png"]


def test_pillow_warnings_name_the_image(tmp_path):
    """A JPEG whose EXIF block is cut short: Pillow warns 'Corrupt EXIF data' without saying which file; the
    warning is given again with the image's path (among thousands, it named none)."""
    import io

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (8, 8), dtype=np.uint8)).save(buf, "JPEG")
    jpeg = buf.getvalue()
    bad = tmp_path / "cut_exif.jpg"
    bad.write_bytes(jpeg[:2] + b"\xff\xe1\x00\x13Exif\x00\x00MM\x00*\x00\x00\x00\x08\xff\xff\x01" + jpeg[2:])
    with pytest.warns(UserWarning, match=r"cut_exif\.jpg: Corrupt EXIF data"):
        image = read_image(bad)
    assert image.shape == (8, 8)


def test_class_names_in_two_unicode_forms_are_one_class(tmp_path):
    """"café" as macOS writes it (NFD) and as Linux does (NFC) look the same and are one class."""
    import unicodedata

    for form, name in (("NFC", "1.png"), ("NFD", "2.png")):
        folder = tmp_path / unicodedata.normalize(form, "café")
        folder.mkdir()
        Image.fromarray(np.full((8, 8), 7, np.uint8)).save(folder / name)
    (tmp_path / "b").mkdir()
    Image.fromarray(np.full((8, 8), 7, np.uint8)).save(tmp_path / "b" / "1.png")
    entries = scan_folders(tmp_path)
    assert sorted({e.label for e in entries}) == ["b", unicodedata.normalize("NFC", "café")]
    assert len(entries) == 3


# EXIF "Orientation" 1-8 (EXIF 2.3, Table 4 / TIFF 6.0): how the stored rows turn into the upright image
_UPRIGHT = {1: lambda a: a, 2: np.fliplr, 3: lambda a: np.rot90(a, 2), 4: np.flipud,
            5: lambda a: np.swapaxes(a, 0, 1), 6: lambda a: np.rot90(a, -1),
            7: lambda a: np.swapaxes(np.rot90(a, 2), 0, 1), 8: lambda a: np.rot90(a, 1)}


@pytest.mark.parametrize("orientation", sorted(_UPRIGHT))
@pytest.mark.parametrize("channels", [1, 3])
def test_exif_orientation_is_applied(tmp_path, orientation, channels):
    """Phones and cameras store the sensor's rows and an Orientation tag: the image is read upright."""
    rng = np.random.default_rng(orientation)
    raw = rng.integers(0, 256, (5, 8) if channels == 1 else (5, 8, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / "c" / "img.png"      # PNG (eXIf chunk): lossless, so the pixels compare exactly
    path.parent.mkdir()
    Image.fromarray(raw).save(path, exif=exif)
    np.testing.assert_array_equal(read_image(path), _UPRIGHT[orientation](raw))
    store = ingest_images(tmp_path, tmp_path / "s.zarr")     # the store (training) reads the same route
    got = store.image(0)
    np.testing.assert_array_equal(got if channels == 3 else got.reshape(got.shape[:2]),
                                  _UPRIGHT[orientation](raw))


def test_exif_orientation_of_a_jpeg_turns_its_shape(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6                       # "turn 90 degrees clockwise to show"
    path = tmp_path / "phone.jpg"
    Image.fromarray(np.zeros((30, 40, 3), np.uint8)).save(path, exif=exif)
    assert read_image(path).shape == (40, 30, 3)


def test_resuming_a_store_begun_without_orientation_is_refused(tmp_path):
    """A store begun before images were turned upright would mix the two readings if resumed."""
    import zarr

    src = tmp_path / "src"
    (src / "c").mkdir(parents=True)
    for i in range(2):
        Image.fromarray(np.full((4, 4), i, np.uint8)).save(src / "c" / f"{i}.png")
    ingest_images(src, tmp_path / "s.zarr", limit=1)     # an interrupted ingestion: incomplete
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="r+")
    record = dict(g.attrs["source_record"])
    del record["orientation"]
    g.attrs["source_record"] = record
    with pytest.raises(StoreError, match=r"started with source_record\.orientation = \(not set\), this ingestion "
                                         r"has \"exif\"; resuming would mix two sources\. Start over: add --restart "
                                         r"to `streamcov ingest` or `synth` \(mode=\"restart\" in Python\), or delete"):
        ingest_images(src, tmp_path / "s.zarr")
    assert len(ingest_images(src, tmp_path / "s.zarr", mode="restart")) == 2


def test_float_store_records_its_largest_pixel_magnitude(tmp_path, monkeypatch):
    """A float image store records ``max |pixel|`` when it is completed, over the images of an interrupted
    run too, so that training and ``predict`` compare scales without reading the pixels again; a store
    written before it was recorded is scanned; integer stores are on the 0-1 scale."""
    import streamcov.data.images as images

    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir(parents=True)
    rng = np.random.default_rng(1)
    values = [rng.uniform(-3, 3, (5, 6)).astype(np.float32) for _ in range(4)]
    values[0][2, 3] = -250.5          # the largest magnitude, in the first image, committed before the stop
    for i, v in enumerate(values):
        Image.fromarray(v).save(src / "ab"[i % 2] / f"{i}.tif")
    out = tmp_path / "f.zarr"
    assert ingest_images(src, out, pixel_dtype="float32", chunk_pixels=20, limit=2) is None
    store = ingest_images(src, out, pixel_dtype="float32", chunk_pixels=20)
    assert len(store) == 4 and store.attrs["pixel_max"] == 250.5

    def no_scan(data):
        raise AssertionError("the pixels were read")

    monkeypatch.setattr(images, "largest_magnitude", no_scan)
    assert store.pixel_scale() == 250.5            # the recorded figure, no pass over the pixels
    monkeypatch.undo()
    del store.attrs["pixel_max"]                   # as a store written before it was recorded
    assert store.pixel_scale() == 250.5
    grey = tmp_path / "grey"
    (grey / "a").mkdir(parents=True)
    Image.fromarray(np.full((4, 4), 200, np.uint8)).save(grey / "a" / "g.png")
    ints = ingest_images(grey, tmp_path / "u.zarr")
    assert ints.pixel_dtype == "uint8" and "pixel_max" not in ints.attrs and ints.pixel_scale() == 1.0


def _textured_and_constant(src: Path, constant: bool = True) -> None:
    """Classes a and b of three textured images each; with ``constant``, a black grey image in a and a flat
    red one in b (a blank frame, a single colour: every pixel the same)."""
    rng = np.random.default_rng(2)
    for c in "ab":
        (src / c).mkdir(parents=True)
        for k in range(3):
            Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(src / c / f"{k}.png")
    if constant:
        Image.fromarray(np.zeros((6, 6), np.uint8)).save(src / "a" / "blank.png")
        Image.fromarray(np.full((6, 6, 3), (200, 10, 10), np.uint8)).save(src / "b" / "red.png")


def test_constant_images_are_kept_recorded_and_warned_about(tmp_path, capsys):
    """Constant images (their descriptors carry nothing of their content) are stored like the others and
    recorded in ``attrs["constant_images"]`` with each commit point: an ingestion interrupted after the first
    of them counts it when resumed, and says both in one warning line."""
    import json

    from streamcov.cli import main

    src, out = tmp_path / "src", tmp_path / "c.zarr"
    _textured_and_constant(src)
    assert ingest_images(src, out, chunk_pixels=64, limit=4) is None   # a/blank.png committed, then a stop
    capsys.readouterr()
    assert main(["ingest", "images", "--format", "folders", "--quiet", str(src), str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"streamcov ingest: warning: 2 of the 8 images of {src} are constant, every pixel the same (a/blank.png, "
        f"b/red.png): their descriptors carry no information about their content, and the class given to them "
        f"means nothing; remove or replace them, or check the camera or scan that made them; the store lists "
        f"them (`streamcov info {out}`)"]
    assert json.loads(captured.out)["constant"] == 2
    store = open_image_store(out)
    assert len(store) == 8 and store.constant_images == ["a/blank.png", "b/red.png"]   # kept, not skipped
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["store"]
    assert info["n_constant_images"] == 2 and info["constant_images"] == ["a/blank.png", "b/red.png"]


def test_textured_images_give_no_constant_warning_and_older_stores_load(tmp_path, capsys):
    import json

    import zarr

    from streamcov.cli import main
    from streamcov.data import integrity

    src, out = tmp_path / "src", tmp_path / "t.zarr"
    _textured_and_constant(src, constant=False)
    assert main(["ingest", "images", "--format", "folders", "--quiet", str(src), str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and json.loads(captured.out)["constant"] == 0
    assert open_image_store(out).constant_images == []
    # a store written before constant images were recorded (sealed without the attribute): read, none known
    g = zarr.open_group(str(out), mode="r+")
    del g.attrs["constant_images"]
    g.attrs["seal"] = integrity.seal(g, out, [*g.attrs["arrays"], "manifest"])
    assert open_image_store(out).constant_images is None
    g.attrs["constant_images"] = "a/0.png"   # an edit: not the list the ingestion writes
    with pytest.raises(StoreError, match="attribute constant_images = 'a/0.png' is not a list of image ids"):
        open_image_store(out)


def test_file_names_with_digits_of_other_kinds_are_ordered_not_refused(tmp_path):
    """The natural order of file names reads runs of decimal digits as numbers (x9 before x10, full-width ones
    too); a superscript or another digit that is not decimal ('²') is text, not a traceback from int()."""
    (tmp_path / "a").mkdir()
    names = ["x10.png", "x9.png", "x1\u00b2.png", "x\uff11\uff12.png"]   # x1², x１２
    for i, name in enumerate(names):
        Image.fromarray(np.full((4, 5), 10 * i, dtype=np.uint8)).save(tmp_path / "a" / name)
    ids = [e.id for e in scan_folders(tmp_path)]
    assert ids == ["a/x1\u00b2.png", "a/x9.png", "a/x10.png", "a/x\uff11\uff12.png"]
    assert len(ingest_images(tmp_path, tmp_path / "s.zarr")) == 4


def test_tiff_variants_are_read_as_they_mean_or_refused_for_what_they_are(tmp_path):
    """A signed 8-bit TIFF was read as unsigned (-100 as 156); a 16-bit MinIsWhite TIFF was not inverted, while
    an 8-bit one is; a valid TIFF Pillow does not decode (float64, tifffile's default for float arrays) was
    called damaged, with the advice to copy it again."""
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(tmp_path / "s8.tif", np.array([[-100, 0], [50, 127]], np.int8))
    with pytest.raises(FormatError, match=r"s8\.tif: signed 8-bit TIFF: it would be read as unsigned \(-100 as "
                                          r"156\); save it as unsigned 8-bit or 16-bit grey, or as 32-bit float grey$"):
        read_image(tmp_path / "s8.tif")
    raw = np.array([[0, 1000], [30000, 65535]], np.uint16)
    tifffile.imwrite(tmp_path / "w16.tif", raw, photometric="miniswhite")
    tifffile.imwrite(tmp_path / "w8.tif", (raw >> 8).astype(np.uint8), photometric="miniswhite")
    w16 = read_image(tmp_path / "w16.tif")
    assert w16.dtype == np.uint16 and w16.tolist() == (65535 - raw).tolist()
    np.testing.assert_array_equal(read_image(tmp_path / "w8.tif"), 255 - (raw >> 8))   # the same sense
    tifffile.imwrite(tmp_path / "f64.tif", np.zeros((4, 4)))
    with pytest.raises(FormatError, match=r"f64\.tif: cannot decode image: it starts as a TIFF file but Pillow "
                                          r"cannot read it: a TIFF variant it does not decode \(64 or 16-bit float, "
                                          r"float colour, extra channels\) or a damaged file; save it as 8 or 16-bit "
                                          r"integer, or 32-bit float grey TIFF, or copy it again$"):
        read_image(tmp_path / "f64.tif")


def test_a_multi_picture_jpeg_is_its_first_picture(tmp_path):
    """A JPEG with a second picture (a phone's HDR gain map, a camera's preview: Pillow's MPO) was refused as
    an animation; it is one photo, its first picture."""
    rng = np.random.default_rng(0)
    first = rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)
    Image.fromarray(first).save(tmp_path / "p.jpg", format="MPO", save_all=True,
                                append_images=[Image.fromarray(first[:12, :12].copy())])
    with Image.open(tmp_path / "p.jpg") as im:
        assert im.format == "MPO" and im.n_frames == 2
        want = np.asarray(im.convert("RGB"))
    got = read_image(tmp_path / "p.jpg")
    assert got.shape == (24, 24, 3)
    np.testing.assert_array_equal(got, want)


def test_a_link_to_an_image_read_elsewhere_is_refused(tmp_path):
    """A file link in class a to b/0.png put one image in two classes without a word (a folder reached twice
    through a link was already refused)."""
    for c in "ab":
        (tmp_path / c).mkdir()
        Image.fromarray(np.full((8, 8), 9, np.uint8)).save(tmp_path / c / "0.png")
    (tmp_path / "a" / "1.png").symlink_to(tmp_path / "b" / "0.png")
    with pytest.raises(FormatError, match=r"(a/1\.png: the same image as \S+b/0\.png|b/0\.png: the same image as "
                                          r"\S+a/1\.png) \(one of them is a link\): it would be read twice, perhaps "
                                          r"under two classes; remove one of them$"):
        scan_folders(tmp_path)


# ------------------------------------------------------------------ round trip of any images
# what each pixel dtype of a store takes, and the pixels it gives back (bit for bit)
_STORED = {
    "uint8": {"uint8": lambda a: a},
    "uint16": {"uint8": lambda a: a.astype(np.uint16) * 257, "uint16": lambda a: a},
    "float32": {"uint8": lambda a: (a / 255.0).astype(np.float32), "uint16": lambda a: (a / 65535.0).astype(np.float32),
                "float32": lambda a: a},
}
_LAYOUTS = ("grey", "grey-1", "rgb", "rgba")   # (h, w), (h, w, 1), (h, w, 3), (h, w, 4): alpha dropped


def _image(rng, h, w, layout, dtype, constant):
    """One image of ``layout`` and ``dtype``; ``constant``: every pixel one value (per channel)."""
    c = {"grey": None, "grey-1": 1, "rgb": 3, "rgba": 4}[layout]
    shape = (h, w) if c is None else (h, w, c)
    if dtype == "float32":
        a = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 300.0])).astype(np.float32)
    else:
        a = rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    if constant:
        a[...] = a[0, 0]
    return a


def _as_stored(a, stored, source):
    """The image as the store gives it back: (h, w) grey or (h, w, 3), in the store's dtype."""
    a = a[:, :, :3] if a.ndim == 3 and a.shape[2] == 4 else a
    a = a[:, :, 0] if a.ndim == 3 and a.shape[2] == 1 else a
    return np.ascontiguousarray(_STORED[stored][source](a))


@st.composite
def _image_sets(draw):
    stored = draw(st.sampled_from(sorted(_STORED)))
    n = draw(st.integers(1, 8))
    images = []
    for i in range(n):
        images.append({"h": draw(st.integers(1, 7)), "w": draw(st.integers(1, 7)),
                       "layout": draw(st.sampled_from(_LAYOUTS)),
                       "source": draw(st.sampled_from(sorted(_STORED[stored]))),   # a pixel dtype the store takes
                       "constant": draw(st.booleans()),
                       # ids of any text (UTF-8 in the store), labels, groups and splits in any order of first use
                       "id": f"{i}/" + draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=4)),
                       "label": draw(st.sampled_from(["a", "b", "ä", "c d"])),
                       "group": draw(st.sampled_from([None, "g1", "g2"])),
                       "split": draw(st.sampled_from([None, "train", "test"]))})
    return stored, images


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_image_sets(), chunk=st.integers(1, 120), stop=st.integers(0, 8), lost=st.integers(0, 3),
       seed=st.integers(0, 2 ** 16))
def test_image_store_round_trip_with_an_interrupted_write_resumed(tmp_path_factory, data, chunk, stop, lost, seed):
    """Images of every size, channel layout and pixel dtype a store holds, written in chunks of any size by a
    writer that stops after ``stop`` images committed and ``lost`` more appended but not committed (a kill),
    then resumed by another: the complete store gives back every image bit for bit (grey as (h, w), alpha
    dropped, 8-bit pixels scaled exactly into 16-bit and float stores), its ids, labels, groups and splits, in
    order, and the constant images and largest float pixel of both runs."""
    from streamcov.data.images import ImageStore, is_constant

    stored, specs = data
    rng = np.random.default_rng(seed)
    images = [_image(rng, s["h"], s["w"], s["layout"], s["source"], s["constant"]) for s in specs]
    path = tmp_path_factory.mktemp("images") / "s.zarr"
    n, stop = len(specs), min(stop, len(specs))

    def append(writer, i):
        s = specs[i]
        return writer.append(images[i], s["id"], s["label"], group=s["group"], split=s["split"])

    if stop < n:   # interrupted: the first `stop` images committed, `lost` more appended, then the writer is gone
        first = ImageStoreWriter(path, source="memory", pixel_dtype=stored, chunk_pixels=chunk, mode="create")
        assert all(append(first, i) for i in range(stop))
        first.flush()
        for i in range(stop, min(stop + lost, n)):
            append(first, i)   # committed only where a whole chunk was written meanwhile
        committed = first.committed
        assert stop <= committed <= min(stop + lost, n)
        del first
        with pytest.raises(IncompleteStoreError, match=rf"incomplete image store .*{committed} images committed"):
            open_image_store(path)
    else:
        committed = 0
    # resumed with the same settings (a store keeps its chunk size: none given is its own)
    writer = ImageStoreWriter(path, source="memory", pixel_dtype=stored, chunk_pixels=None if committed else chunk,
                              mode="resume")
    assert writer.committed == committed
    assert [append(writer, i) for i in range(n)] == [i >= committed for i in range(n)]   # each image stored once
    store = writer.close()
    again = ImageStore(path)
    assert len(store) == len(again) == store.n_images == n and store.attrs["complete"] is True
    assert store.pixel_dtype == stored and store.group["pixels"].chunks[0] == chunk
    want = [_as_stored(a, stored, s["source"]) for a, s in zip(images, specs)]
    got = again.images()
    for i, w in enumerate(want):
        for back in (again.image(i), got[i]):
            assert back.dtype == w.dtype and back.shape == w.shape and back.tobytes() == w.tobytes(), i
    assert again.ids() == [s["id"] for s in specs] and [again.id_of(i) for i in range(n)] == again.ids()
    assert list(again.label_strings()) == [s["label"] for s in specs]
    assert [again.group_names[g] for g in again.groups] == [s["group"] or s["label"] for s in specs]
    assert list(again.split_strings()) == [s["split"] for s in specs]
    assert again.constant_images == [s["id"] for s, w in zip(specs, want) if is_constant(w)]
    if stored == "float32":
        assert again.pixel_scale() == max(float(np.abs(w).max()) for w in want)
    else:
        assert again.pixel_scale() == 1.0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.tuples(st.sampled_from(["png-grey", "png-rgb", "png-rgba", "png-16", "tif-float"]),
                                st.integers(2, 6), st.integers(2, 6), st.sampled_from("ab")), min_size=1, max_size=6),
       chunk=st.integers(1, 80), limit=st.integers(1, 6), seed=st.integers(0, 2 ** 16))
def test_an_image_folder_ingested_with_a_stop_then_resumed_gives_back_its_pixels(tmp_path_factory, files, chunk,
                                                                                  limit, seed):
    """The same round trip through the files: PNG of 8-bit grey, RGB and RGBA and 16-bit grey, float TIFF; the
    pixel dtype the folder asks for (auto); an ingestion stopped after ``limit`` images, then resumed."""
    from streamcov.data.images import auto_pixel_dtype

    rng = np.random.default_rng(seed)
    base = tmp_path_factory.mktemp("folder")
    src, out = base / "src", base / "s.zarr"
    written = {}
    for i, (kind, h, w, label) in enumerate(files):
        layout, dtype = {"png-grey": ("grey", "uint8"), "png-rgb": ("rgb", "uint8"), "png-rgba": ("rgba", "uint8"),
                         "png-16": ("grey", "uint16"), "tif-float": ("grey", "float32")}[kind]
        # float pixels on the 0-1 scale of the integer images beside them (other scales are refused among them)
        a = rng.random((h, w), dtype=np.float32) if dtype == "float32" else _image(rng, h, w, layout, dtype, False)
        name = f"{label}/{i:02d}.{kind[:3]}"
        (src / label).mkdir(parents=True, exist_ok=True)
        Image.fromarray(a, mode="RGBA" if layout == "rgba" else None).save(src / name)
        written[name] = (a, dtype)
    stored = auto_pixel_dtype(src / name for name in written)
    assert stored == ("float32" if any(d == "float32" for _, d in written.values()) else
                      "uint16" if any(d == "uint16" for _, d in written.values()) else "uint8")
    if limit < len(files):
        assert ingest_images(src, out, chunk_pixels=chunk, limit=limit) is None
        with pytest.raises(IncompleteStoreError, match=rf"incomplete image store .*{limit} images committed"):
            open_image_store(out)
    store = ingest_images(src, out, chunk_pixels=chunk)
    order = sorted(written)   # a folder per class, each in the natural order of its names (two digits: sorted)
    assert store.ids() == order and store.pixel_dtype == stored
    assert list(store.label_strings()) == [name.split("/")[0] for name in order]
    for i, name in enumerate(order):
        a, dtype = written[name]
        want = _as_stored(a, stored, dtype)
        back = store.image(i)
        assert back.dtype == want.dtype and back.shape == want.shape and back.tobytes() == want.tobytes(), name


def test_a_folder_that_cannot_be_listed_is_refused_not_left_out(tmp_path, monkeypatch):
    """A class or group folder another user keeps private (mode 0700): os.walk left its images out without a
    word, so ``ingest images`` stored part of the set (and called a class folder it could not list "a class
    folder with no images") and ``predict`` on a folder predicted part of it. The folder is named in one line.
    The tests run as root, who may list any folder: the refusal of the system is simulated."""
    import os

    from streamcov.data.imageio import excluded_images
    from streamcov.data.readers._layout import walk_paths

    _make_tree(tmp_path)
    private = tmp_path / "b" / "obj1"
    scandir = os.scandir

    blocked = {private}

    def refusing(path="."):
        if Path(os.fsdecode(path)) in blocked:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    said = rf"^{re.escape(str(private))}: cannot list the folder: Permission denied; give read access to it or move it"
    for scan in (lambda: scan_folders(tmp_path, group_level=2), lambda: scan_folders(tmp_path / "b", unlabelled=True),
                 lambda: walk_paths(tmp_path)):
        with pytest.raises(FormatError, match=said):
            scan()
    # excluded by name (another user's folder is why it is excluded; by default maps): not entered, nor counted
    blocked = {tmp_path / "a" / "obj2" / "maps"}
    assert len(scan_folders(tmp_path, group_level=2)) == 5 and excluded_images(tmp_path) == 0
