"""The one featurize driver: source -> (fit on training rows) -> feature map -> feature store.

:func:`featurize` is the same for every modality (:mod:`.source`):

1. open the feature store whose fingerprint matches (input store identity,
   descriptor, map, seed, block bounds, and the training rows when anything
   is fitted on data), or create it;
2. fit what depends on data, on training rows only, unless the store already
   holds that fit: the source's state (e.g. the feature scale of training
   images), then the feature map on a seeded sample of at most
   ``fit_sample`` training descriptors (a centred map's mean row, Nystroem's
   landmarks, a median bandwidth; of those rows, only the ones the fit reads
   are held: Nystroem's landmarks, and the first rows the bandwidth is
   checked on); both are kept in the feature store;
3. compute the blocks not yet done, in windows of blocks so that memory stays
   bounded, each task writing its rows and then its done flag;
4. check that every block was written.
"""
from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._config import code_identity, progress_bar
from ..data import integrity
from ..errors import StoreError, say_note
from ..features.registry import fit_feature_map, fit_reads_mean_only, needs_data, rows_read_by_fit
from .featurestore import FeatureStore, write_block
from .runtime import retry_lost, task_path


@dataclass
class Featurized:
    """A complete feature store and what produced it."""

    store: FeatureStore
    source: object
    feature_map: object
    fit_record: dict
    fit_reused: bool
    featurized_rows: int
    fit_seconds: float
    featurize_seconds: float


def _transform(fmap, X, n_numba: int = 1):
    # One BLAS thread: the projection GEMM then sums in the same order on every
    # worker, whatever threads its process was started with (bitwise-equal features).
    # The map's numba kernels (the product maps' grouped products) take the task's share of the thread plan,
    # as the descriptor kernels do: numba's default, every core in every Dask thread, oversubscribed them.
    from .._config import kernel_threads

    if fmap is None:
        return X
    with kernel_threads(n_numba, 1):
        return fmap.transform(X)


def _reference(map_params: dict, seed: int, n_features: int, record: dict):
    """The map of ``map_params`` fitted without data (from its seed), at the measured bandwidth."""
    from ..features.registry import fitted_without_data, make_feature_map

    fmap = make_feature_map(map_params, seed, record.get("median_distance", 1.0))
    return None if fmap is None else fitted_without_data(fmap, n_features)


def fingerprint(source, map_params: dict, seed: int, bounds, train=None, fit_sample: int | None = None) -> dict:
    """Everything the features depend on; a feature store with another fingerprint is not reused.
    ``fit_sample``: the training rows a data-dependent map is fitted on (at most), part of it for such a map
    (its landmarks, mean row or median bandwidth come from them)."""
    # version 3: the fitted arrays are checksummed (stores of version 2 are computed again); 4: map "nystroem" is
    # GaussianNystroem (one landmark set for a sum over blocks), no longer scikit-learn's Nystroem; "code": the
    # code that computes them (another streamcov or numpy computes them again)
    fp = {"version": 4, "source": source.identity(), "features": map_params, "seed": int(seed),
          "bounds": [int(b) for b in bounds], "dtype": str(source.dtype), "code": code_identity()}
    if train is not None and (source.needs_fit or needs_data(map_params)):
        fp["train"] = hashlib.sha1(np.packbits(np.asarray(train, dtype=bool)).tobytes()).hexdigest()
    if train is not None and fit_sample is not None and needs_data(map_params):
        fp["fit_sample"] = min(int(fit_sample), int(np.count_nonzero(train)))
    return fp


def fit_sample_rows(train, fit_sample: int, seed: int) -> np.ndarray:
    """A seeded sample of at most ``fit_sample`` training rows, in row order."""
    rng = np.random.default_rng(seed)
    tr = np.flatnonzero(train)
    return np.sort(rng.choice(tr, size=min(int(fit_sample), len(tr)), replace=False))


def rows_of(source, rows: np.ndarray, bounds, runtime, keep: np.ndarray | None = None,
            mean: np.ndarray | None = None) -> np.ndarray:
    """Descriptors of ``rows`` (sorted indices), computed block by block on the runtime, a window of
    ``2 x parallelism`` blocks at a time: memory is that of the blocks in flight, not of the store (one
    computation of every block held as many blocks' moments as the scheduler's order happened to start).
    ``keep`` (sorted, within ``rows``): only those are returned and held; the others are computed with them.
    ``mean`` (float64, the rows' width): filled with the mean of all of ``rows``, summed one row after
    another in row order, as numpy's ``X.mean(axis=0, dtype=float64)`` of the rows held at once sums them (the
    same bits, on any scheduler)."""
    mask = np.zeros(source.n, dtype=bool)
    mask[rows] = True
    kept = mask if keep is None else np.isin(np.arange(source.n), keep)
    tasks = [(np.asarray(local) + b0, t) for b0, _, local, t in source.block_tasks(bounds, runtime.numba_threads,
                                                                                   rows=mask)]
    step = 2 * max(1, int(getattr(runtime, "parallelism", 1) or 1))
    if not tasks:
        raise ValueError("rows_of: no rows asked for")
    out, at, summed = None, 0, 0
    for i in range(0, len(tasks), step):
        window = tasks[i:i + step]
        for (asked, _), V in zip(window, runtime.compute(*[t for _, t in window])):
            if mean is not None:
                for row in V:
                    if summed:
                        mean += row
                    else:
                        mean[...] = row
                    summed += 1
            V = V[kept[asked]] if keep is not None else V
            if out is None:   # filled in place: a list of the blocks' rows and their concatenation held it twice
                out = np.empty((int(kept.sum()),) + V.shape[1:], dtype=V.dtype)
            out[at:at + len(V)] = V
            at += len(V)
    if mean is not None:
        mean /= summed
    return out


def _compute_window(runtime, fstore: FeatureStore, window: list):
    """Write the blocks ``[(index, task), ...]`` of one window. On a cluster that loses a worker, the blocks
    not yet marked done are submitted again (:func:`~streamcov.stream.runtime.retry_lost`: after waiting
    for the workers, at most ``MAX_RECOVERIES`` times). A block written twice is the same bytes."""
    first = True

    def attempt():
        nonlocal first, window
        if not first:
            done = fstore.done()
            window = [(i, t) for i, t in window if not done[i]]
        first = False
        if window:
            runtime.compute_once(*[t for _, t in window])

    retry_lost(runtime.client, attempt, runtime.reshare)


def _fold_map(source, map_params: dict, seed: int, train, fit_sample: int):
    """``(map_params, dim)``: the map's parameters for a fold's training rows (a map fitted on data is given no
    more components than its fit sample holds) and the width of the rows it gives."""
    from ..features.registry import for_fit_rows, make_feature_map, output_dim

    map_params = dict(map_params)
    if needs_data(map_params):
        map_params = for_fit_rows(map_params, min(int(fit_sample), int(np.count_nonzero(train))))
    return map_params, output_dim(make_feature_map(map_params, seed), source.dim)


def feature_dim(source, map_params: dict, *, seed: int, train, fit_sample: int = 2048) -> int:
    """Numbers per row of the feature store :func:`featurize` would fill for a fold, known before it runs."""
    return _fold_map(source, map_params, seed, train, fit_sample)[1]


def featurize(source, map_params: dict, *, seed: int, train: np.ndarray, path, runtime, bounds,
              fit_sample: int = 2048, progress: bool = False, size_key: str = "features.n_components") -> Featurized:
    """Fill (or reuse) the feature store at ``path``; see the module docstring. ``size_key``: the key that sizes
    the features, as the task names it (``method.n_components`` of the image tasks)."""
    import dask

    t0 = time.perf_counter()
    map_params, dim = _fold_map(source, map_params, seed, train, fit_sample)
    fp = fingerprint(source, map_params, seed, bounds, train, fit_sample)
    if not Path(path).exists():   # a store there is resumed or reused; a new one is refused before it fills the disk
        from .._config import check_disk

        if str(map_params.get("map")).lower() == "none":   # no map: no key sizes it (the image tasks' head method)
            cause, lower = ('method.name = "head": the pooled head features themselves' if size_key.startswith("method.")
                            else 'features.map = "none": the descriptors themselves'), ""
        else:
            cause, lower = f"{size_key} = {map_params.get('n_components')}", f"lower {size_key}, or "
        check_disk(float(np.dtype(source.dtype).itemsize) * source.n * dim, path,
                   f"the feature store of {source.n} rows x {dim} numbers ({cause})",
                   f"{lower}write the run where there is room (--output)")
    loaded = reference = None
    try:
        fstore = FeatureStore.open_or_create(path, source.n, dim, bounds, source.dtype, fp)
        rec = fstore.fit_record()   # checked before a map is drawn from what it measured
        if rec is not None:
            reference = _reference(map_params, seed, source.dim, rec.get("record", {}))
            loaded = fstore.load_fit(reference)
    except StoreError as exc:
        # a cache: its features were computed with the fit or arrays that are damaged now, so none is reused
        say_note(f"{exc.args[0].split(integrity.DAMAGED)[0]}; the feature store is computed again")
        shutil.rmtree(path)
        fstore = FeatureStore.open_or_create(path, source.n, dim, bounds, source.dtype, fp)
    reused = loaded is not None
    if not reused:
        reference = None   # a whole map: not kept while the new one is drawn
    if reused:
        state, fmap, record = loaded
        fitted = source.with_state(state) if source.needs_fit else source
        if fmap is None:
            fmap = reference
    else:
        fitted = source.fit(train, runtime, bounds) if source.needs_fit else source
        sample = check = read = None
        if needs_data(map_params):
            rows = fit_sample_rows(train, fit_sample, seed)
            read = rows_read_by_fit(map_params, seed, len(rows))   # Nystroem's landmarks: only those held
            if fit_reads_mean_only(map_params, source.dim):
                # a centred map reads the sample's mean alone: summed as the blocks come, fitted on the mean row
                # (the same map); the first rows kept for the bandwidth's check, as a fit on the sample does
                from ..features.registry import BANDWIDTH_CHECK_ROWS

                mean = np.zeros(source.dim, dtype=np.float64)
                check = rows_of(fitted, rows, bounds, runtime, keep=rows[:BANDWIDTH_CHECK_ROWS], mean=mean)
                sample, mean = mean[None, :], None
            elif read is None:
                sample = rows_of(fitted, rows, bounds, runtime)
            else:
                # the landmarks, and the rows the bandwidth is checked on (the sample's first, as a fit on all of
                # it reads), alone: a row's descriptor is the same bits whatever rows are computed with it (the
                # eigensolver's lanes are independent, _kernels/symeig), so the map is the same bits as a fit on
                # the whole sample (L-BFGS made a last-bit difference another model)
                from ..features.registry import BANDWIDTH_CHECK_ROWS

                want = np.union1d(rows[read], rows[:BANDWIDTH_CHECK_ROWS])
                computed = rows_of(fitted, want, bounds, runtime)
                sample = computed[np.searchsorted(want, rows[read])]
                check = computed[np.searchsorted(want, rows[:BANDWIDTH_CHECK_ROWS])]
                computed = None
        fmap, record = fit_feature_map(map_params, seed, source.dim, sample, check)
        if read is not None and fmap is not None:
            # fitted on its landmarks alone; their places in the fit sample, as a fit on the whole sample records
            fmap.component_indices_ = read
        if sample is None and fmap is not None and int(np.count_nonzero(train)) >= 2:
            # a map drawn from the width alone (no rows): its Gaussian kernel's bandwidth, and an RGW series cut
            # short, are checked on a few training rows all the same, as the fitted maps' are on their sample (a
            # sigma far below the distances between the rows gave chance accuracy without a word); fit_sample is
            # not read for it
            from ..features.registry import BANDWIDTH_CHECK_ROWS, check_map_on_rows

            check = rows_of(fitted, fit_sample_rows(train, BANDWIDTH_CHECK_ROWS, seed), bounds, runtime)
            check_map_on_rows(map_params, fmap, check)
            check = None
        sample = check = None   # fit_sample descriptors (1.2 GB for 2048 of MSR-Action3D's): not held while featurizing
        data_dependent = needs_data(map_params) and fmap is not None
        fstore.save_fit(fitted.state, fmap if data_dependent else None, record,
                        (lambda: _reference(map_params, seed, source.dim, record)) if data_dependent else None)
    t_fit = time.perf_counter() - t0

    t1 = time.perf_counter()
    done, redo = fstore.done_blocks()
    if redo:
        say_note(f"{fstore.path}: block(s) {redo[:5]}{' ...' if len(redo) > 5 else ''} are not as this feature "
                 f"store wrote them (a chunk of X copied from another store or damaged, or a damaged done flag or "
                 f"checksum): computed again")
    transform = runtime.share(fmap) if fmap is not None else None
    blocks = fitted.block_tasks(bounds, runtime.numba_threads)
    keys = fitted.window_keys(bounds, runtime.parallelism)
    todo = []
    for i, (b0, b1, _, task) in enumerate(blocks):
        if done[i]:
            continue
        X = task if transform is None else dask.delayed(_transform)(transform, task, runtime.numba_threads)
        todo.append((keys[i], b1 - b0, i, dask.delayed(write_block)(task_path(fstore.path), i, b0, b1, X)))
    windows: list[list] = []
    last = None
    for key, size, i, task in todo:
        if key != last:
            windows.append([])
            last = key
        windows[-1].append((i, task))
    # closed before an error is said, so that its line starts a line of its own
    with progress_bar(None, bool(progress and todo), total=len(todo), desc="featurize", unit="block") as bar:
        for window in windows:
            _compute_window(runtime, fstore, window)
            if bar is not None:
                bar.update(len(window))
    missing = np.flatnonzero(~fstore.done())
    if len(missing):
        raise RuntimeError(f"{fstore.path}: blocks {missing[:10].tolist()} were not written although "
                           f"their tasks finished; this is a bug in streamcov")
    return Featurized(store=fstore, source=fitted, feature_map=fmap, fit_record=record, fit_reused=reused,
                      featurized_rows=int(sum(s for _, s, _, _ in todo)), fit_seconds=t_fit,
                      featurize_seconds=time.perf_counter() - t1)
