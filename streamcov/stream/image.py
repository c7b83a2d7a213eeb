"""The image source: an image store to covariance-operator (or region-covariance) vectors, block by block.

Paper 004's scalable path out of core::

    image store (zarr, `streamcov ingest images`)
      | fit, training images only: per-pixel features -> moments (n, mean, M2) per block,
      |      merged (Chan) -> feature scale (one number, or one per feature)
      v every block of images:
    pixel features (numba) -> / scale -> random (or Halton) Fourier features, frequencies
    fixed by the seed -> 2D x 2D approximate covariance operator (eq. (20)) ->
    vec(log(I + C / gamma)) (eq. (21))                      [streamcov.descriptors.image]

The engine then maps the vectors by the feature map of the pipeline (random
features of K2, with a bandwidth from the median distance of training
vectors) into a feature store and trains. Tasks receive the image store's
*path* and open it themselves, so the same code runs on the threaded
scheduler and on dask.distributed workers.

ConvNet features (``[pixels] source = "cnn"``, paper 004 section 5) are one
more per-pixel source: the rows of an image's data matrix are its
hypercolumns instead of its pixels. They are extracted in a stage of their
own, :class:`HypercolumnSource`, whose vectors (each image's hypercolumns
and pooled head, flattened) the same driver writes to a feature store of
their own (one chunk and one done flag per block, resumed like any other);
the image source then reads its data matrices from that store
(``hypercolumns=``) instead of running the network again for the scale pass
and the operators. Without such a store (e.g. ``streamcov predict`` on new
images) it runs the network itself. onnxruntime takes the numba share of the
thread plan in each task.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .._config import kernel_threads
from ..descriptors.image import ImageDescriptor, feature_matrices, feature_scale, image_moments, is_cnn
from ..descriptors.pixels import GREY_FIX, pipeline_key
from ..errors import ConfigError, arg_name
from ..data.ragged import IdsOf
from .runtime import task_path
from ..linalg import merge_moments


def _image_id(store_path: str, i: int) -> str:
    import zarr
    g = zarr.open_group(store_path, mode="r")
    a, b = (int(v) for v in g["id_offsets"][i:i + 2])
    return bytes(np.asarray(g["id_bytes"][a:b], dtype=np.uint8)).decode("utf-8")


def read_images(store_path: str, offsets: np.ndarray, shapes: np.ndarray, rows, checked=True
                ) -> list[np.ndarray]:
    """Images ``rows`` (indices into ``offsets[:-1]``) of a block whose pixels are contiguous."""
    import zarr

    from ..data import integrity
    from ..data.images import unflatten

    flat = integrity.read(zarr.open_group(store_path, mode="r"), store_path, "pixels", int(offsets[0]),
                          int(offsets[-1]), checked)
    return [unflatten(flat[offsets[r] - offsets[0]:offsets[r + 1] - offsets[0]], shapes[r]) for r in rows]


def _names(store_path, i0, rows):
    return [f"image {i0 + r} ({_image_id(store_path, i0 + r)})" for r in rows]


def _named(store_path, i0, rows, fn):
    """``fn()``; a ValueError that names ``image <i>`` (what the checks of one image's pixels raise: a float
    image outside [0, 1] for the ConvNet, a non-finite pixel) is raised again as a ConfigError, one line
    naming the store and the image's id; any other error is a bug and goes on as it is."""
    try:
        return fn()
    except ValueError as exc:
        msg = str(exc)
        for r in rows:
            tag = f"image {i0 + r}:"
            if msg.startswith(tag):
                raise ConfigError(f"{store_path}: image {i0 + r} ({_image_id(store_path, i0 + r)}):"
                                  f"{msg[len(tag):]}") from None
        raise


def block_matrices(store_path: str, i0: int, offsets, shapes, checked, rows, spec, numba_threads: int = 1,
                   hypercolumns: str | None = None):
    """``(mats, heads)`` of the images ``rows`` of one block (:func:`~streamcov.descriptors.image.feature_matrices`).

    With ``hypercolumns`` (the path of a :class:`HypercolumnSource` feature
    store) the ConvNet's output is read from there instead of computed.
    """
    if hypercolumns is not None:
        return read_hypercolumns(hypercolumns, spec, i0 + np.asarray(rows))
    images = read_images(store_path, offsets, shapes, rows, checked)
    return _named(store_path, i0, rows, lambda: feature_matrices(images, spec, [f"image {i0 + r}" for r in rows],
                                                                 threads=numba_threads))


def block_moments(store_path: str, i0: int, offsets, shapes, checked, rows, descriptor: ImageDescriptor,
                  numba_threads: int = 1, hypercolumns: str | None = None):
    """Pixel count, mean and M2 per feature over the images ``rows`` of one block."""
    acc = None
    with kernel_threads(numba_threads):
        if hypercolumns is not None or is_cnn(descriptor.pixels):
            mats, _ = block_matrices(store_path, i0, offsets, shapes, checked, rows, descriptor.pixels,
                                     numba_threads, hypercolumns)
        else:
            mats = _one_at_a_time(store_path, i0, offsets, shapes, checked, rows,
                                  lambda img, name: feature_matrices([img], descriptor.pixels, [name])[0][0])
        for m in map(image_moments, mats):
            acc = m if acc is None else merge_moments(acc, m)
    return acc


def _one_at_a_time(store_path: str, i0: int, offsets, shapes, checked, rows, fn):
    """``fn(image, name)`` of the images ``rows`` of one block, one image at a time (a generator): per-pixel
    features are float64 numbers per pixel and feature (200 MB for a 1-megapixel image of 25 features), so a
    block of photographs holds one image's at a time, not the block's (same numbers)."""
    images = read_images(store_path, offsets, shapes, rows, checked)
    for r, img in zip(rows, images):
        yield _named(store_path, i0, [r], lambda: fn(img, f"image {i0 + r}"))


def block_vectors(store_path: str, i0: int, offsets, shapes, checked, rows, descriptor: ImageDescriptor, scale,
                  W, numba_threads: int = 1, hypercolumns: str | None = None) -> np.ndarray:
    """Descriptors of the images ``rows`` of one block."""
    with kernel_threads(numba_threads):
        if hypercolumns is not None or is_cnn(descriptor.pixels):
            mats, heads = block_matrices(store_path, i0, offsets, shapes, checked, rows, descriptor.pixels,
                                         numba_threads, hypercolumns)
            return descriptor.vectors_of(mats, heads, scale, W)
        return np.vstack(list(_one_at_a_time(store_path, i0, offsets, shapes, checked, rows,
                                             lambda img, name: descriptor.vectors([img], scale, W, names=[name]))))


# ------------------------------------------------------------ hypercolumns
def hypercolumn_width(spec) -> int:
    """Numbers per image in a hypercolumn store: cells x channels, then the raw head."""
    return spec.n_cells(None) * spec.n_features + spec.n_head


def pack_hypercolumns(mats, heads) -> np.ndarray:
    """One row per image: its hypercolumns (cells x channels, row-major) and its raw head, float32."""
    rows = np.stack([np.asarray(m, dtype=np.float32).ravel() for m in mats])
    return rows if heads is None else np.hstack([rows, np.asarray(heads, dtype=np.float32)])


def read_hypercolumns(path: str, spec, rows):
    """``(mats, heads)`` of the images ``rows`` (store rows) from a hypercolumn feature store."""
    import zarr

    from ..data import integrity

    rows = np.asarray(rows, dtype=np.int64)
    g = zarr.open_group(path, mode="r")
    X = integrity.read(g, path, "X", int(rows.min()), int(rows.max()) + 1,
                       fix=integrity.RECOMPUTE)[rows - rows.min()]
    cells, c = spec.n_cells(None), spec.n_features
    mats = [x.reshape(cells, c) for x in X[:, :cells * c]]
    return mats, (X[:, cells * c:] if spec.n_head else None)


def hypercolumn_tasks(store_path: str, i0: int, offsets, shapes, checked, rows, spec, numba_threads: int = 1):
    with kernel_threads(numba_threads):
        return pack_hypercolumns(*block_matrices(store_path, i0, offsets, shapes, checked, rows, spec, numba_threads))


class HypercolumnSource:
    """The ConvNet stage: each image's hypercolumns and pooled head as one row (paper 004, section 5).

    A source of the engine (:mod:`streamcov.stream.source`) like the others:
    :func:`~streamcov.stream.featurize.featurize` with ``{"map": "none"}``
    writes its rows block by block to a feature store (resumable, checked),
    which :class:`ImageSource` then reads (``hypercolumns=``). Needs a fixed
    ``input_size`` (every image gives the same number of cells). Nothing is
    fitted: the network is pretrained.
    """

    kind = "hypercolumns"
    default_block = 64
    needs_fit = False
    state: dict = {}

    def __init__(self, store, spec):
        from ..descriptors.cnn import require

        if not is_cnn(spec):
            raise TypeError("HypercolumnSource needs a CNNSpec")
        if spec.input_size is None:
            raise ConfigError("pixels.input_size must be set for a hypercolumn store (every image resized to "
                              "one size gives rows of one width)")
        require()
        self.store = store
        self.spec = spec

    @property
    def n(self) -> int:
        return len(self.store)

    @property
    def dim(self) -> int:
        return hypercolumn_width(self.spec)

    dtype = "float32"

    def spec_dict(self) -> dict:
        return self.spec.as_dict()

    def identity(self) -> dict:
        return {"kind": self.kind, "store": self.store.key, "n": self.n, "cnn": self.spec.identity()}

    def block_tasks(self, bounds, numba_threads: int = 1, rows=None):
        import dask

        out = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            local = np.arange(b1 - b0) if rows is None else np.flatnonzero(rows[b0:b1])
            if not len(local):
                continue
            task = dask.delayed(hypercolumn_tasks, pure=True)(
                task_path(self.store.path), int(b0), self.store.offsets[b0:b1 + 1], self.store.shapes[b0:b1],
                self.store.checked, local, self.spec, numba_threads)
            out.append((int(b0), int(b1), local, task))
        return out

    def window_keys(self, bounds, width: int):
        return [i // (2 * max(1, width)) for i in range(len(bounds) - 1)]


def hypercolumn_store(store, spec, path, runtime, bounds, progress: bool = False):
    """Extract (or resume, or reuse) the hypercolumn store of ``store`` at ``path``; returns the Featurized result."""
    from .._config import check_disk, check_memory
    from .featurize import featurize

    src = HypercolumnSource(store, spec)
    # each task holds its block's rows (float32) and the network's maps resized to the grid beside them; the
    # store holds every image's row: refused in one line, as the in-memory path refuses its grid
    grid = '"finest"' if spec.grid == "finest" else str(spec.grid)
    what = (f"pixels.grid = {grid} at pixels.input_size = {spec.input_size} ({spec.n_cells(None)} grid cells of "
            f"{spec.n_features} channels per image")
    fix = 'lower pixels.grid ("finest", the grid of the finest block, is the default) or pixels.input_size'
    rows = int(np.diff(np.asarray(bounds)).max()) if len(bounds) > 1 else 0
    tasks = max(1, int(getattr(runtime, "parallelism", 1) or 1))
    check_memory(2 * 4.0 * src.dim * rows * min(tasks, max(1, len(bounds) - 1)),
                 f"{what}, blocks of {rows} images)", fix)
    if not Path(path).exists():   # a store there is resumed or reused: the writer says what it lacks
        check_disk(4.0 * src.dim * src.n, path, f"{what}: the hypercolumn store of {src.n} images)", fix)
    return featurize(src, {"map": "none"}, seed=0, train=np.ones(src.n, dtype=bool), path=path, runtime=runtime,
                     bounds=bounds, progress=progress)


# float64 planes of one full-resolution image that the feature kernel holds beside the image itself (the
# derivative channels, a plane, the padded image and the real and imaginary separable Gabor passes)
FEATURE_PLANES = 8


def _check_image_memory(store, spec, trained: bool, parallelism: int = 1) -> None:
    """One image's per-pixel features at a time per thread: refused in one line, naming the largest image, when
    the ``parallelism`` largest images (the runtime's threads each hold one) need more than this machine's
    memory (a photograph under Pillow's decompression-bomb limit needs about 100 bytes per pixel: 18 GiB at
    169 megapixels), instead of a MemoryError or the kernel's kill halfway through the store."""
    from .._config import check_memory
    from ..descriptors.pixels import n_sampled_pixels

    h, w, c = (store.shapes[:, k].astype(np.float64) for k in range(3))
    need = 8.0 * ((FEATURE_PLANES + c) * h * w + spec.n_features * n_sampled_pixels(h, w, spec.stride))
    top = np.argsort(need)[::-1][:max(1, int(parallelism))]
    i = int(top[0])
    at_once = f", {len(top)} images at a time (one per thread)" if len(top) > 1 else ""
    fix = ("downscale such images, or leave them out" if trained else
           "raise pixels.stride, downscale such images, or leave them out")
    fewer = f"; or run fewer threads ({arg_name('workers')} or dask.workers)" if len(top) > 1 else ""
    check_memory(float(need[top].sum()), f"{store.path}: image {i} ({store.id_of(i)}) of {int(h[i])} x {int(w[i])} "
                 f"pixels (its per-pixel features{at_once})", fix + fewer)


class ImageSource:
    """Descriptors of the images of an :class:`~streamcov.data.ImageStore`.

    See :mod:`streamcov.stream.source` for the protocol. The feature scale
    is fitted on training images (:meth:`fit`); the frequencies follow from
    it and the descriptor's seed.
    """

    kind = "image"
    default_block = 64

    def __init__(self, store, descriptor: ImageDescriptor, state: dict | None = None, hypercolumns=None):
        self.store = store
        self.descriptor = descriptor
        self.state = dict(state or {})
        self.hypercolumns = None if hypercolumns is None else str(hypercolumns)
        spec = descriptor.pixels
        from .._config import check_memory

        if is_cnn(spec):
            from ..descriptors.cnn import require

            require("pixels.source = \"cnn\" (ConvNet features)")
            if not self.needs_fit:
                self.state = {}
        # a block of descriptors (and the operator of one image per thread) must fit in memory
        check_memory(8.0 * self.dim * (self.default_block + 2),
                     f"method.D = {descriptor.n_frequencies} (descriptors of {self.dim} numbers)", "lower method.D")
        if is_cnn(spec):
            return
        if spec.needs_color and (store.shapes[:, 2] != 3).any():
            i = int(np.flatnonzero(store.shapes[:, 2] != 3)[0])
            if state is not None and state.get("scale") is not None:   # a trained model's spec (predict)
                raise ConfigError(f"{store.path}: image {store.id_of(i)} is grey, but the model's features "
                                  f"({pipeline_key(spec)}) use R, G, B; give it colour images, or train a model "
                                  f"on grey features for grey ones")
            raise ConfigError(f"{pipeline_key(spec)} uses R, G, B but image {store.id_of(i)} is grey; "
                              f"{GREY_FIX}")
        from ..descriptors.pixels import check_sampled_pixels

        trained = state is not None and state.get("scale") is not None     # a saved model's (predict)
        if spec.stride > 1:
            check_sampled_pixels(store.shapes, spec.stride, IdsOf(store),
                                 "the model's stride is fixed: leave such images out, or give them larger"
                                 if trained else "lower the stride")
        if len(store):
            _check_image_memory(store, spec, trained)   # one image: refused whatever the runtime

    @property
    def needs_fit(self) -> bool:
        return self.descriptor.needs_scale

    def check_parallel_memory(self, parallelism: int) -> None:
        """The images the runtime's ``parallelism`` threads hold at once fit in memory (see
        :func:`_check_image_memory`); ConvNet features are of images resized to the network's input."""
        if not is_cnn(self.descriptor.pixels) and len(self.store):
            _check_image_memory(self.store, self.descriptor.pixels, self.state.get("scale") is not None, parallelism)

    @property
    def n(self) -> int:
        return len(self.store)

    @property
    def dim(self) -> int:
        return self.descriptor.dim

    @property
    def dtype(self) -> str:
        return self.descriptor.dtype

    def _args(self, b0, b1):
        offsets = self.store.offsets
        return (task_path(self.store.path), int(b0), offsets[b0:b1 + 1], self.store.shapes[b0:b1],
                self.store.check_of("pixels", int(offsets[b0]), int(offsets[b1])))

    def fit(self, train, runtime, bounds):
        """A copy whose feature scale is measured on the pixels of the training rows."""
        import dask

        tasks = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            rows = np.flatnonzero(train[b0:b1])
            if len(rows):
                tasks.append(dask.delayed(block_moments, pure=True)(
                    *self._args(b0, b1), rows, self.descriptor, runtime.numba_threads, self.hypercolumns))
        parts = runtime.compute(*tasks)
        acc = parts[0]
        for p in parts[1:]:
            acc = merge_moments(acc, p)
        scale = feature_scale(acc, self.descriptor.scaling)
        return ImageSource(self.store, self.descriptor, {"scale": [float(s) for s in scale]}, self.hypercolumns)

    def with_state(self, state: dict) -> "ImageSource":
        """A copy with a fitted state (kept in a feature store) and the same hypercolumn store."""
        return ImageSource(self.store, self.descriptor, state, self.hypercolumns)

    def prepare(self, runtime, bounds, folder, progress: bool = False) -> tuple:
        """Stages before this one: for ConvNet features with a fixed input size, the hypercolumn store.

        Returns ``(source, info)``: a copy that reads ``folder/hypercolumns.zarr``
        (extracted, resumed or reused by its fingerprint) and what it cost.
        """
        spec = self.descriptor.pixels
        if not is_cnn(spec) or spec.input_size is None:
            return self, {}
        from pathlib import Path

        hc = hypercolumn_store(self.store, spec, Path(folder) / "hypercolumns.zarr", runtime, bounds, progress)
        info = {"hypercolumns_path": str(hc.store.path), "hypercolumn_seconds": round(hc.featurize_seconds, 3),
                "hypercolumn_images": hc.featurized_rows, "hypercolumn_width": int(hc.store.dim)}
        return ImageSource(self.store, self.descriptor, self.state, hc.store.path), info

    def spec(self) -> dict:
        return {"kind": self.kind, "descriptor": self.descriptor.as_dict(), "state": self.state}

    @classmethod
    def check_spec(cls, spec: dict) -> None:
        """Raise ValueError (or TypeError, KeyError) when ``spec`` cannot be an image source's."""
        desc = ImageDescriptor.from_dict(spec["descriptor"])
        scale = (spec.get("state") or {}).get("scale")
        if scale is not None:
            scale = np.asarray(scale, dtype=np.float64)
            if scale.shape != (desc.pixels.n_features,) or not (np.isfinite(scale).all() and (scale > 0).all()):
                raise ValueError(f"the feature scale must be {desc.pixels.n_features} finite positive numbers, "
                                 f"got {scale.tolist()}")

    @classmethod
    def from_spec(cls, spec: dict, store, hypercolumns=None):
        return cls(store, ImageDescriptor.from_dict(spec["descriptor"]), spec.get("state"), hypercolumns)

    def identity(self) -> dict:
        return {"kind": self.kind, "store": self.store.key, "n": self.n,
                "n_pixels": int(self.store.offsets[-1]), "descriptor": self.descriptor.identity()}

    def data_warnings(self, runtime=None) -> list[str]:
        """One line naming the store's constant images (every pixel the same: their descriptors carry nothing
        of their content), or none: said once per run or prediction, as ingestion says it. Read from the
        store's record (:attr:`~streamcov.data.images.ImageStore.constant_images`), not its pixels; a store
        written before that record says nothing."""
        from ..data.images import constant_warning

        ids = self.store.constant_images
        if not ids:
            return []
        source = self.store.attrs.get("source")   # the folder the ids are relative to
        where = source if isinstance(source, str) and Path(source).is_dir() else self.store.path
        return [constant_warning(ids, len(self.store), where)]

    def block_tasks(self, bounds, numba_threads: int = 1, rows=None):
        import dask

        if self.needs_fit and "scale" not in self.state:
            raise RuntimeError("ImageSource.block_tasks before fit: the feature scale is unknown")
        scale = np.asarray(self.state["scale"]) if self.needs_fit else None
        W = self.descriptor.frequencies_for(scale) if self.descriptor.representation == "operator" else None
        out = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            local = np.arange(b1 - b0) if rows is None else np.flatnonzero(rows[b0:b1])
            if not len(local):
                continue
            task = dask.delayed(block_vectors, pure=True)(*self._args(b0, b1), local, self.descriptor, scale, W,
                                                          numba_threads, self.hypercolumns)
            out.append((int(b0), int(b1), local, task))
        return out

    def window_keys(self, bounds, width: int):
        # a few blocks per compute call: at most that many blocks' vectors in memory
        return [i // (2 * max(1, width)) for i in range(len(bounds) - 1)]
