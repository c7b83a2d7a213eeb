"""Chunked feature arrays on disk, one chunk per Dask block, completion per block."""
from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np

from ..errors import ConfigError, StoreError, say_note


# layout of the store, part of what a store must match to be reused: 2 added the per-block checksums ``crc``,
# 3 the digests of the arrays' zarr.json (stores of an earlier layout are computed again)
LAYOUT = 3
ARRAYS = ("X", "crc", "done")


def _other_code_only(old, new: str) -> bool:
    """Whether the fingerprint ``old`` (a store's, as written) differs from ``new`` by the code that computed it
    alone (:func:`streamcov._config.code_identity`)."""
    try:
        a, b = json.loads(old), json.loads(new)
    except (TypeError, ValueError):
        return False
    return isinstance(a, dict) and "code" in a and a.get("code") != b.get("code") and \
        {k: v for k, v in a.items() if k != "code"} == {k: v for k, v in b.items() if k != "code"}


class FeatureStore:
    """A zarr group with ``X`` (n, D), chunks aligned with the blocks, ``crc`` and ``done`` (n_blocks,).

    Each block task writes its rows, records the checksum of the chunk it
    wrote in its own element of ``crc`` and then sets its own element of
    ``done`` (a chunk of its own, so concurrent writers never share a
    chunk); every array is checksummed. A restarted featurization skips the
    blocks already done whose chunk is still the one written
    (:meth:`done_blocks`): a chunk copied in from another feature store is
    whole, and only the recorded checksum tells it apart. The
    ``fingerprint`` attribute ties the features to everything that produced
    them (the input store's identity, the descriptor, the map, the seed, the
    training rows of any data-dependent fit); a store with another
    fingerprint is discarded, never reused. What was fitted on data (the
    source's state, the feature map) is kept in the store (:meth:`save_fit`),
    so a restart featurizes the remaining blocks with the very same map.
    """

    def __init__(self, path):
        import zarr

        self.path = Path(path)
        self.group = zarr.open_group(str(self.path), mode="r+")
        self.bounds = np.asarray(self.group.attrs["bounds"], dtype=np.int64)

    @classmethod
    def open_or_create(cls, path, n: int, dim: int, bounds: np.ndarray, dtype: str,
                       fingerprint: dict) -> "FeatureStore":
        import zarr

        from ..data import integrity

        path = Path(path)
        fp = json.dumps({**fingerprint, "layout": LAYOUT}, sort_keys=True, default=str)
        if path.exists():
            try:
                attrs = dict(zarr.open_group(str(path), mode="r").attrs)
            except Exception:  # unreadable leftovers of an interrupted creation: rebuild
                attrs = {}
            if attrs.get("fingerprint") == fp:
                _check_sealed(path, attrs.get("seal"))
                from ..data.integrity import remove_partial_chunks

                remove_partial_chunks(path)   # of a block task killed mid-write (the run's lock is held)
                return cls(path)
            if _other_code_only(attrs.get("fingerprint"), fp):   # computed again, and said why (it was silent)
                say_note(f"{path}: these features were computed by other code (streamcov's descriptor or feature "
                         f"modules, or numpy, numba, scipy or scikit-learn, have changed since); they are computed "
                         f"again")
            shutil.rmtree(path)
        from ..data.integrity import array_options

        block = int(bounds[1] - bounds[0]) if len(bounds) > 1 else max(n, 1)
        g = zarr.open_group(str(path), mode="w")
        # checksummed X, not compressed (features hardly compress; see array_options); the checksums and
        # done flags are written as blocks finish (a missing one reads 0: not done)
        g.create_array("X", shape=(n, dim), chunks=(max(block, 1), dim), dtype=dtype, fill_value=0,
                       **array_options(compress=False))
        for name, dt in (("crc", "uint64"), ("done", "uint8")):
            g.create_array(name, shape=(len(bounds) - 1,), chunks=(1,), dtype=dt, fill_value=0,
                           compressors=array_options(compress=False)["compressors"])
        g.attrs.update({"bounds": [int(b) for b in bounds], "fingerprint": fp,
                        "seal": {n: integrity.metadata_sha256(path, n) for n in ARRAYS}})
        return cls(path)

    @property
    def n_blocks(self) -> int:
        return len(self.bounds) - 1

    @property
    def dim(self) -> int:
        return self._layout[0]

    @property
    def dtype(self) -> np.dtype:
        return self._layout[1]

    @functools.cached_property
    def _layout(self) -> tuple:
        # X's width and dtype never change once it is created; a zarr lookup costs about half a millisecond
        X = self.group["X"]
        return int(X.shape[1]), np.dtype(X.dtype)

    def done(self) -> np.ndarray:
        """Which blocks are written: their flag is set. A flag or checksum whose chunk does not decode (a
        damaged one) counts as not done, so that block is computed again."""
        return self._flags()[0]

    def _flags(self):
        """``(done, crc, damaged)``: per block, undecodable entries as 0 and listed in ``damaged`` (each read
        alone only when the whole read fails); ``crc`` holds each chunk's checksum plus one (0: none recorded)."""
        out, damaged = [], set()
        for name in ("done", "crc"):
            a = self.group[name]
            try:
                out.append(np.asarray(a[:]))
            except Exception:   # a damaged chunk (its checksum): read the others one by one
                v = np.zeros(a.shape, dtype=a.dtype)
                for i in range(a.shape[0]):
                    try:
                        v[i] = a[i]
                    except Exception:
                        damaged.add(i)
                out.append(v)
        return out[0].astype(bool) & (out[1] != 0), out[1], sorted(damaged)

    def done_blocks(self) -> tuple[np.ndarray, list]:
        """``(done, redo)``: the blocks whose flag is set and whose chunk of ``X`` still ends with the
        checksum recorded when it was written; ``redo`` lists the blocks that do not count as done for a
        reason to tell: a chunk of ``X`` that is not the one written (copied in from another store, or
        damaged), or a flag or checksum that does not decode."""
        from ..data.integrity import _chunk_path, _tail_crc

        done, crc, redo = self._flags()
        for i in np.flatnonzero(done):
            path = _chunk_path(self.path, "X", (int(i), 0))
            if not path.is_file() or _tail_crc(path) != int(crc[i]) - 1:
                redo.append(int(i))
                done[i] = False
        return done, sorted(set(redo))

    def read_block(self, i: int, buf: np.ndarray | None = None) -> np.ndarray:
        """The rows of block ``i``: an array of their own, or, given ``buf`` (:meth:`block_buffer`), read into
        it where :meth:`read_block_into` can (a view the next read into ``buf`` overwrites)."""
        if buf is None:
            buf = self.block_buffer()
        X = None if buf is None else self.read_block_into(i, buf)
        return self.read_blocks(i, i + 1) if X is None else X   # zarr reads it, or names what is wrong

    # X's chunk encoding that :meth:`read_block_into` reads itself: raw little-endian rows, then their CRC32C
    RAW_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]

    @functools.cached_property
    def _raw_layout(self):
        """``(chunk_rows, row_bytes)`` when every chunk of ``X`` is a file of raw rows and their CRC32C (the
        encoding :meth:`open_or_create` gives, on a little-endian machine, in a local folder), else None."""
        import sys

        if sys.byteorder != "little":
            return None
        try:
            meta = self.group["X"].metadata.to_dict()
            grid = meta["chunk_grid"]
            rows, width = grid["configuration"]["chunk_shape"]
            ok = (list(meta["codecs"]) == self.RAW_CODECS and grid["name"] == "regular" and width == self.dim
                  and meta["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}
                  and not meta.get("storage_transformers") and (self.path / "X" / "zarr.json").is_file())
        except Exception:   # another zarr layout, or metadata this zarr names otherwise: zarr reads it
            return None
        return (int(rows), int(width) * self.dtype.itemsize) if ok else None

    def block_buffer(self):
        """A buffer for :meth:`read_block_into` (one chunk file), or None where zarr must read the chunks."""
        layout = self._raw_layout
        return None if layout is None else np.empty(layout[0] * layout[1] + 4, dtype=np.uint8)

    def read_block_into(self, i: int, buf: np.ndarray):
        """The rows of block ``i`` read straight from its chunk file into ``buf`` (:meth:`block_buffer`), as a
        view of it that the next read into ``buf`` overwrites; None when the chunk is not as this store
        writes it (missing, of another size, failing its checksum, not aligned with the block): then
        :meth:`read_blocks` reads it, or names what is wrong.

        Why: through zarr a block costs about 2 ms of Python and event-loop work and a fresh buffer per
        read; the L-BFGS learner's streamed passes read every training block at every pass (one pass over
        50,000 training rows of 2000 float32 features: 0.89 s through zarr, 0.31 s so;
        ``benchmarks/store_read.py``). The same bytes either way: zarr decodes this encoding by checking
        the same CRC32C and viewing the same bytes as rows.
        """
        import google_crc32c

        from ..data.integrity import _chunk_path

        rows, row_bytes = self._raw_layout
        size = rows * row_bytes
        if buf.dtype != np.uint8 or buf.ndim != 1 or buf.nbytes < size + 4:
            raise ValueError(f"buf: a 1-d uint8 buffer of at least {size + 4} bytes (block_buffer()), got "
                             f"{buf.dtype} of shape {buf.shape}")
        lo, hi = int(self.bounds[i]), int(self.bounds[i + 1])
        if lo != i * rows or hi - lo > rows:
            return None
        view = memoryview(buf)[:size + 4]
        try:
            with open(_chunk_path(self.path, "X", (i, 0)), "rb", buffering=0) as fh:
                got = 0
                while got < size + 4:
                    n = fh.readinto(view[got:])
                    if not n:
                        return None      # short: truncated
                    got += n
                if fh.read(1):
                    return None          # long: not this layout's chunk
        except OSError:
            return None
        if google_crc32c.value(buf[:size]) != int.from_bytes(view[size:], "little"):
            return None
        width = row_bytes // self.dtype.itemsize
        return np.frombuffer(buf, dtype=self.dtype, count=(hi - lo) * width).reshape(hi - lo, width)

    def read_blocks(self, i: int, j: int) -> np.ndarray:
        """The rows of blocks ``i`` to ``j - 1`` in one read: zarr decodes their chunks concurrently
        (about twice as fast as one :meth:`read_block` after another on two cores)."""
        from ..data import integrity

        return integrity.read(self.group, self.path, "X", self.bounds[i], self.bounds[j], fix=integrity.RECOMPUTE)

    # -- what was fitted on data -------------------------------------------
    def save_fit(self, state: dict, fmap, record: dict | None = None, reference=None) -> None:
        """Keep the source's fitted state and the fitted map (arrays as zarr arrays, no pickle).

        ``reference``: a function giving the same map fitted without data (from its seed); only the
        arrays that differ from it (a centred map's mean row, Nystroem's landmarks) are stored, the
        rest is drawn again from the seed on reuse. A map that names its data-dependent arrays
        (:func:`streamcov.features.registry.data_arrays`) is not compared, so ``reference`` is not
        called: a second map of ``n_components x n_features`` projections would double the fit's memory.
        ``record``: what the map's fit measured (e.g. a median distance).
        """
        from ..data.integrity import json_sha256, array_options, arrays_sha256, metadata_sha256
        from ..features.registry import data_arrays
        from .model import dump_estimator

        arrays: dict = {}
        desc = None if fmap is None else dump_estimator(fmap, "map.", arrays)
        if reference is not None:
            keep = data_arrays(fmap, "map.")
            if keep is None:
                ref: dict = {}
                dump_estimator(reference(), "map.", ref)
                keep = {k for k, a in arrays.items() if k not in ref or not _same_bytes(ref[k], a)}
                del ref
            arrays = {k: a for k, a in arrays.items() if k in keep}
        for name, a in arrays.items():
            # checksummed like X: a damaged fit is found on reuse, not fed to the model
            self.group.create_array(f"fit/{name}", data=np.ascontiguousarray(a).reshape(a.shape or (1,)),
                                    overwrite=True, **array_options(compress=False))
        # the record comes last: without it the fit is redone. Its digest and the arrays' contents' make an edited
        # record (a sigma, a feature scale) or fit arrays copied from another store (each chunk whole, with its own
        # checksum) a damaged fit, not one reused under features and a model it did not make
        rec = {"state": state, "map": desc, "record": record or {}, "stored": sorted(arrays),
               "shapes": {k: list(a.shape) for k, a in arrays.items()},
               "seal": {f"fit/{k}": metadata_sha256(self.path, f"fit/{k}") for k in arrays},
               "arrays_sha256": arrays_sha256(arrays)}
        rec = json.loads(json.dumps(rec))   # as the attribute reads back (tuples as lists)
        self.group.attrs["fit"] = {**rec, "digest": json_sha256(rec)}

    def fit_record(self) -> dict | None:
        """The fit record :meth:`save_fit` wrote, checked against its digest (a :class:`StoreError` when it was
        edited: nothing is built from it before), or None when there is none."""
        from ..data import integrity

        rec = self.group.attrs.get("fit")
        if rec is None:
            return None
        rec = dict(rec)
        if rec.get("digest") != integrity.json_sha256({k: v for k, v in rec.items() if k != "digest"}):
            raise StoreError(f"{self.path}: its fit record (the source's state, the map and what its fit "
                             f"measured) is not as it was written (edited, or written by an earlier streamcov)"
                             f"{integrity.DAMAGED}" + integrity.say_fix(integrity.RECOMPUTE, self.path))
        return rec

    def load_fit(self, reference=None):
        """``(state, map, record)`` saved by :meth:`save_fit` (with the same ``reference`` map, here the
        map itself), or None. The map shares the arrays of ``reference`` that were not stored.

        Raises :class:`~streamcov.errors.StoreError` when a fitted array is damaged.
        """
        from ..data import integrity
        from .model import dump_estimator, load_estimator

        rec = self.fit_record()
        if rec is None:
            return None
        fmap = None
        if rec["map"] is not None:
            arrays: dict = {}
            if reference is not None:
                dump_estimator(reference, "map.", arrays)
            _check_sealed(self.path, rec.get("seal"))
            stored = {}
            for name in rec["stored"]:
                a = integrity.read(self.group, self.path, f"fit/{name}", fix=integrity.RECOMPUTE)
                stored[name] = a.reshape(rec["shapes"][name])
            if integrity.arrays_sha256(stored) != rec.get("arrays_sha256"):
                raise StoreError(f"{self.path}: its fitted arrays are not the ones this store wrote (copied from "
                                 f"another store?){integrity.DAMAGED}"
                                 + integrity.say_fix(integrity.RECOMPUTE, self.path))
            arrays.update(stored)
            fmap = load_estimator(rec["map"], arrays, copy=False)
        return rec["state"], fmap, rec.get("record", {})


def _check_sealed(path: Path, recorded) -> None:
    """Raise :class:`StoreError` (a cache to compute again) when an array's ``zarr.json`` is not the one
    ``recorded`` (``name -> metadata_sha256``) when it was written: a byte order or data type edited there
    reads the same chunk bytes as other numbers, which no chunk checksum sees."""
    from ..data import integrity

    why = (integrity.metadata_mismatch(path, recorded, "the feature store") if isinstance(recorded, dict)
           else "its seal (the digests of its arrays' zarr.json) is missing (zarr.json edited)")
    if why is not None:
        raise StoreError(f"{path}: {why}{integrity.DAMAGED}" + integrity.say_fix(integrity.RECOMPUTE, path))


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are the same bytes (shape and dtype too), compared without copying them."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a8 = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    b8 = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    step = 1 << 22   # the comparison's boolean array: 4 MB at a time, not one byte per byte of the map
    return all(np.array_equal(a8[i:i + step], b8[i:i + step]) for i in range(0, len(a8), step))


def write_block(path: str, i: int, b0: int, b1: int, X: np.ndarray) -> int:
    """Write block i's rows, then mark it done. Runs inside a Dask task."""
    import zarr

    from ..data.integrity import _chunk_path, _tail_crc

    if not np.isfinite(X).all():
        r = int(np.argwhere(~np.isfinite(X))[0][0])
        # a user's settings (a tiny bandwidth, a high degree) or data (huge coordinates): one line, exit 2
        raise ConfigError(f"non-finite feature in row {b0 + r}: the feature map overflowed (raise features.sigma "
                          f"or lower features.max_degree); nothing of the block was written")
    g = zarr.open_group(path, mode="r+")
    g["X"][b0:b1] = X
    # the checksum the chunk was written with, plus one (0 is "none recorded"): a chunk swapped in later is
    # told apart by it
    g["crc"][i] = _tail_crc(_chunk_path(Path(path), "X", (i, 0))) + 1
    g["done"][i] = 1
    return b1 - b0
