"""A store knows its archive by the files' contents: an archive copied, unpacked or checked out again (new
modification times, the same files) is the same archive for ``run``, a resumed ingestion and ``predict``;
an archive whose contents changed is not. Every run first compares the files' metadata (relative paths,
sizes, modification times) and reads no file when it matches."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from PIL import Image

from streamcov.data import integrity
from streamcov.data.images import ingest_images
from streamcov.data.ragged import content_digest, files_digest, is_known_copy, record_copy, same_files
from streamcov.data.readers import open_reader
from streamcov.data.skeletons import ingest
from streamcov.errors import ConfigError, FormatError, StoreError
from streamcov.tasks.classify import resolve_image_store, resolve_skeleton_store
from streamcov.tasks.schema import ImageData, SkeletonData
from test_bad_input import as_format_3, rewritten, write_archive

NOTE = r"^note: data\.store: \S+ is used: the files of \S+ have new modification times since it was written, but " \
       r"the same contents$"
CHANGED = r"which has changed since \(files added, removed, or of other contents: 9 files then, 9 now\)"


def later(folder: Path) -> None:
    """Every file under ``folder`` given a later modification time, as `cp -r` without -p or an unpacking does."""
    for f in folder.rglob("*"):
        if f.is_file():
            rewritten(f, edit=False)


def no_file_read(monkeypatch):
    """Any read of a file's contents for the content digest fails the test."""
    def read(path):
        raise AssertionError(f"{path} was read")
    monkeypatch.setattr(integrity, "file_sha256", read)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A user cache of each test's own: a copy remembered by one test is not known to the next."""
    monkeypatch.setenv("STREAMCOV_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def written(tmp_path):
    """A generic archive ``a`` (9 files), its [data], and the store ``run`` ingested from it."""
    data = SkeletonData(store=str(tmp_path / "g.zarr"), source=str(write_archive(tmp_path / "a")), format="generic")
    return tmp_path / "a", data, resolve_skeleton_store(data, tmp_path)


# ------------------------------------------------------------------ the digests
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.sampled_from(["a.csv", "b.txt", "d/c.csv", "d/e/f.bin", "z"]),
                             st.binary(min_size=1, max_size=64), min_size=1),
       seed=st.integers(0, 2**31 - 1))
def test_content_digest_ignores_file_order_and_times_but_not_any_byte(tmp_path_factory, files, seed):
    rng = np.random.default_rng(seed)
    root = tmp_path_factory.mktemp("archive")
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    paths = [root / name for name in files]
    digest, metadata = content_digest(paths, root), files_digest(paths, root)
    for p in paths:   # times long past: other times than the files were written with
        os.utime(p, ns=(int(rng.integers(1, 2**40)), int(rng.integers(1, 2**40))))
    assert content_digest([paths[i] for i in rng.permutation(len(paths))], root) == digest
    assert files_digest(paths, root)["digest"] != metadata["digest"]   # which the metadata digest sees
    copy = tmp_path_factory.mktemp("copy") / "elsewhere"
    shutil.copytree(root, copy, copy_function=shutil.copy)
    assert content_digest([copy / name for name in files], copy) == digest
    name = sorted(files)[int(rng.integers(len(files)))]
    data = bytearray(files[name])
    i = int(rng.integers(len(data)))
    data[i] ^= 1 << int(rng.integers(8))
    (root / name).write_bytes(bytes(data))
    assert content_digest(paths, root) != digest


@pytest.mark.parametrize("old, new, equal", [
    ({"count": 2, "digest": "m"}, {"count": 2, "digest": "m"}, True),                        # the fast path
    ({"count": 2, "digest": "m", "content": "c"}, {"count": 2, "digest": "m"}, True),        # no file read
    ({"count": 2, "digest": "m", "content": "c"}, {"count": 2, "digest": "n"}, "c"),         # new times, read
    ({"count": 2, "digest": "m", "content": "c"}, {"count": 2, "digest": "n"}, "x"),         # other contents
    ({"count": 2, "digest": "m"}, {"count": 2, "digest": "n"}, False),                       # written before
    ({"count": 2, "digest": "m", "content": "c"}, {"count": 3, "digest": "n"}, False),       # a file more
    ({"count": 2, "digest": "m", "content": "c"}, {"count": 2, "digest": "n", "content": "c"}, True),
    ({"count": 2, "digest": "m", "content": "c"}, {"count": 2, "digest": "m", "content": "x"}, False),
    ({"count": 2, "digest": "m"}, None, False),
])
def test_same_files(old, new, equal):
    """Both contents recorded: compared; else the metadata digests, then (when ``old`` records its contents)
    the contents read now, only when the metadata differs."""
    asked = []

    def content():
        asked.append(1)
        return equal
    got = same_files(old, new, content)
    assert got is (equal in (True, "c"))
    assert bool(asked) == isinstance(equal, str)


def test_known_copies(cache):
    """is_known_copy asks, record_copy records: a copy's metadata digest is known to its contents once recorded,
    the 16 latest of each contents kept; a cache that cannot be written records nothing, and no error."""
    assert not is_known_copy("c" * 64, "m0")
    record_copy("c" * 64, "m0")
    assert is_known_copy("c" * 64, "m0") and not is_known_copy("d" * 64, "m0") and not is_known_copy("c" * 64, "m1")
    for i in range(1, 17):
        record_copy("c" * 64, f"m{i}")
    assert not is_known_copy("c" * 64, "m0") and all(is_known_copy("c" * 64, f"m{i}") for i in range(1, 17))
    assert not is_known_copy("c" * 64, None) and record_copy("c" * 64, None) is None
    shutil.rmtree(cache / "archives")
    (cache / "archives").write_text("")   # a file where the folder goes
    record_copy("c" * 64, "m0")
    assert not is_known_copy("c" * 64, "m0")


# ------------------------------------------------------------------ run
def test_run_reuses_the_store_of_an_archive_with_new_times(written, capsys):
    """The archive copied or unpacked again at its path: the store is used, not written again, with one note."""
    archive, data, store = written
    assert set(store.attrs["source_record"]["files"]) == {"count", "digest", "content"}
    capsys.readouterr()
    later(archive)
    again = resolve_skeleton_store(data, archive.parent)
    assert again.attrs["identity"] == store.attrs["identity"]
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and re.search(NOTE, err.strip()), err


def test_a_copy_is_read_once(written, monkeypatch, capsys):
    """The contents of a copy are read by the first run only: later runs over the same copy read no file and say
    nothing; a file of the copy edited afterwards is still seen (new metadata, so the contents are read again)."""
    archive, data, store = written
    later(archive)
    resolve_skeleton_store(data, archive.parent)
    capsys.readouterr()
    with monkeypatch.context() as m:
        no_file_read(m)
        assert resolve_skeleton_store(data, archive.parent).attrs["identity"] == store.attrs["identity"]
    assert capsys.readouterr().err == ""
    rewritten(archive / "s03.csv")
    with pytest.raises(ConfigError, match=r"data\.store: \S+g\.zarr was written from \S+a, " + CHANGED):
        resolve_skeleton_store(data, archive.parent)


def test_no_home_directory_means_no_cache(written, monkeypatch, capsys):
    """Without a home directory (HOME unset, a user without a passwd entry: Path.home() raises RuntimeError)
    there is no cache: the contents are read on every run, as before there was one."""
    import streamcov._config as config

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(config, "default_cache_dir", no_home)
    archive, data, store = written
    later(archive)
    for _ in range(2):
        assert resolve_skeleton_store(data, archive.parent).attrs["identity"] == store.attrs["identity"]
        assert re.search(NOTE, capsys.readouterr().err.strip())


@pytest.mark.parametrize("damage", ["garbage", "other content", "not a folder"])
def test_a_damaged_or_unwritable_cache_means_reading_again(written, cache, damage, capsys):
    """A cache record that cannot be read, is of other contents, or cannot be written is no record: the
    contents are read (and the note said) on every run, and the store is used."""
    archive, data, store = written
    later(archive)
    if damage == "not a folder":
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("a file where the cache folder should be")
    resolve_skeleton_store(data, archive.parent)
    records = list((cache / "archives").glob("*.json")) if cache.is_dir() else []
    assert len(records) == (damage != "not a folder")
    for r in records:
        r.write_text("{" if damage == "garbage" else json.dumps({**json.loads(r.read_text()), "content": "x"}))
    capsys.readouterr()
    assert resolve_skeleton_store(data, archive.parent).attrs["identity"] == store.attrs["identity"]
    assert re.search(NOTE, capsys.readouterr().err.strip())


def test_the_fast_path_reads_no_file_and_misses_an_edit_that_keeps_size_and_time(written, monkeypatch, capsys):
    """The fast path's known limit, as make's and rsync's: a file rewritten in place at its size, its modification
    time set back, is not seen (and no file is read to check a store whose archive's metadata is unchanged)."""
    archive, data, store = written
    rewritten(archive / "s03.csv", later=False)
    no_file_read(monkeypatch)
    capsys.readouterr()
    assert resolve_skeleton_store(data, archive.parent).attrs["identity"] == store.attrs["identity"]
    assert capsys.readouterr().err == ""


def test_an_archive_with_other_contents_is_refused(written):
    archive, data, _ = written
    rewritten(archive / "s03.csv")
    with pytest.raises(ConfigError, match=r"data\.store: \S+g\.zarr was written from \S+a, " + CHANGED):
        resolve_skeleton_store(data, archive.parent)


def test_a_store_without_the_contents_is_checked_by_the_times_as_before(written):
    """A store written by an earlier streamcov (no content digest): new times are a changed archive, as they were."""
    archive, data, store = written
    meta = json.loads((store.path / "zarr.json").read_text())
    del meta["attributes"]["source_record"]["files"]["content"]
    (store.path / "zarr.json").write_text(json.dumps(meta))
    as_format_3(store.path)
    assert resolve_skeleton_store(data, archive.parent).attrs["identity"] == store.attrs["identity"]
    later(archive)
    with pytest.raises(ConfigError, match=r"which has changed since \(files added, removed, or of another size or "
                                          r"modification time: 9 files then, 9 now\)"):
        resolve_skeleton_store(data, archive.parent)


def test_image_run_reuses_the_store_of_a_folder_with_new_times(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for c in "ab":
        (tmp_path / "img" / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (6, 7), dtype=np.uint8)).save(tmp_path / "img" / c / f"{i}.png")
    data = ImageData(store=str(tmp_path / "s.zarr"), source=str(tmp_path / "img"))
    store = resolve_image_store(data)
    capsys.readouterr()
    later(tmp_path / "img")
    assert resolve_image_store(data).attrs["identity"] == store.attrs["identity"]
    assert re.search(NOTE, capsys.readouterr().err.strip())
    Image.fromarray(rng.integers(0, 256, (6, 7), dtype=np.uint8)).save(tmp_path / "img" / "a" / "1.png")
    with pytest.raises(ConfigError, match=r"which has changed since \(files added, removed, or of other contents: "
                                          r"6 files then, 6 now\)"):
        resolve_image_store(data)


# ------------------------------------------------------------------ resume
def test_a_resumed_ingestion_takes_new_times_and_records_them(tmp_path, monkeypatch):
    archive = write_archive(tmp_path / "a")
    out = tmp_path / "g.zarr"
    assert ingest(open_reader("generic", archive), out, chunk_frames=6, limit=3) is None
    later(archive)
    store = ingest(open_reader("generic", archive), out, chunk_frames=6)
    assert store.n_sequences == 8
    # recorded with the times it was completed with: the next run takes the fast path
    now = open_reader("generic", archive).record["files"]
    assert store.attrs["source_record"]["files"] == {**now, "content": content_digest(
        [p for p in archive.rglob("*") if p.is_file()], archive)}
    no_file_read(monkeypatch)
    data = SkeletonData(store=str(out), source=str(archive), format="generic")
    assert resolve_skeleton_store(data, tmp_path).attrs["identity"] == store.attrs["identity"]


def test_a_resumed_ingestion_sees_an_edit_that_keeps_size_and_time(tmp_path):
    """Ingestion reads the contents anyway: an interrupted one is not resumed over a file edited in place."""
    archive = write_archive(tmp_path / "a")
    out = tmp_path / "g.zarr"
    assert ingest(open_reader("generic", archive), out, chunk_frames=6, limit=3) is None
    rewritten(archive / "s05.csv", later=False)
    with pytest.raises(StoreError, match=r"the archive \S+a changed since this ingestion began"):
        ingest(open_reader("generic", archive), out, chunk_frames=6)


def test_an_image_ingestion_resumes_over_new_times(tmp_path):
    rng = np.random.default_rng(1)
    (tmp_path / "img" / "a").mkdir(parents=True)
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (5, 5), dtype=np.uint8)).save(tmp_path / "img" / "a" / f"{i}.png")
    assert ingest_images(tmp_path / "img", tmp_path / "s.zarr", chunk_pixels=25, limit=2) is None
    later(tmp_path / "img")
    assert len(ingest_images(tmp_path / "img", tmp_path / "s.zarr", chunk_pixels=25)) == 4


# ------------------------------------------------------------------ predict
def test_predict_knows_the_training_data_by_its_contents():
    """Two stores of the same archive, one of a copy with new times: the same data when both record the contents;
    a store of an earlier streamcov (no contents) against a newer one: by the metadata, as before."""
    from streamcov.stream.predict import _same_archive, _same_source

    trained = {"format": "msr-action3d", "path": "/d/msr", "options": {},
               "files": {"count": 3, "digest": "ab", "content": "c1"}}
    copy = {**trained, "path": "/e/msr", "files": {"count": 3, "digest": "cd", "content": "c1"}}
    assert _same_source(trained, copy)
    assert not _same_source(trained, {**copy, "files": {"count": 3, "digest": "ab", "content": "c2"}})
    earlier = {**trained, "files": {"count": 3, "digest": "ab"}}
    assert _same_source(earlier, copy) is False and _same_source(earlier, {**copy, "files": trained["files"]})
    subset = {**copy, "options": {"subset": "cvpr12"}}
    assert _same_archive(trained, subset) and not _same_source(trained, subset)
    assert not _same_archive(trained, {**subset, "files": {"count": 3, "digest": "cd", "content": "c2"}})


# ------------------------------------------------------------------ a file that cannot be read
def unreadable(monkeypatch, name: str):
    """Reading the file ``name`` for the content digest fails as a file without read permission does."""
    read = integrity.file_sha256

    def refuse(path):
        if Path(path).name == name:
            raise PermissionError(13, "Permission denied", str(path))
        return read(path)
    monkeypatch.setattr(integrity, "file_sha256", refuse)


def test_an_unreadable_file_of_the_archive_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """Every file under the archive is read for the contents, also one the reader never opens: it is named, before
    the lock and the writer make the store's folders."""
    archive = write_archive(tmp_path / "a", files={"README.txt": "notes"})
    unreadable(monkeypatch, "README.txt")
    out = tmp_path / "new" / "deeper" / "g.zarr"
    with pytest.raises(FormatError, match=r"README\.txt: cannot read it \(Permission denied\), and a store records "
                                          r"the contents of every file of its archive; make it readable, or move "
                                          r"it out of \S+a$"):
        ingest(open_reader("generic", archive), out)
    assert not (tmp_path / "new").exists()


def test_an_unreadable_file_found_by_run_is_one_line(written, monkeypatch):
    """``run`` reads the contents when the times changed: an unreadable file there is named as at ingestion."""
    archive, data, _ = written
    later(archive)
    unreadable(monkeypatch, "s03.csv")
    with pytest.raises(FormatError, match=r"s03\.csv: cannot read it \(Permission denied\)"):
        resolve_skeleton_store(data, archive.parent)


def test_a_resumed_store_that_records_no_digest_of_its_files(tmp_path):
    """An incomplete store begun by an earlier streamcov (no ``files`` in its source record) is not resumed: it
    cannot be told whether the archive changed."""
    archive = write_archive(tmp_path / "a")
    out = tmp_path / "g.zarr"
    assert ingest(open_reader("generic", archive), out, chunk_frames=6, limit=3) is None
    meta = json.loads((out / "zarr.json").read_text())
    del meta["attributes"]["source_record"]["files"]
    (out / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match=r"changed since this ingestion began \(or it is not known: the store was "
                                         r"begun by an earlier streamcov, which recorded no digest of its files\)"):
        ingest(open_reader("generic", archive), out, chunk_frames=6)
