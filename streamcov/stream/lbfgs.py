"""The full-batch learner: L-BFGS over a feature store, one Dask reduction per evaluation.

:func:`train_lbfgs` minimizes the objective of :mod:`streamcov.linear`
(multinomial log loss or one-vs-rest squared hinge, L2 penalty ``1 / (C n)``)
over the training rows of a feature store with the resumable L-BFGS of
:mod:`streamcov.optimize`. Every evaluation of ``(f, grad f)`` is one pass
over the rows:

* the rows are cut once into **partitions** (about :data:`PARTITION_BYTES`
  of float32 features, whole store blocks) and each partition into
  **chunks** (about :data:`streamcov.linear.CHUNK_BYTES`, the rows of one
  pair of GEMMs). The cut depends on the store's block bounds, the training
  rows and the width only, never on the scheduler or the worker count;
* the float64 sums of each partition's chunks
  (:func:`streamcov.linear.chunk_sums`: ``S = X W^T``, ``G = R^T X`` in
  float32, by BLAS or, from :data:`streamcov.linear.KERNEL_MIN_MACS`
  multiply-adds per pass, by a numba kernel that reads each row once; one
  of the two for the whole fit, in every process) are added in a fixed
  tree (fan-in :data:`FAN_IN`, in partition order). The sum, hence every
  iterate and the model, is bitwise the same on threads, on one worker or
  on many. On threads a pass is a Dask task
  per partition and per merge; on a cluster the partitions are held by the
  workers in consecutive runs, and a pass is **one call per worker** to an
  actor that holds the worker's partitions (:class:`_Holder`; one thread
  per worker thread, on consecutive parts of the worker's run), which
  computes the sums of its partitions and merges the nodes of the tree
  that lie within them (:func:`_run_on_holder`); the driver merges the
  rest. So a pass costs one actor call per worker (1-2 ms: the scheduler
  relays it to the worker, no task is scheduled; a task takes 10-12 ms;
  :data:`ACTOR_PASSES` False runs the same pass as one task per worker
  thread) however many partitions there are, and only a few ``k x D``
  blocks of numbers per worker travel. The actor reads its worker's
  partitions itself when it is made, and their moments and centring are
  one call per worker each too: placing the rows is one task per worker,
  not a task per partition for reading and another for centring. A
  worker lost during a fit takes its rows with it: the partitions are
  placed again from the store and the pass repeated
  (:meth:`_Problem._recovering`), to the same sums;
* ``cache="memory"`` keeps the float32 training rows of each partition in
  worker memory (on threads, in this process), centred once, for all the
  passes; ``cache="stream"`` reads them from the store at every pass (memory:
  one chunk per running task); ``cache="auto"`` caches when they take at
  most :data:`CACHE_FRACTION` of the memory the workers have (or this
  machine has available). Both give the same model.

The scaler of ``[model] scale`` is folded in, not applied: with the mean
``m`` of the training rows (one streamed pass of Chan-merged moments) and
the scale ``s`` (one number for ``center``, one per column for
``standard``), the scores ``((x - m) / s) W^T + b`` are computed as
``(x - m32) (W / s)^T + b - (W / s) (m - m32)`` with ``m32`` the float32 mean:
the rows are centred in float32 (in place, once, when cached) but never
scaled, and the float32 rounding of the mean is corrected exactly in the
intercept. Centring matters: explicit features of a Gaussian kernel share
most of their norm (98% on MSR-Action3D), and float32 GEMMs on uncentred
rows lose about 30 times more of the gradient. The intercept is optimized
in centred coordinates; it is not penalized. With ``scale = "none"`` the
rows are still centred internally and the intercept moved back at the end.

Every iteration hands its checkpoint (the point, gradient, curvature pairs
and counters: :class:`streamcov.optimize.LBFGSState`) to a background
writer, which writes the newest one at most every
:data:`CHECKPOINT_INTERVAL` seconds, the first one too (so every iteration
of a long run, and not a 16 MB file every few milliseconds on a small one:
a fit shorter than the interval writes one checkpoint), and the last one
always, in this thread. The last one of a run that has stopped holds no
curvature pairs (nothing continues from it). A run resumed from any
checkpoint continues to the same model. With ``validation_fraction``
the learner holds out that share of the training rows (drawn from
``random_state``), evaluates their loss at every iterate within the same
passes, stops when it has not fallen for ``n_iter_no_change`` iterations and
returns the iterate with the lowest validation loss.

With few training rows against many features (``span``, :func:`span_route`)
the fit runs in the span of the training rows, where the minimizer lies:
one Gram product of the rows, then the same L-BFGS over ``r <= n``
coordinates, mapped back to the features at the end
(:func:`_train_in_span`).
"""
from __future__ import annotations

import itertools
import os
import time
import warnings
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils._available_if import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from .._config import blas_threads, jit_started
from ..linalg import merge_moments
from .. import linear
from ..linear import LOSSES, chunk_rows, chunk_sums, score_columns
from ..optimize import LBFGSState, lbfgs_iteration, lbfgs_start, stalled
from .memory import CACHE_FRACTION, CACHE_MODES, use_cache
from .runtime import MAX_RECOVERIES, RECOVERY_WAIT, lost_worker_errors, task_path, workers_lost
from .sgd import l2_penalty

# rows of one partition: about 16 MB of float32 features. Many per worker, so that the workers' shares
# balance (11 partitions of 64 MB on 2 workers: 6 against 5); on a cluster a pass is one task per worker
# thread whatever their number, on threads a task each (about 0.1 ms of scheduling apiece).
PARTITION_BYTES = 16 << 20
# a model of at most this many bytes travels inside a cluster pass's tasks (one per worker), saving the
# broadcast's round trip; a larger one is broadcast to the workers once per pass
EMBED_BYTES = 1 << 20
# partition sums are added in groups of this many, in partition order
FAN_IN = 8
# on a cluster, passes by calls to an actor per worker (_Holder), relayed by the scheduler, rather than by tasks it
# schedules: the same sums, a tenth of the round trip
ACTOR_PASSES = True
# store bytes read at once when a partition's rows are loaded (consecutive blocks, decoded concurrently)
READ_BYTES = 32 << 20
# seconds between checkpoint writes at most (iterations faster than that share one; the last is always written)
CHECKPOINT_INTERVAL = 1.0
# span = "auto" solves in the span of the training rows when there are at most this many fit rows per score
# column (and at most half as many as features): the Gram product costs about n / (2 k) passes of the
# feature route in float32 (twice that in float64), so at 25 rows per column it is paid back by ~50 passes,
# fewer than a squared-hinge or weakly penalized fit takes
SPAN_ROWS_PER_COLUMN = 25
# at most this many training rows in the span route, and this many bytes of rows, Gram matrix, eigenvectors
# and span coordinates (span_bytes): a fixed bound, the same on every machine and at every resume
SPAN_MAX_ROWS = 8192
SPAN_MAX_BYTES = 2 << 30
# eigenvalues of the Gram matrix below this fraction of the largest are dropped: directions whose rows vary
# by less than 1e-5 of the largest singular value, where the float64 Gram matrix has no digits left
SPAN_RANK_RTOL = 1e-10
# bytes of one float64 panel of the rows in the Gram and back-mapping products: a few hundred columns of
# thousands of rows, every column of a hundred rows (a panel of few rows is a small GEMM, paid per call)
SPAN_PANEL_BYTES = 16 << 20


# ------------------------------------------------------------------- the plan
# plain classes, not dataclasses: dask.delayed would take a dataclass argument apart field by field
class _Piece:
    """Rows of one store block inside one chunk: local indices of fit and validation rows."""

    __slots__ = ("block", "fit", "val")

    def __init__(self, block: int, fit: np.ndarray, val: np.ndarray):
        self.block, self.fit, self.val = int(block), fit, val

    def __getstate__(self):
        return (self.block, self.fit, self.val)

    def __setstate__(self, state):
        self.block, self.fit, self.val = state


class PartSpec:
    """One task's rows: chunks of pieces and the class codes of their fit and validation rows."""

    def __init__(self, chunks: list, y_fit: list, y_val: list):
        self.chunks, self.y_fit, self.y_val = chunks, y_fit, y_val

    @property
    def n_fit(self) -> int:
        return int(sum(len(v) for v in self.y_fit))

    @property
    def n_val(self) -> int:
        return int(sum(len(v) for v in self.y_val))


def make_plan(bounds, fit_mask, val_mask, y, dim: int) -> list[PartSpec]:
    """Cut the fit and validation rows into partitions of chunks (see the module docstring).

    A function of the block ``bounds``, the masks, the labels and ``dim``
    only: the same plan, hence the same sums, wherever it runs.
    """
    per_chunk = chunk_rows(dim)
    per_part = max(per_chunk, PARTITION_BYTES // (4 * max(int(dim), 1)))
    bounds = np.asarray(bounds, dtype=np.int64)
    parts: list[PartSpec] = []
    chunks: list = []
    pieces: list = []
    c_rows = p_rows = 0

    def labels(ps, which):
        return np.concatenate([y[bounds[p.block] + getattr(p, which)] for p in ps]).astype(np.int64)

    def close_chunk():
        nonlocal pieces, c_rows, p_rows
        if pieces:
            chunks.append(pieces)
            p_rows += c_rows
        pieces, c_rows = [], 0

    def close_part():
        nonlocal chunks, p_rows
        if chunks:
            parts.append(PartSpec(chunks, [labels(c, "fit") for c in chunks], [labels(c, "val") for c in chunks]))
        chunks, p_rows = [], 0

    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        f = np.flatnonzero(fit_mask[a:b]).astype(np.int32)
        v = np.flatnonzero(val_mask[a:b]).astype(np.int32)
        fi = vi = 0
        while fi < len(f) or vi < len(v):
            room = per_chunk - c_rows
            tf = f[fi:fi + room]
            fi += len(tf)
            tv = v[vi:vi + room - len(tf)]
            vi += len(tv)
            pieces.append(_Piece(i, tf, tv))
            c_rows += len(tf) + len(tv)
            if c_rows >= per_chunk:
                close_chunk()
                if p_rows >= per_part:
                    close_part()
    close_chunk()
    close_part()
    return parts


class PartData:
    """A partition's rows in memory: float32, centred once the mean is known."""

    def __init__(self, X_fit: np.ndarray, X_val: np.ndarray, spec: PartSpec, centred: bool = False):
        self.X_fit, self.X_val, self.spec, self.centred = X_fit, X_val, spec, centred

    @property
    def nbytes(self) -> int:
        return int(self.X_fit.nbytes + self.X_val.nbytes)


def _open(src):
    if isinstance(src, (str, os.PathLike)):
        from .featurestore import FeatureStore

        return FeatureStore(src)
    return src


def _pieces(spec: PartSpec, read_block):
    """``(p, X)`` for every piece ``p`` of a partition, chunk after chunk, with ``X`` the rows of its
    block (each block read once: the pieces of a block are consecutive)."""
    last, X = None, None
    for chunk in spec.chunks:
        for p in chunk:
            if p.block != last:
                last, X = p.block, read_block(p.block)
            yield p, X


def _spec_chunks(src, spec: PartSpec):
    """``(X_fit, y_fit, X_val, y_val)`` float32 chunks of a partition, read from its store (not centred)."""
    store = _open(src)
    pieces = _pieces(spec, _block_reader(store, [], runs=False))   # a pass holds a block at a time, not a run
    for c, chunk in enumerate(spec.chunks):
        Xf = Xv = None
        fa = va = 0
        for p, X in itertools.islice(pieces, len(chunk)):
            if Xf is None:     # each row gathered once, straight into its place (as _load_partition)
                Xf = np.empty((len(spec.y_fit[c]), X.shape[1]), dtype=np.float32)
                Xv = np.empty((len(spec.y_val[c]), X.shape[1]), dtype=np.float32)
            fa = _gather(X, p.fit, Xf, fa)
            va = _gather(X, p.val, Xv, va)
        yield Xf, spec.y_fit[c], Xv, spec.y_val[c]


def _gather(X: np.ndarray, rows: np.ndarray, out: np.ndarray, at: int) -> int:
    """``out[at:at + len(rows)] = X[rows]`` (rounded to float32 as astype rounds); returns the next free row."""
    if len(rows):
        if X.dtype == out.dtype:
            np.take(X, rows, axis=0, out=out[at:at + len(rows)])
        else:
            out[at:at + len(rows)] = X[rows]
    return at + len(rows)


def _chunks(src, data):
    """The chunks of ``data`` (a :class:`PartSpec` read from ``src``, or a cached :class:`PartData`)
    and whether they are centred already."""
    if isinstance(data, PartData):
        fa = va = 0
        for yf, yv in zip(data.spec.y_fit, data.spec.y_val):
            yield data.X_fit[fa:fa + len(yf)], yf, data.X_val[va:va + len(yv)], yv, data.centred
            fa += len(yf)
            va += len(yv)
    else:
        for Xf, yf, Xv, yv in _spec_chunks(src, data):
            yield Xf, yf, Xv, yv, False


def _block_reader(store, blocks: list, runs: bool = True):
    """``read(i)``: the rows of block ``i`` (of ``blocks``, asked for in order), valid until the next call.
    A store whose chunk files it can read itself (:meth:`FeatureStore.read_block_into`) reads each into one
    buffer, reused (no fresh memory per block: first-touched pages are the slow part of loading on a VM);
    else one that can (:meth:`FeatureStore.read_blocks`) reads runs of consecutive blocks, up to
    :data:`READ_BYTES`, at once (``runs``), else a block at a time."""
    buffer = getattr(store, "block_buffer", None)
    buf = buffer() if buffer is not None else None
    if buf is not None:
        return lambda i: store.read_block(i, buf)
    many = getattr(store, "read_blocks", None) if runs else None
    if many is None:
        return store.read_block
    bounds = np.asarray(store.bounds, dtype=np.int64)
    row_bytes = store.dim * np.dtype(store.dtype).itemsize
    run = {"first": -1, "last": -1, "rows": None}

    def read(i):
        if not run["first"] <= i < run["last"]:
            k = blocks.index(i)
            last = i + 1
            while k + 1 < len(blocks) and blocks[k + 1] == last and \
                    (bounds[last + 1] - bounds[i]) * row_bytes <= READ_BYTES:
                last += 1
                k += 1
            run.update(first=i, last=last, rows=many(i, last))
        a = bounds[i] - bounds[run["first"]]
        return run["rows"][a:a + bounds[i + 1] - bounds[i]]

    return read


def _load_partition(src, spec: PartSpec) -> PartData:
    """Read a partition's rows as float32 (not centred): each piece's rows gathered from its block
    straight into their place, the rows of :func:`_spec_chunks` without its per-chunk copies."""
    store = _open(src)
    blocks = list(dict.fromkeys(p.block for chunk in spec.chunks for p in chunk))
    read_block = _block_reader(store, blocks)
    X_fit = X_val = None
    fa = va = 0
    for p, X in _pieces(spec, read_block):
        if X_fit is None:
            X_fit = np.empty((spec.n_fit, X.shape[1]), dtype=np.float32)
            X_val = np.empty((spec.n_val, X.shape[1]), dtype=np.float32)
        fa = _gather(X, p.fit, X_fit, fa)
        va = _gather(X, p.val, X_val, va)
    return PartData(X_fit, X_val, spec)


def _centred(part: PartData, m32: np.ndarray) -> PartData:
    """``part`` with ``m32`` subtracted from every row, in place (returned); rows centred already are left
    as they are (a repeated centring task must not subtract twice).

    In place on a worker too: a copy would hold the partition twice until the raw one is released (twice
    the memory :func:`streamcov.stream.memory.use_cache` granted) and write 2 x 4 bytes per feature of
    fresh memory, the slowest part of loading on a VM (0.8 s for 800 MB on one worker, 0.08 s in place).
    """
    if part.centred:
        return part
    part.X_fit -= m32
    part.X_val -= m32
    part.centred = True
    return part


# ------------------------------------------------------------ partition sums
class Sums:
    """Float64 sums of one or several partitions at one model."""

    __slots__ = ("n", "loss", "correct", "G", "r", "val_n", "val_loss", "val_correct")

    def __init__(self, k: int, dim: int):
        self.n, self.loss, self.correct = 0, 0.0, 0
        self.G = np.zeros((k, dim))
        self.r = np.zeros(k)
        self.val_n, self.val_loss, self.val_correct = 0, 0.0, 0

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k, v in state.items():
            setattr(self, k, v)


def merge_sums(*parts: Sums) -> Sums:
    """The sum of ``parts``, added left to right (a new object)."""
    out = Sums(*parts[0].G.shape)
    for p in parts:
        out.n += p.n
        out.loss += p.loss
        out.correct += p.correct
        out.G += p.G
        out.r += p.r
        out.val_n += p.val_n
        out.val_loss += p.val_loss
        out.val_correct += p.val_correct
    return out


def partition_sums(src, data, m32, model, loss: int, binary: bool, kernel: bool = False) -> Sums:
    """Loss, gradient sums and validation loss of one partition at ``model = (W32, b)``.

    ``W32`` (k, D) float32 is the scale-folded coefficient matrix, ``b``
    (k,) float64 the intercept with the mean correction; rows not yet
    centred are centred by ``m32`` here. ``kernel``: the numba kernel or
    BLAS (:func:`streamcov.linear.use_kernel`, decided once per fit). One
    BLAS thread: the same sums on any worker.
    """
    W32, b = model
    out = Sums(*W32.shape)
    with blas_threads(1):
        for Xf, yf, Xv, yv, centred in _chunks(src, data):
            if not centred:     # rows just read: fresh arrays of their own
                Xf -= m32
                Xv -= m32
            if len(yf):
                total, correct, G, r = chunk_sums(Xf, yf, W32, b, loss, binary, True, kernel)
                if out.n == 0:   # G + 0.0 is 0.0 + G, bit for bit: the zeros' sum without touching them
                    out.G = np.add(G, 0.0, dtype=np.float64)
                else:
                    out.G += G
                out.n += len(yf)
                out.loss += total
                out.correct += correct
                out.r += r
            if len(yv):
                total, correct, _, _ = chunk_sums(Xv, yv, W32, b, loss, binary, False, kernel)
                out.val_n += len(yv)
                out.val_loss += total
                out.val_correct += correct
    return out


def partition_moments(src, data):
    """``(n, mean, M2)`` per column (float64) of a partition's fit and validation rows, not centred.

    Per chunk, the float64 mean and sum of squared deviations, Chan-merged in order: the same numbers,
    bit for bit, as ``A.mean(axis=0, dtype=float64)`` and ``np.square(A - mean).sum(axis=0)`` (both add
    the rows in order; a single column numpy sums pairwise, and it takes the numpy route). With numba's
    JIT running, by :func:`streamcov._kernels.vector.column_moments`,
    which reads the float32 rows twice and forms nothing else (5x faster, and it scales across workers: the
    float64 copy and its three passes are bound by memory traffic, which two workers share); without it,
    in one float64 buffer reused for every chunk.
    """
    from .._config import jit_started

    fused = jit_started()
    if fused:
        from .._kernels.vector import column_moments
    dim = None
    acc = None
    buf = np.empty(0)
    for Xf, _, Xv, _, _ in _chunks(src, data):
        for A in (Xf, Xv):
            if dim is None:
                dim = A.shape[1]
                acc = (0, np.zeros(dim), np.zeros(dim))
            if len(A):
                if fused and dim > 1:   # one column: numpy sums it pairwise, a 1-d reduction
                    mean, M2 = np.empty(dim), np.empty(dim)
                    column_moments(np.ascontiguousarray(A), mean, M2)
                    acc = merge_moments(acc, (len(A), mean, M2))
                    continue
                if buf.size < A.size:
                    buf = np.empty(A.size)
                B = buf[:A.size].reshape(A.shape)
                np.copyto(B, A)                      # float32 -> float64, exact
                mean = B.sum(axis=0) / len(A)
                np.subtract(B, mean, out=B)
                np.square(B, out=B)
                acc = merge_moments(acc, (len(A), mean, B.sum(axis=0)))
    return acc


def merge_all_moments(*parts):
    """Chan's merge of ``parts``, left to right."""
    out = parts[0]
    for p in parts[1:]:
        out = merge_moments(out, p)
    return out


# The fixed tree of the sums: node (l, i) of the tree over n items is group i of level l (level 0: the
# items, each level groups FAN_IN consecutive nodes of the one below); it covers items
# [i F^l, min((i + 1) F^l, n)) and its children are nodes (l - 1, i F ... i F + F - 1).
def _tree(items, combine):
    """Add ``items`` in the fixed tree: groups of :data:`FAN_IN` consecutive items, level by level;
    ``combine(*group)`` merges a group now, or makes the task that will."""
    n = len(items)
    return _node_value(_top(n, FAN_IN), 0, n, FAN_IN, {}, items.__getitem__, combine)


def _width(level: int, n: int, fan_in: int) -> int:
    """Number of nodes at ``level`` of the tree over ``n`` items."""
    return -(-n // fan_in ** level)


def _top(n: int, fan_in: int) -> int:
    """Level of the root (0 for a single item: ``_tree`` returns it without a merge)."""
    level = 0
    while _width(level, n, fan_in) > 1:
        level += 1
    return level


def _nodes_within(n: int, a: int, b: int, fan_in: int) -> list:
    """The nodes of the tree over ``n`` items that lie inside items ``[a, b)`` while their parent does not,
    in item order: what the holder of those items can merge by itself."""
    out: list = []

    def visit(level, i):
        lo, hi = i * fan_in ** level, min((i + 1) * fan_in ** level, n)
        if hi <= a or lo >= b:
            return
        if a <= lo and hi <= b:
            out.append((level, i))
            return
        for j in range(i * fan_in, min((i + 1) * fan_in, _width(level - 1, n, fan_in))):
            visit(level - 1, j)

    visit(_top(n, fan_in), 0)
    return out


def _node_value(level: int, i: int, n: int, fan_in: int, known: dict, leaf, merge):
    """Node (level, i) of the fixed tree: ``known`` when there, ``leaf(i)`` at level 0, else ``merge``
    of its children computed first to last (so at most ``fan_in`` partial results per level are held)."""
    if (level, i) in known:
        return known[(level, i)]
    if level == 0:
        return leaf(i)
    kids = range(i * fan_in, min((i + 1) * fan_in, _width(level - 1, n, fan_in)))
    return merge(*[_node_value(level - 1, j, n, fan_in, known, leaf, merge) for j in kids])


def _owners(workers: list, n: int) -> list:
    """The worker that holds each of ``n`` partitions: consecutive runs, as even as they can be."""
    return [workers[p * len(workers) // n] for p in range(n)]


def _run_on_holder(fn, merge, src, datas, first: int, n: int, fan_in: int, args: tuple) -> list:
    """On the worker that holds partitions ``first .. first + len(datas) - 1``: ``fn`` of each, merged into
    the nodes of the fixed tree that lie inside them; ``[(node, value), ...]``. One task per worker and
    pass, whatever the number of partitions: the same sums as a task per partition and per merge."""
    nodes = _nodes_within(n, first, first + len(datas), fan_in)
    return [(node, _node_value(*node, n, fan_in, {}, lambda p: fn(src, datas[p - first], *args), merge))
            for node in nodes]


def _unreachable(exc: BaseException) -> bool:
    """Whether an actor call's error is distributed's own for a worker it could not reach (``distributed.actor``
    raises a plain ``OSError`` with this text), not an error of the call's work."""
    return type(exc) is OSError and str(exc) == "Unable to contact Actor's worker"


class _Holder:
    """The partitions one worker holds, with the work over them, as a Dask actor on that worker: every step of
    a fit on a cluster (loading the rows, their moments, centring them, a pass) is then one call per worker
    from the driver, relayed by the scheduler without scheduling a task, a round trip of 1-2 ms, where a
    task takes 10-12 ms (measured on a 2-core machine, 2 single-threaded workers; a pass over 100,000 x 2000
    rows takes 50-60 ms of work per worker). The actor reads its partitions itself when it is made (cached
    rows; streamed ones are read at every pass), so placing the rows is one task per worker, not one per
    partition plus one per centring. ``parts``: runs of partition numbers, one per worker thread, each run's
    work in a thread of its own. Its values come from :func:`_run_on_holder`, so they are the tasks' values,
    bit for bit."""

    def __init__(self, src, parts: list, specs: list, cache: bool):
        self.src, self.parts = src, parts
        self.pool = None
        index = [p for part in parts for p in part]
        by_p = dict(zip(index, specs))
        if cache:
            self.datas = dict(pair for run in self._map(
                lambda part: [(p, _load_partition(src, by_p[p])) for p in part]) for pair in run)
        else:
            self.datas = by_p

    def _map(self, fn) -> list:
        """``[fn(part) for part in self.parts]``, one thread per part."""
        if len(self.parts) == 1:
            return [fn(self.parts[0])]
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(len(self.parts), thread_name_prefix="streamcov-pass")
        return list(self.pool.map(fn, self.parts))

    def nodes(self, fn, merge, n: int, fan_in: int, args: tuple) -> list:
        """Nodes of the fixed tree within each of the parts: ``fn(src, data, *args)`` of each partition
        (:func:`partition_moments`, :func:`partition_sums`), merged by ``merge``."""
        return [pair for out in self._map(lambda part: _run_on_holder(
            fn, merge, self.src, [self.datas[p] for p in part], part[0], n, fan_in, args)) for pair in out]

    def centre(self, m32) -> list:
        """The cached rows centred by ``m32`` in place (:func:`_centred`; rows centred already are left)."""
        self._map(lambda part: [_centred(self.datas[p], m32) for p in part])
        return []


def _wait(client, futs, timeout=None):
    """``distributed.wait`` on ``client``: it finds its client as the default one, and the client of a
    scheduler address is not made the process's default (:func:`streamcov.stream.runtime._connect`)."""
    from distributed import wait

    with client.as_current():
        return wait(futs, timeout=timeout)


class _Problem:
    """The training rows of one fit, where they live, and the passes over them."""

    def __init__(self, source, y, fit_mask, val_mask, n_classes: int, loss: str, runtime, cache: str):
        self.source = source
        self.path = task_path(source.path) if getattr(source, "path", None) is not None else None
        self.src = self.path if self.path is not None else source
        self.runtime = runtime
        self.client = getattr(runtime, "client", None) if runtime is not None else None
        # how the work runs on a cluster: "actors" (a _Holder per worker holds its rows; :meth:`_on_actors`) or
        # "tasks" (the rows are task results, a pass a task per worker thread); None on threads. Fixed for the fit
        self.route = None if self.client is None else ("actors" if ACTOR_PASSES else "tasks")
        self.dim = int(source.dim)
        self.k = score_columns(n_classes)
        self.binary = n_classes == 2
        self.loss = LOSSES[loss]
        self.n_fit = int(np.count_nonzero(fit_mask))
        self.n_val = int(np.count_nonzero(val_mask))
        self.kernel = linear.use_kernel(self.n_fit + self.n_val, self.dim, self.k)
        specs = make_plan(source.bounds, fit_mask, val_mask, np.asarray(y), self.dim)
        self.n_partitions = len(specs)
        self.nbytes = 4 * self.dim * (self.n_fit + self.n_val)
        self.cache = cache
        self.mode = self._cache_mode()
        self.owners = None        # on a cluster: the worker that holds each partition
        self.slots: dict = {}     # on a cluster: threads of each worker
        self.pass_tasks = 0       # on a cluster: tasks of the last pass
        self.holders = None       # actors: [(worker, actor future, runs of partitions, actor)]
        self.specs = specs
        self.m32 = None
        self._m32_shared = None
        self.recoveries = 0
        self.data = None
        # the first placement recovers as the later steps do: a worker lost while the actors read the rows
        # (the longest step, and the one most likely to run a worker out of memory) is a lost worker too
        self._recovering(self._place_once)
        self.moments = self._recovering(lambda: self._run(partition_moments, (), merge_all_moments))
        self.m32 = self.moments[1].astype(np.float32)
        self._recovering(self._centre)
        self.pass_times: list = []

    def _place_once(self) -> None:
        """The first placement, unless a recovery from a worker lost meanwhile has placed the rows (the rows
        are placed once there are data or, on the actor route, actors)."""
        if self.data is None and self.holders is None:
            self.data = self._place(self.specs)

    def _cache_mode(self) -> str:
        if self.path is None:
            return "memory"          # in-memory rows: nothing to stream from
        return "memory" if use_cache(self.cache, self.nbytes, self.runtime) else "stream"

    # -- placement
    def _workers(self) -> list:
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        self.slots = {w: max(1, int(info[w].get("nthreads", 1))) for w in info}
        return sorted(info)

    def _place(self, specs):
        if self.route == "actors":
            self.owners = _owners(self._workers(), len(specs))
            self._make_holders(specs)
            return None
        if self.mode == "stream":
            if self.client is None:
                return specs
            self.owners = _owners(self._workers(), len(specs))
            out = [None] * len(specs)
            for w in dict.fromkeys(self.owners):
                idx = [p for p in range(len(specs)) if self.owners[p] == w]
                futs = self.client.scatter([specs[p] for p in idx], workers=[w], hash=False)
                for p, f in zip(idx, futs):
                    out[p] = f
            return out
        if self.client is None:
            if self.path is None or self.runtime is None or len(specs) == 1:
                # in memory, or one partition: in this thread, without a round trip through the scheduler,
                # from the store open here
                return [_load_partition(self.source, s) for s in specs]
            import dask

            return list(self.runtime.compute(*[dask.delayed(_load_partition, pure=False)(self.src, s)
                                               for s in specs]))
        self.owners = _owners(self._workers(), len(specs))
        futs = [self.client.submit(_load_partition, self.src, s, workers=[self.owners[p]],
                                   allow_other_workers=True, pure=False) for p, s in enumerate(specs)]
        _wait(self.client, futs)
        return futs

    def _centre(self):
        if self.mode != "memory":       # streamed rows are centred as they are read (also after a recovery
            return                      # that found less memory than the first placement)
        if self.client is None:
            for part in self.data:
                _centred(part, self.m32)
            return
        if self.route == "actors":
            self._on_actors(lambda actor: actor.centre(self.m32))
            return
        m32 = self.client.scatter(self.m32, broadcast=True, hash=False)
        raw, self.data = self.data, None
        new = [self.client.submit(_centred, f, m32, pure=False, **self._at(p)) for p, f in enumerate(raw)]
        del raw
        _wait(self.client, new)
        self.data = new

    # -- lost workers
    def _recovering(self, attempt):
        """``attempt()``; on a cluster that lost a worker (and with it the rows it held, or a task it ran),
        the partitions are placed again from the store on the workers there are now, as at the start
        (read, centred by the same mean), and the attempt is repeated: the same rows, hence the same sums.
        At most :data:`MAX_RECOVERIES` times in a fit; errors of the tasks themselves are raised as they are."""
        if self.client is None:
            return attempt()          # threads lose no worker (and need not import dask.distributed: 0.2 s)
        lost = lost_worker_errors()
        while True:
            try:
                return attempt()
            except lost as exc:
                error = exc
            while True:             # place again, itself retried if a worker is lost meanwhile
                if self.recoveries >= MAX_RECOVERIES:
                    raise error
                self.recoveries += 1
                try:
                    if self._place_again():
                        break
                except lost as exc:
                    error = exc
                    continue
                raise workers_lost(self.client) from error   # no worker left: nothing would compute a pass

    def _place_again(self) -> bool:
        """Wait a while for as many workers as there were (a nanny restarts a killed one), then place the
        partitions on those there are; False when there are none."""
        before = len(set(self.owners or ())) or 1
        try:
            self.client.wait_for_workers(before, timeout=RECOVERY_WAIT)
        except TimeoutError:
            if not self._workers():
                return False
        self.data, self._m32_shared, self.holders = None, None, None
        self.mode = self._cache_mode()        # fewer workers may hold less
        self.data = self._place(self.specs)
        if self.m32 is not None:
            self._centre()
        return True

    # -- passes
    def _run(self, fn, args: tuple, merge):
        if self.runtime is None or (self.client is None and self.n_partitions == 1):
            # one partition on threads: the same call, without a round trip through the scheduler
            return _tree([fn(self.src, d, *args) for d in self.data], merge)
        if self.route == "actors":
            n = self.n_partitions
            self.pass_tasks = sum(len(parts) for _, _, parts, _ in self.holders)
            return self._on_actors(lambda actor: actor.nodes(fn, merge, n, FAN_IN, args), merge)
        if self.client is not None:
            # one task per worker thread on the partitions its worker holds (left to itself the scheduler copies
            # partitions between workers and runs a pass on fewer of them), merging the nodes of the fixed
            # tree that lie within them; this thread merges the rest. The same tree, so the same sums, in
            # a round trip of one task per worker however many partitions there are.
            n = self.n_partitions
            runs = self._runs()
            self.pass_tasks = len(runs)
            futs = [self.client.submit(_run_on_holder, fn, merge, self.src, [self.data[p] for p in run], run[0],
                                       n, FAN_IN, args, pure=False, **self._at(run[0])) for run in runs]
            known = dict(pair for part in self._gather(futs) for pair in part)
            return _node_value(_top(n, FAN_IN), 0, n, FAN_IN, known, None, merge)
        import dask

        leaves = [dask.delayed(fn, pure=False)(self.src, d, *args) for d in self.data]
        return self.runtime.compute(_tree(leaves, dask.delayed(merge, pure=False)))[0]

    def _gather(self, futs: list) -> list:
        """The results of tasks on the partitions (a pass's, or the actors being made, which read the
        rows). A worker holding partitions that leaves the cluster mid-pass makes the scheduler recompute
        what it held, or forget it (:func:`lost_worker_errors`, which the fit recovers from); rarely it does
        neither and the pass would wait forever (seen once, in a clean-clone CI run of the worker-kill
        test). So work still unfinished :data:`RECOVERY_WAIT` seconds after one of its owners left is
        cancelled and raised as lost: the fit places the partitions again, as for the scheduler's own
        error, and the sums are the same."""
        def done(timeout):
            try:
                _wait(self.client, futs, timeout=timeout)   # a task's own error is raised by gather, not here
            except TimeoutError:
                return False
            return True

        self._watch(set(self.owners or ()), done, lambda: self.client.cancel(futs))
        return self.client.gather(futs)

    def _watch(self, owners: set, done, cancel=None) -> None:
        """Wait until ``done(timeout)`` (True once the work has finished, False after ``timeout`` seconds)
        while the workers in ``owners`` are there; work still unfinished :data:`RECOVERY_WAIT` seconds after
        one of them left is ``cancel()``-ed and raised as lost (``CancelledError``), which the fit recovers
        from. One watchdog for the work of both routes (:meth:`_gather`, :meth:`_on_actors`): passes, moments,
        centring, and the actors being made."""
        from concurrent.futures import CancelledError

        gone_since = None
        while not done(1.0):
            if gone_since is None and owners - set(self.client.scheduler_info(n_workers=-1)["workers"]):
                gone_since = time.monotonic()
            if gone_since is not None and time.monotonic() - gone_since > RECOVERY_WAIT:
                if cancel is not None:
                    cancel()
                raise CancelledError(f"work still unfinished {RECOVERY_WAIT:g} s after a worker holding its "
                                     f"partitions left")

    def _at(self, p: int) -> dict:
        """Placement of partition ``p``'s tasks: its worker, or any other one if that worker is gone."""
        return {} if self.owners is None else {"workers": [self.owners[p]], "allow_other_workers": True}

    def _runs(self) -> list:
        """The partitions of a cluster pass's tasks: each worker's run of consecutive partitions, cut in
        one part per worker thread."""
        runs: list = []
        for p in range(self.n_partitions):
            if runs and self.owners[p] == self.owners[runs[-1][0]]:
                runs[-1].append(p)
            else:
                runs.append([p])
        # a worker with several threads gets one task per thread, on consecutive parts of its run
        return [[int(p) for p in part] for run in runs
                for part in np.array_split(run, min(len(run), self.slots.get(self.owners[run[0]], 1)))]

    def _make_holders(self, specs) -> None:
        """One :class:`_Holder` actor per worker, made on (and, cached, reading) the partitions it holds."""
        by_worker: dict = {}
        for part in self._runs():
            by_worker.setdefault(self.owners[part[0]], []).append(part)
        cache = self.mode == "memory"
        futs = [self.client.submit(_Holder, self.src, parts, [specs[p] for part in parts for p in part], cache,
                                   actor=True, pure=False, **self._at(parts[0][0]))
                for parts in by_worker.values()]
        actors = self._gather(futs)   # watched: a worker lost meanwhile is raised as lost
        # where each actor is (its worker's, unless that one was busy or gone): the worker a call watches
        where = self.client.who_has(futs)
        self.holders = [((where.get(f.key) or [w])[0], f, parts, a)
                        for (w, parts), f, a in zip(by_worker.items(), futs, actors)]

    def _on_actors(self, call, merge=None):
        """``call(actor)`` on every worker's :class:`_Holder` (its moments, centring, a pass); the driver merges
        the nodes above theirs by ``merge`` (None: nothing to merge). A worker that leaves meanwhile (its
        call fails, or is still unanswered :data:`RECOVERY_WAIT` seconds after it left) is raised as lost,
        as for tasks (:meth:`_watch`)."""
        from concurrent.futures import CancelledError

        def done(pending):
            def finished(timeout):
                try:
                    pending.result(timeout=timeout)
                except TimeoutError:
                    return pending.done()    # not finished; or finished with its own TimeoutError, raised below
                except Exception:   # finished with an error, raised by pending.result() below
                    pass
                return True
            return finished

        calls = []
        for w, _, _, actor in self.holders:
            try:
                calls.append((w, call(actor)))
            except RuntimeError as exc:   # distributed: "Worker holding Actor was lost"
                raise CancelledError(f"the worker {w} holding partitions left: {exc}") from exc
        known: dict = {}
        for w, pending in calls:
            self._watch({w}, done(pending))
            try:
                known.update(pending.result())
            except OSError as exc:
                if self._worker_left(w, wait=RECOVERY_WAIT if _unreachable(exc) else 0.0):
                    raise CancelledError(f"the worker {w} holding partitions left: {exc}") from exc
                raise
        if merge is None:
            return None
        n = self.n_partitions
        return _node_value(_top(n, FAN_IN), 0, n, FAN_IN, known, None, merge)

    def _worker_left(self, w: str, wait: float = 0.0) -> bool:
        """Whether worker ``w`` has left the cluster, waiting up to ``wait`` seconds for the scheduler to see
        it go (a call to a worker just killed fails before the scheduler has noticed)."""
        end = time.monotonic() + wait
        while w in self.client.scheduler_info(n_workers=-1)["workers"]:
            if time.monotonic() >= end:
                return False
            time.sleep(0.1)
        return True

    def sums(self, W32: np.ndarray, b: np.ndarray) -> Sums:
        t0 = time.perf_counter()
        out = self._recovering(lambda: self._run(partition_sums, self._pass_args(W32, b), merge_sums))
        self.pass_times.append(time.perf_counter() - t0)
        return out

    def _pass_args(self, W32: np.ndarray, b: np.ndarray) -> tuple:
        if self.runtime is None or (self.client is None and self.n_partitions == 1) or self.route == "actors":
            return (self.m32, (W32, b), self.loss, self.binary, self.kernel)   # the mean rides in the call
        if self._m32_shared is None:
            self._m32_shared = self.runtime.share(self.m32)
        # a small model rides in the cluster's few tasks (one per worker); a large one is broadcast once
        small = self.client is not None and W32.nbytes <= EMBED_BYTES
        model = (W32, b) if small else self.runtime.share((W32, b))
        return (self._m32_shared, model, self.loss, self.binary, self.kernel)

    @property
    def passes(self) -> int:
        return len(self.pass_times)

    @property
    def pass_seconds(self) -> float:
        return float(sum(self.pass_times))

    @property
    def parallel(self) -> int:
        """Partitions computed at once: the cores a pass can use."""
        if self.runtime is None or (self.client is None and self.n_partitions == 1):
            return 1
        return max(1, min(self.n_partitions, int(self.runtime.parallelism)))

    @property
    def gemm_flops(self) -> int:
        """Floating-point operations of the GEMMs of one pass (2 per multiply-add)."""
        return 2 * self.dim * self.k * (2 * self.n_fit + self.n_val)

    def close(self):
        self.data = None
        self._m32_shared = None
        self.holders = None


# the largest feature value LBFGSClassifier.fit takes: its square still fits in float32
MAX_FEATURE = linear.max_feature(np.float32)
# features above this size: a fit that finds no step is told to standardize them (measured: log loss on
# 20 standardized features x 1e3 trains as LogisticRegression does; x 1e6 stops after 1 iteration)
BADLY_SCALED = 1e4


# ------------------------------------------------------------------ scaler
def scaler_from_moments(kind: str, n: int, mean: np.ndarray, M2: np.ndarray, dtype=np.float64, *,
                        require_spread: bool = False):
    """``(scaler, inv_scale)`` of ``[model] scale`` from the moments of the training rows.

    ``center``: :class:`~streamcov.preprocessing.GlobalCenterScaler` (mean row,
    one factor ``sqrt(sum(M2) / n)``); ``standard``: ``StandardScaler``
    (per column ``sqrt(M2 / n)``, zero variances mapped to 1); ``none``: no
    scaler, ``inv_scale = 1``. Rows equal to within rounding are refused when
    scaling them, and unscaled with ``require_spread`` (a pipeline: a setting
    swamped its descriptors, e.g. descriptor.gamma = 1e300; the estimator fits
    the intercept alone on rows that span nothing).
    """
    dim = len(mean)
    from ..preprocessing import check_rows_differ

    if kind != "none" or require_spread:
        check_rows_differ(n, mean, M2, dtype)
    if kind == "none":
        return None, 1.0
    if kind == "center":
        from ..preprocessing import GlobalCenterScaler

        sc = GlobalCenterScaler()
        var = float(M2.sum()) / max(n, 1)
        sc.n_samples_seen_ = int(n)
        sc.m2_ = np.asarray(M2, dtype=np.float64).copy()
        sc.mean_ = mean.copy()
        sc.scale_ = float(np.sqrt(var)) if var > 0 else 1.0
        sc.n_features_in_ = dim
        return sc, 1.0 / sc.scale_
    if kind == "standard":
        from sklearn.preprocessing import StandardScaler

        sc = StandardScaler()
        var = M2 / max(n, 1)
        scale = np.sqrt(var)
        scale[scale < 10 * np.finfo(scale.dtype).eps] = 1.0
        sc.mean_, sc.var_, sc.scale_ = mean.copy(), var, scale
        sc.n_samples_seen_ = np.int64(n)
        sc.n_features_in_ = dim
        return sc, 1.0 / scale
    raise ValueError(f"scale must be none, center or standard, got {kind!r}")


# --------------------------------------------------------------- checkpoints
def _save(writer, state: LBFGSState, engine: dict, best_x, fingerprint: str):
    # a copy of the engine now (its lists grow), the JSON and the arrays on the writer's thread (a state's
    # arrays never change): the driver pays one list copy an iteration, not the JSON of a growing curve.
    # A run that has stopped continues from nothing but its point: its checkpoint drops the curvature
    # pairs (the bulk of the file, 2 x memory vectors), and a resume from it ends on the same model.
    snapshot = {key: list(v) if isinstance(v, list) else v for key, v in engine.items()}
    if engine["stop"] is not None and state.s:
        state = LBFGSState(x=state.x, f=state.f, g=state.g, info=state.info, n_iter=state.n_iter,
                           n_evals=state.n_evals)

    def build():
        from .model import checkpoint_arrays

        arrays, scalars = state.to_arrays()
        out = {f"state.{k}": v for k, v in arrays.items()}
        if best_x is not None:
            out["best_x"] = best_x
        return checkpoint_arrays(out, {"learner": "lbfgs", "fingerprint": fingerprint, "engine": snapshot,
                                       "state": scalars})

    writer.save(build)


def _load(path, fingerprint: str, size: int):
    from .model import UNREADABLE_CHECKPOINT, read_checkpoint

    try:
        with np.load(path, allow_pickle=False) as z:
            doc, members = read_checkpoint(z)
            if doc.get("learner") != "lbfgs" or doc.get("fingerprint") != fingerprint:
                return None
            arrays = {k.removeprefix("state."): v for k, v in members.items() if k.startswith("state.")}
            best = np.array(members["best_x"]) if "best_x" in members else None
    except UNREADABLE_CHECKPOINT:
        return None
    if arrays["x"].shape != (size,):
        return None
    return LBFGSState.from_arrays(arrays, doc["state"]), doc["engine"], best


# ------------------------------------------------------------------ learner
def _seed_of(random_state) -> int:
    if isinstance(random_state, (Integral, np.integer)):
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def validation_split(y, train_mask, validation_fraction: float, seed: int):
    """``(fit_mask, val_mask)``: ``validation_fraction`` of the training rows held out, stratified by class,
    drawn from ``seed`` (:func:`streamcov.splits.holdout`)."""
    from ..splits import holdout

    return holdout(y, train_mask, validation_fraction, np.random.default_rng(seed))


# ------------------------------------------------------- the span of the rows
def span_bytes(n_fit: int, n_val: int, dim: int) -> int:
    """Bytes the fit in the span holds at once: the float32 rows, the float64 Gram matrix with the
    eigensolver's eigenvectors and workspace (about 4 n^2), the validation rows' products with the fit
    rows, and the span coordinates (float32)."""
    n_all = n_fit + n_val
    return 4 * dim * n_all + 8 * (4 * n_fit * n_fit + n_val * n_fit) + 4 * n_all * n_fit


def span_limit(n_fit: int, n_val: int, dim: int) -> str | None:
    """What keeps a fit of ``n_fit`` rows (and ``n_val`` validation rows) of ``dim`` numbers out of the span
    of its rows (:data:`SPAN_MAX_ROWS`, :data:`SPAN_MAX_BYTES`), or None when it fits."""
    n_all = n_fit + n_val
    need = span_bytes(n_fit, n_val, dim)
    if n_all <= SPAN_MAX_ROWS and need <= SPAN_MAX_BYTES:
        return None
    return (f"the span holds the {n_all} training rows, their {n_fit} x {n_fit} Gram matrix and its eigenvectors in "
            f"memory ({need / 2**30:.3g} GiB): at most {SPAN_MAX_ROWS} rows and {SPAN_MAX_BYTES / 2**30:.3g} GiB")


def span_route(est, source, n_fit: int, n_val: int, n_classes: int) -> bool:
    """Whether a fit of ``est`` runs in the span of the training rows (:func:`_train_in_span`).

    Decided by the shapes alone, never by the memory free at the moment, so that a run and its resume
    take the same route (the two give the same model up to rounding, not bit for bit). ``span =
    "rows"``: yes (a ``ValueError`` beyond :data:`SPAN_MAX_ROWS` rows or :data:`SPAN_MAX_BYTES`);
    ``"features"``: no; ``"auto"``: within those limits, with at most half as many fit rows as features
    and at most :data:`SPAN_ROWS_PER_COLUMN` per score column, unless ``cache = "stream"`` asks that the
    rows are not held in memory.
    """
    span = getattr(est, "span", "features")
    if span == "features" or n_fit == 0:
        return False
    dim = int(source.dim)
    problem = span_limit(n_fit, n_val, dim)
    fits = problem is None
    if span == "rows":
        if not fits:
            raise ValueError(f"span='rows': {problem}; use span='features' (or 'auto')")
        return True
    return (fits and getattr(est, "cache", "auto") != "stream" and 2 * n_fit <= dim
            and n_fit <= SPAN_ROWS_PER_COLUMN * score_columns(n_classes))


def _read_rows(source, y, fit_mask, val_mask):
    """``(X, y_rows)``: the fit rows then the validation rows (each in row order) as float32, as the passes
    read them, with their class codes: the plan, block reader and gather of :func:`_load_partition`, every
    row copied once, straight into its place in one array."""
    specs = make_plan(source.bounds, fit_mask, val_mask, np.asarray(y), int(source.dim))
    n_fit = sum(sp.n_fit for sp in specs)
    X = np.empty((n_fit + sum(sp.n_val for sp in specs), int(source.dim)), dtype=np.float32)
    store = _open(task_path(source.path) if getattr(source, "path", None) is not None else source)
    read = _block_reader(store, list(dict.fromkeys(p.block for sp in specs for c in sp.chunks for p in c)))
    fa, va = 0, n_fit
    for sp in specs:
        for p, B in _pieces(sp, read):
            fa = _gather(B, p.fit, X, fa)
            va = _gather(B, p.val, X, va)
    y_rows = np.concatenate([np.zeros(0, dtype=np.int64)] + [c for sp in specs for c in sp.y_fit]
                            + [c for sp in specs for c in sp.y_val])
    return X, y_rows


def _panels(X: np.ndarray, mean: np.ndarray, inv: np.ndarray):
    """``(j0, j1, B)``: column panels of ``(X - mean) * inv`` in float64, about :data:`SPAN_PANEL_BYTES`
    each (at least 64 columns)."""
    width = max(64, SPAN_PANEL_BYTES // (8 * max(len(X), 1)))
    for j0 in range(0, X.shape[1], width):
        j1 = min(j0 + width, X.shape[1])
        B = np.subtract(X[:, j0:j1], mean[j0:j1], dtype=np.float64)
        B *= inv[j0:j1]
        yield j0, j1, B


def _train_in_span(source, y, fit_mask, val_mask, classes, est, *, scale, checkpoint, resume, fingerprint,
                   progress, require_spread=False):
    """Fit ``est`` in the span of its fit rows; None when the rows span nothing (every row the mean).

    The minimizer of ``(1/n) sum loss(W x_i + b) + lam ||W||^2 / 2`` has ``W = A X`` (the gradient in W
    is ``G^T X / n + lam W``): it lies in the span of the n fit rows ``X`` (after the scaler), and so do
    all L-BFGS iterates from a point in it, since every direction is built from gradients and steps.
    With ``X X^T = U diag(s^2) U^T`` (one float64 Gram product over column panels, then ``eigh``;
    eigenvalues below :data:`SPAN_RANK_RTOL` of the largest dropped) and the orthonormal basis
    ``V = X^T U / s`` of that span, ``W = Wz V^T`` turns the problem into the same one over the rows
    ``z = V^T x`` (``U s`` for the fit rows; validation rows ``(X_val X^T) U / s``) with the same
    penalty, ``||W|| = ||Wz||``, and r <= n columns in place of D: the same fit in exact arithmetic (an
    orthogonal change of coordinates, which L-BFGS and its line search do not see), each pass
    ``r / D`` of the cost. ``tol`` is then checked on the gradient in those coordinates (the same
    2-norm; its largest entry is usually larger than in D columns, a stricter test, not always), and
    ``grad_max_`` reports it. A warm start is projected on the span: the minimizer is the same, but
    the path is not (with early stopping, the iterate kept can differ). The fit in ``z`` is the
    ordinary route (rows in memory), checkpointed and resumed as any; its checkpoint names a digest of
    the basis, which is recomputed on resume and must come out the same bits for the checkpoint to be
    used. Every product here runs on one BLAS thread, so the model does not depend on the caller's.
    """
    import hashlib

    from sklearn.base import clone
    from .sgd import _ArrayBlocks

    t0 = time.perf_counter()
    X, y_rows = _read_rows(source, y, np.asarray(fit_mask, dtype=bool), np.asarray(val_mask, dtype=bool))
    n, n_v = int(np.count_nonzero(fit_mask)), int(np.count_nonzero(val_mask))
    n_all, D = X.shape
    k = score_columns(len(classes))
    warm = est.warm_start and getattr(est, "coef_", None) is not None and \
        np.shape(est.coef_) == (k, D) and np.shape(est.intercept_) == (k,)
    # every product on one BLAS thread: OpenBLAS rounds some shapes differently on 1 and on 2 threads, and
    # the model must be the same bits whatever the caller's limit (only the fit in z, below, runs outside)
    with blas_threads(1):
        mean = X.mean(axis=0, dtype=np.float64)
        M2 = np.zeros(D)
        for j0, j1, B in _panels(X, mean, np.ones(D)):
            M2[j0:j1] = np.einsum("ij,ij->j", B, B)
        scaler, inv = scaler_from_moments(scale, n_all, mean, M2, getattr(source, "dtype", np.float64),
                                          require_spread=require_spread)
        inv_cols = np.broadcast_to(np.asarray(inv, dtype=np.float64), (D,)).copy()
        K = np.zeros((n, n))
        Kv = np.zeros((n_v, n))
        WX = np.zeros((k, n)) if warm else None
        t_gram = time.perf_counter()
        for j0, j1, B in _panels(X, mean, inv_cols):
            Bf = B[:n]
            K += Bf @ Bf.T
            if n_v:
                Kv += B[n:] @ Bf.T
            if warm:
                WX += np.asarray(est.coef_, dtype=np.float64)[:, j0:j1] @ Bf.T
        # the pass over the rows: their Gram product (timed as the other route's passes over cached rows)
        gram_seconds = time.perf_counter() - t_gram
        K += K.T
        K *= 0.5
        ev, U = np.linalg.eigh(K)
        del K
        if not len(ev) or ev[-1] <= 0:
            return None
        keep = np.flatnonzero(ev > ev[-1] * SPAN_RANK_RTOL)[::-1]
        s = np.sqrt(ev[keep])
        U = np.ascontiguousarray(U[:, keep])
        r = len(keep)
        # the span coordinates in float32, as the passes read them
        Z = np.empty((n_all, r), dtype=np.float32)
        np.multiply(U, s, out=Z[:n], casting="same_kind")
        if n_v:
            Z[n:] = Kv @ (U / s)
        del Kv
        inner = clone(est).set_params(span="features", cache="memory", warm_start=warm)
        if warm:
            W0 = np.asarray(est.coef_, dtype=np.float64)
            b0 = np.asarray(est.intercept_, dtype=np.float64)
            inner.coef_ = (WX @ U) / s
            inner.intercept_ = b0 + W0 @ mean if scaler is None else b0.copy()
    span_seconds = time.perf_counter() - t0
    # the checkpoint of the fit in z holds coordinates in this basis: it is resumed only in the same one
    # (eigenvectors of equal or nearly equal eigenvalues may come out rotated from other rounding)
    digest = hashlib.blake2b(Z.tobytes() + s.tobytes(), digest_size=8).hexdigest()
    z_fit = np.zeros(n_all, dtype=bool)
    z_fit[:n] = True
    t1 = time.perf_counter()
    train_lbfgs(_ArrayBlocks(Z, chunk_rows(r)), y_rows, np.ones(n_all, dtype=bool), classes, inner,
                scale="none", checkpoint=checkpoint, resume=resume,
                fingerprint=f"{fingerprint}|span rows {r} {SPAN_PANEL_BYTES} {SPAN_RANK_RTOL} {digest}",
                progress=progress, _masks=(z_fit, ~z_fit))
    t2 = time.perf_counter()
    del Z
    # back to the D columns: W = Wz V^T = (Wz / s) U^T X, panel by panel
    with blas_threads(1):
        A = (inner.coef_ / s) @ U.T
        W = np.empty((k, D))
        for j0, j1, B in _panels(X[:n], mean, inv_cols):
            np.matmul(A, B, out=W[:, j0:j1])
        b = np.asarray(inner.intercept_, dtype=np.float64).copy()
        if scaler is None:
            b = b - W @ mean
    for name in ("n_iter_", "n_evals_", "stop_reason_", "converged_", "grad_max_", "loss_curve_",
                 "validation_loss_curve_", "best_iter_"):
        if hasattr(inner, name):
            setattr(est, name, getattr(inner, name))
        else:
            est.__dict__.pop(name, None)   # an earlier fit's, not this one's
    est.coef_ = W
    est.intercept_ = b
    est.classes_ = classes
    est.n_features_in_ = D
    info = dict(inner.fit_info_)
    info.update(span="rows", rank=r, n_fit=n, n_validation=n_v, gram_seconds=gram_seconds,
                # numpy computes B @ B.T by BLAS syrk: the n (n + 1) / 2 products of the upper triangle
                gram_flops=n * (n + 1) * D + 2 * n_v * n * D, span_seconds=span_seconds,
                span_fit_seconds=t2 - t1, back_map_seconds=time.perf_counter() - t2, cache="memory")
    est.fit_info_ = info
    return est, scaler



def train_lbfgs(source, y, train_mask, classes, estimator, *, runtime=None, scale: str = "none",
                checkpoint=None, resume: bool = False, fingerprint: str = "", progress: bool = False,
                _masks=None, require_spread: bool = False):
    """Fit ``estimator`` (:class:`LBFGSClassifier`) on the training rows of ``source``.

    Parameters
    ----------
    source : FeatureStore or in-memory blocks
        Anything with ``bounds``, ``dim``, ``read_block(i)`` (and ``path``
        for a store, which tasks open themselves).
    y : ndarray of int
        Class codes of every row of ``source``.
    train_mask : ndarray of bool
    classes : ndarray
        Every class code the model knows (``0 .. n_classes - 1``).
    estimator : LBFGSClassifier
        Its parameters say what to fit; it is fitted in place.
    runtime : Runtime, optional
        Where the passes run (:func:`streamcov.stream.runtime.dask_runtime`);
        None: in this thread, same sums.
    scale : {"none", "center", "standard"}
        The scaler of ``[model] scale``, fitted on the training rows and
        folded into the passes.
    checkpoint : path, optional
        Written after every iteration (in the background); with ``resume``
        and a matching ``fingerprint`` the run continues from it.
    resume : bool, default=False
        Continue from ``checkpoint`` when it exists and its fingerprint matches;
        otherwise (or when False) start afresh.
    fingerprint : str, default=""
        What the fit depends on (data, split, parameters); a checkpoint written
        under another fingerprint, or under other partition constants, is not
        resumed from.
    progress : bool
        Show a progress bar of the L-BFGS iterations (up to ``estimator.max_iter``).
    require_spread : bool
        Refuse training rows equal to within rounding even unscaled (a
        pipeline's descriptors swamped by a setting); otherwise only when
        scaling them (:func:`scaler_from_moments`).

    Notes
    -----
    With ``estimator.span`` ``"rows"``, or ``"auto"`` and few training rows
    against the features (:func:`span_route`), the fit runs in the span of
    the training rows (:func:`_train_in_span`): the minimizer ``W`` lies in
    it (representer theorem), so the same problem is solved in ``r <= n``
    coordinates after one Gram product, and mapped back.

    Returns
    -------
    estimator, scaler
        The fitted estimator (coefficients in the scaler's output space) and
        the scaler (None for ``scale = "none"``).
    """
    from .model import AsyncCheckpointWriter

    est = estimator
    est._validate_params()
    # the cut into partitions and chunks and the tree set the order of the sums: a checkpoint written
    # under other constants would continue along another path, so it is not resumed from
    fingerprint = (f"{fingerprint}|plan {PARTITION_BYTES} {linear.CHUNK_BYTES} {linear.MIN_CHUNK_ROWS} "
                   f"{FAN_IN} {linear.KERNEL_MIN_MACS}")
    classes = np.asarray(classes)
    n_classes = len(classes)
    if n_classes < 2:
        raise ValueError(f"a classifier needs at least 2 classes, got {n_classes}")
    seed = _seed_of(est.random_state)
    if _masks is not None:
        fit_mask, val_mask = _masks
    else:
        fit_mask, val_mask = validation_split(y, train_mask, float(est.validation_fraction), seed)
    if span_route(est, source, int(np.count_nonzero(fit_mask)), int(np.count_nonzero(val_mask)), n_classes):
        fitted = _train_in_span(source, y, fit_mask, val_mask, classes, est, scale=scale, checkpoint=checkpoint,
                                resume=resume, fingerprint=fingerprint, progress=progress,
                                require_spread=require_spread)
        if fitted is not None:
            return fitted
    problem = _Problem(source, y, fit_mask, val_mask, n_classes, est.loss, runtime, est.cache)
    try:
        n_mom, mean, M2 = problem.moments
        scaler, inv = scaler_from_moments(scale, n_mom, mean, M2, getattr(source, "dtype", np.float64),
                                          require_spread=require_spread)
        k, D = problem.k, problem.dim
        n = problem.n_fit
        lam = l2_penalty(est.C, n)
        if not 0.0 < lam < float("inf"):
            raise ValueError(f"C={est.C!r} gives the penalty 1 / (C n) = {lam!r} for {n} training rows, which the "
                             f"learner cannot take; give C between 1e-300 and 1e300")
        dm = mean - problem.m32.astype(np.float64)

        size = k * D + k

        fused = jit_started()
        if fused:
            from .._kernels.vector import penalized_gradient, scale_columns

            inv_cols = np.broadcast_to(np.asarray(inv, dtype=np.float64), (D,)).copy()

        def fun(x):
            # Wp = W * inv and its float32 rounding, then the gradient (s.G - outer(s.r, dm)) * inv / n
            # + lam * W written into its place in the result: operation for operation as numpy rounds
            # them, without a k x D temporary per operation; with numba's JIT running, each in one pass
            # (kernels/vector.py). The same numbers either way.
            W = x[:k * D].reshape(k, D)
            b = x[k * D:]
            grad = np.empty(size)
            gW = grad[:k * D].reshape(k, D)
            if fused:
                Wp = np.empty((k, D))
                W32 = np.empty((k, D), dtype=np.float32)
                scale_columns(W, inv_cols, Wp, W32)
                s = problem.sums(W32, b - Wp @ dm)
                penalized_gradient(s.G, s.r, dm, inv_cols, float(n), lam, W, gW)
            else:
                Wp = W * inv
                s = problem.sums(Wp.astype(np.float32), b - Wp @ dm)
                np.outer(s.r, dm, out=gW)
                np.subtract(s.G, gW, out=gW)
                np.multiply(gW, inv, out=gW)
                np.divide(gW, n, out=gW)
                np.add(gW, np.multiply(W, lam, out=Wp), out=gW)
            np.divide(s.r, n, out=grad[k * D:])
            f = s.loss / n + 0.5 * lam * float(np.vdot(W, W))
            info = {"train_accuracy": s.correct / max(s.n, 1)}
            if s.val_n:
                info.update(val_loss=s.val_loss / s.val_n, val_accuracy=s.val_correct / s.val_n)
            return f, grad, info

        x0 = np.zeros(size)
        if est.warm_start and getattr(est, "coef_", None) is not None and \
                np.shape(est.coef_) == (k, D) and np.shape(est.intercept_) == (k,):
            W0 = np.asarray(est.coef_, dtype=np.float64)
            b0 = np.asarray(est.intercept_, dtype=np.float64)
            if scaler is None:
                b0 = b0 + W0 @ mean
            x0 = np.concatenate([W0.ravel(), b0])
        found = resume and checkpoint is not None and Path(checkpoint).is_file()
        loaded = _load(checkpoint, fingerprint, size) if found else None
        use_val = problem.n_val > 0
        if loaded is not None:
            state, engine, best_x = loaded
        else:
            # one BLAS thread, as in every later evaluation: a threaded dot over the k x D coefficients
            # would sum in another order (machine-dependent: it only matters for a warm start, x0 = 0
            # gives zeros either way) and leave BLAS threads spinning for 0.1 s on the other cores
            with blas_threads(1):
                state = lbfgs_start(fun, x0)
            engine = {"stop": None, "loss_curve": [state.f], "val_curve": [], "best_val": None,
                      "best_iter": 0, "stale": 0}
            best_x = None
            if use_val:
                engine["val_curve"].append(state.info["val_loss"])
                engine["best_val"] = state.info["val_loss"]
                best_x = state.x
        writer = AsyncCheckpointWriter(checkpoint, CHECKPOINT_INTERVAL) if checkpoint is not None else None
        bar = None
        if progress:
            from .._config import new_bar

            bar = new_bar(total=int(est.max_iter), desc="train (L-BFGS)", unit="it", initial=state.n_iter)
        t0 = time.perf_counter()
        try:
            blas = blas_threads(1)   # the driver's vector algebra: one thread (BLAS threads spin on busy cores)
            blas.__enter__()
            while engine["stop"] is None:
                if float(np.max(np.abs(state.g))) <= est.tol:
                    engine["stop"] = "converged"
                elif state.n_iter >= est.max_iter:
                    engine["stop"] = "max_iter"
                if engine["stop"] is not None:
                    break
                f_old = state.f
                state, ok = lbfgs_iteration(fun, state, memory=int(est.memory))
                if not ok:
                    engine["stop"] = "line_search"
                else:
                    engine["loss_curve"].append(state.f)
                    if use_val:
                        v = state.info["val_loss"]
                        engine["val_curve"].append(v)
                        if v < engine["best_val"]:
                            engine["best_val"], engine["best_iter"], engine["stale"] = v, state.n_iter, 0
                            best_x = state.x
                        else:
                            engine["stale"] += 1
                            if engine["stale"] >= est.n_iter_no_change:
                                engine["stop"] = "early_stopping"
                    if engine["stop"] is None and stalled(f_old, state.f):
                        engine["stop"] = "stalled"
                if writer is not None:
                    _save(writer, state, engine, best_x, fingerprint)
                if bar is not None:
                    # refresh=False: the bar redraws at tqdm's own rate, not once per iteration (a log
                    # file would get a line per iteration)
                    bar.set_postfix(loss=f"{state.f:.5g}", refresh=False)
                    bar.update(1)
            if writer is not None:
                _save(writer, state, engine, best_x, fingerprint)
        finally:
            blas.__exit__(None, None, None)
            if writer is not None:
                writer.close()
            if bar is not None:
                bar.close()
        x = best_x if use_val else state.x
        W = x[:k * D].reshape(k, D).copy()
        b = x[k * D:].copy()
        if scaler is None:
            with blas_threads(1):   # a threaded product rounds by the thread count
                b = b - W @ mean
        est.coef_ = W
        est.intercept_ = b
        est.classes_ = classes
        est.n_features_in_ = D
        est.n_iter_ = int(state.n_iter)
        est.n_evals_ = int(state.n_evals)
        est.stop_reason_ = engine["stop"]
        est.converged_ = engine["stop"] in ("converged", "stalled")
        est.grad_max_ = float(np.max(np.abs(state.g)))
        est.loss_curve_ = np.asarray(engine["loss_curve"], dtype=np.float64)
        if use_val:
            est.validation_loss_curve_ = np.asarray(engine["val_curve"], dtype=np.float64)
            est.best_iter_ = int(engine["best_iter"])
        else:   # a refit without validation: an earlier fit's curve and best iteration are not this fit's
            for name in ("validation_loss_curve_", "best_iter_"):
                est.__dict__.pop(name, None)
        est.fit_info_ = {"passes": problem.passes, "pass_seconds": problem.pass_seconds,
                         "pass_times": list(problem.pass_times), "parallel_partitions": problem.parallel,
                         "optimize_seconds": time.perf_counter() - t0, "cache": problem.mode,
                         "partitions": problem.n_partitions, "recoveries": problem.recoveries,
                         "pass_tasks": problem.pass_tasks, "pass_route": problem.route,
                         "kernel": problem.kernel,
                         "gemm_flops_per_pass": problem.gemm_flops,
                         "n_fit": problem.n_fit, "n_validation": problem.n_val,
                         "checkpoint_ignored": bool(found and loaded is None), "span": "features"}
    finally:
        problem.close()
    return est, scaler


# --------------------------------------------------------------- prediction
def _predict_blocks(src, pieces, model):
    clf, scaler = model
    store = _open(src)
    out = []
    with blas_threads(1):
        for i, rows in pieces:
            X = store.read_block(i)[rows]
            out.append(clf.predict(X if scaler is None else scaler.transform(X)))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def predict_rows(source, mask, clf, scaler=None, runtime=None) -> np.ndarray:
    """Predictions of ``clf`` (after ``scaler``) for the rows of ``mask``, in row order, block tasks on ``runtime``."""
    bounds = source.bounds
    mask = np.asarray(mask, dtype=bool)
    per_task = max(1, PARTITION_BYTES // (8 * max(int(source.dim), 1)))
    groups, cur, rows_in = [], [], 0
    for i in range(len(bounds) - 1):
        rows = np.flatnonzero(mask[bounds[i]:bounds[i + 1]])
        if len(rows):
            cur.append((i, rows))
            rows_in += len(rows)
        if rows_in >= per_task:
            groups.append(cur)
            cur, rows_in = [], 0
    if cur:
        groups.append(cur)
    src = task_path(source.path) if getattr(source, "path", None) is not None else source
    if not groups:
        return np.zeros(0, dtype=np.int64)
    if runtime is None:
        parts = [_predict_blocks(src, g, (clf, scaler)) for g in groups]
    else:
        import dask

        model = runtime.share((clf, scaler))
        parts = runtime.compute(*[dask.delayed(_predict_blocks, pure=False)(src, g, model) for g in groups])
    return np.concatenate(parts).astype(np.int64)


# ---------------------------------------------------------------- estimator
class LBFGSClassifier(ClassifierMixin, BaseEstimator):
    """Linear classifier fitted by full-batch L-BFGS, streamed over blocks of rows.

    Minimizes ``(1/n) sum_i loss(W x_i + b, y_i) + ||W||^2 / (2 C n)``
    (:mod:`streamcov.linear`): the multinomial log loss (logistic for two
    classes; the problem of ``LogisticRegression(C=C)``) or the one-vs-rest
    squared hinge. In memory (:meth:`fit`) or over a feature store
    (:func:`train_lbfgs`, the ``lbfgs`` learner of pipeline files, which also
    streams, caches, runs on a cluster and checkpoints).

    Parameters
    ----------
    loss : {"log_loss", "squared_hinge"}, default="log_loss"
    C : float, default=1.0
        Inverse regularization strength (``LogisticRegression``'s ``C``).
    tol : float, default=1e-4
        Stop when the largest gradient entry is at most ``tol``.
    max_iter : int, default=100
        Most iterations (each costs about one pass over the rows).
    memory : int, default=10
        Curvature pairs kept by L-BFGS.
    validation_fraction : float in [0, 1), default=0.0
        Share of the training rows held out for early stopping, stratified by class (0: none).
    n_iter_no_change : int, default=5
        Iterations without a lower validation loss before stopping.
    cache : {"auto", "memory", "stream"}, default="auto"
        For feature stores: keep the float32 rows in memory, read them at
        every pass, or cache when they fit (see :mod:`streamcov.stream.lbfgs`).
    warm_start : bool, default=False
        Start from the coefficients of the previous fit (same shape).
    span : {"auto", "rows", "features"}, default="auto"
        Coordinates of the fit. ``"features"``: L-BFGS over the ``k x D``
        coefficients, one pass over the rows per evaluation. ``"rows"``: the
        same problem in the span of the training rows (the minimizer lies in
        it): one Gram product of the rows (``n x n``, float64), then L-BFGS
        over ``k x r`` coordinates (``r <= n`` the rank), each evaluation
        ``r / D`` of the cost; the rows, the Gram matrix and its eigenvectors
        are held in memory (at most 8192 rows and 2 GiB). ``"auto"``:
        ``"rows"`` when there are at most half as many training rows as
        features and at most 25 per score column, within those limits, and
        ``cache`` is not ``"stream"``. The same model up to rounding and the
        stopping test (see :func:`train_lbfgs`).
    n_jobs : int, default=None
        Threads for :meth:`fit` on in-memory data (None or 1: this thread; -1 every core, -2 all but one, ...,
        as in scikit-learn); at most one per core.
    random_state : int, RandomState or None, default=None
        Draws the validation rows; nothing else is random.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_iter_ : int
        L-BFGS iterations.
    n_evals_ : int
        Objective evaluations (passes over the rows).
    loss_curve_ : ndarray
        Objective at the start and after every iteration.
    validation_loss_curve_ : ndarray
        Validation loss at the same points (with ``validation_fraction > 0``).
    best_iter_ : int
        Iteration of the lowest validation loss, whose coefficients are kept (with
        ``validation_fraction > 0``).
    grad_max_ : float
        Largest absolute entry of the objective's gradient at the end, the number ``tol`` is
        checked against (in the span's coordinates when the fit ran in the span of the rows:
        :func:`train_lbfgs`).
    stop_reason_ : str
        ``converged`` (gradient below ``tol``), ``stalled`` (relative decrease
        below 64 eps), ``max_iter``, ``early_stopping`` or ``line_search`` (no
        Wolfe step: the objective's precision is reached).
    converged_ : bool
    fit_info_ : dict
        How the passes ran (:func:`train_lbfgs` fits): ``passes``,
        ``pass_times``, ``cache``, ``partitions``, ``recoveries`` (times the
        partitions were placed again after a worker was lost), ``pass_tasks``
        (on a cluster: one per worker thread holding partitions),
        ``pass_route`` (on a cluster: ``"actors"``, calls to an actor
        per worker, or ``"tasks"``; None on threads), ``kernel``
        (the passes ran the numba kernel, not BLAS), FLOPs per pass.
    """

    _parameter_constraints: dict = {
        "loss": [StrOptions(set(LOSSES))],
        "C": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "memory": [Interval(Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "cache": [StrOptions(set(CACHE_MODES))],
        "warm_start": ["boolean"],
        "span": [StrOptions({"auto", "rows", "features"})],
        "n_jobs": [None, Interval(Integral, 1, None, closed="left"), Interval(Integral, None, -1, closed="right")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, loss="log_loss", C=1.0, tol=1e-4, max_iter=100, memory=10, validation_fraction=0.0,
                 n_iter_no_change=5, cache="auto", warm_start=False, span="auto", n_jobs=None, random_state=None):
        self.loss = loss
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.memory = memory
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.cache = cache
        self.warm_start = warm_start
        self.span = span
        self.n_jobs = n_jobs
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit on in-memory rows ``X`` (n_samples, n_features) and labels ``y``."""
        from .sgd import _ArrayBlocks

        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        big = float(np.abs(X).max()) if X.size else 0.0
        if big > MAX_FEATURE:   # the passes run in float32: beyond, rows and their squares overflow to inf
            raise ValueError(f"X holds values up to {big:.3g}; the L-BFGS passes run in float32 and take values "
                             f"below {MAX_FEATURE:.2g}: standardize X (e.g. sklearn's StandardScaler)")
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"LBFGSClassifier needs samples of at least 2 classes in the data, but the data "
                             f"contains only one class: {classes[0]!r}")
        prev_classes = getattr(self, "classes_", None)
        if self.warm_start and prev_classes is not None and not np.array_equal(prev_classes, classes):
            self.coef_ = None    # another set of classes: nothing to start from
        blocks = _ArrayBlocks(X, chunk_rows(X.shape[1]))
        mask = np.ones(len(X), dtype=bool)
        n_jobs = 1
        if self.n_jobs is not None:
            from .._config import _thread_count, available_cores

            n_jobs = _thread_count(self.n_jobs, available_cores())
            if n_jobs > available_cores():   # said in this estimator's words, not the command line's
                warnings.warn(f"n_jobs={self.n_jobs} and {available_cores()} cores available: {available_cores()} "
                              f"threads used", stacklevel=3)   # the caller's line (fit is wrapped once)
                n_jobs = available_cores()
        if n_jobs == 1:
            train_lbfgs(blocks, codes.astype(np.int64), mask, np.arange(len(classes)), self)
        else:
            from .runtime import dask_runtime

            with dask_runtime("threads", n_jobs) as runtime:
                train_lbfgs(blocks, codes.astype(np.int64), mask, np.arange(len(classes)), self, runtime=runtime)
        self.classes_ = classes
        if self.stop_reason_ == "max_iter":
            warnings.warn(f"L-BFGS did not converge in max_iter={self.max_iter} iterations (largest gradient "
                          f"entry {self.grad_max_:.3g} > tol={self.tol}); raise max_iter", ConvergenceWarning)
        elif self.stop_reason_ == "line_search" and self.grad_max_ > self.tol and big > BADLY_SCALED:
            warnings.warn(f"L-BFGS found no step that lowers its float32 objective after {self.n_iter_} "
                          f"iteration(s) (largest gradient entry {self.grad_max_:.3g} > tol={self.tol}); X holds "
                          f"values up to {big:.3g}: standardize X (e.g. sklearn's StandardScaler)",
                          ConvergenceWarning)
        elif self.stop_reason_ == "line_search" and self.grad_max_ > self.tol:
            warnings.warn(f"L-BFGS stopped at the precision of its float32 objective: no step lowers it "
                          f"further (largest gradient entry {self.grad_max_:.3g} > tol={self.tol}); a tol "
                          f"below about 1e-6 is rarely reachable", ConvergenceWarning)
        return self

    def decision_function(self, X):
        """Scores ``X coef_^T + intercept_``; shape (n_samples,) for two classes."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        S = X @ self.coef_.T.astype(X.dtype, copy=False) + self.intercept_
        return S.ravel() if S.shape[1] == 1 else S

    def predict(self, X):
        S = self.decision_function(X)
        idx = (S > 0).astype(int) if S.ndim == 1 else S.argmax(axis=1)
        return np.asarray(self.classes_)[idx]

    def _check_proba(self):
        if self.loss != "log_loss":
            raise AttributeError(f"probability estimates need loss='log_loss', not {self.loss!r}")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities (log loss only): softmax of the scores, or the logistic for two classes."""
        S = self.decision_function(X)
        if S.ndim == 1:
            from scipy.special import expit

            p = expit(S)   # 1 / (1 + exp(-S)) without exp's overflow warning for large scores
            return np.column_stack([1.0 - p, p])
        S = S - S.max(axis=1, keepdims=True)
        P = np.exp(S)
        return P / P.sum(axis=1, keepdims=True)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


def make_lbfgs(model, n_fit: int, seed: int) -> LBFGSClassifier:
    """The :class:`LBFGSClassifier` of a ``[model]`` table; with ``alpha``, ``C = 1 / (alpha n_fit)``."""
    C = float(model.C) if model.alpha is None else 1.0 / (float(model.alpha) * max(int(n_fit), 1))
    lam = l2_penalty(C, n_fit)
    if not 0.0 < lam < float("inf"):   # C n beyond the float range, or its inverse: the penalty is 0 or infinite
        from ..errors import ConfigError

        key, fix = ((f"model.C = {model.C!r}", "give C between 1e-300 and 1e300") if model.alpha is None else
                    (f"model.alpha = {model.alpha!r}", "give alpha = 1 / (C n) within the float range"))
        why = ("it would train a model that predicts one class" if lam == float("inf") else
               "C n overflows the float range")
        raise ConfigError(f"{key} gives the lbfgs learner the penalty 1 / (C n) = {lam!r} for {n_fit} training "
                          f"rows, which it cannot take ({why}); {fix}")
    return LBFGSClassifier(loss=model.loss, C=C, tol=float(model.tol), max_iter=int(model.max_iter),
                           validation_fraction=float(model.validation_fraction),
                           n_iter_no_change=int(model.n_iter_no_change), cache=model.cache, span=model.span,
                           random_state=int(seed))


def train_lbfgs_arrays(X: np.ndarray, y: np.ndarray, train_mask: np.ndarray, classes: np.ndarray, model,
                       seed: int):
    """:func:`train_lbfgs` (with the scaler of ``model.scale``) on an in-memory array; returns an object
    with ``predict``. Used by studies and cross-validation."""
    from .sgd import _ArrayBlocks, _ScaledClassifier, n_fit_rows

    blocks = _ArrayBlocks(X, chunk_rows(X.shape[1]))
    n_fit = n_fit_rows(int(np.asarray(train_mask, dtype=bool).sum()), float(model.validation_fraction))
    clf, scaler = train_lbfgs(blocks, y, train_mask, classes, make_lbfgs(model, n_fit, seed), scale=model.scale)
    return _ScaledClassifier(clf, scaler)


__all__ = ["CACHE_FRACTION", "CACHE_MODES", "LBFGSClassifier", "PartSpec", "make_lbfgs", "make_plan",
           "predict_rows", "scaler_from_moments", "span_route", "train_lbfgs", "train_lbfgs_arrays", "validation_split"]
