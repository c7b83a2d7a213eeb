"""Reading a feature store's blocks: straight from the chunk files against through zarr, side by side.

Usage: ``python benchmarks/store_read.py [--rows 100000] [--dim 2000] [--block 512] [--classes 10]
[--repeats 3] [--workdir DIR]``

A feature store's chunks are raw little-endian rows followed by their CRC32C
(``streamcov.stream.featurestore``). :meth:`FeatureStore.read_block_into`
reads such a chunk file into one reused buffer and checks the checksum
itself; zarr (``read_blocks``) decodes the same bytes through its codec
pipeline and event loop into a fresh array. This benchmark writes a store of
random float32 rows (``--rows x --dim``, blocks of ``--block`` rows) once and
times, in one process and one run, each of the two routes:

* ``read``: every block read once (GB/s of rows);
* ``stream_pass``: one pass of the L-BFGS learner with ``cache = "stream"``
  over half the rows as training rows (:func:`streamcov.stream.lbfgs.partition_sums`
  on every partition: read, gather, centre, loss and gradient sums, one BLAS
  thread), the pass the learner makes at every evaluation when the training
  rows do not fit in memory;
* ``load``: the training rows loaded into memory once (``cache = "memory"``'s
  placement, :func:`streamcov.stream.lbfgs._load_partition`).

Best and median of ``--repeats`` (the file pages are in the page cache after
the first read; both routes read the same cached pages). ``ratio`` = zarr
time / direct time. The two routes' sums are checked bitwise equal. The
final line is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_store(path: Path, rows: int, dim: int, block: int):
    from streamcov.stream.featurestore import FeatureStore

    bounds = np.arange(0, rows + block, block).clip(max=rows)
    fs = FeatureStore.open_or_create(path, rows, dim, bounds, "float32", {"benchmark": "store_read",
                                                                           "rows": rows, "dim": dim})
    if fs.group.attrs.get("filled") != True:   # noqa: E712 (a zarr attribute)
        rng = np.random.default_rng(0)
        for i in range(len(bounds) - 1):
            fs.group["X"][bounds[i]:bounds[i + 1]] = rng.standard_normal((bounds[i + 1] - bounds[i], dim),
                                                                         dtype=np.float32)
        fs.group.attrs["filled"] = True
    return FeatureStore(path)


def timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, {"best": round(min(times), 4), "median": round(float(np.median(times)), 4)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=2000)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default=None, help="where the store is written (default: a temporary folder)")
    args = ap.parse_args(argv)

    from streamcov import linear
    from streamcov._config import blas_threads
    from streamcov.stream import lbfgs as L
    from streamcov.stream.featurestore import FeatureStore

    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="store_read_")
        work = Path(tmp.name)
    else:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    fs = make_store(work / f"features_{args.rows}x{args.dim}.zarr", args.rows, args.dim, args.block)
    print(f"store of {args.rows} x {args.dim} float32 rows ({fs.n_blocks} blocks of {args.block}): "
          f"{time.perf_counter() - t0:.1f} s to write or open", file=sys.stderr)
    gb = args.rows * args.dim * 4 / 1e9
    rng = np.random.default_rng(1)
    train = np.zeros(args.rows, dtype=bool)
    train[rng.permutation(args.rows)[:args.rows // 2]] = True
    y = rng.integers(0, args.classes, args.rows)
    specs = L.make_plan(fs.bounds, train, np.zeros_like(train), y, fs.dim)
    k = L.score_columns(args.classes)
    W32 = (rng.standard_normal((k, fs.dim)) * 1e-2).astype(np.float32)
    b = np.zeros(k)
    m32 = np.zeros(fs.dim, dtype=np.float32)
    kernel = linear.use_kernel(int(train.sum()), fs.dim, k)
    path = str(fs.path)
    direct_buffer = FeatureStore.block_buffer

    def read_all():
        store = FeatureStore(path)
        buf = store.block_buffer()
        for i in range(store.n_blocks):
            if buf is not None:
                store.read_block_into(i, buf)
            else:
                store.read_blocks(i, i + 1)

    def stream_pass():
        with blas_threads(1):
            return L._tree([L.partition_sums(path, s, m32, (W32, b), linear.LOSSES["log_loss"], False, kernel)
                            for s in specs], L.merge_sums)

    def load():
        return [L._load_partition(path, s) for s in specs]

    stream_pass()   # the kernel's load from numba's cache, not timed
    results: dict = {}
    sums = {}
    for route in ("direct", "zarr"):
        FeatureStore.block_buffer = direct_buffer if route == "direct" else (lambda self: None)
        try:
            _, results[f"read_{route}"] = timed(read_all, args.repeats)
            sums[route], results[f"stream_pass_{route}"] = timed(stream_pass, args.repeats)
            parts, results[f"load_{route}"] = timed(load, args.repeats)
            del parts
        finally:
            FeatureStore.block_buffer = direct_buffer
        print(f"{route}: read {results[f'read_{route}']['best']:.3f} s "
              f"({gb / results[f'read_{route}']['best']:.2f} GB/s), stream pass "
              f"{results[f'stream_pass_{route}']['best']:.3f} s, load {results[f'load_{route}']['best']:.3f} s",
              file=sys.stderr)
    same = all(getattr(sums["direct"], a).tobytes() == getattr(sums["zarr"], a).tobytes() if
               isinstance(getattr(sums["direct"], a), np.ndarray) else getattr(sums["direct"], a) ==
               getattr(sums["zarr"], a) for a in sums["direct"].__slots__)
    summary = {"benchmark": "store_read", "rows": args.rows, "dim": args.dim, "block": args.block,
               "gigabytes": round(gb, 3), "load_average": os.getloadavg(), **results,
               "ratio_read": round(results["read_zarr"]["best"] / results["read_direct"]["best"], 2),
               "ratio_stream_pass": round(results["stream_pass_zarr"]["best"]
                                          / results["stream_pass_direct"]["best"], 2),
               "ratio_load": round(results["load_zarr"]["best"] / results["load_direct"]["best"], 2),
               "same_sums": bool(same)}
    print(json.dumps(summary))
    if tmp is not None:
        tmp.cleanup()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
