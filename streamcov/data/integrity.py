"""Integrity of zarr arrays: every chunk written, every chunk checksummed, damage named.

Arrays written by streamcov (format version 2 and later) carry a crc32c
checksum per chunk (zarr v3's ``crc32c`` codec, after compression) and are
written with ``write_empty_chunks``, so that every chunk of an array exists
on disk. A missing chunk is therefore damage, not zeros: reads through
:func:`read` check that the chunk files they cover exist and turn a
checksum or decompression failure into a :class:`~streamcov.errors.StoreError`
naming the array and the chunk. From format version 3 a store also keeps a
*manifest*: the checksum of every chunk of every array, written when the store
is completed. A chunk whose own checksum is right but differs from the
manifest's (a chunk copied from another store) is refused as well. From
format version 4 a complete store is also *sealed*: the digests of every
array's ``zarr.json`` and of the store's attributes as written
(:func:`seal`), so that an edited byte order, data type or attribute, which
no chunk checksum sees (the chunk bytes are unchanged, and read otherwise),
is refused when the store is opened (:func:`seal_mismatch`).
:func:`verify` reads every chunk of every array (``streamcov info --verify``).
"""
from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from ..errors import StoreError

# 2: checksums and every chunk written; 3: and the manifest of chunk checksums; 4: and the seal of the metadata
FORMAT_VERSION = 4


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes (hex), read in 1 MiB blocks: the digest that models and
    pretrained weights record of their files."""
    import hashlib

    import os
    import stat

    h = hashlib.sha256()
    # opened without blocking and then asked what it is: a pipe would wait for a writer (open) and a device such
    # as /dev/zero never ends (read); neither is a file whose digest anything records
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb") as fh:
            fd = None
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    finally:
        if fd is not None:
            os.close(fd)
    return h.hexdigest()


def array_sha256(a: np.ndarray) -> str:
    """SHA-256 of an array (hex): its dtype, shape and C-order bytes, hashed where they lie. The digest
    that models record of the arrays they leave out and weight caches of the arrays they keep."""
    import hashlib

    a = np.ascontiguousarray(a)
    return hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + memoryview(a.reshape(-1)).cast("B")).hexdigest()


def arrays_sha256(arrays: dict) -> str:
    """SHA-256 (hex) of named arrays: each name with its :func:`array_sha256`, in name order."""
    import hashlib

    h = hashlib.sha256()
    for k in sorted(arrays):
        h.update(f"{k}\0{array_sha256(arrays[k])}\n".encode())
    return h.hexdigest()


def json_sha256(doc) -> str:
    """SHA-256 (hex) of a JSON document, keys sorted and without spaces (the same for the same document)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def metadata_sha256(root, name: str) -> str | None:
    """SHA-256 of array ``name``'s ``zarr.json`` under ``root`` as parsed JSON (its layout on disk aside),
    None when it is missing or not JSON. The file itself, not zarr's reading of it: the same digest under
    every zarr version."""
    import json

    meta = Path(root) / name / "zarr.json"
    try:
        if not meta.is_file():   # (a pipe would block the read)
            return None
        return json_sha256(json.loads(meta.read_text()))
    except (OSError, ValueError, RecursionError):
        return None


# the attributes a seal does not cover: itself, and the completion marker written after it
UNSEALED = ("seal", "complete")


def _attrs_sha256(group) -> str:
    """The digest of a store's attributes but :data:`UNSEALED`."""
    return json_sha256({k: v for k, v in dict(group.attrs).items() if k not in UNSEALED})


def seal(group, root, names) -> dict:
    """The seal of a store (format version 4): the digest of each array's ``zarr.json``
    (:func:`metadata_sha256`) and of the store's attributes but :data:`UNSEALED`."""
    return {"attrs": _attrs_sha256(group), "arrays": {n: metadata_sha256(root, n) for n in names}}


def metadata_mismatch(root, recorded: dict, what: str = "the store") -> str | None:
    """The first array of ``recorded`` (``name -> metadata_sha256`` as written) whose ``zarr.json`` under
    ``root`` is another now, said as such, or None."""
    for name, digest in recorded.items():
        if metadata_sha256(root, name) != digest:
            return (f"array {name!r}: its zarr.json (data type, byte order, codecs, shape) is not the one {what} "
                    f"was written with (edited)")
    return None


def seal_mismatch(group, root, recorded) -> str | None:
    """What differs from the seal ``recorded`` when a store was written (an array's ``zarr.json`` or the
    attributes, edited since), or None."""
    if recorded is None:
        return "its seal (the digests of its metadata) is missing (zarr.json edited)"
    if not (isinstance(recorded, dict) and isinstance(recorded.get("arrays"), dict)):
        return f"its seal attribute is not the table it writes (zarr.json edited): {recorded!r}"[:200]
    why = metadata_mismatch(root, recorded["arrays"])
    if why is None and _attrs_sha256(group) != recorded.get("attrs"):
        why = "its attributes (zarr.json) are not those the store was written with (edited)"
    return why


def names_list(v) -> bool:
    """Whether an attribute holds a list of names (the ``arrays`` of a store, its ``label_names``, ...)."""
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def shown(v, limit: int = 60) -> str:
    """An attribute's value for a message, cut after ``limit`` characters."""
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def arrays_problem(arrays) -> str:
    """What is wrong with a store's ``arrays`` attribute that is not :func:`names_list`."""
    return f"attribute arrays = {shown(arrays)} is not a list of array names"


def get_array(group, name: str):
    """The array ``name`` of ``group``, None when it is missing; a :class:`StoreError` naming it when its
    zarr.json cannot be read (zarr's own parse errors of an edited file)."""
    root = getattr(group.store, "root", None)
    if root is not None:
        not_a_file(Path(root) / group.path / name / "zarr.json", f"array {name!r}: its zarr.json")
    try:
        return group.get(name)
    except RecursionError:
        raise StoreError(f"array {name!r}: its zarr.json is nested too deeply to be read; it was edited") from None
    except (TypeError, ValueError, KeyError) as exc:
        raise StoreError(f"array {name!r}: its zarr.json cannot be read ({exc}); it was edited") from None


def _write_every_chunk():
    # zarr skips chunks equal to the fill value unless told otherwise; the
    # setting is not stored with an array, so it is set for the process (it
    # costs only the disk space of chunks of zeros, and makes a missing chunk
    # detectable as damage). Every writer of streamcov imports this module.
    import zarr

    zarr.config.set({"array.write_empty_chunks": True})


_write_every_chunk()


def array_options(compress: bool = True) -> dict:
    """Keyword arguments of ``create_array`` for checksummed arrays whose chunks all exist.

    ``compress``: zstd before the checksum. Frames and pixels compress; the
    float features of a feature store hardly do (3-13% on MSR-Action3D's
    features and on ConvNet hypercolumns) and zstd would cut their read
    speed about 4x (1.0 against 4.2 GB/s on one thread) and their write speed
    about 2.4x, which a learner streaming the store at every pass pays.
    """
    from zarr.codecs import Crc32cCodec, ZstdCodec

    codecs = [ZstdCodec(), Crc32cCodec()] if compress else [Crc32cCodec()]
    return {"compressors": codecs, "config": {"write_empty_chunks": True}}


def remove_partial_chunks(root) -> None:
    """Delete the temporary chunk files (``<chunk>.<uuid>.partial``) that zarr's local store writes and then
    renames: a process killed between the two left them in the store, where they stayed after it was completed.
    Called by a writer that holds the store (its lock, or its run's output lock) before it writes again."""
    for tmp in Path(root).rglob("*.partial"):
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)


def _chunk_path(root: Path, name: str, index: tuple) -> Path:
    return root / name / "c" / Path(*[str(i) for i in index])


def _chunk_indices(array, start: int, stop: int):
    """Chunk grid indices of rows [start, stop) along axis 0 (every chunk along the other axes)."""
    if stop <= start or array.size == 0:
        return []
    c0 = array.chunks[0]
    rest = [range(-(-s // c)) for s, c in zip(array.shape[1:], array.chunks[1:])]
    import itertools

    return [(i, *tail) for i in range(start // c0, (stop - 1) // c0 + 1) for tail in itertools.product(*rest)]


# what to do about a damaged store that was ingested (its data are the user's) and about a cache
# writing an ingested store again: the command's flag, or the Python keyword of ingest / ingest_images
# a complete store is never overwritten (--restart included), nor is a folder whose zarr.json does not read:
# deleting it is the way that works for every damaged store
WRITE_AGAIN = "delete it and write it again (with the `streamcov ingest`, `synth` or `run` that wrote it)"
REWRITE = "check it with `streamcov info --verify {quoted}`, then " + WRITE_AGAIN
RECOMPUTE = "it is a cache of `streamcov run`: delete {root} and run again, which computes it anew"
DAMAGED = "; the store is damaged: "   # between what is wrong and what to do about it


def say_fix(fix: str, root) -> str:
    """:data:`REWRITE` or :data:`RECOMPUTE` for the store at ``root``; the command they suggest names it quoted
    for the shell (a path with a space pasted as it was printed split into two arguments)."""
    return fix.format(root=root, quoted=shlex.quote(str(root)))


def _damage(root, name, index, reason, fix: str = REWRITE) -> StoreError:
    key = "/".join(str(i) for i in index) if index is not None else "?"
    return StoreError(f"{root}: array {name!r}, chunk {key}: {reason}{DAMAGED}" + say_fix(fix, root))


def open_group(path, mode):
    """The zarr group at ``path``; a :class:`StoreError` when there is none."""
    import zarr

    from ..lock import OUTPUT_MARKER

    meta = Path(path) / "zarr.json"
    not_a_file(meta, f"{path}: the store's zarr.json")
    if meta.is_file():   # and its arrays' (zarr lists them all when a store is opened)
        with_arrays = Path(path).iterdir() if Path(path).is_dir() else ()
        for q in with_arrays:
            if q.is_dir():
                not_a_file(q / "zarr.json", f"{path}: array {q.name!r}: its zarr.json")
    if meta.is_file() and _node_type(meta) == "array":
        raise StoreError(f"{path}: an array inside the store {Path(path).parent}, not a store; give the "
                         f"store's folder")
    try:
        return zarr.open_group(str(path), mode=mode)
    except (FileNotFoundError, zarr.errors.GroupNotFoundError) as exc:  # type: ignore[attr-defined]
        p = Path(path)
        if p.is_file() and p.suffix.lower() == ".toml":
            what = "a pipeline file, not a store; `streamcov run` runs it"
        elif p.is_file() and p.name == "zarr.json":
            store = next((q for q in (p.parent, *p.parent.parents) if (q / "zarr.json").is_file()
                          and _node_type(q / "zarr.json") == "group"), p.parent)
            what = f"a metadata file of the store {store}, not a store; give the store's folder"
        elif p.is_file():
            what = ("a file, not a store: a store is a folder; for images, give their folder (`streamcov predict` "
                    "reads a folder of images) or ingest them with `streamcov ingest images --format folders`")
        elif p.exists() and not p.is_dir():   # it was "no zarr store here", as if nothing were there
            what = "a device or a pipe, not a store: a store is a folder"
        elif (p / "model.json").is_file():
            what = "a model folder, not a store; `streamcov predict MODEL STORE` applies the model to a store"
        elif (p / "model" / "model.json").is_file() or (p / OUTPUT_MARKER).is_file() or (p / "result.json").is_file():
            what = _output_folder_words(p, OUTPUT_MARKER)
        elif (p / "results.csv").is_file() and (p / "table.md").is_file():
            what = "the report of `streamcov study` (results.csv, table.md), not a store"
        elif p.is_dir() and any(p.iterdir()):
            what = ("a folder without a zarr store; ingest it first: a skeleton archive with `streamcov ingest "
                    "skeleton --format FORMAT`, images with `streamcov ingest images --format folders` (`streamcov "
                    "predict` also reads a folder of images as it is)")
        else:
            what = (f"no zarr store here ({exc.__class__.__name__}); create one with `streamcov ingest` or "
                    f"`streamcov synth`")
        raise StoreError(f"{path}: {what}") from None
    except RecursionError:   # (a parse of JSON nested thousands deep: zarr's json.loads)
        raise StoreError(f"{path}: the store's zarr.json is nested too deeply to be read (edited); write the "
                         f"store again") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:   # zarr.json unreadable
        raise StoreError(f"{path}: the store's zarr.json is damaged ({exc.__class__.__name__}: "
                         f"{str(exc)[:120]}); write the store again") from None


def not_a_file(meta: Path, what: str) -> None:
    """Refuse a ``zarr.json`` that exists but is not a regular file (a pipe, a device, a folder) before zarr
    opens it: the open of a pipe with no writer blocks zarr's IO thread for ever, and Ctrl-C did not end it."""
    if meta.exists() and not meta.is_file():
        raise StoreError(f"{what} is not a regular file (a pipe, a device or a folder); a store's zarr.json is "
                         f"a JSON file: write the store again")


def _json_object(path: Path) -> dict:
    """The JSON object in ``path``, or {} when there is none (no file, not JSON, not an object)."""
    import json

    try:
        if not Path(path).is_file():   # (a pipe would block the read)
            return {}
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _node_type(meta: Path):
    """The ``node_type`` of a zarr.json (``group``, ``array``), or None when it cannot be read."""
    return _json_object(meta).get("node_type")


def _output_folder_words(p: Path, marker: str) -> str:
    """What an output folder is, for a message refusing it as a store: by the task its marker or result names
    (a study's or a twin GP's output has no features and no model), with the store a classification read."""
    mark, result = _json_object(p / marker), _json_object(p / "result.json")
    task = mark.get("task") or result.get("task")
    store = result.get("store")
    if task in ("skeleton-classification", "image-stream-classification") or (
            task is None and (p / "model" / "model.json").is_file()):
        where = (f"the store it read is {store}" if isinstance(store, str) and store else
                 "the store it read is its pipeline's data.store")
        return (f"the output folder of `streamcov run`{f' (task {task})' if task else ''}, not a store; {where}, "
                f"its features are in features*.zarr, its model in model/ (which `streamcov info` describes)")
    if not mark:   # an earlier version's output
        return "a folder of results (result.json), not a store"
    model = ", its model in model/ (which `streamcov info` describes)" if (p / "model" / "model.json").is_file() else ""
    return f"the output folder of `streamcov run` (task {task}), not a store: its results are in result.json{model}"


def _why(exc: Exception) -> str:
    """A codec failure in words: a checksum mismatch means the bytes changed after they were written."""
    if "checksum" in str(exc).lower():
        return "checksum mismatch (its bytes changed after they were written)"
    return f"unreadable ({exc.__class__.__name__}: {exc})"


def _tail_crc(path: Path) -> int:
    """The checksum the crc32c codec appended to an encoded chunk: its last 4 bytes; -1 (no uint32, so
    never the manifest's) for a file too short to hold one, as a truncated or emptied chunk is."""
    with open(path, "rb") as fh:
        if fh.seek(0, 2) < 4:
            return -1
        fh.seek(-4, 2)
        return int.from_bytes(fh.read(4), "little")


def chunk_checksums(group, root, name: str) -> np.ndarray:
    """The checksum of every chunk of array ``name``, in chunk-grid order (uint32)."""
    array = group[name]
    out = []
    for i in _chunk_indices(array, 0, array.shape[0]):
        path = _chunk_path(Path(root), name, i)
        if not path.is_file():   # deleted while the store was written: named, not a FileNotFoundError traceback
            raise _damage(root, name, i, "the chunk file is missing", WRITE_AGAIN)
        out.append(_tail_crc(path))
    return np.array(out, dtype=np.uint32)


def write_manifest(group, root, names) -> None:
    """Record the checksum of every chunk of ``names`` (array ``manifest`` and its layout attribute), then
    seal the store's metadata (:func:`seal`: the arrays ``names`` and the manifest)."""
    parts = [chunk_checksums(group, root, n) for n in names]
    layout, pos = {}, 0
    for n, p in zip(names, parts):
        layout[n] = [pos, len(p)]
        pos += len(p)
    data = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)
    if "manifest" in group:
        del group["manifest"]
    arr = group.create_array("manifest", shape=data.shape, chunks=(max(1, min(len(data), 1 << 20)),),
                             dtype="uint32", fill_value=0, **array_options())
    if len(data):
        arr[:] = data
    group.attrs["manifest"] = layout
    group.attrs["seal"] = seal(group, root, [*names, "manifest"])


def load_manifest(group, root) -> dict:
    """``array name -> checksums of its chunks`` of a store of format version 3."""
    layout = dict(group.attrs).get("manifest")
    if not isinstance(layout, dict):
        raise StoreError(f"{root}: the manifest of chunk checksums is missing; the store is damaged: "
                         f"{WRITE_AGAIN}")
    data = read(group, root, "manifest")
    return {n: data[int(a):int(a) + int(c)] for n, (a, c) in layout.items()}


def expected_checksums(checksums: np.ndarray, array, start: int, stop: int) -> np.ndarray:
    """The manifest's checksums of the chunks that rows [start, stop) of ``array`` cover."""
    if stop <= start or array.size == 0:
        return checksums[:0]
    c0 = array.chunks[0]
    per_row = int(np.prod([-(-s // c) for s, c in zip(array.shape[1:], array.chunks[1:])], dtype=np.int64))
    return checksums[(start // c0) * per_row:((stop - 1) // c0 + 1) * per_row]


def layout_mismatch(group, attrs: dict) -> str | None:
    """What in a store's ``zarr.json`` contradicts its arrays, or None: an array the ``arrays`` attribute does
    not list, or a ``format_version`` below the format its arrays were written in (an edit that would turn
    checks off: a manifest of checksums is format 3, per-chunk checksums format 2)."""
    try:
        present = {name: a for name, a in group.arrays()}
    except Exception:   # an array's own zarr.json is unreadable: the array checks name it
        return None
    listed = attrs.get("arrays")
    if isinstance(listed, list):
        unlisted = sorted(set(present) - set(listed) - {"manifest"})
        if unlisted:
            return f"array {unlisted[0]!r} is not listed in the store's arrays attribute (zarr.json edited)"
    version = attrs.get("format_version", 1)
    if isinstance(version, int) and version < 4 and "seal" in attrs:
        return (f"format_version = {version} but the store is sealed as format 4 seals it (zarr.json edited)")
    if isinstance(version, int) and version < 3 and "manifest" in present:
        return (f"format_version = {version} but the store holds the manifest of chunk checksums that format 3 "
                f"writes (zarr.json edited)")
    if isinstance(version, int) and version < 2 and any(
            type(c).__name__ == "Crc32cCodec" for a in present.values() for c in a.compressors):
        return (f"format_version = {version} but its arrays carry the per-chunk checksums of format 2 and later "
                f"(zarr.json edited)")
    return None


def _foreign_or_corrupt(array, index) -> str:
    """Why a chunk differs from the manifest: its bytes changed, or it is whole but another store's."""
    c0 = array.chunks[0]
    try:
        array[index[0] * c0:min((index[0] + 1) * c0, array.shape[0])]
    except Exception as exc:
        return _why(exc)
    return ("not the chunk this store wrote (it is whole, but its checksum differs from the store's "
            "manifest: copied from another store?)")


def read(group, root, name: str, start: int | None = None, stop: int | None = None,
         checked=True, fix: str = REWRITE) -> np.ndarray:
    """Rows [start, stop) of array ``name`` of a store at ``root``, refusing missing or corrupt chunks.

    ``checked``: ``True`` checks that the chunks exist and decode with their
    checksum; an array of the manifest's checksums of the chunks covered
    (:func:`expected_checksums`) also checks that each chunk is the one the
    store wrote; ``False`` (stores written before checksums and complete
    chunks) reads as zarr does. ``fix``: what the error tells the user to do
    (:data:`REWRITE` for an ingested store, :data:`RECOMPUTE` for a cache).
    """
    try:
        array = group[name]
    except KeyError:
        raise StoreError(f"{root}: array {name!r} is missing{DAMAGED}" + say_fix(fix, root)) from None
    start = 0 if start is None else int(start)
    stop = array.shape[0] if stop is None else int(stop)
    manifest = checked if isinstance(checked, np.ndarray) else None
    checked = manifest is not None or bool(checked)
    if checked:
        root = Path(root)
        indices = _chunk_indices(array, start, stop)
        for k, index in enumerate(indices):
            path = _chunk_path(root, name, index)
            if not path.is_file():
                raise _damage(root, name, index, "the chunk file is missing", fix)
            if manifest is not None and (k >= len(manifest) or _tail_crc(path) != manifest[k]):
                raise _damage(root, name, index, _foreign_or_corrupt(array, index), fix)
    try:
        return np.asarray(array[start:stop])
    except Exception as exc:   # a codec failure (checksum, truncated zstd frame): find the chunk
        if not checked:
            raise
        for index in _chunk_indices(array, start, stop):
            try:
                c0 = array.chunks[0]
                array[index[0] * c0:min((index[0] + 1) * c0, array.shape[0])]
            except Exception as inner:
                raise _damage(root, name, index, _why(inner), fix) from None
        raise _damage(root, name, None, _why(exc), fix) from None


def ids_problem(off: np.ndarray, raw: np.ndarray, n: int) -> str | None:
    """What is wrong with the ids of a store of ``n`` items (``id_offsets`` ``off``, ``id_bytes`` ``raw``), or
    None: offsets that are not ``n + 1`` positions non-decreasing from 0 to the end of the bytes (an edited
    store gave ids cut from the wrong bytes, or empty, to `predict`'s CSV), or an id that is not UTF-8."""
    off = np.asarray(off, dtype=np.int64)
    raw = np.asarray(raw, dtype=np.uint8)
    if len(off) != n + 1:
        return f"array 'id_offsets' has {len(off)} rows for {n} items (expected {n + 1})"
    if off[0] != 0 or (np.diff(off) < 0).any() or off[-1] != len(raw):
        return (f"array 'id_offsets' is not non-decreasing from 0 to the {len(raw)} bytes of array 'id_bytes' "
                f"(ids cut from the wrong bytes)")
    try:
        raw.tobytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        i = int(np.searchsorted(off, exc.start, side="right")) - 1
        return f"the id of item {i} (bytes {off[i]}..{off[i + 1]} of array 'id_bytes') is not UTF-8"
    starts = off[:-1][off[:-1] < len(raw)]
    inside = starts[(raw[starts] & 0xC0) == 0x80]   # an id that begins inside a character of the one before
    if len(inside):
        i = int(np.searchsorted(off, inside[0], side="right")) - 1
        return f"the id of item {i} (bytes {off[i]}..{off[i + 1]} of array 'id_bytes') is not UTF-8"
    return None


def rows_problem(group, root, name: str, start: int, stop: int) -> str | None:
    """What keeps rows [start, stop) of array ``name`` from reading as written (``array 'x', chunk i: the chunk
    file is missing``), or None: for a list of a store's problems, without the store's path and the remedy."""
    try:
        read(group, root, name, start, stop, checked=True, fix="")
    except StoreError as exc:
        return str(exc).removeprefix(f"{root}: ").split(DAMAGED)[0]
    return None


def check_rows(group, root, name: str, stop: int, fix: str = REWRITE) -> None:
    """Rows [0, stop) of array ``name`` exist and decode with their checksums, read one chunk at a time (a
    :class:`StoreError` naming the array and chunk otherwise): zarr reads a missing chunk as its fill value, so
    a store resumed over one was completed with zeros in place of what it had committed."""
    array = get_array(group, name)
    if array is None:
        raise StoreError(f"{root}: array {name!r} is missing{DAMAGED}" + say_fix(fix, root))
    c0 = int(array.chunks[0])
    for a in range(0, int(stop), c0):
        read(group, root, name, a, min(a + c0, int(stop)), checked=True, fix=fix)


def verify(path) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of the store at ``path``: missing arrays or chunks, chunks failing their checksum.

    ``notes`` says what could not be checked (stores written before
    per-chunk checksums, where a missing chunk reads as zeros). The seal of the
    metadata (format 4) is checked by opening the store, after the checks of
    what its attributes and arrays hold, which name an edit more precisely.
    """
    path = Path(path)
    g = open_group(path, "r")
    attrs = dict(g.attrs)
    problems, notes = [], []
    expected = attrs.get("arrays")
    if expected is not None and not names_list(expected):
        problems.append(arrays_problem(expected))
        expected = None   # (a string was checked letter by letter)
    names = expected if expected is not None else sorted(k for k, _ in g.arrays())
    version = attrs.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        return [f"attribute format_version = {version!r} is not a format version (an integer); zarr.json was "
                f"edited"], notes
    mismatch = layout_mismatch(g, attrs)
    if mismatch is not None:
        problems.append(mismatch)
    checked = version >= 2
    if not checked:
        notes.append("written before per-chunk checksums (format version 1): chunks are decoded, but a "
                     "missing chunk reads as zeros and cannot be told apart")
    manifest = None
    if version >= 3 and attrs.get("complete") is True:
        try:
            manifest = load_manifest(g, path)
        except StoreError as exc:
            problems.append(str(exc).removeprefix(f"{path}: "))
    elif version == 2:
        notes.append("written before the manifest of chunk checksums (format version 2): a chunk copied "
                     "from another store cannot be told apart")
    if version in (2, 3):
        notes.append(f"written before the seal of its metadata (format version {version}): an edited byte order, "
                     f"data type or attribute that the other checks do not refuse cannot be told apart")
    for name in names:
        try:
            array = get_array(g, name)
        except StoreError as exc:
            problems.append(str(exc))
            continue
        if array is None:
            problems.append(f"array {name!r} is missing")
            continue
        if checked and not any(type(c).__name__ == "Crc32cCodec" for c in array.compressors):
            problems.append(f"array {name!r}: its checksum codec was removed from its zarr.json")
        c0 = array.chunks[0]
        sums = None if manifest is None else manifest.get(name)
        if manifest is not None and sums is None:
            problems.append(f"array {name!r} is not in the manifest of chunk checksums")
        for k, index in enumerate(_chunk_indices(array, 0, array.shape[0])):
            key = "/".join(map(str, index))
            if checked and not _chunk_path(path, name, index).is_file():
                problems.append(f"array {name!r}, chunk {key}: the chunk file is missing")
                continue
            if sums is not None and (k >= len(sums) or _tail_crc(_chunk_path(path, name, index)) != sums[k]):
                problems.append(f"array {name!r}, chunk {key}: {_foreign_or_corrupt(array, index)}")
                continue
            try:
                array[index[0] * c0:min((index[0] + 1) * c0, array.shape[0])]
            except Exception as exc:
                problems.append(f"array {name!r}, chunk {key}: {_why(exc)}")
    if not problems and {"offsets", "id_offsets", "id_bytes"} <= set(names):
        try:
            why = ids_problem(g["id_offsets"][:], g["id_bytes"][:], g["offsets"].shape[0] - 1)
        except Exception as exc:   # (every chunk read above: not expected)
            why = f"the ids cannot be read ({exc.__class__.__name__}: {exc})"
        if why is not None:
            problems.append(why)
    return problems, notes
