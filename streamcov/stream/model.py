"""Saving fitted pipelines without pickle: arrays in ``.npz``, the rest in JSON.

A model folder holds ``model.json`` (the source spec: modality, descriptor
settings and what was fitted on training rows; class names from an
allow-list, constructor parameters, label names, provenance) and
``model.npz`` (every fitted array). Loading reads the npz with
``allow_pickle=False`` and builds objects only from classes named in
:data:`ALLOWED`, so a model file can never execute code. The same state dump
serves the training checkpoints and the fitted maps kept in feature stores.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import numbers
import zipfile
from pathlib import Path

import numpy as np

from ..data.integrity import array_sha256, arrays_sha256, file_sha256
from ..errors import ConfigError, ModelError, path_arg
from ..files import atomic_write, atomic_write_text

FORMAT = "streamcov.model"
# 3: the map's seed-drawn arrays left out (map_redraw); 4: model.json records its own SHA-256 (doc_sha256)
VERSION = 4

ALLOWED = {
    "RGWSampler": "streamcov.features",
    "OrthogonalRBFSampler": "streamcov.features",
    "QuasiRandomRBFSampler": "streamcov.features",
    "RandomMaclaurinSampler": "streamcov.features",
    "FastfoodSampler": "streamcov.features",
    "GaussianRandomFeatures": "streamcov.features",
    "HeadProductSketch": "streamcov.features",
    "BlockSumFeatures": "streamcov.features",
    "GaussianNystroem": "streamcov.features",
    "RBFSampler": "sklearn.kernel_approximation",
    "Nystroem": "sklearn.kernel_approximation",   # models saved before GaussianNystroem
    "StandardScaler": "sklearn.preprocessing",
    "GlobalCenterScaler": "streamcov.preprocessing",
    "SGDClassifier": "sklearn.linear_model",
    "GaussianKernelSVC": "streamcov.stream.exact",
    "LBFGSClassifier": "streamcov.stream.lbfgs",
    "SVC": "sklearn.svm",
}

_SKIP = {"_loss_function_"}  # rebuilt by the estimator from its parameters


def _json_value(v):
    """``v`` as JSON (scalars, and lists and string-keyed tables of them, nested), or ValueError."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {k: _json_value(x) for k, x in v.items()}
    raise ValueError(v)


# parameters scikit-learn deprecated and then removed, with the values that meant its default: not written when a
# model is saved, and dropped when it is loaded by a scikit-learn whose class no longer takes them, so that a model
# saved before loads after (SVC's probability: deprecated in 1.9, whose default became "deprecated", removed in
# 1.11; every SVC-based model, the exact SVM's and the images', stored it). Another value asked for what the class
# no longer does, and is refused as before.
RETIRED_PARAMS = {("SVC", "probability"): (False, "deprecated")}


def _retired(name: str, key: str, value) -> bool:
    """Whether ``value`` of parameter ``key`` of class ``name`` is a default that :data:`RETIRED_PARAMS` drops."""
    defaults = RETIRED_PARAMS.get((name, key))
    return defaults is not None and isinstance(value, (bool, str)) and value in defaults


def _jsonable_params(est) -> dict:
    params = est.get_params(deep=False)
    out = {}
    for k, v in params.items():
        if _retired(type(est).__name__, k, v):
            continue
        try:
            out[k] = _json_value(v)
        except ValueError:
            raise ModelError(f"{type(est).__name__}.{k} = {v!r} cannot be stored as JSON") from None
    return out


def dump_estimator(est, prefix: str, arrays: dict) -> dict:
    """Describe ``est`` as JSON; put its fitted arrays into ``arrays`` under ``prefix``.

    Fitted attributes (ending or starting with ``_``) that are arrays,
    scalars, tuples of numbers or allow-listed estimators (dumped in turn)
    are kept; anything else is left out, and rebuilt by the estimator.
    """
    name = type(est).__name__
    if name not in ALLOWED:
        raise ModelError(f"{name} is not in the model allow-list")
    state, scalars, tuples, nested = {}, {}, {}, {}
    for key, value in vars(est).items():
        if key in _SKIP or not (key.endswith("_") or key.startswith("_")) or key.startswith("__"):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise ModelError(f"{name}.{key} holds Python objects; cannot store it")
            arrays[f"{prefix}{key}"] = value
            state[key] = f"{prefix}{key}"
        elif isinstance(value, (bool, int, float, str, np.generic)) or value is None:
            scalars[key] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, tuple) and all(isinstance(v, (int, float, np.generic)) for v in value):
            tuples[key] = [v.item() if isinstance(v, np.generic) else v for v in value]
        elif type(value).__name__ in ALLOWED:
            nested[key] = dump_estimator(value, f"{prefix}{key}.", arrays)
    return {"class": name, "params": _jsonable_params(est), "arrays": state, "scalars": scalars,
            "tuples": tuples, "estimators": nested}


def _new_estimator(desc: dict):
    """The unfitted estimator of ``desc``'s class (from the allow-list only) and parameters."""
    name = desc.get("class")
    if name not in ALLOWED:
        raise ModelError(f"names class {name!r}, which is not in the allow-list "
                         f"{sorted(ALLOWED)}")
    cls = getattr(importlib.import_module(ALLOWED[name]), name)
    params = desc["params"]
    if isinstance(params, dict) and any(_retired(name, k, v) for k, v in params.items()):
        import inspect

        takes = inspect.signature(cls).parameters
        params = {k: v for k, v in params.items() if k in takes or not _retired(name, k, v)}
    return cls(**params)


def load_estimator(desc: dict, arrays, copy: bool = True) -> object:
    """The estimator ``desc`` describes (:func:`dump_estimator`), its fitted arrays taken from ``arrays``.

    ``copy=False`` uses the arrays as they are (for arrays made for this estimator alone, e.g. read
    from a file: a feature map's projections can take gigabytes).
    """
    est = _new_estimator(desc)
    name = desc["class"]
    for key, array_name in desc["arrays"].items():
        if array_name not in arrays:
            raise ModelError(f"array {array_name!r} of {name} missing from model.npz")
        setattr(est, key, np.array(arrays[array_name]) if copy else np.asarray(arrays[array_name]))
    for key, value in desc["scalars"].items():
        setattr(est, key, value)
    for key, value in desc.get("tuples", {}).items():
        setattr(est, key, tuple(value))
    for key, sub in desc.get("estimators", {}).items():
        setattr(est, key, load_estimator(sub, arrays, copy))
    return est


#: the first line of predict's CSV (a run's predictions.csv has a fold column first)
PREDICTIONS_HEADER = "id,predicted,label"


def _source_record(csv_path: Path) -> Path:
    """Where predict records which store the predictions CSV at its default place came from."""
    return csv_path.with_name(f".{csv_path.name}.source.json")


def _written_by_predict(path: Path) -> bool:
    """Whether ``path`` is a predictions CSV (its header is predict's): one a run of predict may replace."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            # a byte-order mark: the CSV saved again by a spreadsheet; a bounded read: a huge file without newlines
            return fh.readline(256).lstrip("\ufeff").rstrip("\r\n") == PREDICTIONS_HEADER
    except (OSError, UnicodeDecodeError):
        return False


def _remove_old_predictions(folder: Path) -> None:
    """Delete the predictions an earlier model of ``folder`` wrote to predict's default place
    (``<model>/predictions/<store>.csv``): beside a new model they were another model's, taken for its own.
    Only files that are predictions CSVs (first line ``id,predicted,label``) go."""
    target = Path(folder) / "predictions"
    try:
        entries = list(target.glob("*.csv"))
    except OSError:
        return
    for p in entries:
        if p.is_file() and not p.is_symlink() and _written_by_predict(p):
            p.unlink(missing_ok=True)
            _source_record(p).unlink(missing_ok=True)   # the store it came from (predict)
    with contextlib.suppress(OSError):
        target.rmdir()   # only when nothing else is left there


def atomic_write_npz(path: Path, arrays: dict) -> None:
    atomic_write(path, lambda fh: np.savez(fh, **arrays))


# what reading a checkpoint raises when its file is damaged (truncated, edited): it is then a cache that is
# not used, and training starts again (read_checkpoint says a checkpoint_json nested too deeply as a ValueError)
UNREADABLE_CHECKPOINT = (OSError, ValueError, KeyError, zipfile.BadZipFile)


def checkpoint_arrays(arrays: dict, doc: dict) -> dict:
    """A learner's checkpoint as npz members: ``arrays`` and ``checkpoint_json``, ``doc`` with the SHA-256 of
    the arrays and its own (:func:`read_checkpoint` refuses a file edited since)."""
    doc = json.loads(json.dumps({**doc, "arrays_sha256": arrays_sha256(arrays)}))   # as it will read back
    doc["doc_sha256"] = doc_sha256_of(doc)
    return {**arrays, "checkpoint_json": np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)}


def read_checkpoint(npz) -> tuple[dict, dict]:
    """``(doc, arrays)`` of an open checkpoint written by :func:`checkpoint_arrays`; ValueError when the file
    was edited since (coefficients or state changed by hand: a model that was never trained), or was written
    without its digests."""
    try:
        doc = json.loads(npz["checkpoint_json"].tobytes().decode())
    except RecursionError:
        raise ValueError("checkpoint_json is nested too deeply to be a checkpoint's description") from None
    arrays = {k: npz[k] for k in npz.files if k != "checkpoint_json"}
    if (not isinstance(doc, dict) or doc.get("doc_sha256") != doc_sha256_of(doc)
            or doc.get("arrays_sha256") != arrays_sha256(arrays)):
        raise ValueError("not the checkpoint as written (edited, or written without its digests)")
    return doc, arrays


class AsyncCheckpointWriter:
    """Write checkpoints (``atomic_write_npz``) from a background thread, the newest one winning.

    :meth:`save` hands over a dict of arrays that the caller will not change
    again (or a function that builds it, called on the writer's thread) and
    returns at once. While a write is in progress, or within
    ``min_interval`` seconds of the last one (or of the writer's start), a
    newer checkpoint replaces any one still waiting: a learner whose steps
    are faster than the disk (or than ``min_interval``) skips intermediate
    checkpoints instead of waiting for them or filling the disk's bandwidth.
    Every checkpoint is complete and a run resumed from any of them reaches
    the same model, so a skipped one changes nothing but how much work a
    crash loses. :meth:`close` writes the last one handed over at once, in
    the caller's thread, and re-raises a failed write. The thread starts
    with the first save due (``min_interval`` after the writer's start): a
    run shorter than that writes one checkpoint, its last, and starts no
    thread. Until then a checkpoint handed over waits for the next save or
    for :meth:`close` (a crash in between loses it: at most the first
    ``min_interval`` seconds of work).
    """

    def __init__(self, path, min_interval: float = 0.0):
        import threading
        import time

        self.path = Path(path)
        self.min_interval = float(min_interval)
        self._cond = threading.Condition()
        self._pending = None
        self._busy = False
        self._urgent = False
        self._closed = False
        self._last = time.monotonic()
        self._error: BaseException | None = None
        self._thread = None     # started by the first save

    def _write(self, arrays) -> None:
        """Write one checkpoint handed over: its arrays, or what the function handed over builds."""
        atomic_write_npz(self.path, arrays() if callable(arrays) else arrays)

    def _run(self):
        import time

        while True:
            with self._cond:
                while True:
                    if self._pending is None:
                        if self._closed:
                            return
                        self._cond.wait()
                        continue
                    if self._closed:
                        return  # close() writes the one waiting
                    wait = self._last + self.min_interval - time.monotonic()
                    if wait <= 0 or self._urgent:
                        break
                    self._cond.wait(wait)
                arrays, self._pending, self._busy = self._pending, None, True
                self._last = time.monotonic()
            try:
                self._write(arrays)
            except BaseException as exc:  # surfaced by flush()
                self._error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def save(self, arrays: dict) -> None:
        if self._error is not None:
            raise self._error
        with self._cond:
            # only a writer idle with nothing to write needs waking: with one waiting, it is asleep until
            # its interval ends or busy writing, and takes the newest either way. Waking it at every
            # save would hand it the interpreter at every step of a fast learner.
            wake = self._pending is None
            self._pending = arrays
            if self._thread is None:
                import time

                if time.monotonic() < self._last + self.min_interval:
                    return    # not due yet: the next save (or close) finds it waiting
                import threading

                self._thread = threading.Thread(target=self._run, daemon=True, name="streamcov-checkpoint")
                self._thread.start()
            elif wake:
                self._cond.notify_all()

    def flush(self) -> None:
        """Write the checkpoint waiting, now, and return when everything handed over is on disk."""
        with self._cond:
            self._urgent = True
            self._cond.notify_all()
            while self._busy or (self._pending is not None and self._thread is not None):
                self._cond.wait()
            self._urgent = False
            arrays, self._pending = self._pending, None
        if arrays is not None:   # no thread was started
            self._write(arrays)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Write the last checkpoint handed over (here, not handed to the thread: no wait for it to
        wake up) and stop the thread."""
        with self._cond:
            while self._busy:       # an older one being written: the newest goes after it
                self._cond.wait()
            arrays, self._pending, self._closed = self._pending, None, True
            self._cond.notify_all()
        try:
            if arrays is not None:
                self._write(arrays)
        finally:
            if self._thread is not None:
                self._thread.join()
        if self._error is not None:
            raise self._error


def _map_width(fmap) -> int | None:
    from ..features.registry import BlockSumFeatures

    if isinstance(fmap, BlockSumFeatures):
        return fmap.width
    width = getattr(fmap, "n_features_in_", None)
    return None if width is None else int(width)


def _leave_out_drawn(fmap, arrays: dict) -> dict | None:
    """Take out of ``arrays`` the feature map's arrays that its seed draws again (a random map's
    projections: 1.5 GB at nu = 20000 on the shipped skeleton descriptor), keeping their SHA-256; returns
    what :func:`_draw_again` needs, or None when the map keeps everything (its class does not name its
    data-dependent arrays, :func:`streamcov.features.registry.data_arrays`)."""
    from ..features.registry import data_arrays

    if fmap is None:
        return None
    seed = fmap.get_params(deep=False).get("random_state", 0)
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        return None   # drawn from no seed the file could keep (random_state None): every array stays in it
    keep, width = data_arrays(fmap, "map."), _map_width(fmap)
    if keep is None or width is None:
        return None
    drawn = sorted(k for k in arrays if k.startswith("map.") and k not in keep)
    if not drawn:
        return None
    out = {"width": width, "sha256": {k: array_sha256(arrays[k]) for k in drawn}}
    for k in drawn:
        del arrays[k]
    return out


def doc_sha256_of(doc: dict) -> str:
    """SHA-256 of a model description without its ``doc_sha256``: keys sorted, JSON without spaces."""
    import hashlib

    body = {k: v for k, v in doc.items() if k != "doc_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _draw_again(desc: dict, redraw: dict, arrays: dict) -> None:
    """Put the map's drawn arrays back into ``arrays``: the map of ``desc``'s parameters fitted on zeros
    (only its data-dependent arrays depend on the rows, and those are in the file), each checked against
    the SHA-256 it was saved with."""
    from ..features.registry import fitted_without_data

    est = _new_estimator(desc)
    try:
        est._validate_params()
    except (TypeError, ValueError) as exc:
        raise ModelError(f"the feature map has an invalid parameter ({exc})") from None
    drawn: dict = {}
    dump_estimator(fitted_without_data(est, redraw["width"]), "map.", drawn)
    for key, digest in redraw["sha256"].items():
        if key not in drawn or array_sha256(drawn[key]) != digest:
            raise ModelError(f"the feature map's {key.removeprefix('map.')} drawn again from its seed "
                             f"differs from the one the model was trained with (another numpy, scikit-learn "
                             f"or streamcov draws other numbers): train the model again with this installation")
        arrays[key] = drawn[key]


def _named_arrays(desc) -> set:
    """The array names (members of model.npz) that an estimator's description and its nested ones name."""
    out: set = set()
    if isinstance(desc, dict):
        if isinstance(desc.get("arrays"), dict):
            out |= {v for v in desc["arrays"].values() if isinstance(v, str)}
        if isinstance(desc.get("estimators"), dict):
            for sub in desc["estimators"].values():
                out |= _named_arrays(sub)
    return out


def _zip_damage(path: Path) -> str | None:
    """What is wrong with the zip file at ``path`` (its directory, a member's CRC), or None; its members are read
    in blocks, none of them kept in memory."""
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except Exception as exc:   # noqa: BLE001 - whatever a damaged file raises is what is said of it
        return f"{exc.__class__.__name__}: {exc}"
    return None if bad is None else f"BadZipFile: Bad CRC-32 for file {bad!r}"


def _check_npz_members(npath: Path, jpath: Path, doc: dict) -> None:
    """Refuse, before any member is read, a model.npz holding members its description does not name, or
    members whose declared (uncompressed) sizes are not those of their arrays or exceed this machine's memory:
    a member of gigabytes of zeros compresses to a few kilobytes."""
    from .._config import _size, total_memory

    named = set().union(*(_named_arrays(doc.get(part)) for part in ("feature_map", "scaler", "classifier")))
    total = 0
    try:
        with zipfile.ZipFile(npath) as zf:
            for info in zf.infolist():
                name = info.filename.removesuffix(".npy")
                if name not in named:
                    raise ModelError(f"{npath}: holds {info.filename!r}, which {jpath.name} does not name; a "
                                     f"model.npz holds the arrays of its model alone: train the model again")
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                              else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = header(fh)
                    size = int(np.prod(shape, dtype=object)) * dtype.itemsize + fh.tell()
                # (an object array is left to np.load, which refuses it unread: allow_pickle=False)
                if not dtype.hasobject and size != info.file_size:
                    raise ModelError(f"{npath}: member {info.filename!r} declares {info.file_size} bytes but "
                                     f"holds a {dtype} array of shape {tuple(shape)}; the file is damaged: train "
                                     f"the model again")
                total += info.file_size
    except ModelError:
        raise
    except Exception as exc:   # not a zip file, a damaged header: said as np.load would say it
        raise ModelError(f"{npath}: unreadable ({exc.__class__.__name__}: {exc}); the file is damaged: train "
                         f"the model again") from None
    limit = total_memory()
    if limit and total > limit:
        raise ModelError(f"{npath}: its arrays take {_size(total)}, more than the {_size(limit)} of memory this "
                         f"process may use; predict on a machine with more memory, or train a smaller model")


def _estimators(est, name: str):
    """``(name, estimator)`` of ``est`` and of the allow-listed estimators it holds (an SVC inside the exact SVM,
    the blocks of a block sum), depth first."""
    yield name, est
    for key, value in vars(est).items():
        if type(value).__name__ in ALLOWED and value is not est:
            yield from _estimators(value, f"{name}'s {key}")


def _check_internals(est) -> None:
    """ValueError when a fitted estimator's arrays do not fit together where compiled code reads them without
    bounds checks: a scikit-learn SVC's support vectors and dual coefficients (libsvm), and what the
    estimator's own ``check_fitted`` checks (the index arrays of numba kernels)."""
    from sklearn.svm import SVC

    if type(est) is SVC and hasattr(est, "support_"):
        from .exact import check_fitted_svc

        check_fitted_svc(est)
    check = getattr(est, "check_fitted", None)
    if callable(check):
        check()


def _check_info(info, where) -> None:
    """The provenance predict reads (:func:`~streamcov.stream.predict.predict`) is of the form a run writes."""
    def bad(key, value, expected):
        raise ModelError(f"{where}: info.{key} = {value!r} is not {expected}; the model's description is damaged: "
                         f"train the model again")

    def integer(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if not isinstance(info, dict):
        raise ModelError(f"{where}: info = {info!r} is not a table; the model's description is damaged: train the "
                         f"model again")
    block = info.get("block")
    if block is not None and not (integer(block) and block >= 1):
        bad("block", block, "a whole number of rows >= 1")
    seed = info.get("seed")
    if seed is not None and not integer(seed):
        bad("seed", seed, "a whole number")
    for key in ("store_path", "pixel_dtype", "rows_sha256"):
        if info.get(key) is not None and not isinstance(info[key], str):
            bad(key, info[key], "a string")
    fold = info.get("fold")
    if fold is not None and not (isinstance(fold, str) or integer(fold)):
        bad("fold", fold, "a fold name")
    for key in ("store", "source_record"):
        if info.get(key) is not None and not isinstance(info[key], dict):
            bad(key, info[key], "a table")
    scale = info.get("pixel_scale")
    if scale is not None and not (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                                  and np.isfinite(scale)):
        bad("pixel_scale", scale, "a finite number")
    size = info.get("image_size")
    if size is not None and not (isinstance(size, dict) and set(size) == {"height", "width"} and all(
            isinstance(v, list) and len(v) == 2 and all(integer(x) and x >= 1 for x in v) and v[0] <= v[1]
            for v in size.values())):
        bad("image_size", size, "a table of height and width, each [smallest, largest] in pixels")
    split = info.get("split")
    if split is not None:
        from ..splits import SPLIT_KINDS

        if not isinstance(split, dict):
            bad("split", split, "a [split] table")
        if split.get("kind", "subject-parity") not in SPLIT_KINDS:
            bad("split.kind", split.get("kind"), f"a kind of split ({', '.join(SPLIT_KINDS)})")
        # the rest of the table is read by the protocol, when predict is given the model's training store
        # (stream.predict._model_fold, which says a table it cannot read as a damaged description)


def _run_note(folder: Path) -> str:
    """What the run whose output holds (or is) ``folder`` said of its model, when it saved none (a method that
    compares images pairwise has no vector per image: ``result.json``'s ``model_note``)."""
    for result in (folder / "result.json", folder.parent / "result.json"):
        try:
            note = json.loads(result.read_text()).get("model_note")
        except (OSError, ValueError, AttributeError):
            continue
        if note:
            return f"; {result} says: {note}"
    return ""


def read_description(folder) -> tuple[Path, Path, dict]:
    """``(model.json, model.npz, description)`` of a model folder: the description read and checked as
    :meth:`FittedPipeline.load` does before it reads an array (a streamcov model of a version this streamcov
    reads, not edited since it was saved: its ``doc_sha256``). Raises :class:`ModelError` with one line."""
    folder = path_arg("folder", folder, None, "the model folder of a run (<output>/model)")
    jpath, npath = folder / "model.json", folder / "model.npz"
    if not folder.is_dir():
        # a file, a device or a pipe there is not "no such" folder
        what = ("a file, not a model folder" if folder.is_file() else "a device or a pipe, not a model folder"
                if folder.exists() else "no such model folder")
        raise ModelError(f"{folder}: {what} (a run writes its model into <output>/model)" + _run_note(folder))
    for path in (jpath, npath):
        if not path.is_file():
            if path.exists():   # a pipe would wait for a writer and a device (/dev/zero) never ends
                raise ModelError(f"{path}: not a regular file (a pipe, a device or a link to one); a model "
                                 f"folder holds model.json and model.npz as files: train the model again")
            raise ModelError(f"{path}: missing; a model folder holds model.json and model.npz: train "
                             f"the model again")
    try:
        doc = json.loads(jpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelError(f"{jpath}: not valid JSON ({exc}); the file is damaged: train the model again") from None
    except RecursionError:
        raise ModelError(f"{jpath}: nested too deeply to be a model's description (not a streamcov model); "
                         f"train the model again") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelError(f"{jpath}: not a streamcov model (format "
                         f"{doc.get('format') if isinstance(doc, dict) else None!r})")
    version = doc.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise ModelError(f"{jpath}: model format version {version!r}; this streamcov reads versions 1 to "
                         f"{VERSION}: upgrade streamcov or train the model again")
    if (version >= 4 or "doc_sha256" in doc) and doc.get("doc_sha256") != doc_sha256_of(doc):
        raise ModelError(f"{jpath}: edited after it was saved (it is not the description its SHA-256, "
                         f"doc_sha256, was taken of); a model's description is not edited: train the model "
                         f"again")
    return jpath, npath, doc


def source_of(doc: dict) -> dict:
    """The source spec of a model's description; version 1 (skeleton models only) kept its descriptor at the top."""
    source = doc.get("source")
    if source is None:
        d = dict(doc["descriptor"])
        d["center"] = doc.get("center")
        source = {"kind": "skeleton", "n_joints": doc["n_joints"],
                  "descriptor": {k: d[k] for k in ("center", "gamma", "normalize", "ddof", "dtype") if k in d}}
    return source


def _fitted_part(desc) -> dict | None:
    """One estimator of a model's description as ``info`` shows it: class, parameters, fitted scalars (no array)."""
    if not isinstance(desc, dict):
        return None

    def table(key) -> dict:
        value = desc.get(key)
        return value if isinstance(value, dict) else {}

    out = {"class": desc.get("class"), "params": desc.get("params"), **table("scalars"), **table("tuples")}
    if table("estimators"):
        out["estimators"] = {k: _fitted_part(v) for k, v in table("estimators").items()}
    return out


def describe(folder, verify: bool = False) -> dict:
    """What a model folder holds (``streamcov info MODEL``): task, source and descriptor, feature map, scaler,
    classifier, classes, and the store, split and source archive it was trained on.

    The description is checked as :func:`read_description` checks it (not edited since it was saved); with
    ``verify`` the model is then loaded as ``predict`` loads it (every array read and checked against the
    SHA-256 the description records, a map's projections drawn again from its seed, the parts checked to fit
    together). Raises :class:`ModelError` with one line."""
    jpath, _, doc = read_description(folder)
    try:
        source = source_of(doc)
    except (KeyError, TypeError, ValueError) as exc:   # the same refusal with --verify or without
        raise ModelError(f"{jpath}: incomplete model description ({exc.__class__.__name__}: {exc})") from None
    if verify:
        FittedPipeline.load(folder)
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    names = doc.get("label_names")
    store = info.get("store") if isinstance(info.get("store"), dict) else {}
    shown = ("task", "pipeline", "fold", "seed", "store", "store_path", "split", "source_record")
    return {"path": str(jpath.parent), "format_version": doc["version"],
            **{k: info.get(k) for k in shown[:4]},
            "n_classes": len(names) if isinstance(names, list) else None, "classes": names, "source": source,
            **{part: _fitted_part(doc.get(part)) for part in ("feature_map", "scaler", "classifier")},
            "trained_on": {"store": info.get("store_path"), "store_id": store.get("id"),
                           "store_created": store.get("created"), "split": info.get("split"),
                           "source": info.get("source_record")},
            "recorded": {k: v for k, v in info.items() if k not in shown},   # an image model's method, pixels...
            "checked": _checked_words(doc, verify)}


def _checked_words(doc: dict, verify: bool) -> str:
    what = ("the description (its SHA-256)" if "doc_sha256" in doc else
            f"not the description (format version {doc['version']} records no SHA-256 of it)")
    if verify:
        return f"{what}; every array read and checked (its SHA-256), the model loaded as predict loads it"
    return f"{what}; --verify also reads and checks every array"


class FittedPipeline:
    """Source spec + feature map + optional scaler + classifier, with label names and provenance.

    Parameters
    ----------
    source : dict
        The spec of :mod:`streamcov.stream.source` (``kind``, descriptor settings, fitted state): enough to
        featurize new data of the same kind exactly as the training data was.
    feature_map : transformer or None
        The fitted explicit feature map applied to the descriptors (:mod:`streamcov.features`); None: the
        descriptors go to the scaler or the classifier as they are.
    scaler : transformer or None
        Fitted on the features of the training rows; None: no scaling.
    classifier : estimator
        The fitted classifier; its class codes index ``label_names``.
    label_names : sequence of str
        The class names, distinct, in the order of the codes.
    info : dict, optional
        Provenance, saved with the model (JSON): the pipeline, task, fold and seed, and as the run knows them
        the block size, the training store (identity, path, source record), the split, and for images their
        orientation, sizes and pixel scale. :func:`~streamcov.stream.predict.predict` reads it (the model's
        own test rows, notes on or refusals of data unlike the training data).
    """

    def __init__(self, source: dict, feature_map, scaler, classifier, label_names, info: dict | None = None):
        self.source = dict(source)
        self.feature_map = feature_map
        self.scaler = scaler
        self.classifier = classifier
        self.label_names = list(label_names)
        self.info = dict(info or {})

    @property
    def kind(self) -> str:
        return self.source["kind"]

    @property
    def input_width(self) -> int | None:
        """Width of the descriptor vectors the model takes."""
        first = self.feature_map if self.feature_map is not None else (self.scaler or self.classifier)
        return getattr(first, "n_features_in_", None)

    def transform(self, V: np.ndarray) -> np.ndarray:
        X = V if self.feature_map is None else self.feature_map.transform(V)
        return X if self.scaler is None else self.scaler.transform(X)

    def predict_codes(self, V: np.ndarray) -> np.ndarray:
        from .._config import blas_threads

        with blas_threads(1):   # the same sums as at training time, on any worker
            return self.classifier.predict(self.transform(V))

    def save(self, folder) -> Path:
        from ..lock import why_not_a_folder

        folder = path_arg("folder", folder, None, "the folder to save the model in")
        # what load would refuse is not written (a classifier fitted on label strings was saved, and every
        # predict with it was a traceback)
        self.check("the model to save")
        if (folder / "zarr.json").is_file():   # a store there (one written into a run's model folder): not mixed in
            from ..data.ragged import store_words

            try:
                what = store_words(folder)
            except Exception:   # noqa: BLE001 - a damaged store is a store all the same
                what = "a zarr store"
            raise ConfigError(f"{folder}: {what}, not a model folder; the model's files would be mixed into it: "
                              f"move the store elsewhere, or save the model in another folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:   # a file there or above it, no permission: said, naming the folder
            raise ConfigError(f"{folder}: cannot save the model there "
                              f"({why_not_a_folder(folder, exc)}); choose another folder") from None
        arrays: dict = {}
        doc = {"format": FORMAT, "version": VERSION, "source": self.source,
               "feature_map": None if self.feature_map is None else dump_estimator(self.feature_map, "map.", arrays),
               "scaler": None if self.scaler is None else dump_estimator(self.scaler, "scaler.", arrays),
               "classifier": dump_estimator(self.classifier, "clf.", arrays),
               "label_names": self.label_names, "info": self.info}
        doc["map_redraw"] = _leave_out_drawn(self.feature_map, arrays)
        atomic_write_npz(folder / "model.npz", arrays)
        # the json names the very npz it goes with: a file of another model is refused on load
        doc["arrays_sha256"] = file_sha256(folder / "model.npz")
        doc = json.loads(json.dumps(doc, default=str))   # as it will read back
        # and its own digest: an edited descriptor setting or protocol would otherwise be used as it reads
        doc["doc_sha256"] = doc_sha256_of(doc)
        atomic_write_text(folder / "model.json", json.dumps(doc, indent=1))
        _remove_old_predictions(folder)
        return folder

    @classmethod
    def load(cls, folder) -> "FittedPipeline":
        jpath, npath, doc = read_description(folder)
        # the digest first, and the members' declared sizes: a file of another model (or one grown by a member of
        # gigabytes of zeros, compressed to nothing) is refused before anything of it is read into memory
        digest = doc.get("arrays_sha256")
        try:
            if digest is not None and digest != file_sha256(npath):
                damage = _zip_damage(npath)   # a truncated file, a flipped byte: said as such
                if damage:
                    raise ModelError(f"{npath}: unreadable ({damage}); the file is damaged: train the model again")
                raise ModelError(f"{npath}: not the model.npz that {jpath.name} was saved with (its SHA-256 "
                                 f"differs): the files come from different runs, or one was replaced: train the "
                                 f"model again")
        except OSError as exc:
            raise ModelError(f"{npath}: unreadable ({exc}); train the model again") from None
        _check_npz_members(npath, jpath, doc)
        try:
            with np.load(npath, allow_pickle=False) as npz:
                # read every member now: an object (pickled) array, a truncated file or a
                # flipped byte (zip CRC) fails here
                arrays = {name: npz[name] for name in npz.files}
        except Exception as exc:
            raise ModelError(f"{npath}: unreadable ({exc.__class__.__name__}: {exc}); the file is "
                             f"damaged: train the model again") from None
        try:
            source = source_of(doc)
            if doc.get("map_redraw"):
                _draw_again(doc["feature_map"], doc["map_redraw"], arrays)
            # the arrays just read from the .npz (or drawn again) belong to this model alone: the map's
            # (possibly gigabytes) are not copied again
            fmap = None if doc["feature_map"] is None else load_estimator(doc["feature_map"], arrays, copy=False)
            scaler = None if doc["scaler"] is None else load_estimator(doc["scaler"], arrays)
            clf = load_estimator(doc["classifier"], arrays)
            model = cls(source, fmap, scaler, clf, doc["label_names"], doc.get("info"))
        except ModelError as exc:
            raise ModelError(f"{jpath}: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(f"{jpath}: incomplete model description ({exc.__class__.__name__}: {exc})") from None
        model.check(jpath)
        return model

    def check(self, where="model") -> None:
        """The parts are valid and fit together: the source spec, every estimator's parameters and
        arrays (finite), widths from descriptor to map to scaler to classifier, and the classes."""
        import importlib

        from .source import SOURCE_KINDS

        kind = self.source.get("kind") if isinstance(self.source, dict) else None
        if kind not in SOURCE_KINDS:
            raise ModelError(f"{where}: unknown source kind {kind!r}")
        module, name = SOURCE_KINDS[kind]
        try:
            getattr(importlib.import_module(module), name).check_spec(self.source)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{where}: the {kind} descriptor is invalid ({exc.__class__.__name__}: {exc}); the "
                             f"model is damaged: train it again") from None
        names = self.label_names
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise ModelError(f"{where}: label_names must be distinct class names, got {names!r}")
        _check_info(self.info, where)
        for part, top in (("feature map", self.feature_map), ("scaler", self.scaler), ("classifier", self.classifier)):
            if top is None:
                continue
            for owner, est in _estimators(top, part):
                try:
                    if hasattr(est, "_validate_params"):
                        est._validate_params()
                except (TypeError, ValueError) as exc:
                    raise ModelError(f"{where}: the {owner} has an invalid parameter ({exc})") from None
                for attr, value in vars(est).items():
                    # (classes: said below; objects: refused by save, never read by load)
                    if isinstance(value, np.ndarray) and value.dtype.kind not in "biufcO" and attr != "classes_":
                        raise ModelError(f"{where}: the {owner}'s {attr} holds {value.dtype} values, not numbers; "
                                         f"the model is damaged: train it again")
                    if ((isinstance(value, np.ndarray) and value.dtype.kind in "fc" and not np.isfinite(value).all())
                            or (isinstance(value, float) and not np.isfinite(value))):
                        raise ModelError(f"{where}: the {owner}'s {attr} holds non-finite numbers; the model is "
                                         f"damaged: train it again")
                try:   # the arrays a compiled kernel (libsvm, numba) indexes without bounds checks
                    _check_internals(est)
                except (TypeError, ValueError) as exc:
                    raise ModelError(f"{where}: the {owner} is inconsistent ({exc}); the model is damaged: train "
                                     f"it again") from None
        scale = getattr(self.scaler, "scale_", None)
        if scale is not None and not (np.asarray(scale) > 0).all():
            raise ModelError(f"{where}: the scaler's scale_ holds values <= 0; the model is damaged: train it again")
        # the width of what each part takes and gives, in order
        widths = []
        if self.feature_map is not None:
            from ..features.registry import output_dim

            widths.append(("feature map", output_dim(self.feature_map, 0)))
        if self.scaler is not None:
            widths.append(("scaler", getattr(self.scaler, "n_features_in_", None)))
        widths.append(("classifier", getattr(self.classifier, "n_features_in_", None)))
        coef = getattr(self.classifier, "coef_", None)
        if coef is not None:
            widths.append(("classifier coefficients", int(np.shape(coef)[-1])))
        chain = [w for w in widths if w[1] is not None]
        for (na, a), (nb, b) in zip(chain[:-1], chain[1:]):
            if a != b:
                raise ModelError(f"{where}: the {na} gives {a} features but the {nb} takes {b}; the model is "
                                 f"damaged or assembled from different runs: train it again")
        classes = getattr(self.classifier, "classes_", None)
        if classes is None or len(self.label_names) == 0:
            raise ModelError(f"{where}: the classifier is not fitted or names no classes")
        classes = np.asarray(classes)
        whole = classes.dtype.kind in "iu" or (classes.dtype.kind == "f" and np.isfinite(classes).all()
                                               and (classes == np.round(classes)).all())
        if not whole:   # labels fitted as they are (strings): the model predicts codes (floats 0.0, 1.0 do)
            raise ModelError(f"{where}: the classifier's classes are {classes.dtype} values "
                             f"({', '.join(map(str, classes[:3].tolist()))}{', ...' if len(classes) > 3 else ''}), "
                             f"not the integer codes of the label names; fit it on integer codes (the index of each "
                             f"row's label in label_names)")
        if classes.ndim != 1 or (len(classes) > 1 and not (np.diff(classes) > 0).all()):
            raise ModelError(f"{where}: the classifier's classes {classes.tolist()} are not distinct and in increasing "
                             f"order (as a fitted classifier keeps them); the model is damaged: train it again")
        if classes.min() < 0 or classes.max() >= len(self.label_names):
            raise ModelError(f"{where}: classifier classes {classes.tolist()} do not index the "
                             f"{len(self.label_names)} label names")
        k = len(classes)
        # one row (two classes), one per class (one-vs-rest), or one per pair of classes (SVC's one-vs-one)
        rows = {1, k} | ({k * (k - 1) // 2} if type(self.classifier).__name__ == "SVC" else set())
        if coef is not None and np.shape(coef)[0] not in rows:
            raise ModelError(f"{where}: {np.shape(coef)[0]} coefficient rows for {k} classes")
        if not all(np.isfinite(a).all() for a in (coef, getattr(self.classifier, "intercept_", None))
                   if a is not None):
            raise ModelError(f"{where}: the classifier has non-finite coefficients")
        width = self.input_width
        if isinstance(width, (int, np.integer)) and width > 0:
            # parts that each pass their checks can still not work together (a part of another class
            # in model.json): one prediction now, rather than a crash in the middle of the store
            try:
                self.predict_codes(np.zeros((1, int(width))))
            except (AttributeError, TypeError, ValueError, IndexError, MemoryError) as exc:
                raise ModelError(f"{where}: the model cannot predict ({exc.__class__.__name__}: {exc}); it is "
                                 f"damaged or assembled from different runs: train it again") from None
