"""A minimal C3D writer written from the format description (c3d.org user guide), used to
build test files byte by byte, independently of the library the reader uses.

Layout: block 1 (512 bytes) is the header; parameters start at block 2; 3D data at
``DATA_START``. Intel byte order (processor type 84), no analog data.
"""
import struct

import numpy as np


def _group(gid: int, name: str, desc: str = "") -> bytes:
    nm = name.upper().encode()
    d = desc.encode()
    body_after_offset = bytes([len(d)]) + d
    return struct.pack("<bb", len(nm), -gid) + nm + struct.pack("<h", 2 + len(body_after_offset)) \
        + body_after_offset


def _param(gid: int, name: str, kind: str, value, desc: str = "") -> bytes:
    nm = name.upper().encode()
    if kind == "char":
        strings = [value] if isinstance(value, str) else list(value)
        width = max([len(s) for s in strings] + [1])
        data = b"".join(s.encode().ljust(width) for s in strings)
        if isinstance(value, str):
            head = struct.pack("<bb", -1, 1) + bytes([width])
        else:
            head = struct.pack("<bb", -1, 2) + bytes([width, len(strings)])
    else:
        code, fmt = {"int16": (2, "<h"), "float": (4, "<f"), "byte": (1, "<b")}[kind]
        vals = np.atleast_1d(value)
        data = b"".join(struct.pack(fmt, v) for v in vals)
        if np.ndim(value) == 0:
            head = struct.pack("<bb", code, 0)
        else:
            head = struct.pack("<bb", code, 1) + bytes([len(vals)])
    d = desc.encode()
    rest = head + data + bytes([len(d)]) + d
    return struct.pack("<bb", len(nm), gid) + nm + struct.pack("<h", 2 + len(rest)) + rest


def c3d_bytes(labels, xyz, residual=None, *, units="mm", rate=100.0, scale=-1.0,
              extra_point_params=None) -> bytes:
    """C3D file bytes: ``xyz`` (T, N, 3) in ``units``; ``residual`` (T, N), negative for an
    invalid point (4th word -1), else written with a zero camera mask; ``scale < 0``: float
    data, ``scale > 0``: int16 data ``round(v / scale)``."""
    xyz = np.asarray(xyz, dtype=np.float64)
    T, N, _ = xyz.shape
    residual = np.zeros((T, N)) if residual is None else np.asarray(residual, dtype=np.float64)

    def params(data_start):
        items = [_group(1, "POINT", "3D points"),
                 _param(1, "USED", "int16", N),
                 _param(1, "SCALE", "float", scale),
                 _param(1, "RATE", "float", rate),
                 _param(1, "DATA_START", "int16", data_start),
                 _param(1, "FRAMES", "int16", T),
                 _param(1, "LABELS", "char", list(labels)),
                 _param(1, "DESCRIPTIONS", "char", [""] * N),
                 _param(1, "UNITS", "char", units)]
        for name, value in (extra_point_params or {}).items():
            items.append(_param(1, name, "char", list(value)))
        items += [_group(2, "ANALOG", "analog data"),
                  _param(2, "USED", "int16", 0),
                  _param(2, "RATE", "float", rate)]
        body = b"".join(items)
        # the last record's offset is 0: patch it
        last = body.rfind(_param(2, "RATE", "float", rate))
        nlen = body[last]
        off_at = last + 2 + nlen
        body = body[:off_at] + struct.pack("<h", 0) + body[off_at + 2:]
        nblocks = -(-(4 + len(body)) // 512)
        head = bytes([1, 0x50, nblocks, 84])
        return (head + body).ljust(512 * nblocks, b"\0"), nblocks

    _, nblocks = params(0)
    data_start = 2 + nblocks
    pblock, _ = params(data_start)

    header = bytearray(512)
    struct.pack_into("<BB", header, 0, 2, 0x50)
    struct.pack_into("<hhhhh", header, 2, N, 0, 1, T, 0)
    struct.pack_into("<f", header, 12, scale)
    struct.pack_into("<hh", header, 16, data_start, 0)
    struct.pack_into("<f", header, 20, rate)

    rows = []
    for t in range(T):
        for n in range(N):
            bad = residual[t, n] < 0
            if scale < 0:
                w4 = -1.0 if bad else float(int(min(residual[t, n], 255)))
                rows.append(struct.pack("<4f", *xyz[t, n], w4))
            else:
                q = np.round(xyz[t, n] / scale).astype(int)
                res = int(min(round(residual[t, n] / scale), 255))
                w4 = -1 if bad else res
                rows.append(struct.pack("<4h", *q, w4))
    data = b"".join(rows)
    data = data.ljust(-(-len(data) // 512) * 512, b"\0")
    return bytes(header) + pblock + data


def damaged_parameter(data: bytes, record: bytes, field: int, value: int) -> bytes:
    """``data`` with byte ``field`` after the name of the parameter record ``record`` (0, 1: the offset to the
    next record; 2: its type; 3: its number of dimensions; then the dimensions) set to ``value``."""
    at = data.index(record, 512) + len(record) + field
    return data[:at] + bytes([value]) + data[at + 1:]
