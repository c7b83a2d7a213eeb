"""Ingest speed of the motion-capture readers, in frames per second, against plain Python.

For ASF/AMC (HDM05) and BVH, two comparisons on the same files:

* parser vs parser: the motion section into the (T, n_values) float64 array of channel values,
  by a per-line Python parser (``split()`` and ``float()`` per value) and by streamcov's
  compiled scanner; checked equal bit for bit;
* reader vs reader: positions as ``sequences()`` yields them ((T, 3J) float32, in metres for
  AMC), by that Python parser plus the usual per-frame, per-joint Python forward kinematics of
  mocap viewers (3 x 3 matrices per bone) and by streamcov's reader (scanner plus compiled
  kinematics); checked equal to a few float32 ulps (the two sum their products in another
  order).

Skeletons (``.asf``) and BVH hierarchies are parsed once, when the archive is opened, by both.
Files are timed back to back, each file's best of ``--repeat`` passes (from the page cache after
the first pass, for both sides), so bursts of load from other processes hit both alike.

BVH and C3D use generated archives (a 31-joint chain with an End Site, ``--synth-files`` files
of ``--synth-frames`` frames; C3D written by ezc3d, 31 markers); C3D (binary, read by ezc3d) has
no text to parse: its reader (ezc3d in a process of its own, which a damaged file cannot crash)
is timed against the same reader with ezc3d called in this process (the arrays checked equal). The last line printed is one JSON object.

    python benchmarks/mocap_ingest.py [--root .../hdm05/raw] [--files N] [--repeat 3]
                                      [--synth-files 10] [--synth-frames 3000]

The per-frame Python kinematics run at about 1,500 frames per second: all of HDM05 (about
70,000 frames) takes about a minute per pass; ``--files 20`` takes seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from streamcov.data.readers.asf_amc import INCH, UNITS, open_hdm05, read_amc
from streamcov.data.readers.bvh import BvhReader, read_bvh_motion

DEFAULT_ROOTS = [os.environ.get("STREAMCOV_HDM05", ""), "/work/shared/data/hdm05/raw",
                 str(Path(__file__).resolve().parents[2] / "shared" / "data" / "hdm05" / "raw")]


# --- plain Python: what a mocap viewer does ---------------------------------------------------

def _rot(axis, a):
    c, s = np.cos(a), np.sin(a)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def naive_parse_amc(path, skeleton):
    """Read lines, split, ``float()`` every value, place it by bone name."""
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


def naive_fk_amc(skeleton, values):
    """Per frame, per bone: ``R_b = R_parent C M C^T``, ``x_b = x_parent + length R_b d``
    (HDM05's conventions: root order TX TY TZ RX RY RZ, axis XYZ, angles in degrees)."""
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


def naive_read_amc(path, skeleton, units="m"):
    X = naive_fk_amc(skeleton, naive_parse_amc(path, skeleton))
    X *= INCH / skeleton.length_unit / UNITS[units]
    return X.reshape(len(X), -1).astype(np.float32)


def naive_parse_bvh_motion(path) -> np.ndarray:
    """Read lines after MOTION, split, ``float()`` every value."""
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


def naive_fk_bvh(hdr, values):
    """Per frame, per joint (file order: parents first): ``R_j = R_parent @ Rc1 @ Rc2 @ Rc3``
    in channel order, ``x_j = x_parent + R_parent @ offset_j`` (position channels replace the
    offset's components)."""
    J = len(hdr.names)
    out = np.zeros((len(values), J, 3))
    for t, v in enumerate(values):
        R = [None] * J
        for j in range(J):
            local = np.eye(3)
            off = np.array(hdr.offsets[j], dtype=np.float64)
            for k, ch in enumerate(hdr.channels[j]):
                val = v[hdr.col0[j] + k]
                if ch.endswith("rotation"):
                    local = local @ _rot(ch[0], np.deg2rad(val))
                else:
                    off["xyz".index(ch[0])] = val
            p = hdr.parents[j]
            if p < 0:
                R[j] = local
                out[t, j] = off
            else:
                R[j] = R[p] @ local
                out[t, j] = out[t, p] + R[p] @ off
    return out


def naive_read_bvh(hdr):
    X = naive_fk_bvh(hdr, naive_parse_bvh_motion(hdr.path))
    return X.reshape(len(X), -1).astype(np.float32)


# --- generated archives -----------------------------------------------------------------------

def write_bvh_archive(root: Path, n_files: int, n_frames: int, n_joints: int = 31, seed: int = 0):
    """A chain of ``n_joints`` joints (root: 6 channels, others ZXY rotations), random motion."""
    rng = np.random.default_rng(seed)
    lines = ["HIERARCHY", "ROOT j0", "{", "  OFFSET 0 0 0",
             "  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]
    for j in range(1, n_joints):
        lines += [f"{'  ' * j}JOINT j{j}", f"{'  ' * j}{{",
                  f"{'  ' * j}  OFFSET {rng.uniform(-1, 1):.4f} {rng.uniform(2, 5):.4f} "
                  f"{rng.uniform(-1, 1):.4f}",
                  f"{'  ' * j}  CHANNELS 3 Zrotation Xrotation Yrotation"]
    lines += [f"{'  ' * n_joints}End Site", f"{'  ' * n_joints}{{",
              f"{'  ' * n_joints}  OFFSET 0 1 0", f"{'  ' * n_joints}}}"]
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


# --- timing -----------------------------------------------------------------------------------

def compare(files, steps: dict, repeat: int) -> tuple[dict, int]:
    """Best of ``repeat`` per file of every step (name -> function of a file), run back to back
    per file; returns the total seconds of each step and the frames (rows of the first)."""
    frames = sum(len(steps["naive_parse"](f)) for f in files)
    best = {k: np.full(len(files), np.inf) for k in steps}
    clock = time.perf_counter
    for _ in range(repeat):
        for i, f in enumerate(files):
            for k, fn in steps.items():
                t0 = clock()
                fn(f)
                best[k][i] = min(best[k][i], clock() - t0)
    return {k: float(v.sum()) for k, v in best.items()}, frames


def check(files, steps: dict, what: str) -> float:
    """Parsers equal bit for bit, readers to 4 float32 ulps of the largest coordinate; returns
    the largest reader difference."""
    worst = 0.0
    for f in files:
        a, b = steps["naive_parse"](f), steps["fast_parse"](f)
        if not np.array_equal(a, b):
            raise SystemExit(f"{what} {f}: the parsers disagree")
        a, b = steps["naive_reader"](f), steps["reader"](f)
        diff = float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0
        if a.shape != b.shape or diff > 4 * np.spacing(np.abs(b).max()):
            raise SystemExit(f"{what} {f}: the readers disagree (max |diff| {diff})")
        worst = max(worst, diff)
    return worst


def summary(seconds: dict, frames: int, files: int, diff: float) -> dict:
    fps = {k: frames / v for k, v in seconds.items()}
    return {"files": files, "frames": frames,
            **{f"{k}_frames_per_s": round(v) for k, v in fps.items()},
            "parse_speedup": round(fps["fast_parse"] / fps["naive_parse"], 1),
            "reader_speedup": round(fps["reader"] / fps["naive_reader"], 1),
            "reader_max_abs_diff": diff}


def amc(root, n_files: int, repeat: int) -> dict:
    reader = open_hdm05(root)
    entries = reader._entries[:n_files or None]
    skel = {e.id: reader._skeleton(reader._skel_of[e.id]) for e in entries}
    steps = {"naive_parse": lambda e: naive_parse_amc(e.path, skel[e.id]),
             "fast_parse": lambda e: read_amc(e.path, skel[e.id]).values,
             "naive_reader": lambda e: naive_read_amc(e.path, skel[e.id], reader.units),
             "reader": reader.read}
    t0 = time.perf_counter()
    reader.read(entries[0])                 # first call: compiles or loads the numba kernels
    first = time.perf_counter() - t0
    diff = check(entries, steps, "amc")
    seconds, frames = compare(entries, steps, repeat)
    return {**summary(seconds, frames, len(entries), diff), "root": str(root),
            "megabytes": round(sum(e.path.stat().st_size for e in entries) / 1e6, 2),
            "first_call_seconds": round(first, 3)}


def bvh(tmp: Path, n_files: int, n_frames: int, repeat: int) -> dict:
    reader = BvhReader(write_bvh_archive(tmp / "bvh", n_files, n_frames))
    hdr = reader._headers
    steps = {"naive_parse": lambda e: naive_parse_bvh_motion(e.path),
             "fast_parse": lambda e: read_bvh_motion(hdr[e.id]),
             "naive_reader": lambda e: naive_read_bvh(hdr[e.id]),
             "reader": reader.read}
    diff = check(reader._entries, steps, "bvh")
    seconds, frames = compare(reader._entries, steps, repeat)
    return summary(seconds, frames, n_files, diff)


def c3d(tmp: Path, n_files: int, n_frames: int, repeat: int) -> dict:
    try:
        from streamcov.data.readers.c3d import C3dReader

        root = write_c3d_archive(tmp / "c3d", n_files, n_frames)
    except ImportError:
        return {"skipped": "ezc3d is not installed (pip install 'streamcov[mocap]')"}
    from streamcov.data.readers import _c3d_child, c3d as c3d_module

    reader = C3dReader(root)
    # the reader as shipped (ezc3d in a process of its own, the arrays sent back) against the same reader
    # with ezc3d called in this process (as before the isolation), file by file, back to back
    isolated = c3d_module._EZC3D.read
    best = np.full((2, n_files), np.inf)
    try:
        for _ in range(repeat):
            for i, e in enumerate(reader._entries):
                c3d_module._EZC3D.read = lambda path: _c3d_child.contents(str(path))
                t0 = time.perf_counter()
                a = reader.read(e)
                t1 = time.perf_counter()
                c3d_module._EZC3D.read = isolated
                b = reader.read(e)
                t2 = time.perf_counter()
                assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]
                best[:, i] = np.minimum(best[:, i], (t1 - t0, t2 - t1))
    finally:
        c3d_module._EZC3D.read = isolated
    frames = n_files * n_frames
    return {"files": n_files, "frames": frames,
            "in_process_frames_per_s": round(frames / best[0].sum()),
            "reader_frames_per_s": round(frames / best[1].sum()),
            "isolation_time_ratio": round(best[1].sum() / best[0].sum(), 2)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="HDM05: the folder with [split/]class/*.amc and the .asf files")
    ap.add_argument("--files", type=int, default=0, help="HDM05: the first N files (0: all)")
    ap.add_argument("--repeat", type=int, default=3, help="passes; each file's best is kept")
    ap.add_argument("--synth-files", type=int, default=10, help="generated BVH and C3D files")
    ap.add_argument("--synth-frames", type=int, default=3000, help="frames per generated file")
    args = ap.parse_args(argv)
    root = args.root or next((r for r in DEFAULT_ROOTS if r and Path(r, "train").is_dir()), None)
    if root is None:
        ap.error("HDM05 not found: pass --root")
    result = {"benchmark": "mocap ingest", "repeat": args.repeat,
              "amc": amc(root, args.files, args.repeat)}
    with tempfile.TemporaryDirectory(prefix="streamcov-mocap-bench-") as tmp:
        result["bvh"] = bvh(Path(tmp), args.synth_files, args.synth_frames, args.repeat)
        result["c3d"] = c3d(Path(tmp), args.synth_files, args.synth_frames, args.repeat)
    result.update(python=platform.python_version(), numpy=np.__version__, cpus=os.cpu_count())

    print(f"frames per second, best of {args.repeat} per file (AMC: HDM05; BVH, C3D: generated, "
          "31 joints)")
    print(f"{'format':<7}{'files':>6}{'frames':>8} | {'naive parser':>12}{'scanner':>11}"
          f"{'ratio':>8} | {'naive reader':>12}{'reader':>11}{'ratio':>8}")
    for fmt in ("amc", "bvh", "c3d"):
        r = result[fmt]
        if "skipped" in r:
            print(f"{fmt:<7} skipped: {r['skipped']}")
            continue
        if fmt == "c3d":
            print(f"{fmt:<7}{r['files']:>6}{r['frames']:>8} | {'(binary, read by ezc3d)':>31} | "
                  f"{r['in_process_frames_per_s']:>12,}{r['reader_frames_per_s']:>11,}"
                  f"{1 / r['isolation_time_ratio']:>7.2f}x   (naive reader: the reader with ezc3d called in "
                  f"this process; reader: ezc3d in a process of its own, as shipped)")
            continue
        print(f"{fmt:<7}{r['files']:>6}{r['frames']:>8} | {r['naive_parse_frames_per_s']:>12,}"
              f"{r['fast_parse_frames_per_s']:>11,}{r['parse_speedup']:>7}x | "
              f"{r['naive_reader_frames_per_s']:>12,}{r['reader_frames_per_s']:>11,}"
              f"{r['reader_speedup']:>7}x")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
