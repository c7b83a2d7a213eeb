"""Time per sequence of ingesting many short sequences, as the store grows 10x.

Usage: ``python benchmarks/ingest_scaling.py [--small N] [--workdir DIR]``

Ingests ``N`` and ``10 N`` generated sequences of 2-3 frames (``streamcov.data.skeletons.ingest`` of
``SyntheticSkeletons``; default N = 2000) into fresh stores, one after the other in this process, and prints the
milliseconds per sequence of each and their ratio (``per_sequence_ratio`` = large / small; goal <= 1.25: the
writer's cost per sequence does not grow with the store). Before 2026-12-01 the writer joined its whole buffer
(up to a chunk of 65536 frames) at every sequence and looked its chunk length up in zarr each time: this script
on that code (a55fffb) gave 1.03 and 1.89 ms per sequence (ratio 1.83), against 0.20 and 0.10 after (README).
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def ingest_ms(n: int, folder: Path) -> float:
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    out = folder / f"short_{n}.zarr"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    store = ingest(SyntheticSkeletons(n_sequences=n, frames=(2, 3)), out)
    seconds = time.perf_counter() - t0
    assert len(store) == n, (len(store), n)
    shutil.rmtree(out)
    return 1000.0 * seconds / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2000, help="sequences of the small store (the large: 10x)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the stores are written (default: a temporary)")
    args = ap.parse_args()
    folder = args.workdir or Path(tempfile.mkdtemp(prefix="ingest_scaling_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        ingest_ms(200, folder)   # imports, numba's first calls: not measured
        small = ingest_ms(args.small, folder)
        large = ingest_ms(10 * args.small, folder)
    finally:
        if args.workdir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.small:>8} sequences: {small:.3f} ms per sequence")
    print(f"{10 * args.small:>8} sequences: {large:.3f} ms per sequence")
    print(json.dumps({"benchmark": "ingest_scaling", "frames": [2, 3], "small": args.small, "large": 10 * args.small,
                      "ms_per_sequence_small": round(small, 4), "ms_per_sequence_large": round(large, 4),
                      "per_sequence_ratio": round(large / small, 3), "per_sequence_ratio_goal": 1.25,
                      "meets_goal": large / small <= 1.25}))


if __name__ == "__main__":
    main()
