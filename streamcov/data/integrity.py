"""Integrity of zarr arrays: every chunk written, every chunk checksummed, damage named.

Arrays written by streamcov (format version 2 and later) carry a crc32c
checksum per chunk (zarr v3's ``crc32c`` codec, after compression) and are
written with ``write_empty_chunks``, so that every chunk of an array exists
on disk. A missing chunk is therefore damage, not zeros: reads through
:func:`read` check that the chunk files they cover exist and turn a
checksum or decompression failure into a :class:`~streamcov.errors.StoreError`
naming the array and the chunk. :func:`verify` reads every chunk of every
array (``streamcov info --verify``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import StoreError

FORMAT_VERSION = 2   # stores with checksums and every chunk written


def _write_every_chunk():
    # zarr skips chunks equal to the fill value unless told otherwise; the
    # setting is not stored with an array, so it is set for the process (it
    # costs only the disk space of chunks of zeros, and makes a missing chunk
    # detectable as damage). Every writer of streamcov imports this module.
    import zarr

    zarr.config.set({"array.write_empty_chunks": True})


_write_every_chunk()


def array_options() -> dict:
    """Keyword arguments of ``create_array`` for checksummed arrays whose chunks all exist."""
    from zarr.codecs import Crc32cCodec, ZstdCodec

    return {"compressors": [ZstdCodec(), Crc32cCodec()], "config": {"write_empty_chunks": True}}


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


def _damage(root, name, index, reason) -> StoreError:
    key = "/".join(str(i) for i in index) if index is not None else "?"
    return StoreError(f"{root}: array {name!r}, chunk {key}: {reason}; the store is damaged: check it with "
                      f"`streamcov info --verify {root}` and write it again (ingest with --restart)")


def open_group(path, mode):
    """The zarr group at ``path``; a :class:`StoreError` when there is none."""
    import zarr

    try:
        return zarr.open_group(str(path), mode=mode)
    except (FileNotFoundError, zarr.errors.GroupNotFoundError) as exc:  # type: ignore[attr-defined]
        raise StoreError(f"{path}: no zarr store here ({exc.__class__.__name__}); "
                         f"create one with `streamcov ingest` or `streamcov synth`") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:   # zarr.json unreadable
        raise StoreError(f"{path}: the store's zarr.json is damaged ({exc.__class__.__name__}: "
                         f"{str(exc)[:120]}); write the store again") from None


def _why(exc: Exception) -> str:
    """A codec failure in words: a checksum mismatch means the bytes changed after they were written."""
    if "checksum" in str(exc).lower():
        return "checksum mismatch (its bytes changed after they were written)"
    return f"unreadable ({exc.__class__.__name__}: {exc})"


def read(group, root, name: str, start: int | None = None, stop: int | None = None,
         checked: bool = True) -> np.ndarray:
    """Rows [start, stop) of array ``name`` of a store at ``root``, refusing missing or corrupt chunks.

    ``checked=False`` (stores written before checksums and complete chunks)
    reads as zarr does.
    """
    try:
        array = group[name]
    except KeyError:
        raise StoreError(f"{root}: array {name!r} is missing; the store is damaged: write it again "
                         f"(ingest with --restart)") from None
    start = 0 if start is None else int(start)
    stop = array.shape[0] if stop is None else int(stop)
    if checked:
        root = Path(root)
        for index in _chunk_indices(array, start, stop):
            if not _chunk_path(root, name, index).is_file():
                raise _damage(root, name, index, "the chunk file is missing")
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
                raise _damage(root, name, index, _why(inner)) from None
        raise _damage(root, name, None, _why(exc)) from None


def verify(path) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of the store at ``path``: missing arrays or chunks, chunks failing their checksum.

    ``notes`` says what could not be checked (stores written before
    per-chunk checksums, where a missing chunk reads as zeros).
    """
    path = Path(path)
    g = open_group(path, "r")
    attrs = dict(g.attrs)
    problems, notes = [], []
    expected = attrs.get("arrays")
    names = expected if expected is not None else sorted(k for k, _ in g.arrays())
    checked = int(attrs.get("format_version", 1)) >= FORMAT_VERSION
    if not checked:
        notes.append("written before per-chunk checksums (format version 1): chunks are decoded, but a "
                     "missing chunk reads as zeros and cannot be told apart")
    for name in names:
        try:
            array = g[name]
        except KeyError:
            problems.append(f"array {name!r} is missing")
            continue
        c0 = array.chunks[0]
        for index in _chunk_indices(array, 0, array.shape[0]):
            key = "/".join(map(str, index))
            if checked and not _chunk_path(path, name, index).is_file():
                problems.append(f"array {name!r}, chunk {key}: the chunk file is missing")
                continue
            try:
                array[index[0] * c0:min((index[0] + 1) * c0, array.shape[0])]
            except Exception as exc:
                problems.append(f"array {name!r}, chunk {key}: {_why(exc)}")
    return problems, notes
