"""Classification through the engine: ``skeleton-classification`` and ``image-stream-classification``.

Both tasks build a source (:mod:`streamcov.stream.source`) from their
tables and hand it to :func:`classify`, the one loop over the folds of the
protocol: featurize (:func:`streamcov.stream.featurize.featurize`, fitted on
each fold's training rows when anything depends on data), then the learner
of ``[model]`` (incremental SGD over the feature store, or the exact kernel
SVM in memory), accuracy on the fold's test rows, and the model of the last
fold saved to ``<output>/model``.
"""
from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import numpy as np

from .._config import code_identity
from ..errors import ConfigError, IncompleteStoreError, arg, say_note, toml_value
from ..data.ragged import inside_source, same_files
from ..features.registry import needs_data
from ..files import atomic_write_text
from ..stream.model import FittedPipeline, doc_sha256_of
from .. import splits
from .config import searched


# -------------------------------------------------------------------- inputs
def open_or_ingest(path: Path, open_store, source, ingest, make: str, record=None):
    """Open the store at ``path``; when it is missing or incomplete and a ``source`` is given,
    ``ingest()`` it first (an incomplete one is resumed). ``make`` says how to create it. ``source`` is tested
    against None, not for truth: a generator of 2^63 sequences or more has no length (an OverflowError).

    ``record()``: the source record the pipeline's ``[data]`` would write, and
    a callable that reads its archive's files for their content digest (None
    without files); a complete store written from another source (another
    folder, reader options, generator parameters, or an archive whose
    contents changed since) is refused, never used in its place.
    """
    if path.exists():
        try:
            store = open_store(path)
        except IncompleteStoreError:
            if source is None:
                raise
        else:
            if source is not None and record is not None:
                _same_source(path, store.attrs.get("source_record"), *record())
            return store
    elif source is None:
        raise ConfigError(f"data.store: {path} does not exist{searched(path)}; create it with `{make}` or set "
                          f"data.source")
    return ingest()


def _same_source(path, old: dict | None, new: dict, content=None) -> None:
    """Refuse the store at ``path`` unless its source record ``old`` names the source ``new`` (``content()``:
    the content digest of ``new``'s files, read only when their modification times are not those recorded)."""
    if old == new:
        return
    fix = f"point data.store at a new path, or delete {path} to write it again from [data]"
    if not isinstance(old, dict):
        raise ConfigError(f"data.store: {path} records no source, so it cannot be checked against [data]; {fix}")
    key = next(k for k in sorted(set(old) | set(new), key=lambda k: (k == "files", k)) if old.get(k) != new.get(k))
    if key == "files" and not isinstance(old.get("files"), dict):
        raise ConfigError(f"data.store: {path} records no digest of its archive (written by an earlier "
                          f"streamcov), so it cannot be checked against {new.get('path')}; {fix}")
    read = []   # whether the contents were read: said once, later runs over the same copy read no file

    def contents():
        read.append(True)
        return content()

    if key == "files" and same_files(old["files"], new["files"], contents if content else None):
        if read:
            say_note(f"data.store: {path} is used: the files of {new.get('path')} have new modification times "
                     f"since it was written, but the same contents")
        return
    if key == "orientation":
        raise ConfigError(f"data.store: {path} was written by an earlier streamcov, which read images without "
                          f"their EXIF orientation (photos that say to be turned were stored sideways); {fix}")
    if key == "files" and inside_source(path, new.get("path")) is not None:
        # its own files count as files of the archive: writing it again there would not help
        raise ConfigError(f"data.store: {path} lies inside {new.get('path')}, the folder it was written from, so "
                          f"its own files make that archive look changed; point data.store at a path outside "
                          f"{new.get('path')} (the store is written there again)")
    if key == "files":
        how = ("other contents" if "content" in old["files"]   # an earlier streamcov's store: by size and time
               else "another size or modification time")
        raise ConfigError(f"data.store: {path} was written from {new.get('path')}, which has changed since "
                          f"(files added, removed, or of {how}: "
                          f"{old['files'].get('count')} files then, {new['files'].get('count')} now); {fix}")
    raise ConfigError(f"data.store: {path} was written with {key} = {toml_value(old.get(key))}, but [data] gives "
                      f"{toml_value(new.get(key))}; {fix}")


def _hinted(ingest, *args, **kwargs):
    """``ingest(*args, **kwargs)``, a file that cannot be read saying how the pipeline leaves it out."""
    from ..errors import FormatError, skip_hint

    try:
        return ingest(*args, **kwargs)
    except FormatError as exc:
        raise skip_hint(exc, 'data.on_error = "skip"') from None


def resolve_skeleton_store(data, out: Path, progress: bool = False):
    """Open the pipeline's skeleton store, ingesting or generating it first when needed."""
    from ..data.readers import open_reader
    from ..data.skeletons import SequenceStore, ingest

    if data.synthetic is not None:
        from ..data.synth import SyntheticSkeletons

        p = data.synthetic
        path = Path(data.store) if data.store else out / "synthetic.zarr"
        source = SyntheticSkeletons(n_sequences=p.n_sequences, n_subjects=p.n_subjects, n_classes=p.n_classes,
                                    seed=p.seed, frames=tuple(p.frames), noise=p.noise, where="data.synthetic")
        return open_or_ingest(path, SequenceStore, source,
                              lambda: ingest(source, path, mode="resume", progress=progress), "",
                              record=lambda: (source.record, None))

    def reader():
        if not Path(data.source).exists():
            raise ConfigError(f"data.source: {data.source} does not exist{searched(data.source)}")
        return open_reader(data.format, data.source, where="data.options", **data.options)

    def record():
        r = reader()
        return r.record, r.content

    path = Path(data.store)
    return open_or_ingest(path, SequenceStore, data.source,
                          lambda: _hinted(ingest, reader(), path, mode="resume", progress=progress,
                                          on_error=data.on_error),
                          f"streamcov ingest skeleton --format FORMAT SRC {path}", record=record)


def resolve_image_store(data, progress: bool = False):
    """Open ``data.store``; ingest ``data.source`` (a folder per class) into it first when missing or incomplete."""
    from ..data.imageio import scan_folders
    from ..data.images import ImageStore, ingest_images

    path = Path(data.store)

    def ingest_source():
        if not Path(data.source).is_dir():
            raise ConfigError(f"data.source: {data.source!r}: folder not found")
        return _hinted(ingest_images, data.source, path, group_level=data.group_level,
                       exclude=tuple(data.exclude), pixel_dtype=data.pixel_dtype, mode="resume", progress=progress,
                       on_error=data.on_error)

    def record():
        from functools import partial

        from ..data.imageio import exif_turned
        from ..data.images import source_record
        from ..data.ragged import content_digest, open_group

        if not Path(data.source).is_dir():
            raise ConfigError(f"data.source: {data.source!r}: folder not found")
        entries = scan_folders(data.source, group_level=data.group_level, exclude=tuple(data.exclude))
        new = source_record(data.source, data.group_level, tuple(data.exclude), entries=entries)
        old = dict(open_group(path, "r").attrs).get("source_record")
        if isinstance(old, dict) and "orientation" not in old and not exif_turned(e.path for e in entries):
            new.pop("orientation")   # written before images were turned upright, but none is turned: same pixels
        return new, partial(content_digest, [e.path for e in entries], Path(data.source))

    return open_or_ingest(path, ImageStore, data.source, ingest_source,
                          f"streamcov ingest images --format folders SRC {path}", record=record)


def pixel_spec(pixels):
    try:
        return pixels.spec()
    except ConfigError:   # says its key itself (the missing extra: pixels.source = "cnn" ...)
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"[pixels]: {exc}") from None


# --------------------------------------------------------------------- tasks
def run_skeleton(cfg, ctx) -> dict:
    """``task = "skeleton-classification"``."""
    from ..stream.skeleton import skeleton_source

    store = resolve_skeleton_store(cfg.data, ctx.output, ctx.progress)
    d = cfg.descriptor
    source = skeleton_source(store, d.center, d.gamma, d.normalize, d.ddof, d.dtype, **d.options())
    map_params = cfg.features.params()
    if source.kernel_views > 1 and map_params.get("map") == "none" and cfg.model.learner != "exact-svm":
        # the views enter through the kernel (its mean over the pairs of views); a linear learner on the raw
        # rows would weigh the two views apart, and a sequence and its mirror image would differ
        raise ConfigError("descriptor.mirror = true averages the kernel over the sequence and its mirror image, "
                          "but features.map = \"none\" gives the linear learner the descriptors themselves; set "
                          "features.map (e.g. \"nystroem\") or model.learner = \"exact-svm\", or set "
                          "descriptor.mirror = false")
    if ("level_weights" in d.model_fields_set and d.levels > 1 and map_params.get("map") == "none"
            and cfg.model.learner != "exact-svm"):
        # the weights enter the kernel the map approximates (and the exact SVM's sum of Gram matrices); the linear
        # learner on the descriptors themselves sees every window with weight 1: they were ignored without a word
        raise ConfigError(f"descriptor.level_weights = {toml_value(list(d.level_weights))} weighs the pyramid's "
                          f"levels in the kernel, but features.map = \"none\" gives the linear learner the "
                          f"descriptors themselves, each window with weight 1 (its own weights choose); set "
                          f"features.map (e.g. \"nystroem\") or model.learner = \"exact-svm\", or remove "
                          f"descriptor.level_weights")
    return classify(cfg, ctx, source, kernel_map_params(cfg, source), cfg.features.fit_sample)


def kernel_map_params(cfg, source) -> dict:
    """The ``[features]`` map of a skeleton pipeline over the kernel its descriptor defines: one block per
    pyramid window (their sum of Gaussian kernels) and the views of the mirror (the kernel's mean over them)."""
    map_params = cfg.features.params()
    d = cfg.descriptor
    if (len(source.kernel_blocks) > 1 or source.kernel_views > 1) and map_params.get("map") != "none":
        # a sum of Gaussian kernels, one per pyramid window: one map per block, concatenated (Nystroem: one
        # map of the sum, its landmarks shared by the blocks); with the mirror view, averaged over the views
        map_params["blocks"] = [[int(w), float(c)] for w, c in source.kernel_blocks]
        if source.kernel_views > 1:
            map_params["views"] = source.kernel_views
        n_comp = map_params.get("n_components")
        if n_comp is not None and int(n_comp) < len(source.kernel_blocks) and map_params.get("map") != "nystroem":
            raise ConfigError(f"features.n_components = {n_comp} is fewer than the {len(source.kernel_blocks)} "
                              f"windows of descriptor.levels = {d.levels}"
                              f"{' (overlapping)' if d.overlap else ''}, each of which needs its own features; "
                              f"raise features.n_components, or lower descriptor.levels")
    return map_params


def run_image_stream(cfg, ctx) -> dict:
    """``task = "image-stream-classification"``: paper 004's scalable path out of core.

    ``[method]`` keeps paper 004's conventions: ``sigma1`` (K1, in units of
    ``sqrt(n_features)`` feature scales) and ``sigma2`` (K2, in units of the
    median distance of ``fit_sample`` training vectors) are the ``s`` of
    ``exp(-d^2 / s^2)``, converted here to streamcov's ``sigma = s / sqrt(2)``.

    ConvNet features (``[pixels] source = "cnn"``, paper 004 section 5):
    ``name = "head"`` learns on the unit pooled heads alone (a linear model:
    the linear kernel of x^fc); ``head_weight = w`` appends the head
    (normalised by ``head_norm``) to each log-operator vector and maps the rows
    by the tensor sketch of ``K2 ((1 - w) + w <h, h'>)`` (``head_combine =
    "product"``) or by ``[sqrt(1 - w) z(v), sqrt(w) h]`` for ``(1 - w) K2 + w
    <h, h'>`` (``"sum"``) (:class:`~streamcov.features.HeadProductSketch`),
    the explicit counterparts of the conv + head kernels.
    """
    from ..descriptors.image import ImageDescriptor, is_cnn
    from ..kernels import sigma_from_paper004
    from ..stream.image import ImageSource

    store = resolve_image_store(cfg.data, ctx.progress)
    m = cfg.method
    spec = pixel_spec(cfg.pixels)
    head = m.head_weight is not None
    descriptor = ImageDescriptor(spec, "head" if m.name == "head" else "operator", m.D, sigma_from_paper004(m.sigma1),
                                 "halton" if m.name == "qapprox_loghs" else "random", m.gamma, True,
                                 m.scaling, int(cfg.seed), head=head, head_norm=m.head_norm)
    source = ImageSource(store, descriptor)
    if m.name == "head":
        map_params = {"map": "none"}
    elif head:
        map_params = {"map": "rff-head", "n_components": m.n_components, "sigma": sigma_from_paper004(m.sigma2),
                      "bandwidth": "median", "n_head": descriptor.n_head, "head_weight": float(m.head_weight),
                      "head_combine": m.head_combine}
    else:
        map_params = {"map": "rff-blocks", "n_components": m.n_components, "sigma": sigma_from_paper004(m.sigma2),
                      "bandwidth": "median"}
    from ..preprocessing import suspects_named

    with suspects_named("method.gamma", "method.sigma2"):
        res = classify(cfg, ctx, source, map_params, m.fit_sample)
    scale = res["fitted"]["source"].get("scale")
    record = res["fitted"]["map"]
    res.update({"n_classes": len(store.label_names),
                "features": (spec.as_dict() if is_cnn(spec) else spec.name if spec.name != "custom"
                             else list(spec.features)),
                "n_features": spec.n_features, "method": m.name, "D": m.D, "sigma1": m.sigma1, "gamma": m.gamma,
                "sigma2": m.sigma2, "vector_dim": source.dim, "head_weight": m.head_weight,
                "head_combine": m.head_combine if head else None, "head_norm": m.head_norm,
                "feature_scale": None if scale is None else scale[0] if m.scaling == "global" else scale,
                "median_distance": record.get("median_distance"),
                "bandwidth": None if record.get("median_distance") is None
                else m.sigma2 * record["median_distance"],
                "fit_images": min(m.fit_sample, res["n_train"])})
    return res


# ---------------------------------------------------------------------- loop
def cnn_warnings(cfg) -> list[str]:
    """What a run of ConvNet features says of its settings: blocks whose own map is one cell
    (:meth:`~streamcov.descriptors.cnn.CNNSpec.one_cell_warning`)."""
    pixels = getattr(cfg, "pixels", None)
    if pixels is None or getattr(pixels, "source", None) != "cnn":
        return []
    said = pixels.spec().one_cell_warning()
    return [said] if said else []


def subject_names(store) -> list | None:
    """The names ``split.train_subjects`` may give: a skeleton store's named subjects, an image store's groups."""
    return getattr(store, "subject_names", None) or getattr(store, "group_names", None)


def protocol_folds(cfg, store):
    return splits.folds(cfg.split, store.labels, store.groups, group_names=getattr(store, "group_names", None),
                        subject_names=subject_names(store), store_split=store.split,
                        split_names=store.split_names, seed=cfg.seed, label_names=store.label_names)


def _finished_fold(path: Path, fingerprint: str, truth: np.ndarray, n_classes: int):
    """The saved result of a finished fold (``result``, ``predicted``) when it was written under
    ``fingerprint``; None when it was not, or when the file is damaged or was edited (its own SHA-256,
    class codes out of range, an accuracy its predictions do not give: a note says so; the fold is a
    cache, trained again). ``truth``: the labels of the fold's test rows."""
    try:
        saved = json.loads(path.read_text())
        if saved.get("fingerprint") != fingerprint:
            return None
        if saved.get("doc_sha256") != doc_sha256_of(saved):
            raise ValueError("not the SHA-256 it was written with")
        predicted = np.asarray(saved["predicted"], dtype=np.int64)
        result = saved["result"]
        if predicted.shape != truth.shape or not isinstance(result, dict):
            raise ValueError("predictions of another length")
        if len(predicted) and (predicted.min() < 0 or predicted.max() >= n_classes):
            raise ValueError("class codes out of range")
        if len(truth) and result.get("accuracy") != float((predicted == truth).mean()):
            raise ValueError("an accuracy its predictions do not give")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        say_note(f"{arg('resume', True)}: {path} is damaged or was edited (or written by an earlier streamcov); "
                 f"fold {path.name.removesuffix('.result.json')} is run again")
        return None
    return {"result": result, "predicted": predicted}


def classify(cfg, ctx, source, map_params: dict, fit_sample: int) -> dict:
    """Every fold of ``cfg.split``: featurize, learn, test; the last fold's model is saved."""
    from ..stream.runtime import dask_runtime
    from ..stream.source import block_bounds

    t_start = time.perf_counter()
    store = source.store
    folds = protocol_folds(cfg, store)
    unit = "sequences" if source.kind == "skeleton" else "images"
    block = int(cfg.dask.block_size or source.default_block)
    bounds = block_bounds(source.n, block)
    # absolute: a later run from another working directory compares it with its own store (runner._same_path)
    result: dict = {"pipeline": cfg.name, "store": str(Path(store.path).absolute()), f"n_{unit}": source.n,
                    "descriptor_dim": source.dim, "seed": int(cfg.seed)}
    # rows no fold uses: said for the protocols meant to use every row (a subset of folds leaves rows out)
    whole = cfg.split.kind in ("subjects", "subject-splits-file", "store") and not getattr(cfg.split, "folds", None)
    warnings = cnn_warnings(cfg) + splits.fold_warnings(folds, store.labels, store.label_names,
                                    getattr(store, "groups", None) if whole else None)
    named = getattr(store, "subject_names", None)
    if cfg.split.kind == "subject-parity" and named:
        # subjects named (HDM05's bd, bk, ...) are numbered in sorted order: their parity is an accident of the
        # alphabet, which the run says instead of splitting by it without a word
        codes = np.unique(store.groups)
        side = {p: [str(named[c]) if 0 <= c < len(named) else str(int(c)) for c in codes if c % 2 == p]
                for p in (1, 0)}
        warnings = [*warnings, f"split.kind = \"subject-parity\" on a store whose subjects are named: they are "
                               f"numbered 0, 1, ... in sorted order, so subjects {', '.join(side[1])} train and "
                               f"{', '.join(side[0])} test; give split.kind = \"subjects\" with "
                               f"split.train_subjects (their names or numbers) to choose"]
    skipped = list(store.attrs.get("skipped", []))
    if skipped:   # items of the archive without a row (ingested with on_error = "skip", images under 2 x 2): said by
        # every run, as ingest says it, since the run that ingested its data.source said nothing of them
        from ..data.ragged import skipped_text

        warnings = [*warnings, f"{len(skipped)} {unit[:-1]}(s) of the store's source were skipped when it was "
                               f"ingested {skipped_text(skipped)} and have no row here; the store lists them "
                               f"(`streamcov info {shlex.quote(str(store.path))}`)"]
    if warnings:
        result["warnings"] = warnings
    scheduler = ctx.scheduler or cfg.dask.scheduler
    workers = ctx.workers if ctx.workers is not None else cfg.dask.workers
    with dask_runtime(scheduler, workers) as runtime:
        result["runtime"] = runtime.info
        if hasattr(source, "block_bytes"):
            _check_block_memory(source, block, bounds, runtime.parallelism)
        if hasattr(source, "check_parallel_memory"):
            source.check_parallel_memory(runtime.parallelism)
        # rows whose descriptor took a fallback (a degenerate body frame), images with nothing in them
        lines = source.data_warnings(runtime) if hasattr(source, "data_warnings") else []
        if lines:
            result.setdefault("warnings", []).extend(lines)
        if hasattr(source, "prepare"):
            source, info = source.prepare(runtime, bounds, ctx.output, ctx.progress)
            result.update(info)
        if cfg.model.learner == "exact-svm":
            result.update(_exact(cfg, ctx, source, folds, bounds, runtime))
        else:
            res = _incremental(cfg, ctx, source, folds, bounds, runtime, map_params, fit_sample, unit)
            learner_warnings = res.pop("warnings", [])
            result.update(res)
            if learner_warnings:
                result.setdefault("warnings", []).extend(learner_warnings)
    result["seconds"] = round(time.perf_counter() - t_start, 3)
    return result


def _model_info(cfg, source, fold: str, block: int) -> dict:
    info = {"pipeline": cfg.name, "task": cfg.task, "fold": fold, "seed": int(cfg.seed), "block": block,
            "store": source.store.identity, "store_path": str(Path(source.store.path).absolute()),
            "split": cfg.split.model_dump()}
    record = source.store.attrs.get("source_record")
    if isinstance(record, dict):   # predict tells a store written anew from the same data (its training rows)
        info["source_record"] = record
    if "pixel_dtype" in source.store.attrs:
        info["pixel_dtype"] = source.store.attrs["pixel_dtype"]
    if source.kind == "image":
        from ..data.images import size_range

        info["orientation"] = source.store.orientation
        info["pixel_scale"] = source.store.pixel_scale()
        info["image_size"] = size_range(source.store.shapes)
    return info


def write_predictions(path: Path, ids, names, labels, preds) -> None:
    """``fold,id,predicted,label`` of every test row of every fold: ``preds`` holds ``(fold, rows, codes)``,
    the rows' indices into ``ids`` and ``labels`` (codes of ``names``) and their predicted codes."""
    import csv

    def write(fh):   # whole or not at all; a temporary a failed write left is removed (atomic_write)
        w = csv.writer(fh)
        w.writerow(["fold", "id", "predicted", "label"])
        for fold, rows, pred in preds:
            for r, p in zip(rows, pred):
                w.writerow([fold, ids[r], names[p], names[labels[r]]])

    from ..files import atomic_write

    atomic_write(path, write, binary=False)


def _summarize(per: list[dict]) -> dict:
    accs = np.array([r["accuracy"] for r in per])
    out = {"accuracy": float(accs.mean()), "accuracy_std": float(accs.std()), **splits.rows_per_fold(per),
           "n_folds": len(per)}
    if len(per) == 1:
        out.update({k: v for k, v in per[0].items() if k not in out and k != "fold"})
    else:
        out["folds"] = per
    return out


def _check_block_memory(source, block: int, bounds, parallelism: int) -> None:
    """Refuse blocks whose descriptor work cannot fit in memory (wide skeletons: the moments grow with the
    square of the joint count), naming a block size that would fit. Counts the blocks that really run at once:
    the largest ``min(parallelism, blocks)`` of ``bounds``."""
    from .._config import check_memory, total_memory

    sizes = np.sort(np.diff(np.asarray(bounds)))[::-1]
    at_once = max(1, min(int(parallelism), len(sizes)))
    need = source.block_bytes(int(sizes[:at_once].sum()))
    total = total_memory()
    # half the machine: the map, the rows and the learner need the rest
    fits = min(int(total // (2 * at_once * max(1, source.block_bytes(1)))), source.n) if total else 0
    fix = (f"lower dask.block_size (to {fits} or less{'; or use fewer descriptor.levels or joints' if fits < 8 else ''})"
           if fits >= 1 else "use fewer descriptor.joints or descriptor.levels")
    check_memory(need, f"dask.block_size = {block} ({at_once} block(s) of up to {int(sizes[0])} sequences at a "
                       f"time, their descriptor moments)", fix)


def _map_reads(map_params: dict) -> dict:
    """The feature map's parameters as the result reports them: those its map reads (Nystroem reads no theta)
    and its own further keys."""
    from .schema import FeaturesTable, map_reads

    reads = set(map_reads(map_params.get("map", "rgw")))
    return {k: v for k, v in map_params.items() if k != "map" and (k in reads or k not in FeaturesTable.model_fields)}


def _exact(cfg, ctx, source, folds, bounds, runtime) -> dict:
    from .._config import check_memory
    from ..stream.exact import exact_svm_fold

    # in memory: the descriptors, and per fold one n_train x n_train distance matrix per kernel term (window and,
    # with the mirror, pair of views) with a few kernel-sized arrays beside them (the grid's kernel, SVC's copy)
    blocks = getattr(source, "kernel_blocks", None) or [(source.dim, 1.0)]
    views = getattr(source, "kernel_views", 1)
    terms = len(blocks) * views ** 2
    n_train = max(int(np.count_nonzero(train)) for _, train, _ in folds)
    check_memory(8.0 * source.n * source.dim + 8.0 * n_train ** 2 * (terms + 3),
                 f"model.learner = \"exact-svm\" on {n_train} training rows with {terms} kernel term(s) "
                 f"({len(blocks)} window(s){f' x {views ** 2} pairs of views' if views > 1 else ''})",
                 "use a streamed learner (features.map = \"nystroem\", model.learner = \"lbfgs\"), or fewer "
                 "descriptor.levels, or descriptor.mirror = false")
    t0 = time.perf_counter()
    V = np.concatenate(runtime.compute(*[t for *_, t in source.block_tasks(bounds, runtime.numba_threads)]))
    t_feat = time.perf_counter() - t0
    y = source.store.labels.astype(np.int64)
    groups = source.store.groups
    m = cfg.model
    per, preds = [], []
    for name, train, test in folds:
        r, clf, pred = exact_svm_fold(V, y, groups, train, test, m.sigma_grid, m.C_grid, return_model=True,
                                      blocks=getattr(source, "kernel_blocks", None),
                                      views=getattr(source, "kernel_views", 1))
        r.update(fold=name, n_train=int(train.sum()), n_test=int(test.sum()))
        per.append(r)
        preds.append((name, np.flatnonzero(test), pred))
    model_path = ctx.output / "model"
    info = _model_info(cfg, source, folds[-1][0], int(bounds[1] - bounds[0]))
    # the fold's rows, as the streamed learners record them: an edited splits file that makes its training rows
    # test rows is then told by predict (they were scored as its test rows)
    info["rows_sha256"] = splits.rows_sha256(folds[-1][1], folds[-1][2])
    FittedPipeline(source.spec(), None, None, clf, source.store.label_names, info).save(model_path)
    write_predictions(ctx.output / "predictions.csv", source.store.ids(), source.store.label_names,
                      source.store.labels, preds)
    res = _summarize(per)
    res.update({"feature_map": "exact", "n_components": None, "featurize_seconds": round(t_feat, 3),
                "featurize_ms_per_sequence": round(1e3 * t_feat / source.n, 4),
                "model_path": str(model_path.absolute()),
                "predictions_path": str((ctx.output / "predictions.csv").absolute())})
    return res


def _saved_model_of(folder: Path, fold_fingerprint: str) -> bool:
    """Whether ``folder`` holds the model a fold of this fingerprint saved, whole: its ``model.json`` records
    the fingerprint and its own SHA-256, and ``model.npz`` is the file it was saved with. A model of
    another run (other settings, the exact SVM, another fold) or a damaged one is not."""
    from ..data.integrity import file_sha256

    try:
        doc = json.loads((folder / "model.json").read_text())
        return (doc["info"].get("fold_fingerprint") == fold_fingerprint and doc.get("doc_sha256") == doc_sha256_of(doc)
                and doc.get("arrays_sha256") == file_sha256(folder / "model.npz"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


#: training rows on which a trained model is checked to have learned something (:func:`learned_nothing`)
CHECK_ROWS = 2048


def learned_nothing(predicted: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """``(accuracy, majority)`` when predictions of training rows are no better than always naming their most
    frequent class (``majority``, its share), to within two standard errors of that share over the rows
    checked, but never more than half the way from it to 1 (on a handful of rows two standard errors reach
    1: a perfect fit would be called no better); None when the model does better. A model that diverged (steps
    too large, a penalty that swamps the data) predicts at chance and scikit-learn says nothing; the size of its
    weights does not tell (squared hinge weights 1e10 times the optimum's norm still classify well)."""
    y = np.asarray(y)
    m = len(y)
    if m == 0:
        return None
    majority = float(np.bincount(y).max()) / m
    accuracy = float(np.mean(np.asarray(predicted) == y))
    if accuracy > majority + min(2.0 * np.sqrt(majority * (1.0 - majority) / m), (1.0 - majority) / 2.0):
        return None
    return accuracy, majority


def _incremental(cfg, ctx, source, folds, bounds, runtime, map_params, fit_sample, unit) -> dict:
    from ..stream.featurize import feature_dim, featurize, fit_sample_rows
    from ..stream.lbfgs import make_lbfgs, predict_rows, span_limit, train_lbfgs
    from ..stream.sgd import SGDPlan, fit_scaler, make_sgd, n_fit_rows, predict_mask, train_sgd

    out = ctx.output
    m = cfg.model
    plan = SGDPlan.from_model(m, prefetch=cfg.dask.prefetch)
    y = source.store.labels.astype(np.int64)
    classes = np.arange(len(source.store.label_names))
    shared = len(folds) == 1 or not (source.needs_fit or needs_data(map_params))
    ckdir = out / "checkpoints"
    ckdir.mkdir(exist_ok=True)
    per, paths, preds, learner_warnings = [], [], [], []
    featurized, t_feat, t_fit = 0, 0.0, 0.0
    feat = None
    if m.learner == "lbfgs" and m.span == "rows":   # known before the features are computed (minutes), not after
        for name, train, _ in folds:
            n_fit = n_fit_rows(int(train.sum()), plan.validation_fraction)
            dim = feature_dim(source, map_params, seed=int(cfg.seed), train=train, fit_sample=fit_sample)
            problem = span_limit(n_fit, int(train.sum()) - n_fit, dim)
            if problem is not None:
                raise ConfigError(f'model.span = "rows": fold {name!r}: {problem}; set model.span = "features" '
                                  f'(or "auto", which chooses the span only within these limits)')
    # the key that sizes the features, as the task names it ([features] of skeletons, [method] of images)
    size_key = f"{'features' if hasattr(cfg, 'features') else 'method'}.n_components"
    if not shared:   # a store per fold, all kept: their sum, before the first (featurize checks one at a time)
        from .._config import check_disk

        new = [(name, feature_dim(source, map_params, seed=int(cfg.seed), train=train, fit_sample=fit_sample))
               for name, train, _ in folds if not (out / f"features-{name}.zarr").exists()]
        if len(new) > 1:
            check_disk(float(np.dtype(source.dtype).itemsize) * source.n * sum(d for _, d in new), out,
                       f"the feature stores of {len(new)} folds ({source.n} rows x up to {max(d for _, d in new)} "
                       f"numbers each, {size_key} = {map_params.get('n_components')})",
                       f"lower {size_key}, run fewer folds (split.folds), or write the run where there is room "
                       f"(--output)")
    for name, train, test in folds:
        if feat is None or not shared:
            path = out / ("features.zarr" if shared else f"features-{name}.zarr")
            feat = None   # the previous fold's map (n_components x n_features projections) goes before the next
            feat = featurize(source, map_params, seed=int(cfg.seed), train=train, path=path, runtime=runtime,
                             size_key=size_key,
                             bounds=bounds, fit_sample=fit_sample, progress=ctx.progress)
            paths.append(str(path.absolute()))   # absolute as the store: result.json is read from anywhere
            featurized += feat.featurized_rows
            t_feat += feat.featurize_seconds
            t_fit += feat.fit_seconds
        fstore = feat.store
        rows = splits.rows_sha256(train, test)
        fp_doc = {"features": fstore.group.attrs["fingerprint"], "model": m.model_dump(),
                  "split": cfg.split.model_dump(), "fold": name, "rows": rows,
                  "learner_code": code_identity("learners")["streamcov"]}   # an edited learner trains again
        if m.validation_fraction > 0:
            fp_doc["holdout"] = "class-stratified"      # the early-stopping rows of earlier versions were not
        fp_text = json.dumps(fp_doc, sort_keys=True, default=str)
        fold_fp = doc_sha256_of({"fold": fp_text})
        done_file = ckdir / f"{name}.result.json"
        is_last = name == folds[-1][0]
        if not ctx.resume and (ckdir / f"{name}.npz").is_file() and not done_file.is_file():
            # a training that was cut (kill -9, a lost machine): starting over without a word hid --resume
            say_note(f"{ckdir / (name + '.npz')}: the checkpoint of a training of fold {name} that did not finish; "
                     f"fold {name} is trained from the start (add {arg('resume', True)} to continue it)")
        if ctx.resume and done_file.is_file():
            saved = _finished_fold(done_file, fp_text, y[test], len(classes))
            if saved is not None and is_last and not _saved_model_of(out / "model", fold_fp):
                # the model folder is another run's (other settings, the exact SVM) or damaged: the result
                # saved would be reported beside a model it does not describe
                say_note(f"{arg('resume', True)}: {out / 'model'} is not the model fold {name} saved (missing, "
                         f"another run's, or damaged); fold {name} is trained again")
                saved = None
            if saved is not None:
                per.append(saved["result"])
                preds.append((name, np.flatnonzero(test), saved["predicted"]))
                continue
        t1 = time.perf_counter()
        n_fit = n_fit_rows(int(train.sum()), plan.validation_fraction)
        if m.learner == "lbfgs":
            clf, scaler = train_lbfgs(fstore, y, train, classes, make_lbfgs(m, n_fit, int(cfg.seed)),
                                      runtime=runtime, scale=m.scale, checkpoint=ckdir / f"{name}.npz",
                                      resume=ctx.resume, fingerprint=fp_text, progress=ctx.progress,
                                      require_spread=True)
            t_train = time.perf_counter() - t1
            ignored = clf.fit_info_["checkpoint_ignored"]
            learned = {"iterations": int(clf.n_iter_), "passes": int(clf.n_evals_), "stop": clf.stop_reason_,
                       "converged": bool(clf.converged_), "cache": clf.fit_info_["cache"],
                       "pass_seconds": round(clf.fit_info_["pass_seconds"], 3),
                       "pass_times": [round(t, 5) for t in clf.fit_info_["pass_times"]],
                       "parallel_partitions": int(clf.fit_info_["parallel_partitions"]),
                       "gemm_flops_per_pass": int(clf.fit_info_["gemm_flops_per_pass"]),
                       "span": clf.fit_info_["span"]}
            if clf.fit_info_["span"] == "rows":   # the one pass over the stored rows: their Gram product
                learned.update(rank=int(clf.fit_info_["rank"]), gram_seconds=round(clf.fit_info_["gram_seconds"], 5),
                               gram_flops=int(clf.fit_info_["gram_flops"]))
            if clf.n_iter_ == 0 and clf.converged_:   # "converged" at its starting point: not trained at all
                learner_warnings.append(
                    f"fold {name!r}: L-BFGS took no step: the largest gradient entry at its start, "
                    f"{clf.grad_max_:.3g}, is already at most model.tol = {m.tol}; the model is its starting "
                    f"point; lower model.tol")
            elif clf.n_iter_ == 0:   # no step the line search could take (C so small that the loss is flat)
                # the key that set the penalty's weight: alpha, when given, replaces C (C = 1 / (alpha n))
                weight = (f"model.C = {m.C:g}", "raise model.C") if m.alpha is None else \
                    (f"model.alpha = {m.alpha:g}", "lower model.alpha")
                learner_warnings.append(
                    f"fold {name!r}: L-BFGS took no step (stop: {clf.stop_reason_}): the model is its starting "
                    f"point and predicts as it does; with {weight[0]} the data term of the loss is too small "
                    f"to move it in floating point: {weight[1]} (or scale the features: model.scale)")
        else:
            # rows equal to within rounding are refused whatever the scale (with scale = "none" they were trained on
            # without a word, descriptor.gamma = 1e300: chance accuracy); unscaled, that check costs one pass
            scaler = fit_scaler(fstore, train, plan.prefetch, "center" if m.scale == "none" else m.scale)
            scaler = None if m.scale == "none" else scaler
            estimator = make_sgd(m, n_fit, int(cfg.seed))
            clf = train_sgd(fstore, y, train, classes, estimator, plan, int(cfg.seed), ctx.progress,
                            checkpoint=ckdir / f"{name}.npz", resume=ctx.resume, scaler=scaler,
                            fingerprint=fp_text, cache=m.cache)
            t_train = time.perf_counter() - t1
            ignored = clf.streamcov_checkpoint_ignored_
            learned = {"epochs_run": int(getattr(clf, "streamcov_epochs_", m.epochs)),
                       "cache": getattr(clf, "streamcov_cache_", "stream")}
        # the test rows, and a sample of the training rows on which the model is checked to have learned something;
        # in one prediction: the model is shared with a cluster's workers once (its key is its content's hash, and
        # scattering it again while the first copy is being released can hang)
        checked = np.zeros(len(train), dtype=bool)
        checked[fit_sample_rows(train, CHECK_ROWS, int(cfg.seed))] = True
        both = test | checked
        got = (predict_rows(fstore, both, clf, scaler, runtime) if m.learner == "lbfgs" else
               predict_mask(fstore, clf, both, plan.prefetch, scaler))
        pred, seen = got[test[both]], got[checked[both]]
        warned = any(w.startswith(f"fold {name!r}: L-BFGS took no step") for w in learner_warnings)
        if not warned:   # a model that learned nothing (diverged steps, a penalty that swamps the data): said
            nothing = learned_nothing(seen, y[checked])
            if nothing is not None:
                fix = ("raise model.C (or lower model.alpha), or scale the features (model.scale)" if m.learner ==
                       "lbfgs" else "its steps may diverge or not move (model.learning_rate, model.eta0), or the "
                       "penalty swamps the data (raise model.C or lower model.alpha); scale the features "
                       "(model.scale) if they are not")
                learner_warnings.append(
                    f"fold {name!r}: the model predicts {nothing[0]:.1%} of {int(checked.sum())} of its own "
                    f"training rows, no better than always naming their most frequent class ({nothing[1]:.1%}): it "
                    f"learned nothing; {fix}")
        if ignored:   # --resume found a checkpoint it must not continue: say so rather than start over unseen
            say_note(f"{arg('resume', True)}: {ckdir / (name + '.npz')} was written for other settings (features, "
                     f"[model], [split], or another streamcov or numpy) or is damaged; fold {name} trained from the "
                     f"start")
        r = {"fold": name, "accuracy": float((pred == y[test]).mean()), "n_train": int(train.sum()),
             "n_test": int(test.sum()), "train_seconds": round(t_train, 3), **learned}
        per.append(r)
        preds.append((name, np.flatnonzero(test), pred))
        if is_last:
            FittedPipeline(feat.source.spec(), feat.feature_map, scaler, clf, source.store.label_names,
                           {**_model_info(cfg, source, name, int(bounds[1] - bounds[0])),
                            "fold_fingerprint": fold_fp, "rows_sha256": rows}).save(out / "model")
        done = {"fingerprint": fp_text, "result": r, "predicted": [int(p) for p in pred]}
        atomic_write_text(done_file, json.dumps({**done, "doc_sha256": doc_sha256_of(done)}))
    write_predictions(out / "predictions.csv", source.store.ids(), source.store.label_names, source.store.labels,
                      preds)
    res = _summarize(per)
    fmap = feat.feature_map
    res.update({
        "feature_map": map_params.get("map", "rgw"),
        "n_components": None if fmap is None else int(fmap.n_components),
        "feature_params": _map_reads(map_params),
        "fit_reused": feat.fit_reused, "fit_seconds": round(t_fit, 3),
        "featurize_seconds": round(t_feat, 3),
        f"featurized_{unit}": featurized,
        # none when every row's features were reused (the time was the reuse check's, not per row)
        f"featurize_ms_per_{unit[:-1]}": round(1e3 * t_feat / featurized, 4) if featurized else None,
        "model": m.learner_params(),   # the learner and the keys it reads
        "features_path": paths[-1], "model_path": str((out / "model").absolute()),
        "predictions_path": str((out / "predictions.csv").absolute()),
        "fitted": {"source": feat.source.state, "map": feat.fit_record},
    })
    if m.learner == "sgd":
        res["epochs"] = int(m.epochs)
    if len(paths) > 1:
        res["features_paths"] = paths
    if learner_warnings:
        res["warnings"] = learner_warnings
    return res
