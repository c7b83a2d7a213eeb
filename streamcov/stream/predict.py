"""The one predict path: a saved model applied to a store of its kind, block by block."""
from __future__ import annotations

import csv
import json
import os
import stat
import tempfile
import time
from pathlib import Path

import numpy as np

from ..data.ragged import check_on_error, inside_source, read_only_attrs, same_files, store_words
from ..errors import ConfigError, ModelError, StreamcovError, arg, arg_name, bool_arg, int_arg, path_arg
from ..files import TMP_SUFFIX, atomic_write, remove_dead_temporaries, temporary_prefix
from .model import PREDICTIONS_HEADER, FittedPipeline, _source_record, _written_by_predict
from .runtime import dask_runtime
from .source import block_bounds, open_store_of_kind, source_from_spec, store_kind


def _predict_codes(model, V, n_numba: int = 1):
    from .._config import kernel_threads

    with kernel_threads(n_numba, 1):   # the map's numba kernels within the task's share of the thread plan
        return model.predict_codes(V)


def predict(model_dir, store_path, out_csv=None, scheduler: str | None = None, workers: int | None = None,
            block: int | None = None, train_accuracy: bool = False, on_error: str = "stop") -> dict:
    """Predict every row of a store, block by block; write ``id,predicted,label`` and return a summary.

    The descriptor settings and everything fitted on the training rows (the
    feature scale of images, the map, the scaler) come from the model, so
    the features match those it was trained on. For an image model,
    ``store_path`` may also be a folder of images (a folder per class, or
    images directly in it, unlabelled): it is ingested into a temporary store,
    an image that cannot be read stopping it (``on_error="stop"``) or left out
    and named in a note (``"skip"``; :func:`streamcov.data.images.ingest_images`).

    Accuracy: on the store the model was trained on (same identity), on the
    test rows of the fold the model was trained for (its protocol), and with
    ``train_accuracy`` also on that fold's training rows; on any other store,
    on every row whose label the model knows. The predictions of every row
    are always written, by default to ``<model>/predictions/<store name>.csv``.

    Parameters
    ----------
    model_dir : path
        The model folder of a run (``<output>/model``).
    store_path : path
        A store of the model's kind; for an image model, also a folder of images.
    out_csv : path, optional
        The CSV file to write (``--out``; default ``<model_dir>/predictions/<store name>.csv``).
    scheduler : str, optional
        ``threads`` (default), ``synchronous``, ``local-cluster`` or a scheduler address
        ``tcp://HOST:PORT``, or a ``distributed.Client`` or cluster object of the caller's, as for
        :func:`streamcov.run`.
    workers : int, optional
        Threads of ``threads``, or worker processes of ``local-cluster`` (default: one per core); given
        alone, a LocalCluster of that many. Refused with ``synchronous`` or an address.
    block : int, optional
        Rows per block (default: the block size the model was trained with, else the source's default).
    train_accuracy : bool
        Also report the accuracy on the training rows of the model's fold (on the store it was trained on).
    on_error : {"stop", "skip"}
        For a folder of images: what an image that cannot be read does (above); ``"skip"`` is refused for a
        store.
    """
    from .runtime import check_local_workers, resolve_runtime

    model_dir = path_arg("model_dir", model_dir, "MODEL", "the model folder of a run (<output>/model)")
    store_path = path_arg("store_path", store_path, "STORE", "a store of the kind the model was trained on "
                                                             "(for an image model, also a folder of images)")
    out_csv = None if out_csv is None else path_arg("out_csv", out_csv, "--out", "the CSV file to write")
    train_accuracy = bool_arg("train_accuracy", train_accuracy)
    check_on_error(on_error)
    scheduler, workers = resolve_runtime(scheduler, workers)
    scheduler = scheduler or "threads"
    if scheduler == "local-cluster" and workers is None:   # one worker process per core (a count: checked above)
        check_local_workers(None, arg("scheduler", scheduler))
    if block is not None:
        block = int_arg("block", block, " (rows per block), or None for the model's")
    _check_model_path(Path(model_dir), Path(store_path))
    model_sha = _model_sha(model_dir)   # the model these predictions are of (_write_predictions)
    model = FittedPipeline.load(model_dir)
    path = Path(store_path)
    folder = model.kind == "image" and path.is_dir() and not (path / "zarr.json").exists()
    if on_error != "stop" and (path / "zarr.json").is_file():   # it would be ignored: a store was checked as
        # it was written (anything else that is not a folder of images is refused below, by what it is)
        raise ConfigError(f"{arg('on_error', on_error)}: only a folder of images is read file by file (ingested "
                          f"for the model); {path} is a store: leave {arg_name('on_error')} out")
    if folder:
        from ..data.images import ingest_images
        from ..errors import FormatError, skip_hint

        exclude, trained_exclude = _folders_left_out(model)
        _remove_stale_copies()
        from ..lock import host_tag

        with tempfile.TemporaryDirectory(prefix=f"{COPY_PREFIX}{host_tag()}-{os.getpid()}-") as tmp:
            try:
                store = ingest_images(path, Path(tmp) / "input.zarr", unlabelled=True, skip=_too_small_for(model),
                                      on_error=on_error, exclude=exclude, exclude_absent_ok=True)
            except FormatError as exc:
                raise skip_hint(exc, arg("on_error", "skip"), "named in a note, without a prediction") from None
            try:
                summary = _predict(model, model_dir, Path(tmp) / "input.zarr", out_csv, scheduler, workers, block,
                                   train_accuracy, inputs=path, model_sha=model_sha)
            except StreamcovError as exc:   # name the folder the user gave, not the store made from it and gone
                exc.args = tuple(str(a).replace(str(Path(tmp) / "input.zarr"), str(path)) for a in exc.args)
                raise
        summary["store"] = str(path)
        from ..data.imageio import excluded_images

        left_out = excluded_images(path, exclude)
        if left_out:   # said, since those images get no row
            summary["excluded"] = left_out
            names = ", ".join(repr(n) for n in exclude)
            why = ("ETH-80's segmentation maps, as `streamcov ingest images` leaves them out by default"
                   if trained_exclude in (None, ["maps"]) else
                   f"as the model's training left out folders named {', '.join(repr(n) for n in trained_exclude)}: "
                   f"data.exclude, or ingest images --exclude")
            summary.setdefault("notes", []).append(
                f"{left_out} image(s) in folders named {names} under {path} left out, not predicted ({why}); "
                f"rename those folders to predict their images")
        if store.constant_images:   # said by a note of _predict; listed here, since the store is gone
            summary["constant_images"] = store.constant_images
        skipped = list(store.attrs.get("skipped", []))
        if skipped:   # images the folder holds that have no row in the predictions: said, as ingest says it
            from ..data.ragged import skipped_text

            summary["skipped"] = skipped
            summary.setdefault("notes", []).append(f"{len(skipped)} image(s) of {path} skipped, not predicted "
                                                   f"{skipped_text(skipped)}")
        return summary
    return _predict(model, model_dir, path, out_csv, scheduler, workers, block, train_accuracy, model_sha=model_sha)


#: the temporary copy of an image folder given to predict: this prefix, the host, the pid, tempfile's name
COPY_PREFIX = "streamcov-predict-"


def _remove_stale_copies() -> None:
    """Delete the temporary copies of image folders that predicts killed with SIGKILL left (a copy of every
    pixel of the folder): those of this machine whose process no longer exists. Copies of live predicts, and
    every copy of another machine sharing the temporary folder (its pids are not this machine's), are left."""
    import re
    import shutil

    from ..lock import left_by_dead

    for p in left_by_dead(tempfile.gettempdir(), re.escape(COPY_PREFIX), "-.+"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


def _folders_left_out(model) -> tuple[tuple, list | None]:
    """The folder names a folder given to ``predict`` is read without, and the model's recorded ``exclude``
    (None when it recorded none): the folders its training left out (``data.exclude``, ``ingest images
    --exclude``; scoring the masks a model was trained without, and calling that folder a new one, was wrong),
    else ETH-80's ``maps`` as ingestion's default. The folder need not have any of them."""
    record = model.info.get("source_record")
    trained = record.get("exclude") if isinstance(record, dict) else None
    if not (isinstance(trained, list) and all(isinstance(n, str) and n for n in trained)):
        return ("maps",), None
    return tuple(trained), list(trained)


def _too_small_for(model):
    """``skip(image)`` for the images of a folder given to ``predict``: a reason when the image keeps fewer
    than 2 pixels at the model's pixel stride (its covariance needs 2), which the model cannot change; such
    an image is left out and named, as ingestion does with images smaller than 2 x 2, instead of refusing
    the folder. None when the model samples every pixel."""
    from ..descriptors.image import ImageDescriptor
    from ..descriptors.pixels import MIN_SAMPLED_PIXELS, n_sampled_pixels

    stride = int(ImageDescriptor.from_dict(model.source["descriptor"]).pixels.stride)   # 1 for ConvNet sources
    if stride <= 1:
        return None

    def skip(image):
        h, w = image.shape[:2]
        n = n_sampled_pixels(h, w, stride)
        if n < MIN_SAMPLED_PIXELS:
            return (f"image of {h} x {w} pixels keeps {n} sampled pixel at the model's pixels.stride = {stride}; "
                    f"a covariance needs at least 2")
        return None

    return skip


def _check_model_path(model_dir: Path, store_path: Path) -> None:
    """The common slips: the arguments swapped, a run folder given for its model."""
    if (model_dir / "zarr.json").is_file():
        hint = " (the arguments are MODEL then STORE)" if (store_path / "model.json").is_file() else ""
        raise ModelError(f"{model_dir}: a store, not a model folder{hint}; the model folder comes first "
                         f"(streamcov predict MODEL STORE; predict(model_dir, store_path) in Python)")
    if (not (model_dir / "model.json").exists() and model_dir.is_dir() and (store_path / "model.json").is_file()
            and not (model_dir / "model" / "model.json").is_file()):
        raise ModelError(f"{model_dir}: not a model folder, and {store_path} is one (the arguments are MODEL then "
                         f"the images or STORE); streamcov predict MODEL STORE")
    if not (model_dir / "model.json").exists() and (model_dir / "model" / "model.json").is_file():
        raise ModelError(f"{model_dir}: a run's output folder; its model is {model_dir / 'model'}")
    if model_dir.name in ("model.json", "model.npz") and model_dir.is_file():
        raise ModelError(f"{model_dir}: one of a model's files; give the model's folder, {model_dir.parent}")


def _check_out(out_csv: Path, model_dir: Path, name: str, inputs: Path | None = None,
               archive: str | None = None) -> None:
    """The predictions never replace a model's, a store's or a run's own files (``--out model/model.json``,
    ``--out store.zarr/zarr.json``, ``--out run/result.json``), an image of the folder being predicted, any
    other file with content that is not a predictions CSV (an earlier run's is replaced; an empty file too),
    nor anything at the path that is not a regular file: they are written beside the path and renamed onto
    it, which would replace a link, a device or a FIFO by a plain file. Nor are they written into
    ``archive``, the skeleton archive the store was ingested from (:func:`_archive_of`). ``name`` is how
    messages name the path."""
    from ..data.imageio import IMAGE_EXTENSIONS
    from ..data.ragged import enclosing_store
    from ..lock import OUTPUT_MARKER, RUN_FOLDERS, a_runs_own

    store = enclosing_store(out_csv.parent)
    if store is not None:
        raise ConfigError(f"{name}: inside the zarr store {store}; write the predictions outside every store")
    archive = inside_source(out_csv, archive)
    if archive is not None:   # as a run's output folder is not (tasks/runner.py)
        raise ConfigError(f"{name}: inside {archive}, the archive the store was ingested from; the file would "
                          f"become part of that archive, which every later run would then find changed: write "
                          f"the predictions outside {archive}")
    if (out_csv.parent / "model.json").is_file():
        raise ConfigError(f"{name}: beside the model files of {out_csv.parent}; write the predictions "
                          f"elsewhere, e.g. {_default_out(model_dir, out_csv.stem)}")
    if a_runs_own(out_csv):
        # whether or not the run wrote it yet (an interrupted run's result.json, its lock file): the run would
        # find a CSV there, or replace the predictions
        raise ConfigError(f"{name}: {'a folder' if out_csv.name in RUN_FOLDERS else 'a file'} of the run in "
                          f"{out_csv.parent} (its own), which the predictions would replace; write them to a new "
                          f"file or elsewhere, e.g. "
                          f"{_default_out(model_dir, out_csv.stem)}")
    try:
        st = out_csv.lstat()
    except OSError:   # nothing there yet (a name too long: said by the write probe)
        return
    if not stat.S_ISREG(st.st_mode):
        what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket")
        raise ConfigError(f"{name}: {what}, not a regular file; the predictions would replace it by a plain file: "
                          f"give the path of a regular file (a link's target itself) or a new one")
    if _written_by_predict(out_csv):   # an earlier run of the same command: replaced
        return
    if (out_csv.parent / OUTPUT_MARKER).exists():
        raise ConfigError(f"{name}: a file of the run in {out_csv.parent} (not predictions), which the predictions "
                          f"would replace; write them to a new file or elsewhere, e.g. "
                          f"{_default_out(model_dir, out_csv.stem)}")
    if inputs is not None and inputs.is_dir() and inputs.resolve() in out_csv.resolve().parents:
        what = "an image" if out_csv.suffix.lower() in IMAGE_EXTENSIONS else "a file"
        raise ConfigError(f"{name}: {what} of {inputs}, the folder being predicted, which the predictions would "
                          f"replace; write them to a new file or outside that folder")
    if st.st_size:   # anything else with content: a user's notes, a script, another tool's CSV
        raise ConfigError(f"{name}: an existing file that is not a predictions CSV (its first line is not "
                          f"{PREDICTIONS_HEADER}), which the predictions would replace; give a new path, or delete "
                          f"the file first if it may go")


def _archive_of(store_path: Path) -> str | None:
    """The archive folder the skeleton store at ``store_path`` was ingested from (its source record's ``path``),
    whose every file its record counts; None for an image store (its record counts the images alone, which
    predictions are not), a generated store, or none that can be read (said when the store is opened)."""
    from ..data.skeletons import FORMAT_NAME

    if not (store_path / "zarr.json").is_file():
        return None
    try:
        attrs = read_only_attrs(store_path)
    except (StreamcovError, OSError, ValueError):
        return None
    record = attrs.get("source_record")
    return record.get("path") if attrs.get("format") == FORMAT_NAME and isinstance(record, dict) else None


def _check_orientation(model, model_dir, store) -> None:
    """A model and a store whose images were read with and without their EXIF orientation (one of them
    written by an earlier streamcov, or from arrays) see differently the images that carry one: refused
    when the store's source folder is there and holds such images; nothing can be checked otherwise."""
    from ..data.imageio import exif_turned

    if model.info.get("orientation") == store.orientation:
        return
    record = store.attrs.get("source_record")
    folder = Path(record.get("path", "")) if isinstance(record, dict) and record.get("path") else None
    if folder is None or not folder.is_dir():
        return
    turned = exif_turned(folder / i for i in store.ids())
    if not turned:
        return
    which = f"{len(turned)} image(s) of {folder} carry an EXIF orientation (first: {turned[0].name})"
    if store.orientation is None:
        raise ModelError(f"{store.path}: written by an earlier streamcov, which read images without their EXIF "
                         f"orientation, and {which}: they are stored sideways, but the model was trained on "
                         f"upright images; ingest the images again")
    raise ModelError(f"{model_dir}: the model was trained on images read without their EXIF orientation (by an "
                     f"earlier streamcov, or from arrays), but {which}, read upright now; train the model again "
                     f"on a store ingested by this streamcov")


def _size_note(model, store) -> str | None:
    """A note when the descriptor has the pixel coordinates x, y among its features (paper 004's, in pixels)
    and images fall outside the sizes of the model's training images: the coordinates' variances grow with the
    image, so such images get descriptors the model never saw, and often the same wrong class. None when the
    features have no x, y (ConvNet features resize every image), the model recorded no sizes (saved before
    they were recorded), or every image is within them."""
    from ..descriptors.image import ImageDescriptor

    trained = model.info.get("image_size")
    features = getattr(ImageDescriptor.from_dict(model.source["descriptor"]).pixels, "features", ()) or ()
    coords = [f for f in ("x", "y") if f in features]
    if not isinstance(trained, dict) or not coords or not len(store):
        return None
    (h0, h1), (w0, w1) = trained["height"], trained["width"]
    hw = np.asarray(store.shapes)[:, :2]
    out = (hw[:, 0] < h0) | (hw[:, 0] > h1) | (hw[:, 1] < w0) | (hw[:, 1] > w1)
    if not out.any():
        return None
    first = int(np.flatnonzero(out)[0])
    trained_size = f"{h0} x {w0}" if (h0, w0) == (h1, w1) else f"{h0}-{h1} x {w0}-{w1}"
    return (f"{int(out.sum())} of {len(store)} images are of another size than the model's training images "
            f"({trained_size} pixels; first: {store.ids()[first]}, {hw[first, 0]} x {hw[first, 1]}): the "
            f"descriptor's pixel coordinates ({', '.join(coords)}) grow with the image, so their predictions may be "
            f"wrong; resize them to the training size, or train a model on images of these sizes")


def _check_pixel_scale(model, model_dir, store) -> None:
    """Images on another scale than the model's: integer images are read as fractions of their range (0
    to 1) and float images as they are, so float images of 0 to 255 given to a model of 8-bit images (or
    8-bit images to a model of such float images) would give features 255 times off, and predictions
    without a word. Refused when one side's pixels stay within 1 and the other's go beyond 2 (models
    that recorded no scale: not checked)."""
    trained = model.info.get("pixel_scale")
    if trained is None:
        return
    given = store.pixel_scale()
    if (trained <= 1 and given > 2) or (trained > 2 and given <= 1):
        def scale(top, dtype):
            return (f"{dtype} images, read as fractions of their range (0 to 1)" if dtype != "float32"
                    else f"float images with pixels up to {top:.4g} in magnitude")

        fix = ("scale them to 0 to 1 (divide 8-bit values by 255)" if given > 2 else
               f"give float images on the model's scale (up to {trained:.4g})")
        raise ModelError(f"{store.path}: {scale(given, store.pixel_dtype)}, but the model in {model_dir} was "
                         f"trained on {scale(trained, model.info.get('pixel_dtype', 'uint8'))}: its features "
                         f"would be on another scale; {fix}, or train a model on images like these")


def _default_out(model_dir, store_path) -> Path:
    return Path(model_dir) / "predictions" / f"{Path(store_path).resolve().name}.csv"


def _default_choice(model_dir, store_path) -> tuple[Path, str | None]:
    """The default predictions file of ``store_path``, and a note when it is not the plain one: two stores of one
    folder name (``2024-01/store.zarr``, ``2024-02/store.zarr``) shared ``<name>.csv``, and the second predict
    replaced the first one's predictions without a word. The plain file is taken when it is absent or records
    this store; otherwise ``<name>-<8 hex digits of the store's path>.csv``."""
    import hashlib

    plain = _default_out(model_dir, store_path)
    source = str(Path(store_path).resolve())
    # a folder or a file predict did not write there is refused by the checks of the place, as named
    if not (plain.is_file() and _written_by_predict(plain)):
        return plain, None
    owner = _recorded_source(plain)
    if owner == source:
        return plain, None
    if owner is None:   # written by a version that recorded no store: taken over once, and said (it stayed stale)
        return plain, (f"{plain} records no store (written with --out, or by an earlier streamcov): replaced by "
                       f"the predictions of {source}")
    alt = plain.with_name(f"{Path(source).name}-{hashlib.sha256(source.encode()).hexdigest()[:8]}.csv")
    return alt, f"{plain} holds the predictions of another store, {owner}; these go to {alt.name}"


def _recorded_source(csv_path: Path) -> str | None:
    try:
        doc = json.loads(_source_record(csv_path).read_text())
    except (OSError, ValueError):
        return None
    return doc.get("store") if isinstance(doc, dict) and isinstance(doc.get("store"), str) else None


def _predict(model, model_dir, store_path, out_csv, scheduler, workers, block, train_accuracy,
             inputs: Path | None = None, model_sha: str | None = None) -> dict:
    """``out_csv`` None: the default path; ``inputs``, the folder being predicted when it is not a store;
    ``model_sha``, the digest of the ``model.json`` loaded (:func:`_write_predictions`)."""
    t0 = time.perf_counter()
    default, place_note = out_csv is None, None
    if out_csv is None:
        out_csv, place_note = _default_choice(model_dir, inputs or store_path)
        name = f"the default predictions file {out_csv} (choose another with {arg_name('out_csv', '--out')})"
    else:
        name = arg("out_csv", out_csv, flag="--out")
    try:
        is_dir = Path(out_csv).is_dir()
    except OSError:   # a name too long: said by the write probe below
        is_dir = False
    if is_dir:
        raise ConfigError(f"{name}: a folder; give the path of a CSV file")
    _check_out(Path(out_csv), Path(model_dir), name, inputs, _archive_of(Path(store_path)))
    try:
        Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from ..lock import why_not_a_folder

        why = why_not_a_folder(Path(out_csv).parent, exc)
        raise ConfigError(f"{name}: cannot create its folder ({why}); choose another path") from None
    try:   # before any work: the predictions are written beside it, then moved onto it (atomic_write)
        # the very name the predictions' temporary gets (host and pid make it longer than the file's own)
        fd, probe = tempfile.mkstemp(dir=Path(out_csv).parent, prefix=temporary_prefix(Path(out_csv), owned=True),
                                     suffix=TMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
        remove_dead_temporaries(Path(out_csv))   # those of predicts killed (SIGKILL) while writing it
    except OSError as exc:   # read-only or virtual file system, no permission, a name too long
        raise ConfigError(f"{name}: cannot write there ({exc.strerror}); choose another path") from None
    if not Path(store_path).exists():
        raise ConfigError(f"{store_path}: no such store or folder")
    kind = store_kind(store_path)
    if kind != model.kind:
        raise ModelError(f"{store_path}: {store_words(store_path)}, but the model in {model_dir} was "
                         f"trained on {model.kind} data")
    store = open_store_of_kind(kind, store_path)
    if kind == "image":
        _check_orientation(model, model_dir, store)
        _check_pixel_scale(model, model_dir, store)
    source = source_from_spec(model.source, store)
    if model.input_width is not None and model.input_width != source.dim:
        raise ModelError(f"{model_dir}: the model takes {model.input_width}-dimensional descriptors but its "
                         f"descriptor gives {source.dim} on {store_path}; the model is damaged: train it again")
    bounds = block_bounds(source.n, block or model.info.get("block") or source.default_block)
    predictions = np.empty(source.n, dtype=np.int64)
    with dask_runtime(scheduler, workers) as runtime:
        import dask

        if hasattr(source, "check_parallel_memory"):
            source.check_parallel_memory(runtime.parallelism)
        # rows whose descriptor took a fallback (a degenerate body frame): said, as a run says it
        data_notes = source.data_warnings(runtime) if hasattr(source, "data_warnings") else []

        tasks = source.block_tasks(bounds, runtime.numba_threads)
        keys = source.window_keys(bounds, runtime.parallelism)
        shared = runtime.share(model)
        for key in dict.fromkeys(keys):
            window = [t for t, k in zip(tasks, keys) if k == key]
            preds = runtime.compute(*[dask.delayed(_predict_codes)(shared, t, runtime.numba_threads)
                                      for *_, t in window])
            for (b0, b1, _, _), p in zip(window, preds):
                predictions[b0:b1] = p
        info = runtime.info
    names = np.asarray(model.label_names, dtype=object)
    pred_names = names[predictions]
    summary = {"model": str(model_dir), "store": str(store_path), "n": source.n,
               "seconds": round(time.perf_counter() - t0, 3), "runtime": info}
    true = store.label_strings()
    summary.update(_accuracies(model, store, pred_names, true, names, train_accuracy))
    if data_notes:
        summary.setdefault("notes", []).extend(data_notes)
    if kind == "image":
        size = _size_note(model, store)
        if size is not None:
            summary.setdefault("notes", []).append(size)

    def write(fh):
        w = csv.writer(fh)
        w.writerow(PREDICTIONS_HEADER.split(","))
        for sid, p, t in zip(store.ids(), pred_names, true):
            w.writerow([sid, p, t])

    source = str(Path(inputs or store_path).resolve()) if default else None
    # the default file is chosen again under the lock: a predict of another store of this folder name may have
    # taken the plain name since (two predicts of 2024-01/s.zarr and 2024-02/s.zarr started together)
    choose = (lambda: _default_choice(model_dir, inputs or store_path)) if default else None
    out_csv, chosen_note = _write_predictions(model_sha, Path(model_dir), Path(out_csv), write, source, choose)
    if default:
        place_note = chosen_note
    summary["predictions"] = str(out_csv)
    if place_note:
        summary.setdefault("notes", []).append(place_note)
    return summary


def _model_sha(model_dir) -> str | None:
    """SHA-256 of the model's ``model.json`` (which records the digest of its arrays), or None when unreadable
    (the load says why)."""
    from ..data.integrity import file_sha256

    try:
        return file_sha256(Path(model_dir) / "model.json")
    except OSError:
        return None


def _write_predictions(model_sha: str | None, model_dir: Path, out_csv: Path, write, source: str | None = None,
                       choose=None) -> tuple[Path, str | None]:
    """Write the predictions CSV: the old file or the whole new one, never a part (the temporary named by host
    and pid, so that a later predict can tell one a killed process left from one being written). Into the
    model's own folder only while the model is the one predicted with: a run that trained the output folder
    again meanwhile removed the earlier model's predictions from it, and these would have stood beside the new
    model. So the write holds the output folder's lock (a run writing there now refuses it) and checks that
    ``model.json`` is the one loaded. ``source``: the store recorded beside a CSV at the default place
    (:func:`_default_choice`); ``choose``: that choice, made again under the lock (a model outside a run's
    folder: the lock of its predictions folder), since another predict may have written the file meanwhile.
    Returns the file written and the note of its choice."""
    import contextlib

    from ..lock import OUTPUT_MARKER

    model_dir = model_dir.resolve()   # "." given from inside it: its parent is the output folder
    inside = model_dir in out_csv.resolve().parents
    run_folder = model_dir.parent if (model_dir.parent / OUTPUT_MARKER).exists() else None
    lock_folder = run_folder if inside and run_folder is not None else out_csv.parent if choose else None
    note = None
    with _predictions_lock(lock_folder) if lock_folder is not None else contextlib.nullcontext():
        if inside and _model_sha(model_dir) != model_sha:
            raise ModelError(f"{model_dir}: the model was replaced (trained again) while these predictions were "
                             f"computed with the earlier one; nothing was written: predict again")
        if choose is not None:
            out_csv, note = choose()
        out_csv.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out_csv, write, binary=False, owned=True)
        if source is not None:
            atomic_write(_source_record(out_csv), lambda fh: fh.write(json.dumps({"store": source}) + "\n"),
                         binary=False, owned=True)
        else:   # --out onto a default place: the record of the file it replaced no longer holds
            _source_record(out_csv).unlink(missing_ok=True)
    return out_csv, note


#: what a predict writing into a model's folder names as the holder of the output folder's lock
PREDICTIONS_WRITER = "streamcov predict (writing predictions into the model's folder)"
#: seconds a predict waits for another predict's write into the same folder (a CSV: a moment), not for a run
PREDICTIONS_WAIT = 60.0


def _predictions_lock(run_folder: Path):
    """The output folder's lock, for writing predictions. Held by another predict writing its CSV, it is waited
    for (two predicts of one model ended at the same moment: the second was refused after all its work); held
    by a run (which may be replacing the model), or for longer than :data:`PREDICTIONS_WAIT`, refused."""
    import contextlib

    from ..errors import StoreError
    from ..lock import OUTPUT_LOCK, _holder, output_lock

    deadline = time.monotonic() + PREDICTIONS_WAIT
    stack = contextlib.ExitStack()
    while True:
        try:
            stack.enter_context(output_lock(run_folder, PREDICTIONS_WRITER))
            return stack
        except StoreError:
            lock = run_folder / OUTPUT_LOCK
            try:   # None: a lock file being written, or released, this moment (looked at again)
                holder = _holder(lock) if lock.is_file() or not lock.exists() else False
            except OSError:
                holder = False
            if not (holder is None or isinstance(holder, dict) and holder.get("command") == PREDICTIONS_WRITER) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _accuracies(model, store, pred, true, names, train_accuracy) -> dict:
    """Test accuracy of the model's own protocol on its training store; labelled accuracy elsewhere."""
    out: dict = {}
    ident = model.info.get("store") or {}
    same = bool(ident) and ident == store.identity and "split" in model.info and "fold" in model.info
    moved = unrecorded = False
    if same:
        fold = _model_fold(model, store)
        moved = fold == "moved"   # the protocol now gives other rows (an edited splits file): not its test rows
        unrecorded = fold == "unrecorded"   # which rows they were is not known: scored as every labelled row
        if fold is not None and not (moved or unrecorded):
            train, test = fold
            out.update({"evaluated_on": f"test rows of fold {model.info['fold']} (the model's protocol)",
                        "accuracy": float((pred[test] == true[test]).mean()), "n_test": int(test.sum())})
            if train_accuracy:
                out.update({"train_accuracy": float((pred[train] == true[train]).mean()),
                            "n_train": int(train.sum())})
            return out
    # the model's own store, whose fold is not known as trained: none of the notes of another store below
    own_fold_unknown = moved or unrecorded
    known = np.isin(true, names)
    if known.any():
        why = ""   # why the model's own store is not scored on its fold's test rows
        if moved:
            why = (f" (fold {model.info['fold']} of the model's protocol now gives other training and test rows "
                   f"than it was trained with)")
        elif unrecorded:
            why = (f" (the model records no digest of fold {model.info['fold']}'s rows: it was saved by a streamcov "
                   f"from before it recorded one, 2026-11-29 for the streamed learners and 2026-12-02 for exact-svm "
                   f"and the in-memory image task; whether the protocol still gives that fold its rows cannot be "
                   f"told)")
        elif same:
            why = " (the model's fold was not found)"
        out.update({"evaluated_on": "every row whose label the model knows" + why,
                    "accuracy": float((pred[known] == true[known]).mean()), "n_labelled": int(known.sum())})
    if (~known).any():
        out["n_unknown_labels"] = int((~known).sum())
    notes = []
    if moved and "accuracy" in out:
        notes.append(f"the model's protocol ([split] {model.info['split'].get('kind')}"
                     f"{', file ' + str(model.info['split'].get('file')) if model.info['split'].get('file') else ''}) "
                     f"now gives fold {model.info['fold']} other rows than the model was trained with (the splits file "
                     f"was edited?): this accuracy includes its training rows and is not a test accuracy; train the "
                     f"model again for the test accuracy of the protocol as it is now")
        out["includes_training_rows"] = True
    if unrecorded and "accuracy" in out:
        notes.append("this is the model's training store, and its rows include the model's training rows: this "
                     "accuracy is not a test accuracy; train the model again with this streamcov, which records its "
                     "fold's rows, to be scored on its test rows")
        out["includes_training_rows"] = True
    if train_accuracy and own_fold_unknown:
        notes.append(f"{arg('train_accuracy', True)}: the model's training rows on this store are not known (see "
                     f"evaluated_on), so no training accuracy is given")
    trained_record, given_record = model.info.get("source_record"), store.attrs.get("source_record")
    if ("accuracy" in out and not own_fold_unknown and not ident and _is_training_store(model, store)
            and (trained_record is None or _same_source(trained_record, given_record))):
        # the model's own store, but no identity recorded (the in-memory task on some of its images,
        # data.max_per_class): which rows were its test rows is not known here
        notes.append("this is the model's training store, of which the model was trained on a part whose test rows "
                     "are not known here (no identity recorded: data.max_per_class?): its rows include the "
                     "model's training rows, so this accuracy is not a test accuracy; the run's result gives the "
                     "test accuracy of its protocol")
        out["includes_training_rows"] = True
    elif "accuracy" in out and not own_fold_unknown and _same_source(trained_record, given_record):
        if model.info.get("store_path"):
            notes.append(f"this store was written from the same data as the model's training store "
                         f"({model.info.get('store_path')}) but is another one: its rows include the model's training "
                         f"rows, so this accuracy is not a test accuracy; predict the model's own store for the test "
                         f"rows of its protocol")
        else:   # trained in memory on a folder: its test rows are in the run's predictions
            notes.append(f"these are the images the model was trained on ({trained_record.get('path')}): its "
                         f"training images are among them, so this accuracy is not a test accuracy; the run's "
                         f"result gives the test accuracy of its protocol")
        out["includes_training_rows"] = True
    elif "accuracy" in out and not own_fold_unknown and _same_generator(trained_record, given_record):
        # sequence i of the generator depends on its settings and i alone: the smaller store is the other's start
        shared = _training_rows_among(model, store)
        common = min(trained_record["n_sequences"], given_record["n_sequences"])
        if shared is None or shared:
            count = (f"{shared} of its {len(true)} rows are the model's training rows, so this accuracy is not a test "
                     f"accuracy" if shared else
                     f"its first {common} rows are the training store's, so they may include the model's training "
                     f"rows (which ones is not known: that store is not there as the model recorded it), and this "
                     f"accuracy may not be a test accuracy")
            notes.append(f"this store was generated with the same settings as the model's training store "
                         f"({model.info.get('store_path')}) but {given_record['n_sequences']} sequences instead of "
                         f"{trained_record['n_sequences']}: {count}; generate it with another seed for new data")
            if shared:
                out["includes_training_rows"] = True
    elif "accuracy" in out and not own_fold_unknown and _same_archive(trained_record, given_record):
        # the same archive read with other reader options (a subset): its sequences are the archive's, under the
        # same ids; which of them the model trained on is known from its training store
        options = given_record.get("options") or {}
        read = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "the default options"
        shared = _training_rows_among(model, store)
        if shared is None:
            notes.append(f"this store was read from the same archive as the model's training store "
                         f"({model.info.get('store_path')}), with {read}: its rows may include the model's training "
                         f"rows (which ones is not known: that store is not there as the model recorded it), so this "
                         f"accuracy may not be a test accuracy")
        elif shared:
            notes.append(f"this store was read from the same archive as the model's training store "
                         f"({model.info.get('store_path')}), with {read}: {shared} of its {len(true)} rows are the "
                         f"model's training rows, so this accuracy is not a test accuracy; predict the model's own "
                         f"store for the test rows of its protocol")
            out["includes_training_rows"] = True
    if train_accuracy and not own_fold_unknown:
        notes.append(f"{arg('train_accuracy', True)} applies only to the store the model was trained on (its "
                     f"training rows are known there); this store is another one")
    if notes:
        out["notes"] = notes
    return out


def _same_source(trained, given) -> bool:
    """Whether two stores' source records name the same data: the same generator settings, or the same files
    (:func:`~streamcov.data.ragged.same_files`: their contents where both records hold them, else their relative
    paths, sizes and times) read the same way, wherever the archive or folder lies (a copy at another path is
    the same data; its path alone is not compared when both record their files). How images were grouped and
    whether they were accepted unlabelled (predict reads a folder with group level 1, unlabelled) do not change
    the data; the folders left out do, and the files say so."""
    if not (isinstance(trained, dict) and isinstance(given, dict) and trained):
        return False
    drop = {"unlabelled", "group_level", "exclude"}
    if isinstance(trained.get("files"), dict) and isinstance(given.get("files"), dict):
        if not same_files(trained["files"], given["files"]):
            return False
        drop |= {"path", "files"}
    return {k: v for k, v in trained.items() if k not in drop} == {k: v for k, v in given.items() if k not in drop}


def _is_training_store(model, store) -> bool:
    """Whether ``store`` is the store the model recorded as its training store (the same folder)."""
    path = model.info.get("store_path")
    try:
        return bool(path) and Path(path).resolve() == Path(store.path).resolve()
    except (OSError, RuntimeError):
        return False


def _same_generator(trained, given) -> bool:
    """Whether two stores come from the synthetic generator with the same settings but for the sequence count:
    its sequence ``i`` depends on the seed, the subject and class counts, the frames, the noise and ``i`` only
    (:mod:`streamcov.data.synth`), so the smaller store is the first rows of the larger."""
    if not (isinstance(trained, dict) and isinstance(given, dict) and trained.get("format") == "synthetic"):
        return False
    rest = [{k: v for k, v in r.items() if k != "n_sequences"} for r in (trained, given)]
    return (rest[0] == rest[1] and isinstance(trained.get("n_sequences"), int)
            and isinstance(given.get("n_sequences"), int) and trained["n_sequences"] != given["n_sequences"])


def _same_archive(trained, given) -> bool:
    """Whether two stores were read from the same archive (format and files, wherever it lies) with other
    reader options (MSR-Action3D's ``subset="cvpr12"``): their sequences are the archive's, under the ids the
    reader gives them."""
    if not (isinstance(trained, dict) and isinstance(given, dict)):
        return False
    return (trained.get("format") == given.get("format") and same_files(trained.get("files"), given.get("files"))
            and trained.get("options") != given.get("options"))


def _model_fold(model, store, unrecorded_ok: bool = False):
    """``(train, test)`` masks of the model's fold on ``store`` (its training store) by the protocol as it is
    now; ``"moved"`` when that fold's rows are not those the model recorded (an edited splits file),
    ``"unrecorded"`` when the model recorded none (nothing tells its test rows; with ``unrecorded_ok`` the masks,
    unchecked, as models without a digest were read before); None when the protocol has no fold of that name."""
    from ..splits import folds, rows_sha256

    info = model.info
    try:
        fold_masks = folds(info["split"], store.labels, store.groups,
                           group_names=getattr(store, "group_names", None), store_split=store.split,
                           split_names=store.split_names, seed=int(info.get("seed", 0)),
                           label_names=store.label_names)
    except StreamcovError:   # the protocol's own refusals, in its words
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        # a table a run wrote reads; one that does not is an edited description
        raise ModelError(f"the model's model.json: info.split cannot be read as a [split] table "
                         f"({exc.__class__.__name__}: {str(exc)[:120]}); the model's description is damaged: train "
                         f"the model again") from None
    for name, train, test in fold_masks:
        if name == info.get("fold"):
            recorded = info.get("rows_sha256")
            if recorded is None and not unrecorded_ok:   # a model saved before streamcov recorded it
                return "unrecorded"
            if recorded is not None and recorded != rows_sha256(train, test):
                return "moved"
            return train, test
    return None


def _training_rows_among(model, store) -> int | None:
    """How many rows of ``store`` have the id of a training row of the model's fold, read from the model's
    training store (where the model recorded it, with the identity it had); None when that store is not there
    or its fold no longer gives the rows the model was trained with."""
    info = model.info
    try:
        trained = open_store_of_kind(model.kind, info["store_path"])
    except (KeyError, StreamcovError, OSError):
        return None
    if not info.get("store") or trained.identity != info["store"] or "split" not in info:
        return None
    try:   # the protocol as it is now (a splits file moved or edited: not known, rather than an error of predict)
        # a model without the digest: its fold as the protocol gives it now (counted as before it was recorded)
        fold = _model_fold(model, trained, unrecorded_ok=True)
    except StreamcovError:
        return None
    if fold is None or fold == "moved":
        return None
    ids = set(np.asarray(trained.ids(), dtype=object)[fold[0]].tolist())
    return sum(i in ids for i in store.ids())
