"""Throughput of the synthetic skeleton generator on one core.

Generates 45-frame sequences with the batched path (``sequences()``) and one
at a time (``generate_sequence``), side by side, and prints a final JSON line.
Run: ``python benchmarks/synth_speed.py``.
"""
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from streamcov.data.synth import SyntheticSkeletons  # noqa: E402


def rate(fn, n, repeats=3):
    best_wall, best_cpu = 0.0, 0.0
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        best_wall = max(best_wall, n / (time.perf_counter() - w))
        best_cpu = max(best_cpu, n / (time.process_time() - c))
    return best_wall, best_cpu


def main():
    src = SyntheticSkeletons(n_sequences=100_000, frames=(45, 45))
    list(src.sequences(0, 256))                       # warm the subject cache
    n_batch, n_single = 5000, 1000
    batched = rate(lambda: sum(1 for _ in src.sequences(0, n_batch)), n_batch)
    single = rate(lambda: [src.generate_sequence(i) for i in range(n_single)], n_single)
    print(f"batched:       {batched[0]:8.0f} seq/s wall, {batched[1]:8.0f} seq/s cpu")
    print(f"one at a time: {single[0]:8.0f} seq/s wall, {single[1]:8.0f} seq/s cpu")
    print(json.dumps({
        "benchmark": "synth_throughput", "frames": 45,
        "batched_seq_per_s": round(batched[0]), "batched_seq_per_cpu_s": round(batched[1]),
        "single_seq_per_s": round(single[0]), "single_seq_per_cpu_s": round(single[1]),
        "batched_over_single": round(batched[0] / single[0], 2),
        "meets_2000_per_s": batched[0] >= 2000,
    }))


if __name__ == "__main__":
    main()
