"""Peak memory and throughput of a full pipeline run as the store grows 1x, 4x, 16x.

Usage: ``python benchmarks/memory_scaling.py [--base N] [--quick] [--workdir DIR] [--keep]``

For each scale ``s`` in 1, 4, 16 a synthetic store of ``s * base`` sequences
is written with ``streamcov synth`` (setup, not measured; an existing
complete store in ``--workdir`` is reused), then ``streamcov run`` (the
``msr_action3d`` pipeline with ``--store``: featurization into
``features.zarr`` and incremental SGD training, threaded scheduler) runs in
a fresh process. The run process is measured two ways:

* ``peak_rss_bytes``: the kernel's high-water mark of the run process
  (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` read by a small wrapper
  process whose only child is the run, so earlier children such as the
  ``synth`` processes never count);
* ``peak_tree_rss_bytes``: psutil polling (every 50 ms) of the summed RSS of
  the run's process tree.

Throughput is sequences per second of the pipeline (``n_sequences /
seconds`` of the result line, i.e. without the interpreter start-up, which
is constant); wall-clock figures are reported too.

Keys of the final JSON line: ``rss_growth`` = peak RSS at 16x / at 1x (goal
<= 1.25: memory bounded by blocks and chunks, not by the store),
``throughput_ratio`` = sequences/s at 16x / at 1x (goal >= 0.8), the raw
figures per scale and the store sizes in bytes (on disk, and the raw frame
bytes = frames x 60 float32).

The scaling runs use the file's descriptor and map with few feature
components (``--components``, default 256) and the SGD learner with few
epochs (``--epochs``, default 3): the point is how memory and time grow with
the store, not accuracy. ``--map rgw`` maps by paper 000's eq. (3) instead,
centred on the mean of ``features.fit_sample`` = 2048 training descriptors
(summed as they are computed; 1.2 GB of the shipped descriptor's float64 were
held until 2026-12-01): the map of the figures measured before 2026-12-01. The default ``--base`` (47000) makes the
16x store about 752k sequences of ~45 frames, i.e. >= 8 GB of frames; that
takes hours on 2 cores, so the script prints progress. ``--quick`` uses
base 2000.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "msr_action3d.toml"
FRAME_BYTES = 60 * 4  # 20 joints x 3 float32

# Runs the command given in argv[2:], then writes the kernel's max RSS of its
# children (only that command) to the file argv[1].
_WRAPPER = (
    "import json, resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "open(sys.argv[1], 'w').write(json.dumps({'rc': rc, 'maxrss_kib': ru.ru_maxrss}))\n"
    "sys.exit(rc)\n"
)


def log(msg: str) -> None:
    print(f"[memory_scaling {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def streamcov_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "streamcov"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "streamcov.cli"]


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


def store_info(path: Path) -> dict | None:
    from streamcov.data.ragged import store_status
    from streamcov.errors import StoreError

    try:
        st = store_status(path)
    except StoreError:
        return None
    return st if st["complete"] else None


def make_store(path: Path, n: int, quiet: bool, timeout: float) -> dict:
    """Write (or reuse, or resume) a synthetic store of n sequences; not measured."""
    st = store_info(path) if path.exists() else None
    if st is not None and st.get("n_sequences") == n:
        log(f"reusing {path} ({n} sequences)")
    else:
        if st is not None:  # a complete store of another size
            shutil.rmtree(path)
        log(f"setup: streamcov synth --sequences {n} {path} (resumes an interrupted one)")
        t0 = time.perf_counter()
        cmd = streamcov_cmd() + ["synth", "--sequences", str(n), str(path)]
        if quiet:
            cmd.append("--quiet")
        subprocess.run(cmd, check=True, timeout=timeout, stdout=subprocess.DEVNULL)
        log(f"setup done in {time.perf_counter() - t0:.1f} s")
        st = store_info(path)
    return {"n_sequences": int(st["n_sequences"]), "n_frames": int(st["n_frames"]),
            "frame_bytes": int(st["n_frames"]) * FRAME_BYTES, "store_bytes": dir_bytes(path)}


class TreeRSS:
    """Poll the summed RSS of a process and its descendants in a thread."""

    def __init__(self, pid: int, interval: float = 0.05, skip_root: bool = True):
        import psutil

        self.root = psutil.Process(pid)
        self.skip_root = skip_root
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self):
        import psutil

        while not self._stop.is_set():
            try:
                procs = self.root.children(recursive=True)
                if not self.skip_root:
                    procs.append(self.root)
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                pass
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def measure_run(store: Path, out: Path, args) -> dict:
    """One ``streamcov run`` in a fresh process; returns timings, peak RSS and the result."""
    from streamcov.tasks.study import rgw_sets

    if out.exists():
        shutil.rmtree(out)
    rss_file = out.parent / (out.name + ".rss.json")
    cmd = streamcov_cmd() + [
        "run", str(PIPELINE), "--store", str(store), "--output", str(out), "--json",
        "--set", f"features.n_components={args.components}",
        # the file's own map (Nystroem), or paper 000's eq. (3) map, centred, as the figures before 2026-12-01 were
        *([w for s in rgw_sets("msr") for w in ("--set", s)] if args.map == "rgw" else []),
        "--set", 'model.learner="sgd"',   # the file's learner is lbfgs; --epochs are SGD epochs
        "--set", f"model.epochs={args.epochs}",
        "--set", f"dask.block_size={args.block_sequences}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(rss_file)] + cmd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    poll = TreeRSS(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        poll.stop()
        raise RuntimeError(f"streamcov run on {store} exceeded {args.timeout} s")
    wall = time.perf_counter() - t0
    tree_peak = poll.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"streamcov run failed (exit {proc.returncode}):\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    rss = json.loads(rss_file.read_text())
    rss_file.unlink()
    n = result["n_sequences"]
    seconds = float(result["seconds"])
    return {
        "peak_rss_bytes": int(rss["maxrss_kib"]) * 1024,
        "peak_tree_rss_bytes": int(tree_peak),
        "wall_seconds": round(wall, 3),
        "pipeline_seconds": seconds,
        "featurize_seconds": result["featurize_seconds"],
        "train_seconds": result.get("train_seconds"),
        "seq_per_s": round(n / seconds, 2),
        "seq_per_s_wall": round(n / wall, 2),
        "featurize_seq_per_s": round(n / max(result["featurize_seconds"], 1e-9), 2),
        "accuracy": result["accuracy"],
        "feature_bytes": dir_bytes(Path(result["features_path"])),
        "runtime": result.get("runtime"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=int, help="sequences at 1x (default 47000; 2000 with --quick)")
    ap.add_argument("--quick", action="store_true", help="base 2000")
    ap.add_argument("--scales", default="1,4,16", help="comma-separated multiples of --base")
    ap.add_argument("--components", type=int, default=256, help="features.n_components")
    ap.add_argument("--map", choices=("file", "rgw"), default="file",
                    help="the pipeline file's map (Nystroem: n_components landmarks among features.fit_sample = "
                         "2048 training rows), or paper 000's eq. (3) map centred on the mean of those 2048 rows "
                         "(the map of the figures measured before 2026-12-01)")
    ap.add_argument("--epochs", type=int, default=3, help="model.epochs")
    ap.add_argument("--block-sequences", type=int, default=128, help="dask.block_size (sequences per block)")
    ap.add_argument("--workdir", default="runs/memory_scaling")
    ap.add_argument("--keep", action="store_true", help="keep stores and run folders")
    ap.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds per subprocess")
    args = ap.parse_args(argv)
    base = args.base if args.base is not None else (2000 if args.quick else 47000)
    scales = [int(s) for s in args.scales.split(",")]
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    created = []
    runs = []
    try:
        for s in scales:
            n = s * base
            store = work / f"synth_{n}.zarr"
            if not store.exists():
                created.append(store)
            info = make_store(store, n, quiet=args.quick, timeout=args.timeout)
            log(f"{s}x: {n} sequences, {info['n_frames']} frames, "
                f"{info['frame_bytes'] / 1e9:.2f} GB of frames; streamcov run ...")
            out = work / f"run_{n}"
            r = measure_run(store, out, args)
            r.update(scale=s, **info)
            runs.append(r)
            log(f"{s}x: peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB (tree "
                f"{r['peak_tree_rss_bytes'] / 2**20:.0f} MiB), {r['seq_per_s']} seq/s, "
                f"pipeline {r['pipeline_seconds']} s, wall {r['wall_seconds']} s")
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if not args.keep:
            for store in created:
                shutil.rmtree(store, ignore_errors=True)
            try:
                work.rmdir()
            except OSError:
                pass
    first, last = runs[0], runs[-1]
    summary = {
        "benchmark": "memory_scaling",
        "base_sequences": base,
        "scales": scales,
        "rss_growth": round(last["peak_rss_bytes"] / first["peak_rss_bytes"], 4),
        "rss_growth_goal": 1.25,
        "rss_growth_tree": round(last["peak_tree_rss_bytes"] / max(first["peak_tree_rss_bytes"], 1), 4),
        "throughput_ratio": round(last["seq_per_s"] / first["seq_per_s"], 4),
        "throughput_ratio_goal": 0.8,
        "throughput_ratio_wall": round(last["seq_per_s_wall"] / first["seq_per_s_wall"], 4),
        "largest_frame_bytes": last["frame_bytes"],
        "settings": {"pipeline": str(PIPELINE.relative_to(REPO)), "map": args.map, "n_components": args.components,
                     "epochs": args.epochs, "block_sequences": args.block_sequences,
                     "scheduler": "threads"},
        "load_average": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "runs": runs,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
