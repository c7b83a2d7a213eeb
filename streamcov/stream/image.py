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
"""
from __future__ import annotations

import numpy as np

from .._config import kernel_threads
from ..descriptors.image import ImageDescriptor, feature_scale, features_of, image_moments
from ..errors import ConfigError
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


def block_moments(store_path: str, i0: int, offsets, shapes, checked, rows, descriptor: ImageDescriptor,
                  numba_threads: int = 1):
    """Pixel count, mean and M2 per feature over the images ``rows`` of one block."""
    acc = None
    with kernel_threads(numba_threads):
        for r, img in zip(rows, read_images(store_path, offsets, shapes, rows, checked)):
            m = image_moments(features_of(img, descriptor.pixels, f"image {i0 + r}"))
            acc = m if acc is None else merge_moments(acc, m)
    return acc


def block_vectors(store_path: str, i0: int, offsets, shapes, checked, rows, descriptor: ImageDescriptor, scale,
                  W, numba_threads: int = 1) -> np.ndarray:
    """Descriptors of the images ``rows`` of one block."""
    images = read_images(store_path, offsets, shapes, rows, checked)
    with kernel_threads(numba_threads):
        try:
            return descriptor.vectors(images, scale, W, names=[f"image {i0 + r}" for r in rows])
        except ValueError as exc:
            # name the image by its id, which the worker can read from the store
            msg = str(exc)
            for r in rows:
                tag = f"image {i0 + r}:"
                if msg.startswith(tag):
                    raise ValueError(f"image {i0 + r} ({_image_id(store_path, i0 + r)}):"
                                     f"{msg[len(tag):]}") from None
            raise


class ImageSource:
    """Descriptors of the images of an :class:`~streamcov.data.ImageStore`.

    See :mod:`streamcov.stream.source` for the protocol. The feature scale
    is fitted on training images (:meth:`fit`); the frequencies follow from
    it and the descriptor's seed.
    """

    kind = "image"
    default_block = 64
    needs_fit = True

    def __init__(self, store, descriptor: ImageDescriptor, state: dict | None = None):
        self.store = store
        self.descriptor = descriptor
        self.state = dict(state or {})
        spec = descriptor.pixels
        if spec.needs_color and (store.shapes[:, 2] != 3).any():
            i = int(np.flatnonzero(store.shapes[:, 2] != 3)[0])
            raise ConfigError(f"[pixels]: spec {spec.name!r} uses R, G, B but image {i} "
                              f"({store.ids()[i]}) is grey; use a grey spec")
        from .._config import check_memory
        from ..descriptors.pixels import check_sampled_pixels

        # a block of descriptors (and the operator of one image per thread) must fit in memory
        check_memory(8.0 * self.dim * (self.default_block + 2), f"method.D = {descriptor.n_frequencies} (descriptors of "
                     f"{self.dim} numbers)", "lower method.D")

        if spec.stride > 1:
            check_sampled_pixels(store.shapes, spec.stride, store.ids())

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
        return (str(self.store.path), int(b0), offsets[b0:b1 + 1], self.store.shapes[b0:b1],
                self.store.check_of("pixels", int(offsets[b0]), int(offsets[b1])))

    def fit(self, train, runtime, bounds):
        """A copy whose feature scale is measured on the pixels of the training rows."""
        import dask

        tasks = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            rows = np.flatnonzero(train[b0:b1])
            if len(rows):
                tasks.append(dask.delayed(block_moments, pure=True)(
                    *self._args(b0, b1), rows, self.descriptor, runtime.numba_threads))
        parts = runtime.compute(*tasks)
        acc = parts[0]
        for p in parts[1:]:
            acc = merge_moments(acc, p)
        scale = feature_scale(acc, self.descriptor.scaling)
        return ImageSource(self.store, self.descriptor, {"scale": [float(s) for s in scale]})

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
    def from_spec(cls, spec: dict, store):
        return cls(store, ImageDescriptor.from_dict(spec["descriptor"]), spec.get("state"))

    def identity(self) -> dict:
        return {"kind": self.kind, "store": self.store.identity, "path": str(self.store.path),
                "n": self.n, "n_pixels": int(self.store.offsets[-1]), "descriptor": self.descriptor.as_dict()}

    def block_tasks(self, bounds, numba_threads: int = 1, rows=None):
        import dask

        if "scale" not in self.state:
            raise RuntimeError("ImageSource.block_tasks before fit: the feature scale is unknown")
        scale = np.asarray(self.state["scale"])
        W = self.descriptor.frequencies_for(scale) if self.descriptor.representation == "operator" else None
        out = []
        for b0, b1 in zip(bounds[:-1], bounds[1:]):
            local = np.arange(b1 - b0) if rows is None else np.flatnonzero(rows[b0:b1])
            if not len(local):
                continue
            task = dask.delayed(block_vectors, pure=True)(*self._args(b0, b1), local, self.descriptor, scale, W,
                                                          numba_threads)
            out.append((int(b0), int(b1), local, task))
        return out

    def window_keys(self, bounds, width: int):
        # a few blocks per compute call: at most that many blocks' vectors in memory
        return [i // (2 * max(1, width)) for i in range(len(bounds) - 1)]
