"""Zarr (v3) store for labelled images of any size, written resumably.

Layout of a store (a zarr group)::

    pixels      (total,) uint8 | uint16 | float32, flat, chunked
    offsets     (n + 1,) int64     image i is pixels[offsets[i]:offsets[i+1]]
    shapes      (n, 3) int32       (height, width, channels) of image i, channels 1 or 3
    labels      (n,) int32         codes into attrs["label_names"]
    groups      (n,) int32         codes into attrs["group_names"] (e.g. object instance)
    split       (n,) int8          codes into attrs["split_names"]; -1 = none
    id_bytes, id_offsets           UTF-8 ids (paths relative to the source folder)

Conventions follow :mod:`streamcov.store`: integer codes with names in the
attributes (zarr v3 has no stable string dtype), an ``attrs["committed"]``
count moved only after the arrays it covers are written, and the completion
marker ``attrs["complete"] = True`` written last. An interrupted ingestion
leaves an incomplete store that :func:`open_image_store` refuses and that
the same :func:`ingest_images` call resumes after the last committed image.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ..store import (StoreError, _append_ids, _jsonable, _names, _open_group,
                     _ready, open_complete)
from .io import ImageSet, read_image, scan_folders

FORMAT_NAME = "streamcov.images"
FORMAT_VERSION = 1
DEFAULT_CHUNK_PIXELS = 1 << 20
_META_CHUNK = 65536
PIXEL_DTYPES = ("uint8", "uint16", "float32")


def _convert(image: np.ndarray, dtype: str, where: str) -> np.ndarray:
    """Image pixels in the store's dtype; refuses conversions that lose bit depth."""
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[2] == 4:
        a = a[:, :, :3]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (1, 3)) or 0 in a.shape[:2]:
        raise ValueError(f"{where}: expected a grey (h, w) or RGB (h, w, 3) image, got shape {a.shape}")
    if dtype == "float32":
        from .features import as_float_image
        return as_float_image(a, where).astype(np.float32)
    if a.dtype == np.uint8:
        return a if dtype == "uint8" else a.astype(np.uint16) * 257
    if a.dtype == np.uint16:
        if dtype == "uint16":
            return a
        raise ValueError(f"{where}: 16-bit image but the store holds uint8 pixels; ingest with "
                         f"pixel_dtype='uint16' (or 'float32')")
    raise ValueError(f"{where}: pixel dtype {a.dtype} cannot be stored as {dtype}; ingest with "
                     f"pixel_dtype='float32'")


class ImageStore:
    """Read access to a complete image store."""

    def __init__(self, path):
        self.path = Path(path)
        g, attrs = open_complete(self.path, FORMAT_NAME, "image", "images")
        self.group = g
        self.attrs = attrs
        self.offsets = np.asarray(g["offsets"][:], dtype=np.int64)
        self.shapes = np.asarray(g["shapes"][:], dtype=np.int64).reshape(-1, 3)
        self.labels = np.asarray(g["labels"][:], dtype=np.int32)
        self.groups = np.asarray(g["groups"][:], dtype=np.int32)
        self.split = np.asarray(g["split"][:], dtype=np.int8)

    @property
    def label_names(self) -> list[str]:
        return list(self.attrs["label_names"])

    @property
    def group_names(self) -> list[str]:
        return list(self.attrs["group_names"])

    @property
    def split_names(self) -> list[str]:
        return list(self.attrs.get("split_names", []))

    def __len__(self):
        return len(self.offsets) - 1

    def ids(self) -> list[str]:
        raw = np.asarray(self.group["id_bytes"][:], dtype=np.uint8).tobytes()
        off = np.asarray(self.group["id_offsets"][:], dtype=np.int64)
        return [raw[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]

    def image(self, i: int) -> np.ndarray:
        """Image i as stored: (h, w) grey or (h, w, 3) RGB."""
        if not 0 <= i < len(self):
            raise IndexError(f"image {i} out of range 0..{len(self) - 1}")
        flat = np.asarray(self.group["pixels"][self.offsets[i]:self.offsets[i + 1]])
        h, w, c = self.shapes[i]
        return flat.reshape(h, w) if c == 1 else flat.reshape(h, w, c)

    def images(self) -> list[np.ndarray]:
        flat = np.asarray(self.group["pixels"][:])
        out = []
        for i in range(len(self)):
            h, w, c = self.shapes[i]
            a = flat[self.offsets[i]:self.offsets[i + 1]]
            out.append(a.reshape(h, w) if c == 1 else a.reshape(h, w, c))
        return out

    def to_image_set(self) -> ImageSet:
        split = self.split if (self.split >= 0).any() else None
        return ImageSet(images=self.images(), labels=self.labels.copy(), label_names=self.label_names,
                        groups=self.groups.copy(), group_names=self.group_names, ids=self.ids(),
                        split=split, split_names=self.split_names, source=self.attrs.get("source", ""))

    def __repr__(self):
        return f"ImageStore({str(self.path)!r}, images={len(self)}, classes={len(self.label_names)})"


def open_image_store(path) -> ImageStore:
    """Open a complete image store; raises :class:`IncompleteStoreError` otherwise."""
    return ImageStore(path)


class ImageStoreWriter:
    """Append images one by one; pixels are flushed in whole chunks, resumable.

    Parameters
    ----------
    path : str or Path
    source : str
        Where the images come from (recorded; a resumed run must name the same).
    pixel_dtype : {"uint8", "uint16", "float32"}
    chunk_pixels : int
        Pixel values per chunk of ``pixels``; memory held is about one chunk.
    mode : {"create", "resume", "restart"}
        As :class:`streamcov.store.SequenceStoreWriter`.
    """

    def __init__(self, path, source: str, pixel_dtype: str = "uint8",
                 chunk_pixels: int = DEFAULT_CHUNK_PIXELS, mode: str = "resume"):
        if mode not in ("create", "resume", "restart"):
            raise ValueError(f"mode must be create, resume or restart, got {mode!r}")
        if pixel_dtype not in PIXEL_DTYPES:
            raise ValueError(f"pixel_dtype must be one of {PIXEL_DTYPES}, got {pixel_dtype!r}")
        if int(chunk_pixels) != chunk_pixels or chunk_pixels < 1:
            raise ValueError(f"chunk_pixels must be a positive integer, got {chunk_pixels!r}")
        self.path = Path(path)
        self.source = str(source)
        self.pixel_dtype = pixel_dtype
        self._buf = np.empty(0, dtype=pixel_dtype)
        self._pending = []
        self.resumed_from = 0
        existing = self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir()))
        if existing:
            attrs = dict(_open_group(self.path, "r").attrs)
            if attrs.get("complete", False):
                raise StoreError(f"{self.path}: a complete store is already here; delete it or "
                                 f"choose another output path")
            if attrs.get("format") not in (FORMAT_NAME, None):
                raise StoreError(f"{self.path}: holds something else ({attrs.get('format')}); "
                                 f"will not touch it")
            if mode == "create":
                raise StoreError(f"{self.path}: an incomplete image store is here; resume it or restart")
            if mode == "restart" or attrs.get("format") is None:
                shutil.rmtree(self.path)
                self._create(int(chunk_pixels))
            else:
                self._reopen(attrs)
        else:
            self._create(int(chunk_pixels))

    def _create(self, chunk_pixels):
        import zarr
        g = zarr.open_group(str(self.path), mode="w")
        g.create_array("pixels", shape=(0,), chunks=(chunk_pixels,), dtype=self.pixel_dtype, fill_value=0)
        g.create_array("offsets", shape=(1,), chunks=(_META_CHUNK,), dtype="int64", fill_value=0)
        g.create_array("shapes", shape=(0, 3), chunks=(_META_CHUNK, 3), dtype="int32", fill_value=0)
        for name, dt in (("labels", "int32"), ("groups", "int32"), ("split", "int8")):
            g.create_array(name, shape=(0,), chunks=(_META_CHUNK,), dtype=dt, fill_value=0)
        g.create_array("id_bytes", shape=(0,), chunks=(1 << 20,), dtype="uint8", fill_value=0)
        g.create_array("id_offsets", shape=(1,), chunks=(_META_CHUNK,), dtype="int64", fill_value=0)
        g.attrs.update({
            "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "complete": False,
            "source": self.source, "pixel_dtype": self.pixel_dtype, "chunk_pixels": chunk_pixels,
            "layout": "image i = pixels[offsets[i]:offsets[i+1]].reshape(shapes[i]), row-major, "
                      "channels last",
            "label_names": [], "group_names": [], "split_names": [],
            "committed": {"images": 0, "pixels": 0},
        })
        self.group = g
        self._index = {"label": {}, "group": {}, "split": {}}
        self._ids: set[str] = set()
        self._committed = 0
        self._committed_pixels = 0
        self._written = 0
        self._id_bytes = 0

    def _reopen(self, attrs):
        import zarr
        if attrs.get("source") != self.source or attrs.get("pixel_dtype") != self.pixel_dtype:
            raise StoreError(f"{self.path}: the incomplete store was started from {attrs.get('source')!r} "
                             f"with {attrs.get('pixel_dtype')} pixels, not {self.source!r} with "
                             f"{self.pixel_dtype}; use mode='restart'")
        g = zarr.open_group(str(self.path), mode="r+")
        c = attrs.get("committed", {"images": 0, "pixels": 0})
        k, p = int(c["images"]), int(c["pixels"])
        # anything past the commit point may be half written: cut it off
        g["pixels"].resize((p,))
        g["offsets"].resize((k + 1,))
        g["shapes"].resize((k, 3))
        for name in ("labels", "groups", "split"):
            g[name].resize((k,))
        g["id_offsets"].resize((k + 1,))
        nbytes = int(g["id_offsets"][k]) if k else 0
        g["id_bytes"].resize((nbytes,))
        self.group = g
        self._index = {key: {n: i for i, n in enumerate(attrs.get(f"{key}_names", []))}
                       for key in ("label", "group", "split")}
        raw = np.asarray(g["id_bytes"][:], dtype=np.uint8).tobytes()
        off = np.asarray(g["id_offsets"][:], dtype=np.int64)
        self._ids = {raw[off[i]:off[i + 1]].decode("utf-8") for i in range(k)}
        self._committed = k
        self._committed_pixels = p
        self._written = p
        self._id_bytes = nbytes
        self.resumed_from = k

    def has(self, image_id: str) -> bool:
        return image_id in self._ids

    def append(self, image, image_id: str, label: str, group: str | None = None,
               split: str | None = None) -> bool:
        """Add one image; returns False when ``image_id`` is already stored."""
        if image_id in self._ids:
            return False
        a = _convert(image, self.pixel_dtype, image_id)
        shape = (a.shape[0], a.shape[1], 1 if a.ndim == 2 else a.shape[2])
        self._ids.add(image_id)
        codes = (self._code("label", str(label)), self._code("group", str(group if group is not None else label)),
                 -1 if split is None else self._code("split", str(split)))
        self._pending.append((image_id, int(a.size), shape, codes))
        self._buf = np.concatenate([self._buf, a.ravel()])
        if len(self._buf) >= self.group["pixels"].chunks[0]:
            self._flush(whole_chunks_only=True)
        return True

    def _code(self, key, name):
        index = self._index[key]
        if name not in index:
            index[name] = len(index)
        return index[name]

    def _flush(self, whole_chunks_only: bool):
        g = self.group
        cp = g["pixels"].chunks[0]
        n = (len(self._buf) // cp) * cp if whole_chunks_only else len(self._buf)
        if n:
            g["pixels"].resize((self._written + n,))
            g["pixels"][self._written:self._written + n] = self._buf[:n]
            self._buf = self._buf[n:].copy()
            self._written += n
        done, end = _ready(self._pending, self._committed_pixels, self._written)
        if not done:
            return
        self._pending = self._pending[len(done):]
        k, m = self._committed, len(done)
        sizes = np.array([d[1] for d in done], dtype=np.int64)
        g["offsets"].resize((k + 1 + m,))
        g["offsets"][k + 1:] = self._committed_pixels + np.cumsum(sizes)
        g["shapes"].resize((k + m, 3))
        g["shapes"][k:] = np.array([d[2] for d in done], dtype=np.int32)
        for col, (name, dt) in enumerate((("labels", np.int32), ("groups", np.int32), ("split", np.int8))):
            g[name].resize((k + m,))
            g[name][k:] = np.array([d[3][col] for d in done], dtype=dt)
        self._id_bytes = _append_ids(g, k, self._id_bytes, [d[0] for d in done])
        self._committed += m
        self._committed_pixels = end
        # the commit point moves only after the arrays above are written
        g.attrs.update({
            "label_names": _names(self._index["label"]), "group_names": _names(self._index["group"]),
            "split_names": _names(self._index["split"]),
            "committed": {"images": self._committed, "pixels": self._committed_pixels},
        })

    def flush(self):
        """Write everything buffered and commit it (the store stays incomplete)."""
        self._flush(whole_chunks_only=False)

    def close(self, extra: dict | None = None) -> ImageStore:
        """Flush, write the summary, then the completion marker (last)."""
        self._flush(whole_chunks_only=False)
        if self._committed == 0:
            raise StoreError(f"{self.path}: no image was written; the store stays incomplete")
        g = self.group
        g.attrs.update({"n_images": self._committed, "n_pixels": self._committed_pixels,
                        "extra": _jsonable(extra or {})})
        g.attrs["complete"] = True
        return ImageStore(self.path)


def ingest_images(src, out, format: str = "folders", group_level: int = 1, exclude=("maps",),
                  pixel_dtype: str = "uint8", chunk_pixels: int = DEFAULT_CHUNK_PIXELS,
                  mode: str = "resume", progress: bool = False, limit: int | None = None):
    """Write the images under ``src`` to an image store at ``out``.

    Parameters
    ----------
    src : path
        ``format="folders"``: a folder per class, nested folders allowed
        (:func:`streamcov.images.io.scan_folders`); PNG, JPEG, BMP, TIFF; grey or RGB.
    out : path
        Store location.
    group_level : int
        Folder levels that make the group (2 for ETH-80 category/object).
    exclude : sequence of str
        Folder names to skip (ETH-80's ``maps``).
    pixel_dtype : {"uint8", "uint16", "float32"}
    mode : {"create", "resume", "restart"}
        ``resume`` continues an interrupted ingestion after its last committed image.
    limit : int, optional
        Stop after that many new images *without* completing the store (tests).

    Returns
    -------
    ImageStore, or None when stopped by ``limit``.
    """
    if format != "folders":
        raise ValueError(f"format must be 'folders', got {format!r}")
    entries = scan_folders(src, group_level=group_level, exclude=exclude)
    writer = ImageStoreWriter(out, source=str(Path(src).resolve()), pixel_dtype=pixel_dtype,
                              chunk_pixels=chunk_pixels, mode=mode)
    it = entries
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(entries, desc=f"ingest {Path(out).name}", unit="img")
    written = 0
    for e in it:
        if writer.has(e.id):
            continue
        writer.append(read_image(e.path), e.id, e.label, e.group)
        written += 1
        if limit is not None and written >= limit:
            writer.flush()
            return None
    return writer.close(extra={"group_level": group_level, "exclude": list(exclude or ())})
