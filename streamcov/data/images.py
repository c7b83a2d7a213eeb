"""Zarr (v3) stores of labelled images of any size, written resumably.

Layout of a store (a zarr group, written by :class:`~streamcov.data.ragged.RaggedStoreWriter`)::

    pixels      (total,) uint8 | uint16 | float32, flat, chunked
    offsets     (n + 1,) int64     image i is pixels[offsets[i]:offsets[i+1]]
    shapes      (n, 3) int32       (height, width, channels) of image i, channels 1 or 3
    labels      (n,) int32         codes into attrs["label_names"]
    groups      (n,) int32         codes into attrs["group_names"] (e.g. object instance)
    split       (n,) int8          codes into attrs["split_names"]; -1 = none
    id_bytes, id_offsets           UTF-8 ids (paths relative to the source folder)

``attrs["constant_images"]`` lists the ids of the images whose every pixel is the same (one flat grey or
colour: :func:`is_constant`), found as they are written and kept with every commit point, so that a resumed
ingestion counts those of the interrupted one; stores written before it record none (the attribute is absent).

The commit and completion rules are those of every ragged store
(:mod:`streamcov.data.ragged`).
"""
from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np

from .._config import progress_bar
from ..errors import FormatError, StoreError, ingest_option, path_arg, read_or_skip
from . import integrity
from .imageio import MIN_SIDE, ORIENTATION, ImageSet, check_float_scale, read_image, scan_folders
from .ragged import RaggedStore, RaggedStoreWriter, content_digest, files_digest, ingest_args

FORMAT_NAME = "streamcov.images"
DEFAULT_CHUNK_PIXELS = 1 << 20
PIXEL_DTYPES = ("uint8", "uint16", "float32")


def _convert(image: np.ndarray, dtype: str, where: str) -> np.ndarray:
    """Image pixels in the store's dtype; refuses conversions that lose bit depth."""
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[2] == 4:
        a = a[:, :, :3]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (1, 3)) or 0 in a.shape[:2]:
        raise FormatError(where, f"expected a grey (h, w) or RGB (h, w, 3) image, got shape {a.shape}")
    if dtype == "float32":
        from ..descriptors.pixels import as_float_image
        return as_float_image(a, where).astype(np.float32)
    if a.dtype == np.uint8:
        return a if dtype == "uint8" else a.astype(np.uint16) * 257
    if a.dtype == np.uint16:
        if dtype == "uint16":
            return a
        raise FormatError(where, f"16-bit image but the store holds 8-bit pixels; ingest with the pixel dtype "
                                 f"auto (the default) or uint16: {ingest_option('pixel_dtype')}")
    raise FormatError(where, f"{a.dtype} pixels cannot be stored as {dtype}; ingest with the pixel dtype auto "
                             f"(the default) or float32: {ingest_option('pixel_dtype')}")


class ImageStore(RaggedStore):
    """Read access to a complete image store."""

    FORMAT = FORMAT_NAME
    KIND = "image"
    UNIT = "images"
    DATA = "pixels"

    @property
    def orientation(self) -> str | None:
        """``"exif"`` when the images were read upright by their EXIF orientation (:func:`read_image`); None
        for a store written by an earlier streamcov, or from arrays (its images are as they were given)."""
        record = self.attrs.get("source_record")
        return record.get("orientation") if isinstance(record, dict) else None

    @property
    def pixel_dtype(self) -> str:
        return str(self.attrs.get("pixel_dtype", "uint8"))

    @property
    def constant_images(self) -> list[str] | None:
        """The ids of the images whose every pixel is the same (:func:`is_constant`), in store order: kept in
        the store, warned about by ingestion, ``run`` and ``predict``; None for a store written before they
        were recorded."""
        ids = self.attrs.get("constant_images")
        return None if ids is None else list(ids)

    @property
    def n_images(self) -> int:
        """The number of images (``len(store)``), as :attr:`SequenceStore.n_sequences` counts sequences."""
        return len(self)

    def pixel_scale(self) -> float:
        """The largest magnitude a pixel can have: 1 for integer images (stored as fractions of their
        range), the largest ``|pixel|`` for float images: recorded when the store was completed
        (``attrs["pixel_max"]``), or one pass over the pixels for a store written before it was."""
        if self.pixel_dtype != "float32":
            return 1.0
        if "pixel_max" in self.attrs:
            return float(self.attrs["pixel_max"])
        return largest_magnitude(self.data)

    def __init__(self, path):
        super().__init__(path)
        self.shapes = self.read("shapes").astype(np.int64).reshape(-1, 3)
        self.labels = self.read("labels").astype(np.int32)
        self.groups = self.read("groups").astype(np.int32)
        self.split = self.read("split").astype(np.int8)
        self.check_rows(("shapes", "labels", "groups", "split"),
                        {"labels": "label_names", "groups": "group_names", "split": "split_names"})
        self.check_sealed()
        # after the seal: an edited byte order of shapes is said as such, not as the shapes it reads as
        self._check_shapes()

    def _check_shapes(self):
        """Every image's (height, width, channels) is what ingestion writes (each at least 1, channels 1 or 3)
        and covers its pixels, and the attributes of its pixels are of their types: an edited store was a
        reshape or float() traceback when an image was read."""
        damaged = "the store is damaged: " + integrity.WRITE_AGAIN
        dtype = self.attrs.get("pixel_dtype", "uint8")
        if dtype not in PIXEL_DTYPES:
            raise StoreError(f"{self.path}: attribute pixel_dtype = {integrity.shown(dtype)} is not one of "
                             f"{', '.join(PIXEL_DTYPES)}; {damaged}")
        top = self.attrs.get("pixel_max")
        if dtype == "float32" and "pixel_max" in self.attrs and not (
                isinstance(top, (int, float)) and not isinstance(top, bool) and np.isfinite(top) and top >= 0):
            raise StoreError(f"{self.path}: attribute pixel_max = {integrity.shown(top)} is not the largest pixel "
                             f"magnitude (a finite number >= 0); {damaged}")
        if self.group["shapes"].shape[1:] != (3,):
            raise StoreError(f"{self.path}: array 'shapes' has rows of {self.group['shapes'].shape[1:]}, not "
                             f"(height, width, channels); {damaged}")
        h, w, c = self.shapes.T
        sizes = np.diff(self.offsets)
        bad = np.flatnonzero((h < 1) | (w < 1) | ((c != 1) & (c != 3)) | (h.astype(np.float64) * w * c != sizes))
        if len(bad):
            i = int(bad[0])
            shape = tuple(int(v) for v in self.shapes[i])
            raise StoreError(f"{self.path}: array 'shapes' gives image {i} the shape {shape} "
                             f"(height, width, channels: each at least 1, channels 1 or 3) for its {int(sizes[i])} "
                             f"pixels; {damaged}")

    @property
    def group_names(self) -> list[str]:
        return list(self.attrs["group_names"])

    def image(self, i: int) -> np.ndarray:
        """Image i as stored: (h, w) grey or (h, w, 3) RGB."""
        if not 0 <= i < len(self):
            raise IndexError(f"image {i} out of range 0..{len(self) - 1}")
        return unflatten(self.read("pixels", self.offsets[i], self.offsets[i + 1]), self.shapes[i])

    def images(self, rows=None) -> list[np.ndarray]:
        """Images ``rows`` (all by default) as stored; reads the pixels they span once."""
        rows = np.arange(len(self)) if rows is None else np.asarray(rows)
        if not len(rows):
            return []
        lo, hi = int(self.offsets[rows.min()]), int(self.offsets[rows.max() + 1])
        flat = self.read("pixels", lo, hi)
        return [unflatten(flat[self.offsets[r] - lo:self.offsets[r + 1] - lo], self.shapes[r]) for r in rows]

    def to_image_set(self) -> ImageSet:
        split = self.split if (self.split >= 0).any() else None
        return ImageSet(images=self.images(), labels=self.labels.copy(), label_names=self.label_names,
                        groups=self.groups.copy(), group_names=self.group_names, ids=self.ids(),
                        split=split, split_names=self.split_names, source=self.attrs.get("source", ""))

    def __repr__(self):
        return f"ImageStore({str(self.path)!r}, images={len(self)}, classes={len(self.label_names)})"


def is_constant(image) -> bool:
    """True when every pixel of ``image`` ((h, w) or (h, w, c)) has the same value in every channel: a blank
    frame (a broken camera, an empty scan) or one flat colour. Its per-pixel features are constant, so its
    covariance descriptor carries nothing of its content."""
    a = np.asarray(image)
    flat = a.reshape(-1, a.shape[2] if a.ndim == 3 else 1)
    return bool(len(flat) == 0 or (flat.max(axis=0) == flat.min(axis=0)).all())


def constant_warning(ids: list, n_images: int, where) -> str:
    """The line that says the constant images ``ids`` (relative paths) among ``n_images`` of ``where``:
    the count, the first three, what they do to a classifier and the fix. Ingestion, ``run`` and
    ``predict`` say it (kept, not skipped: the store holds every image of its folder)."""
    shown = ", ".join(str(i) for i in ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return (f"{len(ids)} of the {n_images} images of {where} {'is' if len(ids) == 1 else 'are'} constant, every "
            f"pixel the same ({shown}): "
            f"their descriptors carry no information about their content, and the class given to them means "
            f"nothing; remove or replace them, or check the camera or scan that made them")


def unflatten(flat: np.ndarray, shape) -> np.ndarray:
    """One image from its flat pixels and its (h, w, c) shape: (h, w) grey or (h, w, 3)."""
    h, w, c = (int(v) for v in shape)
    return flat.reshape(h, w) if c == 1 else flat.reshape(h, w, c)


def open_image_store(path) -> ImageStore:
    """Open a complete image store; raises :class:`~streamcov.errors.StoreError` otherwise
    (:class:`~streamcov.errors.IncompleteStoreError` for one whose writing was cut)."""
    return ImageStore(path)


class ImageStoreWriter(RaggedStoreWriter):
    """Append images one by one; pixels are flushed in whole chunks, resumable.

    Parameters
    ----------
    path : str or Path
    source : str
        Where the images come from (recorded; a resumed run must name the same).
    pixel_dtype : {"uint8", "uint16", "float32"}
    chunk_pixels : int, optional
        Pixel values per chunk of ``pixels`` (default 2^20); memory held is about one chunk. A store
        being resumed keeps its own: another value given here is refused.
    mode : {"create", "resume", "restart"}
        As :class:`~streamcov.data.ragged.RaggedStoreWriter`.
    record : dict, optional
        Where the images come from (folder, reader options): an interrupted
        ingestion resumes only with the same record.
    """

    def __init__(self, path, source: str, pixel_dtype: str = "uint8",
                 chunk_pixels: int | None = None, mode: str = "resume", record: dict | None = None):
        given = chunk_pixels is not None
        chunk_pixels = DEFAULT_CHUNK_PIXELS if chunk_pixels is None else chunk_pixels
        if pixel_dtype not in PIXEL_DTYPES:
            raise ValueError(f"pixel_dtype must be one of {PIXEL_DTYPES}, got {pixel_dtype!r}")
        self.pixel_dtype = pixel_dtype
        self._constant_new: set[str] = set()   # appended, not yet committed
        attrs = {"source": str(source), "pixel_dtype": pixel_dtype, "chunk_pixels": int(chunk_pixels),
                 "layout": "image i = pixels[offsets[i]:offsets[i+1]].reshape(shapes[i]), row-major, "
                           "channels last", "source_record": record or {"source": str(source)}}
        super().__init__(path, format_name=FORMAT_NAME, kind="image", unit="images", data_unit="pixels",
                         data="pixels", row_shape=(), dtype=pixel_dtype, chunk_rows=chunk_pixels,
                         columns={"shapes": ("int32", (3,)), "labels": ("int32", ()),
                                  "groups": ("int32", ()), "split": ("int8", ())},
                         coded={"labels": "label_names", "groups": "group_names", "split": "split_names"},
                         attrs=attrs, same=("source_record", "source", "pixel_dtype"), mode=mode,
                         chunk_given=given)
        # those of an interrupted ingestion resumed here (committed with them)
        self._constant = [i for i in self.group.attrs.get("constant_images", []) if self.has(i)]

    def append(self, image, image_id: str, label: str, group: str | None = None,
               split: str | None = None, where=None) -> bool:
        """Add one image; returns False when ``image_id`` is already stored. ``where`` (default ``image_id``)
        names the image in an error: its file."""
        if self.has(image_id):
            return False
        a = _convert(image, self.pixel_dtype, image_id if where is None else where)
        shape = (a.shape[0], a.shape[1], 1 if a.ndim == 2 else a.shape[2])
        if is_constant(a):   # the pixels as stored, already in memory
            self._constant_new.add(str(image_id))
        return super().append(image_id, a.ravel(), shapes=np.asarray(shape, dtype=np.int32),
                              labels=str(label), groups=str(group if group is not None else label),
                              split=split)

    def commit_attrs(self, ids: list[str]) -> dict:
        """The constant images so far, written with the commit point that covers the last of them."""
        new = [i for i in ids if i in self._constant_new]
        if not new:
            return {}
        self._constant += new
        self._constant_new.difference_update(new)
        return {"constant_images": list(self._constant)}

    def close(self, extra: dict | None = None, skipped=()) -> ImageStore:
        """Flush, write the summary (with what an earlier interrupted run skipped, the constant images, and for
        float images the largest ``|pixel|``, which training and ``predict`` compare), then the marker."""
        self.flush()   # every image committed, and so every constant one recorded
        prev = list(self.group.attrs.get("skipped", []))
        known = {s["id"] for s in prev}
        summary = {"extra": extra or {}, "skipped": prev + [s for s in skipped if s["id"] not in known],
                   "constant_images": list(self._constant)}
        if self.pixel_dtype == "float32":
            # read back once here, over every image committed by this run and any interrupted one before
            # it, so that every later use of the store reads the figure instead of its pixels
            summary["pixel_max"] = largest_magnitude(self.group["pixels"])
        super().close(summary)
        return ImageStore(self.path)


def largest_magnitude(data) -> float:
    """``max |x|`` over a 1-d zarr array, one chunk at a time (0 when empty)."""
    step = max(int(data.chunks[0]), 1)
    top = 0.0
    for i in range(0, int(data.shape[0]), step):
        a = np.asarray(data[i:i + step])
        if a.size:
            top = max(top, float(np.abs(a).max()))
    return top


def pixel_summary(images) -> tuple[str, float]:
    """``(pixel_dtype, pixel_scale)`` of images held in memory, as a store of them records them
    (:attr:`ImageStore.pixel_dtype`, :meth:`ImageStore.pixel_scale`): ``float32`` and the largest ``|pixel|``
    when any image has float pixels, else ``uint16`` or ``uint8`` and 1 (integer pixels are read as fractions
    of their range)."""
    arrays = [np.asarray(a) for a in images]
    if any(a.dtype.kind == "f" for a in arrays):   # every pixel as it is read: integers as fractions of their range
        return "float32", max((float(np.abs(a).max()) / (np.iinfo(a.dtype).max if a.dtype.kind in "ui" else 1.0)
                               for a in arrays if a.size), default=0.0)
    return ("uint16" if any(a.dtype == np.uint16 for a in arrays) else "uint8"), 1.0


def size_range(shapes) -> dict:
    """``{"height": [min, max], "width": [min, max]}`` of images of ``shapes`` (rows of (height, width, ...)):
    what a model records of its training images, which predict compares with the images it is given."""
    hw = np.array([tuple(s)[:2] for s in shapes], dtype=np.int64).reshape(-1, 2)   # grey (h, w), colour (h, w, 3)
    return {"height": [int(hw[:, 0].min()), int(hw[:, 0].max())],
            "width": [int(hw[:, 1].min()), int(hw[:, 1].max())]}


def auto_pixel_dtype(paths) -> str:
    """``float32`` when the images have float pixels, else ``uint16`` when any is 16-bit, else ``uint8``:
    the file headers are read, and the pixels of float images among integer ones. Integers are stored as
    fractions of their range (0 to 1) and floats as they are: a float image with values outside 0 to 1
    among integer images would lie on another scale, and is refused."""
    from PIL import Image

    out, floats, ints = "uint8", [], None
    for p in paths:
        try:
            with Image.open(p) as im:
                if im.mode == "F":
                    floats.append(p)
                else:
                    ints = ints or p
                    if im.mode.startswith("I;16") or im.mode == "I":
                        out = "uint16"
        except Exception:   # unreadable: read_image names it when the ingestion reaches it
            continue
    if floats and ints is not None:
        check_float_scale(((p, read_image(p)) for p in floats), ints)
    return "float32" if floats else out


def ingest_images(src, out, format: str = "folders", group_level: int = 1, exclude=("maps",),
                  pixel_dtype: str = "auto", chunk_pixels: int | None = None,
                  mode: str = "resume", progress: bool = False, limit: int | None = None,
                  unlabelled: bool = False, skip=None, on_error: str = "stop", exclude_absent_ok: bool = False,
                  exclude_typed: bool = False):
    """Write the images under ``src`` to an image store at ``out``.

    Parameters
    ----------
    src : path
        ``format="folders"``: a folder per class, nested folders allowed
        (:func:`streamcov.data.imageio.scan_folders`); PNG, JPEG, BMP, TIFF, GIF, WebP, PBM/PGM/PPM/PNM,
        TGA (:data:`~streamcov.data.imageio.IMAGE_EXTENSIONS`); grey or RGB.
    out : path
        Store location.
    format : {"folders"}
        Layout of ``src``; ``"folders"`` is the only one (any other value is refused). Recorded with the store.
    group_level : int
        Folder levels that make the group (2 for ETH-80 category/object).
    exclude : sequence of str
        Folder names to skip (ETH-80's ``maps``).
    pixel_dtype : {"auto", "uint8", "uint16", "float32"}
        ``auto``: float32 when any image has float pixels (32-bit float
        TIFF), else 16-bit when any image is 16-bit (8-bit images are then
        scaled by 257, exactly), else 8-bit.
    chunk_pixels : int, optional
        Pixel values per chunk of the store's ``pixels`` (default 2^20); memory held is about one chunk. A
        store being resumed keeps its own: another value given here is refused.
    mode : {"create", "resume", "restart"}
        ``resume`` continues an interrupted ingestion after its last committed image.
    progress : bool
        Show a progress bar over the images.
    limit : int, optional
        Stop after that many new images *without* completing the store (tests).
    unlabelled : bool
        Accept images directly under ``src`` (label ``""``): images to predict.
    skip : callable, optional
        ``skip(image)``: a reason to leave the image out (recorded with the
        store's skipped images, as those smaller than 2 x 2 pixels are), or
        None to keep it; ``predict`` leaves out the images too small for a
        model's pixel stride this way.
    on_error : {"stop", "skip"}
        ``"stop"``: an image file that is damaged or not an image stops the
        ingestion (its :class:`~streamcov.errors.FormatError`), keeping the
        images committed before it; ``"skip"``: it is recorded with the
        store's skipped images, with the error, and the ingestion goes on. A
        missing file or a read error of the system stops either way. Not part
        of the store's source record: the store holds every readable image
        either way, so an ingestion stopped by a damaged image resumes with
        ``"skip"``.
    exclude_absent_ok : bool
        Accept names of ``exclude`` that no folder has (``predict`` leaves out the folders a model's
        training left out, in a folder that may have none of them); else one is refused, as a typo.
    exclude_typed : bool
        ``exclude`` was typed by the user on the command line (``--exclude``): ``maps`` is then refused too
        when no folder has it, not exempt as the default's name.

    Returns
    -------
    ImageStore, or None when stopped by ``limit``.
    """
    from ..lock import store_lock

    src = path_arg("src", src, "SRC", "the image folder (a folder per class)")
    out = ingest_args(out, limit, on_error)
    if format != "folders":
        raise ValueError(f"format must be 'folders', got {format!r}")
    # the Python API's slips that would otherwise be silent (a string is a sequence of one-letter names) or
    # a traceback deep inside the scan
    if exclude is not None and not isinstance(exclude, (str, bytes)):
        exclude = tuple(exclude)   # once: a generator checked here would be empty when the scan reads it
    if isinstance(exclude, (str, bytes)) or not all(isinstance(x, str) for x in (exclude or ())):
        raise TypeError(f"exclude must be a list of folder names, got {exclude!r}"
                        + (f"; write exclude=[{exclude!r}]" if isinstance(exclude, str) else ""))
    if isinstance(group_level, bool) or not isinstance(group_level, numbers.Integral) or group_level < 1:
        raise ValueError(f"group_level must be an integer >= 1 (folder levels that make the group), got "
                         f"{group_level!r}")
    # the folder and its first image are read before the lock is taken, as skeletons.ingest reads the archive's
    # first sequence: a missing, empty or unreadable folder, or a first image that cannot be read, is refused
    # before anything is written (the lock would create the store's parent folders, the writer an empty store)
    entries = scan_folders(src, group_level=group_level, exclude=exclude, unlabelled=unlabelled,
                           exclude_absent_ok=exclude_absent_ok, exclude_typed=exclude_typed)
    for k, e in enumerate(entries):   # scan_folders refuses a folder without images
        first, why = read_or_skip(on_error, read_image, e.path)
        if why is None:   # the first image that can be read (the ones before it are skipped again below)
            break
    record = source_record(src, group_level, exclude, unlabelled, entries, format)
    # the images' contents, recorded with the store (one plain read of the files more; see skeletons.ingest)
    record["files"]["content"] = content_digest([e.path for e in entries], Path(src))
    with store_lock(out):
        return _ingest(src, out, group_level, exclude, pixel_dtype, chunk_pixels, mode, progress, limit, skip,
                       on_error, entries, (k, first), record)



def source_record(src, group_level: int = 1, exclude=("maps",), unlabelled: bool = False, entries=None,
                  format: str = "folders") -> dict:
    """What an image store records of its source (a resumed or reused store must match it)."""
    if entries is None:
        entries = scan_folders(src, group_level=group_level, exclude=exclude, unlabelled=unlabelled)
    return {"format": format, "path": str(Path(src).resolve()), "group_level": int(group_level),
            "exclude": sorted(exclude or ()), "unlabelled": bool(unlabelled),
            "files": files_digest([e.path for e in entries], Path(src)), "orientation": ORIENTATION}


def _ingest(src, out, group_level, exclude, pixel_dtype, chunk_pixels, mode, progress, limit, skip, on_error,
            entries, first, record):
    if pixel_dtype == "auto":
        pixel_dtype = auto_pixel_dtype(e.path for e in entries)
    writer = ImageStoreWriter(out, source=str(Path(src).resolve()), pixel_dtype=pixel_dtype,
                              chunk_pixels=chunk_pixels, mode=mode, record=record)
    written, skipped = 0, []
    # what was read is kept, or no empty store is left; the bar is closed before an error is said
    with writer.committed_on_error(), progress_bar(entries, progress, desc=f"ingest {Path(out).name}",
                                                   unit="img") as it:
        for i, e in enumerate(it):
            # the first readable image was read before the lock, the others are read here
            image = first[1] if i == first[0] else None
            if writer.has(e.id):
                continue
            if image is None:
                image, why = read_or_skip(on_error, read_image, e.path)
                if why is not None:
                    skipped.append({"id": e.id, "reason": why})
                    continue
            if min(image.shape[:2]) < MIN_SIDE:
                # the derivative filters and a covariance need at least 2 x 2 pixels
                skipped.append({"id": e.id, "reason": f"image of {image.shape[0]} x {image.shape[1]} pixels; at "
                                                      f"least {MIN_SIDE} x {MIN_SIDE} are needed"})
                continue
            reason = skip(image) if skip is not None else None
            if reason:
                skipped.append({"id": e.id, "reason": str(reason)})
                continue
            writer.append(image, e.id, e.label, e.group, where=e.path)
            written += 1
            if limit is not None and written >= limit:
                writer.flush()
                return None
        if written == 0 and not writer.committed and skipped:
            raise FormatError(Path(src) / skipped[0]["id"], f"{skipped[0]['reason']}: skipped, and so was every "
                              f"other image of {src} ({len(skipped)}); nothing is left to store")
        return writer.close(extra={"group_level": group_level, "exclude": list(exclude or ())}, skipped=skipped)
