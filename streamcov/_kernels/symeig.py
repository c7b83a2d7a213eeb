"""Symmetric eigendecomposition of small dense matrices, LANES at a time.

For the matrix log of thousands of d ~ 60 SPD matrices, LAPACK's dsyevd is
slow at this size: the level-2 calls of dsytd2 are dominated by their
overheads, and the eigenvectors of the tridiagonal cost O(d^3) of poorly
vectorized rotations (dsteqr, dstedc, dstemr called directly are all slower
than the whole path below; see benchmarks/spd_log_kernels.py). Here:

1. ``tridiagonalize``: Householder reduction, full storage, one pass over
   the trailing matrix per step, rows padded to a multiple of LANES columns
   so that every inner loop is whole SIMD vectors (``_rank2_dot_rows``);
2. ``form_qt``: Q^T by backward accumulation (``_reflect_rows``);
3. ``tql_lanes``: implicit QL with Wilkinson shifts (EISPACK tql2) on LANES
   tridiagonals at once. A single QL is bound by the latency of its scalar
   recurrence (a square root and divisions per rotation); running LANES of
   them in one SIMD register (``_sweep_lanes``) removes that bound. The
   rotations are applied to Q^T as fast Givens (two FMAs per element instead
   of four; ``_apply_sweeps``), logged and applied an L1-sized column block
   at a time.

``eig_lanes`` chains them for up to LANES matrices. No step approximates:
everything is the usual backward-stable Householder + QL, with deflation
at EPS times the matrix norm. The SIMD pieces are LLVM IR written through
numba intrinsics (vectors of LANES doubles: AVX-512 registers; LLVM splits
them on narrower hardware), because LLVM does not vectorize an 8-iteration
loop over numba arrays that it cannot prove disjoint. A lane that fails (no
convergence, non-finite input, a degenerate rotation) is reported, and the
caller recomputes that matrix with LAPACK.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._config import JIT_OPTS

EPS = np.finfo(np.float64).eps * 0.5          # unit roundoff, LAPACK dlamch('E')

LANES = 8                       # matrices per SIMD register (8 doubles, AVX-512)
_VEC = ir.VectorType(ir.DoubleType(), LANES)
_I32V = ir.VectorType(ir.IntType(32), LANES)
_FM = ("contract",)


def _splat(builder, x):
    """A scalar (LLVM double) broadcast to all lanes."""
    v = builder.insert_element(ir.Constant(_VEC, ir.Undefined), x, ir.IntType(64)(0))
    return builder.shuffle_vector(v, ir.Constant(_VEC, ir.Undefined), ir.Constant(_I32V, [0] * LANES))


class _Rows:
    """Pointer arithmetic on a 2-D float64 array with unit column stride."""

    def __init__(self, context, builder, aty, aval):
        arr = context.make_array(aty)(context, builder, aval)
        self.builder = builder
        self.base = builder.bitcast(arr.data, ir.IntType(8).as_pointer())
        self.rstride = cgutils.unpack_tuple(builder, arr.strides, 2)[0]
        self.ncol = cgutils.unpack_tuple(builder, arr.shape, 2)[1]

    def vptr(self, row, col):
        b = self.builder
        off = b.add(b.mul(row, self.rstride), b.mul(col, ir.IntType(64)(8)))
        return b.bitcast(b.gep(self.base, [off]), _VEC.as_pointer())


def _data(context, builder, aty, aval):
    return context.make_array(aty)(context, builder, aval).data


def _vptr(builder, p, col):
    return builder.bitcast(builder.gep(p, [col]), _VEC.as_pointer())


def _hsum(builder, acc):
    red = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType(), _VEC]),
        "llvm.vector.reduce.fadd.v%df64" % LANES)
    return builder.call(red, [ir.Constant(ir.DoubleType(), -0.0), acc], fastmath=("reassoc",))


def _rows_in_pairs(builder, r0, r1, do_rows):
    """Emit do_rows(i, 2) for i = r0, r0 + 2, ... and do_rows(i, 1) for the odd row left."""
    i64 = ir.IntType(64)
    npair = builder.sdiv(builder.sub(r1, r0), i64(2))
    with cgutils.for_range(builder, npair) as pl:
        do_rows(builder.add(r0, builder.mul(pl.index, i64(2))), 2)
    with cgutils.for_range(builder, r1, start=builder.add(r0, builder.mul(npair, i64(2)))) as rl:
        do_rows(rl.index, 1)


@intrinsic
def _rank2_dot_rows(typingctx, a, v, w, vn, p, r0, r1, j0, tn):
    """Rows r0 <= i < r1 of a: a[i, j0:] -= v[i] w[j0:] + w[i] v[j0:], then
    p[i] = tn * (a[i, j0:] . vn[j0:]). One pass, two rows at a time (the
    loads of v, w, vn are shared), no remainder loop: a has unit column
    stride and a multiple of LANES columns, j0 is a multiple of LANES, v, w,
    vn are contiguous with at least as many entries."""
    sig = types.void(a, v, w, vn, p, r0, r1, j0, tn)

    def codegen(context, builder, signature, args):
        aa, av, aw, avn, ap, vr0, vr1, vj0, vtn = args
        ta, tv = signature.args[0], signature.args[1]
        i64 = ir.IntType(64)
        vr0, vr1, vj0 = (context.cast(builder, x, t, types.int64)
                         for x, t in zip((vr0, vr1, vj0), signature.args[5:8]))
        vtn = context.cast(builder, vtn, signature.args[8], types.float64)
        rows = _Rows(context, builder, ta, aa)
        pv, pw, pvn, pp = (_data(context, builder, tv, x) for x in (av, aw, avn, ap))
        nvec = builder.sdiv(builder.sub(rows.ncol, vj0), i64(LANES))
        accs = [cgutils.alloca_once(builder, _VEC) for _ in range(2)]

        def do_rows(i0, nr):
            idx = [builder.add(i0, i64(r)) for r in range(nr)]
            vis = [_splat(builder, builder.load(builder.gep(pv, [i]))) for i in idx]
            wis = [_splat(builder, builder.load(builder.gep(pw, [i]))) for i in idx]
            for r in range(nr):
                builder.store(ir.Constant(_VEC, [0.0] * LANES), accs[r])
            with cgutils.for_range(builder, nvec) as cl:
                j = builder.add(vj0, builder.mul(cl.index, i64(LANES)))
                wj = builder.load(_vptr(builder, pw, j), align=8)
                vj = builder.load(_vptr(builder, pv, j), align=8)
                vnj = builder.load(_vptr(builder, pvn, j), align=8)
                for r in range(nr):
                    ptr = rows.vptr(idx[r], j)
                    x = builder.load(ptr, align=8)
                    upd = builder.fadd(builder.fmul(vis[r], wj, flags=_FM),
                                       builder.fmul(wis[r], vj, flags=_FM), flags=_FM)
                    x = builder.fsub(x, upd, flags=_FM)
                    builder.store(x, ptr, align=8)
                    builder.store(builder.fadd(builder.load(accs[r]), builder.fmul(x, vnj, flags=_FM),
                                               flags=_FM), accs[r])
            for r in range(nr):
                builder.store(builder.fmul(vtn, _hsum(builder, builder.load(accs[r]))),
                              builder.gep(pp, [idx[r]]))

        _rows_in_pairs(builder, vr0, vr1, do_rows)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _reflect_rows(typingctx, q, u, r0, r1, j0, t):
    """Rows r0 <= i < r1 of q times the reflector I - t u u^T from the right:
    q[i, j0:] -= t (q[i, j0:] . u[j0:]) u[j0:], two rows at a time. Same
    layout rules as ``_rank2_dot_rows``."""
    sig = types.void(q, u, r0, r1, j0, t)

    def codegen(context, builder, signature, args):
        aq, au, vr0, vr1, vj0, vt = args
        i64 = ir.IntType(64)
        vr0, vr1, vj0 = (context.cast(builder, x, ty, types.int64)
                         for x, ty in zip((vr0, vr1, vj0), signature.args[2:5]))
        vt = context.cast(builder, vt, signature.args[5], types.float64)
        rows = _Rows(context, builder, signature.args[0], aq)
        pu = _data(context, builder, signature.args[1], au)
        nvec = builder.sdiv(builder.sub(rows.ncol, vj0), i64(LANES))
        accs = [cgutils.alloca_once(builder, _VEC) for _ in range(2)]

        def do_rows(i0, nr):
            idx = [builder.add(i0, i64(r)) for r in range(nr)]
            for r in range(nr):
                builder.store(ir.Constant(_VEC, [0.0] * LANES), accs[r])
            with cgutils.for_range(builder, nvec) as cl:
                j = builder.add(vj0, builder.mul(cl.index, i64(LANES)))
                uj = builder.load(_vptr(builder, pu, j), align=8)
                for r in range(nr):
                    x = builder.load(rows.vptr(idx[r], j), align=8)
                    builder.store(builder.fadd(builder.load(accs[r]), builder.fmul(x, uj, flags=_FM),
                                               flags=_FM), accs[r])
            svs = [_splat(builder, builder.fmul(vt, _hsum(builder, builder.load(accs[r]))))
                   for r in range(nr)]
            with cgutils.for_range(builder, nvec) as cl:
                j = builder.add(vj0, builder.mul(cl.index, i64(LANES)))
                uj = builder.load(_vptr(builder, pu, j), align=8)
                for r in range(nr):
                    ptr = rows.vptr(idx[r], j)
                    x = builder.fsub(builder.load(ptr, align=8), builder.fmul(svs[r], uj, flags=_FM),
                                     flags=_FM)
                    builder.store(x, ptr, align=8)

        _rows_in_pairs(builder, vr0, vr1, do_rows)
        return context.get_dummy_value()

    return sig, codegen


@njit(**JIT_OPTS)
def _reflector(a, k, n, v):
    """Householder reflector from row k: I - tau u u^T maps a[k, k+1:n] to
    (beta, 0, ..., 0). u goes to v (zero outside k+1..n-1, v[k+1] = 1) and to
    a[k, k+1:n]. Returns (tau, beta); tau = 0 when there is nothing to do."""
    k1 = k + 1
    v[:] = 0.0
    x = a[k, k1 + 1:n]
    vx = v[k1 + 1:n]
    alpha = a[k, k1]
    ss = 0.0
    for j in range(x.shape[0]):
        ss += x[j] * x[j]
    v[k1] = 1.0
    a[k, k1] = 1.0
    if ss == 0.0:
        return 0.0, alpha
    beta = -math.copysign(math.sqrt(alpha * alpha + ss), alpha)
    sc = 1.0 / (alpha - beta)
    for j in range(x.shape[0]):
        y = x[j] * sc
        vx[j] = y
        x[j] = y
    return (beta - alpha) / beta, beta


@njit(**JIT_OPTS)
def tridiagonalize(a, n, d, e, tau, vw):
    """Householder reduction of the symmetric n x n matrix in a[:, :n] to
    tridiagonal form, A = Q T Q^T.

    a is (n, ld), ld a multiple of LANES, columns n.. zero; full storage is
    kept up to date (both triangles), so every access is a contiguous row.
    On exit d[:n] is the diagonal and e[:n-1] the subdiagonal of T, and row
    k < n-2 of a holds the Householder vector u_k in a[k, k+1:n]
    (u_k[k+1] = 1) with scalar tau[k]: Q = H_0 ... H_{n-3},
    H_k = I - tau_k u_k u_k^T. vw is (4, ld) scratch.

    One pass over the trailing matrix per step: step k applies
    B <- B - v w^T - w v^T (B = rows and columns k+1..) row by row; the
    first row of B is updated first so that the next reflector v' is known,
    and every later row, once updated, is dotted with v' for the next step's
    p = tau' B' v' (``_rank2_dot_rows``). Rows are processed from an aligned
    column (a multiple of LANES) to ld: the vectors are zero outside their
    support, so the extra columns are left unchanged, and no loop has a
    remainder.
    """
    ld = a.shape[1]
    if n == 1:
        d[0] = a[0, 0]
        return
    if n == 2:
        d[0] = a[0, 0]
        e[0] = a[1, 0]
        d[1] = a[1, 1]
        return
    v = vw[0]
    vn = vw[1]
    p = vw[2]
    w = vw[3]
    ldu = np.uint64(ld)
    t, beta = _reflector(a, 0, n, v)
    tau[0] = t
    d[0] = a[0, 0]
    e[0] = beta
    for j in range(ld):
        p[j] = 0.0
        w[j] = 0.0
    # p = t A[1:, :] v (w = 0: the rank-2 update does nothing here)
    _rank2_dot_rows(a, w, w, v, p, 1, n, 0, t)
    for k in range(n - 2):
        k1 = k + 1
        t = tau[k]
        pv = 0.0
        for j in range(ldu):
            pv += p[j] * v[j]
        h = -0.5 * t * pv
        for j in range(ldu):
            w[j] = p[j] + h * v[j]
        j0 = (k1 // LANES) * LANES
        _rank2_dot_rows(a, v, w, v, p, k1, k1 + 1, j0, 0.0)  # row k1 only, no dot
        last = k1 > n - 3
        if not last:
            tn, beta = _reflector(a, k1, n, vn)
            tau[k1] = tn
            d[k1] = a[k1, k1]
            e[k1] = beta
        else:
            tn = 0.0
        for j in range(ldu):
            p[j] = 0.0
        _rank2_dot_rows(a, v, w, vn, p, k1 + 1, n, j0, tn)
        v, vn = vn, v
    d[n - 2] = a[n - 2, n - 2]
    e[n - 2] = a[n - 1, n - 2]
    d[n - 1] = a[n - 1, n - 1]


@njit(**JIT_OPTS)
def form_qt(a, n, tau, qt, u):
    """Q^T = H_{n-3} ... H_0 from the vectors left in a by ``tridiagonalize``.

    qt is (n, ld) like a: Q^T in its first n columns, zeros after; u is
    scratch of length ld. Backward accumulation on the transposed factor:
    Q^T <- Q^T H_k acts on rows and columns k+1.. (``_reflect_rows``: one
    dot product and one axpy per row, from an aligned column).
    """
    qt[:, :] = 0.0
    for i in range(n):
        qt[i, i] = 1.0
    for k in range(n - 3, -1, -1):
        t = tau[k]
        if t == 0.0:
            continue
        k1 = k + 1
        u[:] = 0.0
        for j in range(k1, n):   # a loop, not u[k1:n] = a[k, k1:n]: no shape check (and its message) to compile
            u[j] = a[k, j]
        _reflect_rows(qt, u, k1, n, (k1 // LANES) * LANES, t)


STRIPS = 4                      # column strips rotated together (independent chains)
# rows of the lane state array ``st`` (shape (ST_ROWS, LANES))
ST_S, ST_C, ST_P, ST_G, ST_M, ST_THR, ST_BAD, ST_DMIN, ST_ROWS = 0, 1, 2, 3, 4, 5, 6, 7, 8
# fast Givens: a lane whose rotation has |cos| below TINY_COS is handed back
# (status -2) rather than scaled by it; row scale factors below RESCALE are
# folded into the row, so that c dl_i dl_{i+1} > 2**-240 never underflows.
TINY_COS = 2.0 ** -40
RESCALE = 2.0 ** -60
# sweeps logged before their fast-Givens factors are applied to the vectors
LOG_SWEEPS = 16


@intrinsic
def _sweep_lanes(typingctx, d, e, dl, fa, fb, st, l, top):
    """The scalar part of one QL sweep for LANES tridiagonals, as SIMD.

    Steps i = top, top-1, ..., l of the implicit QL recurrence (EISPACK
    tql2), lane q in column q of the (n, LANES) arrays d, e with its own
    s, c, p, g (rows of ``st``); lane q is active at step i only if
    i < st[ST_M, q], its own bottom row m, and does an identity step
    otherwise. The rotation (c, s) of step i on rows (i, i+1) is turned into
    fast-Givens factors for the vectors, which are kept as z = diag(dl) zh:
    zh_i <- zh_i + fa[i] zh_{i+1}, zh_{i+1} <- zh_{i+1} + fb[i] zh_i with
    dl_i, dl_{i+1} <- c dl_i, c dl_{i+1} (two FMAs per element instead of a
    rotation's four). st[ST_BAD, q] becomes 1 if some |c| < TINY_COS;
    st[ST_DMIN, q] is lowered to the smallest |dl| written.
    Straight SIMD code: LLVM does not vectorize an 8-iteration loop over
    numba arrays it cannot prove disjoint. All arrays C-contiguous with
    LANES columns.
    """
    sig = types.void(d, e, dl, fa, fb, st, l, top)

    def codegen(context, builder, signature, args):
        ad, ae, adl, afa, afb, ast, vl, vtop = args
        ta = signature.args[0]
        tst, tl, ttop = signature.args[5:]
        i64 = ir.IntType(64)
        vl = context.cast(builder, vl, tl, types.int64)
        vtop = context.cast(builder, vtop, ttop, types.int64)

        def base(aty, aval):
            return context.make_array(aty)(context, builder, aval).data

        pd, pe, pdl, pfa, pfb = (base(ta, a) for a in (ad, ae, adl, afa, afb))
        pst = base(tst, ast)

        def ptr(p, row):
            return builder.bitcast(builder.gep(p, [builder.mul(row, i64(LANES))]), _VEC.as_pointer())

        def load(p, row):
            return builder.load(ptr(p, row), align=8)

        def store(v, p, row):
            builder.store(v, ptr(p, row), align=8)

        def splat(x):
            return ir.Constant(_VEC, [x] * LANES)

        def mul(a, b):
            return builder.fmul(a, b, flags=_FM)

        sqrt = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VEC, [_VEC]), "llvm.sqrt.v%df64" % LANES)
        fabs = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VEC, [_VEC]), "llvm.fabs.v%df64" % LANES)
        state = {}
        for name, row in (("s", ST_S), ("c", ST_C), ("p", ST_P), ("g", ST_G), ("bad", ST_BAD),
                          ("dmin", ST_DMIN)):
            slot = cgutils.alloca_once(builder, _VEC)
            builder.store(load(pst, i64(row)), slot)
            state[name] = slot
        mrow = load(pst, i64(ST_M))
        count = builder.add(builder.sub(vtop, vl), i64(1))
        with cgutils.for_range(builder, count) as loop:
            i = builder.sub(vtop, loop.index)
            i1 = builder.add(i, i64(1))
            act = builder.fcmp_ordered("<", _splat(builder, builder.sitofp(i, ir.DoubleType())), mrow)
            s, c, p, g, bad = (builder.load(state[k]) for k in ("s", "c", "p", "g", "bad"))
            ei, ei1, di, di1 = load(pe, i), load(pe, i1), load(pd, i), load(pd, i1)
            f = mul(s, ei)
            b = mul(c, ei)
            r = builder.call(sqrt, [builder.fadd(mul(f, f), mul(g, g), flags=_FM)])
            nz = builder.fcmp_ordered("!=", r, splat(0.0))
            rinv = builder.fdiv(splat(1.0), builder.select(nz, r, splat(1.0)))
            s1 = builder.select(nz, mul(f, rinv), splat(0.0))
            c1 = builder.select(nz, mul(g, rinv), splat(1.0))
            g1 = builder.fsub(di1, p)
            r1 = builder.fadd(mul(builder.fsub(di, g1), s1), mul(mul(splat(2.0), c1), b), flags=_FM)
            p1 = mul(s1, r1)
            gn = builder.fsub(mul(c1, r1), b, flags=_FM)
            store(builder.select(act, builder.fadd(g1, p1), di1), pd, i1)
            store(builder.select(act, r, ei1), pe, i1)
            builder.store(builder.select(act, s1, s), state["s"])
            builder.store(builder.select(act, c1, c), state["c"])
            builder.store(builder.select(act, p1, p), state["p"])
            builder.store(builder.select(act, gn, g), state["g"])
            # fast Givens factors and row scales
            tiny = builder.fcmp_ordered("<", builder.call(fabs, [c1]), splat(TINY_COS))
            tiny = builder.and_(tiny, act)
            builder.store(builder.select(tiny, splat(1.0), bad), state["bad"])
            cs = builder.select(tiny, splat(1.0), c1)
            dli, dlj = load(pdl, i), load(pdl, i1)
            inv = builder.fdiv(splat(1.0), mul(mul(cs, dli), dlj))
            store(mul(mul(builder.fsub(splat(0.0), mul(s1, dlj)), dlj), inv), pfa, i)
            store(mul(mul(mul(s1, dli), dli), inv), pfb, i)
            ndi = builder.select(act, mul(c1, dli), dli)
            ndj = builder.select(act, mul(c1, dlj), dlj)
            store(ndi, pdl, i)
            store(ndj, pdl, i1)
            adi = builder.call(fabs, [ndi])
            adj = builder.call(fabs, [ndj])
            dm = builder.select(builder.fcmp_ordered("<", adi, adj), adi, adj)
            dmin = builder.load(state["dmin"])
            builder.store(builder.select(builder.fcmp_ordered("<", dm, dmin), dm, dmin), state["dmin"])
        for name, row in (("s", ST_S), ("c", ST_C), ("p", ST_P), ("g", ST_G), ("bad", ST_BAD),
                          ("dmin", ST_DMIN)):
            store(builder.load(state[name]), pst, i64(row))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _apply_sweeps(typingctx, z, q, slog, flog, nsw, nstrip):
    """Apply lane q's logged fast-Givens sweeps to its scaled vector rows.

    Sweep s < nsw of lane q ran on rows slog[s, q] = (l, m): for i = m-1,
    ..., l, with a = flog[0, s, i, q], b = flog[1, s, i, q], x = zh_i,
    y = zh_{i+1}: zh_{i+1} <- y + b x, zh_i <- x + a y; zh = z[q]. Column
    block by column block (STRIPS x LANES columns, small enough for L1) all
    the sweeps are applied before moving on, with row i+1 carried in
    registers from one step to the next: one vector load, one store and two
    FMAs per strip and step, STRIPS independent chains. z is (LANES, n, ldz)
    with unit column stride and ldz >= LANES * nstrip.
    """
    sig = types.void(z, q, slog, flog, nsw, nstrip)

    def codegen(context, builder, signature, args):
        az, vq, asl, afl, vnsw, vns = args
        tz, tq, tsl, tfl, tnsw, tns = signature.args
        i64 = ir.IntType(64)
        i8p = ir.IntType(8).as_pointer()
        vq = context.cast(builder, vq, tq, types.int64)
        vnsw = context.cast(builder, vnsw, tnsw, types.int64)
        vns = context.cast(builder, vns, tns, types.int64)
        zarr = context.make_array(tz)(context, builder, az)
        zstr = cgutils.unpack_tuple(builder, zarr.strides, 3)
        zb = builder.gep(builder.bitcast(zarr.data, i8p), [builder.mul(vq, zstr[0])])
        rstride = zstr[1]
        sarr = context.make_array(tsl)(context, builder, asl)
        sstr = cgutils.unpack_tuple(builder, sarr.strides, 3)
        sb = builder.gep(builder.bitcast(sarr.data, i8p), [builder.mul(vq, sstr[1])])
        farr = context.make_array(tfl)(context, builder, afl)
        fstr = cgutils.unpack_tuple(builder, farr.strides, 4)
        fb8 = builder.gep(builder.bitcast(farr.data, i8p), [builder.mul(vq, fstr[3])])

        def sweep_field(sidx, k):
            off = builder.add(builder.mul(sidx, sstr[0]), builder.mul(i64(k), sstr[2]))
            return builder.load(builder.bitcast(builder.gep(sb, [off]), i64.as_pointer()))

        def coef(which, sidx, row):
            off = builder.add(builder.add(builder.mul(i64(which), fstr[0]), builder.mul(sidx, fstr[1])),
                              builder.mul(row, fstr[2]))
            x = builder.load(builder.bitcast(builder.gep(fb8, [off]), ir.DoubleType().as_pointer()))
            return _splat(builder, x)

        def rowptr(row, col):
            p = builder.gep(zb, [builder.add(builder.mul(row, rstride), builder.mul(col, i64(8)))])
            return builder.bitcast(p, _VEC.as_pointer())

        def block(col0, width):
            cols = [builder.add(col0, i64(LANES * k)) for k in range(width)]
            carry = [cgutils.alloca_once(builder, _VEC) for _ in range(width)]
            with cgutils.for_range(builder, vnsw) as sl:
                lo = sweep_field(sl.index, 0)
                mm = sweep_field(sl.index, 1)
                top = builder.sub(mm, i64(1))
                count = builder.sub(mm, lo)
                with cgutils.if_likely(builder, builder.icmp_signed(">", count, i64(0))):
                    for k in range(width):
                        builder.store(builder.load(rowptr(mm, cols[k]), align=8), carry[k])
                    with cgutils.for_range(builder, count) as loop:
                        i = builder.sub(top, loop.index)
                        i1 = builder.add(i, i64(1))
                        a = coef(0, sl.index, i)
                        b = coef(1, sl.index, i)
                        for k in range(width):
                            x = builder.load(rowptr(i, cols[k]), align=8)
                            y = builder.load(carry[k])
                            builder.store(builder.fadd(y, builder.fmul(b, x, flags=_FM), flags=_FM),
                                          rowptr(i1, cols[k]), align=8)
                            builder.store(builder.fadd(x, builder.fmul(a, y, flags=_FM), flags=_FM),
                                          carry[k])
                    for k in range(width):
                        builder.store(builder.load(carry[k]), rowptr(lo, cols[k]), align=8)

        nblk = builder.sdiv(vns, i64(STRIPS))
        with cgutils.for_range(builder, nblk) as blk:
            block(builder.mul(blk.index, i64(STRIPS * LANES)), STRIPS)
        with cgutils.for_range(builder, vns, start=builder.mul(nblk, i64(STRIPS))) as blk:
            block(builder.mul(blk.index, i64(LANES)), 1)
        return context.get_dummy_value()

    return sig, codegen


@njit(**JIT_OPTS)
def _flush(z, n, dl, st, status, slog, flog, nsw, final):
    """Apply the nsw logged sweeps to every lane's z[q], then fold the row
    scales dl into the rows (z = diag(dl) zh becomes z, dl = 1) of each lane
    whose own smallest scale fell below RESCALE, and of every lane when
    ``final``. A lane is folded on its own scales only: folded whenever any
    lane needed it, a matrix's last bits depended on the 7 others computed
    with it (applying logged sweeps sooner or later gives the same bits;
    folding the scales at another step does not)."""
    nstrip = z.shape[2] // LANES
    for q in range(LANES):
        if status[q] != 1:
            st[ST_DMIN, q] = 1.0
            continue
        if nsw > 0 and nstrip > 0:
            _apply_sweeps(z, q, slog, flog, nsw, nstrip)
        if not final and st[ST_DMIN, q] >= RESCALE:
            continue
        st[ST_DMIN, q] = 1.0
        for i in range(n):
            sc = dl[i, q]
            if sc != 1.0:
                for k in range(z.shape[2]):
                    z[q, i, k] *= sc
                dl[i, q] = 1.0


@njit(**JIT_OPTS)
def tql_lanes(d, e, dl, z, n, maxit, st, mq, it, status, slog, flog):
    """Implicit QL with Wilkinson shifts on LANES tridiagonals at once.

    Lane q: diagonal d[:, q], subdiagonal e[:n-1, q]; on entry z[q, :n, :n]
    holds the rows to rotate (Q^T of the Householder step, so that on exit
    row j is the eigenvector of eigenvalue d[j, q]). z has LANES * k >= n
    columns (padding ones zero). The scalar recurrence of a sweep (a chain of
    dependent square roots and divisions, the bottleneck of a one-matrix QL)
    runs for all lanes together in SIMD (``_sweep_lanes``); each lane keeps
    its own shift and split point m and idles when its sweep is shorter or
    it has converged at row l. The vectors are updated by fast Givens,
    z = diag(dl) zh: the factors of up to slog.shape[0] sweeps are logged
    (flog, in lane layout as the SIMD code writes them; slog[s, q] = (l, m))
    and applied lane by lane, one L1-sized column block after the other
    (``_apply_sweeps``), when the log is full, when a row scale falls below
    RESCALE, and at the end; a lane's scales are folded into its rows when its
    own smallest one falls below RESCALE, and at the end (``_flush``), so that
    its result does not depend on the other lanes.

    An off-diagonal is negligible below EPS times the lane's norm (normwise
    backward stable, like the Householder step). status[q]: 1 converged;
    -1 some eigenvalue took more than ``maxit`` sweeps; -2 a rotation with
    |cos| < TINY_COS. A lane with status < 0 is dropped (its output is
    unusable, the caller must redo it); the other lanes are unaffected.
    """
    scap = slog.shape[0]
    nsw = 0
    for q in range(LANES):
        e[n - 1, q] = 0.0
        status[q] = 1
        st[ST_BAD, q] = 0.0
        st[ST_DMIN, q] = 1.0
        tn = 0.0
        for i in range(n):
            tn = max(tn, abs(d[i, q]) + abs(e[i, q]))
            dl[i, q] = 1.0
        st[ST_THR, q] = EPS * tn
    for l in range(n - 1):
        for q in range(LANES):
            it[q] = 0
        while True:
            mmax = l
            for q in range(LANES):
                m = l
                if status[q] == 1:
                    thr = st[ST_THR, q]
                    while m < n - 1:
                        if abs(e[m, q]) <= thr:
                            break
                        m += 1
                    if m > l:
                        if it[q] == maxit:
                            status[q] = -1
                            m = l
                        else:
                            it[q] += 1
                mq[q] = m
                mmax = max(mmax, m)
            if mmax == l:
                break
            for q in range(LANES):
                m = mq[q]
                st[ST_M, q] = m
                st[ST_S, q] = 1.0
                st[ST_C, q] = 1.0
                st[ST_P, q] = 0.0
                if m > l:
                    el = e[l, q]
                    g = (d[l + 1, q] - d[l, q]) / (2.0 * el)
                    r = math.sqrt(g * g + 1.0)
                    st[ST_G, q] = d[m, q] - d[l, q] + el / (g + math.copysign(r, g))
                else:
                    st[ST_G, q] = 0.0
            _sweep_lanes(d, e, dl, flog[0, nsw], flog[1, nsw], st, l, mmax - 1)
            small = False
            for q in range(LANES):
                m = mq[q]
                slog[nsw, q, 0] = l
                slog[nsw, q, 1] = m
                if m == l:
                    continue
                if st[ST_BAD, q] != 0.0:
                    status[q] = -2
                    continue
                d[l, q] -= st[ST_P, q]
                e[l, q] = st[ST_G, q]
                e[m, q] = 0.0
                if st[ST_DMIN, q] < RESCALE:
                    small = True
            nsw += 1
            if small or nsw == scap:
                _flush(z, n, dl, st, status, slog, flog, nsw, False)
                nsw = 0
    _flush(z, n, dl, st, status, slog, flog, nsw, True)
    return 0


@njit(**JIT_OPTS)
def lanes_workspace(n):
    """Scratch arrays for ``eig_lanes`` on n x n matrices (one per thread)."""
    ldz = ((n + LANES - 1) // LANES) * LANES
    a = np.zeros((n, ldz))
    z = np.zeros((LANES, n, ldz))
    d = np.empty((n, LANES))
    e = np.empty((n, LANES))
    dl = np.empty((n, LANES))
    st = np.empty((ST_ROWS, LANES))
    mq = np.empty(LANES, dtype=np.int64)
    it = np.empty(LANES, dtype=np.int64)
    status = np.empty(LANES, dtype=np.int64)
    vecs = np.empty((6, ldz))
    scale = np.empty(LANES)
    usable = np.empty(LANES, dtype=np.bool_)
    slog = np.empty((LOG_SWEEPS, LANES, 2), dtype=np.int64)
    flog = np.empty((2, LOG_SWEEPS, n, LANES))
    return a, z, d, e, dl, st, mq, it, status, vecs, scale, usable, slog, flog


@njit(**JIT_OPTS)
def eig_lanes(c, count, ws):
    """Eigenvalues and eigenvectors of the symmetric c[0], ..., c[count-1].

    count <= LANES matrices of one size n; c is left unchanged. Each matrix
    is scaled by a power of two (exact) so that its largest entry lies in
    [0.5, 1), reduced to tridiagonal form by Householder reflections
    (``tridiagonalize``, ``form_qt``), and the tridiagonals are solved
    together by ``tql_lanes``. On return, with ``a, z, d, ... = ws``:
    status[q] == 1: eigenvalue j of c[q] is d[j, q] (unsorted, scaled back)
    with eigenvector z[q, j, :n] (a row). status[q] == 0: c[q] has a NaN or
    an infinity, or is zero; status[q] < 0: the QL iteration gave up. In
    both cases the caller must use another method for c[q].
    """
    a, z, d, e, dl, st, mq, it, status, vecs, scale, usable, slog, flog = ws
    n = c.shape[1]
    tau = vecs[0]
    u = vecs[1]
    vw = vecs[2:6]
    for q in range(LANES):
        usable[q] = False
        if q < count:
            amax = 0.0
            tot = 0.0
            for i in range(n):
                for j in range(n):
                    x = abs(c[q, i, j])
                    tot += x
                    amax = max(amax, x)
            usable[q] = math.isfinite(tot) and amax > 0.0
        if not usable[q]:
            for i in range(n):
                d[i, q] = 1.0
                e[i, q] = 0.0
            continue
        _mant, ex = math.frexp(amax)
        sc = math.ldexp(1.0, -ex)
        scale[q] = math.ldexp(1.0, ex)
        for i in range(n):
            for j in range(n):
                a[i, j] = c[q, i, j] * sc
        tridiagonalize(a, n, d[:, q], e[:, q], tau, vw)
        form_qt(a, n, tau, z[q], u)
    tql_lanes(d, e, dl, z, n, 30, st, mq, it, status, slog, flog)
    for q in range(LANES):
        if not usable[q]:
            status[q] = 0
        elif status[q] == 1:
            sc = scale[q]
            for i in range(n):
                d[i, q] *= sc
