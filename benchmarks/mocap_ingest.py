"""Ingest speed of the motion-capture readers: ASF/AMC and BVH against plain-Python per-line
parsers of the same files, C3D (binary, read by ezc3d) in frames per second.

ASF/AMC (HDM05):

Both parsers read the same ``.amc`` files (HDM05 by default) into the same (T, n_values)
float64 array of channel values (checked equal, bit for bit); they are timed side by side in
one run, file by file back to back, keeping each file's best of ``--repeat`` passes (files
are read from the page cache after the first pass, for both). The end-to-end
ingest (parse + forward kinematics of all frames + float32 frames, what ``sequences()``
yields) is timed too, and, on a few files, a per-frame Python forward kinematics as a
reference for the kinematics step.

BVH and C3D: generated archives (a 31-joint chain, ``--synth-files`` files of
``--synth-frames`` frames; C3D written by ezc3d, 31 markers): the BVH motion
section parsed by the compiled scanner against a per-line ``float()`` parser
(checked equal), and the full reader (``sequences()``: parse, kinematics,
float32) of each format in frames per second. The last line printed is one JSON
object.

    python benchmarks/mocap_ingest.py [--root .../hdm05/raw] [--files N] [--repeat 3] [--naive-fk-files 5]
                                      [--synth-files 10] [--synth-frames 3000]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np



from streamcov.data.readers.asf_amc import open_hdm05, read_amc
from streamcov.data.readers.bvh import BvhReader, read_bvh_header, read_bvh_motion

DEFAULT_ROOTS = [os.environ.get("STREAMCOV_HDM05", ""), "/work/shared/data/hdm05/raw",
                 str(Path(__file__).resolve().parents[2] / "shared" / "data" / "hdm05" / "raw")]


def naive_parse_amc(path, skeleton):
    """The baseline: read lines, split, ``float()`` every value, place it by bone name."""
    cols = {n: (int(c), int(d)) for n, c, d in zip(skeleton.joint_names, skeleton.col0,
                                                   skeleton.ndof)}
    frames = []
    row = None
    with open(path, encoding="latin-1") as fh:
        for line in fh:
            parts = line.split()
            if not parts or parts[0][0] in "#:":
                continue
            if parts[0].isdigit():
                row = [0.0] * skeleton.ncols
                frames.append(row)
                continue
            c0, nd = cols[parts[0]]
            vals = [float(v) for v in parts[1:]]
            if len(vals) != nd:
                raise ValueError(f"{path}: {parts[0]} has {len(vals)} values, expected {nd}")
            row[c0:c0 + nd] = vals
    return np.array(frames, dtype=np.float64).reshape(len(frames), skeleton.ncols)


def _rot(axis, a):
    c, s = np.cos(a), np.sin(a)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def naive_fk(skeleton, values):
    """Per-frame, per-bone forward kinematics with 3x3 matrices (the usual AMC viewer code)."""
    sk = skeleton
    children = {j: [c for c in range(len(sk.parents)) if sk.parents[c] == j]
                for j in range(len(sk.parents))}
    C = [np.eye(3)] + [np.linalg.multi_dot([_rot("z", np.deg2rad(b.axis[2])),
                                            _rot("y", np.deg2rad(b.axis[1])),
                                            _rot("x", np.deg2rad(b.axis[0]))]) for b in sk.bones]
    out = np.zeros((len(values), len(sk.parents), 3))
    for t, v in enumerate(values):
        R = {0: _rot("z", np.deg2rad(v[5])) @ _rot("y", np.deg2rad(v[4])) @
             _rot("x", np.deg2rad(v[3]))}
        out[t, 0] = v[:3]
        stack = [0]
        while stack:
            j = stack.pop()
            for c in children[j]:
                b = sk.bones[c - 1]
                M = np.eye(3)
                for k, d in enumerate(b.dof):
                    M = _rot(d[1], np.deg2rad(v[sk.col0[c] + k])) @ M
                R[c] = R[j] @ C[c] @ M @ C[c].T
                out[t, c] = out[t, j] + b.length * (R[c] @ b.direction)
                stack.append(c)
    return out


def write_bvh_archive(root: Path, n_files: int, n_frames: int, n_joints: int = 31, seed: int = 0):
    """A chain of ``n_joints`` joints (root: 6 channels, others ZXY rotations), random motion."""
    rng = np.random.default_rng(seed)
    lines = ["HIERARCHY", "ROOT j0", "{", "  OFFSET 0 0 0",
             "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]
    for j in range(1, n_joints):
        lines += [f"{'  ' * j}JOINT j{j}", f"{'  ' * j}{{",
                  f"{'  ' * j}  OFFSET {rng.uniform(-1, 1):.4f} {rng.uniform(2, 5):.4f} {rng.uniform(-1, 1):.4f}",
                  f"{'  ' * j}  CHANNELS 3 Zrotation Xrotation Yrotation"]
    lines += [f"{'  ' * n_joints}End Site", f"{'  ' * n_joints}{{", f"{'  ' * n_joints}  OFFSET 0 1 0",
              f"{'  ' * n_joints}}}"]
    lines += [f"{'  ' * j}}}" for j in range(n_joints - 1, -1, -1)]
    header = "\n".join(lines)
    n_values = 6 + 3 * (n_joints - 1)
    for f in range(n_files):
        folder = root / ("walk" if f % 2 else "run")
        folder.mkdir(parents=True, exist_ok=True)
        values = rng.uniform(-60, 60, (n_frames, n_values))
        body = "\n".join(" ".join(f"{v:.4f}" for v in row) for row in values)
        (folder / f"{f % 4 + 1:02d}_{f:03d}.bvh").write_text(
            f"{header}\nMOTION\nFrames: {n_frames}\nFrame Time: 0.008333\n{body}\n")
    return root


def naive_parse_bvh_motion(path) -> np.ndarray:
    """The baseline: read lines after MOTION, split, ``float()`` every value."""
    rows, motion = [], False
    with open(path) as fh:
        for line in fh:
            if not motion:
                motion = line.strip() == "MOTION"
                continue
            if line.startswith(("Frames:", "Frame Time:")) or not line.strip():
                continue
            rows.append([float(v) for v in line.split()])
    return np.array(rows, dtype=np.float64)


def write_c3d_archive(root: Path, n_files: int, n_frames: int, n_markers: int = 31, seed: int = 0):
    import ezc3d

    rng = np.random.default_rng(seed)
    for f in range(n_files):
        folder = root / ("walk" if f % 2 else "run")
        folder.mkdir(parents=True, exist_ok=True)
        c = ezc3d.c3d()
        c["parameters"]["POINT"]["RATE"]["value"] = [120.0]
        c["parameters"]["POINT"]["LABELS"]["value"] = tuple(f"m{k}" for k in range(n_markers))
        c["parameters"]["POINT"]["UNITS"]["value"] = ["mm"]
        pts = np.ones((4, n_markers, n_frames))
        pts[:3] = rng.uniform(-1000, 1000, (3, n_markers, n_frames))
        c["data"]["points"] = pts
        c.write(str(folder / f"{f % 4 + 1:02d}_{f:03d}.c3d"))
    return root


def reader_fps(reader) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = sum(len(s.frames) for s in reader.sequences())
    return n, n / (time.perf_counter() - t0)


def synth_formats(n_files: int, n_frames: int, repeat: int) -> dict:
    import tempfile

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="streamcov-mocap-bench-") as tmp:
        bvh_root = write_bvh_archive(Path(tmp) / "bvh", n_files, n_frames)
        files = sorted(bvh_root.rglob("*.bvh"))
        hdrs = [read_bvh_header(p) for p in files]
        read_bvh_motion(hdrs[0])                                  # compile or load
        for p, h in zip(files, hdrs):
            if not np.array_equal(naive_parse_bvh_motion(p), read_bvh_motion(h)):
                raise SystemExit(f"{p}: the BVH parsers disagree")
        best = np.full((2, len(files)), np.inf)
        for _ in range(repeat):
            for i, (p, h) in enumerate(zip(files, hdrs)):
                t0 = time.perf_counter()
                naive_parse_bvh_motion(p)
                t1 = time.perf_counter()
                read_bvh_motion(h)
                t2 = time.perf_counter()
                best[:, i] = np.minimum(best[:, i], [t1 - t0, t2 - t1])
        nf = n_files * n_frames
        naive, fast = nf / best.sum(axis=1)
        _, ingest = max(reader_fps(BvhReader(bvh_root)) for _ in range(repeat))
        out["bvh"] = {"files": n_files, "frames": nf, "naive_parse_frames_per_s": round(naive),
                      "fast_parse_frames_per_s": round(fast), "parse_speedup_vs_naive": round(fast / naive, 2),
                      "reader_frames_per_s": round(ingest)}
        try:
            from streamcov.data.readers.c3d import C3dReader

            c3d_root = write_c3d_archive(Path(tmp) / "c3d", n_files, n_frames)
            _, fps = max(reader_fps(C3dReader(c3d_root)) for _ in range(repeat))
            out["c3d"] = {"files": n_files, "frames": nf, "reader_frames_per_s": round(fps)}
        except ImportError:
            out["c3d"] = {"skipped": "ezc3d is not installed (pip install 'streamcov[mocap]')"}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="folder with [split/]class/*.amc and the .asf files")
    ap.add_argument("--files", type=int, default=0, help="use the first N files (0: all)")
    ap.add_argument("--repeat", type=int, default=3, help="passes; the best is reported")
    ap.add_argument("--naive-fk-files", type=int, default=5,
                    help="files for the per-frame Python kinematics reference (0: skip)")
    ap.add_argument("--synth-files", type=int, default=10, help="generated BVH and C3D files")
    ap.add_argument("--synth-frames", type=int, default=3000, help="frames per generated file")
    args = ap.parse_args(argv)
    root = args.root or next((r for r in DEFAULT_ROOTS if r and Path(r, "train").is_dir()), None)
    if root is None:
        ap.error("HDM05 not found: pass --root")
    t0 = time.perf_counter()
    reader = open_hdm05(root)
    t_open = time.perf_counter() - t0
    entries = reader._entries[:args.files or None]
    skels = [reader._skeleton(reader._skel_of[e.id]) for e in entries]
    nbytes = sum(e.path.stat().st_size for e in entries)

    t0 = time.perf_counter()
    read_amc(entries[0].path, skels[0])                  # first call: compiles or loads numba
    t_first = time.perf_counter() - t0

    n_frames = 0
    for e, sk in zip(entries, skels):                     # correctness: identical values
        a = naive_parse_amc(e.path, sk)
        b = read_amc(e.path, sk).values
        if not np.array_equal(a, b):
            raise SystemExit(f"{e.path}: the parsers disagree (max |diff| "
                             f"{np.abs(a - b).max()})")
        n_frames += len(a)

    # per file, the three timings back to back, best of --repeat per file: bursts of load
    # from other processes hit both parsers alike and are filtered file by file
    per_file = np.full((3, len(entries)), np.inf)
    clock = time.perf_counter
    for _ in range(args.repeat):
        for i, (e, sk) in enumerate(zip(entries, skels)):
            t0 = clock()
            naive_parse_amc(e.path, sk)
            t1 = clock()
            read_amc(e.path, sk)
            t2 = clock()
            reader.read(e)
            t3 = clock()
            per_file[:, i] = np.minimum(per_file[:, i], [t1 - t0, t2 - t1, t3 - t2])
    best = dict(zip(("naive_parse", "fast_parse", "fast_ingest"), per_file.sum(axis=1)))

    fk = None
    if args.naive_fk_files:
        sub = list(zip(entries, skels))[:args.naive_fk_files]
        vals = [read_amc(e.path, sk).values for e, sk in sub]
        t0 = time.perf_counter()
        ref = [naive_fk(sk, v) for (e, sk), v in zip(sub, vals)]
        t_naive = time.perf_counter() - t0
        t0 = time.perf_counter()
        mine = [sk.positions(v) for (e, sk), v in zip(sub, vals)]
        t_vec = time.perf_counter() - t0
        err = max(float(np.abs(a - b).max()) for a, b in zip(ref, mine))
        nf = sum(len(v) for v in vals)
        fk = {"files": len(sub), "frames": nf, "naive_fk_frames_per_s": round(nf / t_naive),
              "vectorized_fk_frames_per_s": round(nf / t_vec),
              "fk_speedup": round(t_naive / t_vec, 1), "max_abs_diff_asf_units": err}

    fps = {k: n_frames / v for k, v in best.items()}
    result = {
        "benchmark": "mocap ingest", "root": str(root), "files": len(entries),
        "frames": n_frames, "megabytes": round(nbytes / 1e6, 2), "repeat": args.repeat,
        "seconds": {k: round(v, 4) for k, v in best.items()},
        "frames_per_s": {k: round(v) for k, v in fps.items()},
        "parse_speedup_vs_naive": round(fps["fast_parse"] / fps["naive_parse"], 2),
        "ingest_speedup_vs_naive_parse_only": round(fps["fast_ingest"] / fps["naive_parse"], 2),
        "first_call_seconds": round(t_first, 3), "open_seconds": round(t_open, 3),
        "fk_reference": fk, **synth_formats(args.synth_files, args.synth_frames, args.repeat),
        "python": platform.python_version(), "numpy": np.__version__,
        "cpus": os.cpu_count(),
    }
    print(f"{len(entries)} files, {n_frames} frames, {nbytes / 1e6:.1f} MB, best of {args.repeat} "
          "per file")
    print(f"  naive per-line parser : {fps['naive_parse']:>10,.0f} frames/s")
    print(f"  compiled scanner      : {fps['fast_parse']:>10,.0f} frames/s  "
          f"({result['parse_speedup_vs_naive']}x)")
    print(f"  full ingest (parse + kinematics + float32): {fps['fast_ingest']:>10,.0f} frames/s")
    if fk:
        print(f"  kinematics alone on {fk['files']} files: per-frame Python "
              f"{fk['naive_fk_frames_per_s']:,} frames/s, vectorized "
              f"{fk['vectorized_fk_frames_per_s']:,} frames/s ({fk['fk_speedup']}x)")
    for fmt in ("bvh", "c3d"):
        r = result[fmt]
        if "skipped" in r:
            print(f"  {fmt}: skipped ({r['skipped']})")
        elif fmt == "bvh":
            print(f"  bvh ({r['files']} generated files, {r['frames']} frames): naive per-line parser "
                  f"{r['naive_parse_frames_per_s']:,} frames/s, compiled scanner {r['fast_parse_frames_per_s']:,} "
                  f"frames/s ({r['parse_speedup_vs_naive']}x); full reader {r['reader_frames_per_s']:,} frames/s")
        else:
            print(f"  c3d ({r['files']} generated files, {r['frames']} frames, ezc3d): full reader "
                  f"{r['reader_frames_per_s']:,} frames/s")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
