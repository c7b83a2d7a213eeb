"""Compiled (numba) scanners for the text motion formats: one pass over the file's bytes.

The AMC and BVH motion sections are millions of small numbers; splitting lines and calling
``float`` per value in Python costs about 0.5 us per value. These scanners walk the raw bytes
once, tokenise, parse plain decimal numbers and check the structure, and report the first
problem as an error code with its line and byte span, which the readers turn into a
:class:`FormatError` message. They never return partial data as if it were whole: on an error
the arrays they return must be ignored.

Numbers: ``[+-]digits[.digits][(e|E)[+-]digits]`` (``.5`` and ``5.`` too). Anything else
(``nan``, ``inf``, ``1_000``, ``0x10``, ``1,5``) is an error. The value is computed as
``mantissa * 10**exponent`` with the mantissa exact and one rounding for
exponents within +-22 and mantissas up to 2**53 (the classic exact fast path); the few other
tokens are reported back and re-parsed with Python's ``float``, so every value is the
correctly rounded double, bit for bit what ``float(token)`` gives.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# error codes shared with the readers
OK = 0
E_BONE_BEFORE_FRAME = 1     # a bone line before the first frame number
E_UNKNOWN_BONE = 2          # name not in the skeleton (span = name)
E_TOO_FEW = 3               # fewer values than the bone's dof (aux0 = bone, aux1 = got)
E_TOO_MANY = 4              # more values than the bone's dof (aux0 = bone, aux1 = got)
E_BAD_NUMBER = 5            # token is not a plain decimal number (span = token)
E_FRAME_SEQ = 6             # frame number not previous + 1 (aux0 = got, aux1 = expected)
E_MISSING_BONES = 7         # a frame lacks required bones (aux0 = frame index, aux1 = 1 at EOF)
E_DUPLICATE_BONE = 8        # bone twice in one frame (aux0 = bone, aux1 = its first line)
E_FRAME_LINE_EXTRA = 9      # frame number line has more tokens (span = first extra token)
E_NOT_FINITE = 10           # number overflows to infinity (raised by the readers after the
                            # exact re-parse: the fast path cannot overflow)
E_KEYWORD = 11              # a ':' keyword line inside the frame data (span = token)
E_BAD_FRAME_NUMBER = 12     # frame number line is not an integer (span = token)
E_ROW_COUNT = 13            # BVH row with a wrong number of values (aux0 = got, aux1 = expected)
E_TOO_MANY_ROWS = 14        # more rows than declared (aux0 = declared)

_POW10 = np.array([10.0 ** k for k in range(23)])


def reparse(path, data: bytes, vals: np.ndarray, fix: np.ndarray) -> None:
    """Re-parse with Python's ``float`` the values the scanner could only approximate
    (``fix`` rows: row, column, start, end); raises FormatError for one out of range."""
    from .base import FormatError
    for row, col, s, e in fix.tolist():
        v = float(data[s:e])
        if not np.isfinite(v):
            raise FormatError(path, f"value {data[s:e].decode('latin-1')!r} is out of range "
                              "(not finite)", line=data.count(b"\n", 0, s) + 1)
        vals[row, col] = v

# byte classes: 0 token byte, 1 blank (space, tab, CR, VT, FF), 2 newline, 3 '#' (comment)
_CLS = np.zeros(256, dtype=np.uint8)
_CLS[[32, 9, 13, 11, 12]] = 1
_CLS[10] = 2
_CLS_AMC = _CLS.copy()
_CLS_AMC[35] = 3


@njit(cache=True, inline="always")
def _isspace(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True)
def _parse_number_long(buf, s, e, pow10):
    """parse_number for mantissas of more than 18 digits: the first 19 significant digits
    are kept, the others only move the decimal exponent."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    mant = np.uint64(0)
    nd = 0
    exp10 = 0
    ndig = 0
    while i < e and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        if nd < 19:
            if mant != 0 or d != 0:
                nd += 1
            mant = mant * np.uint64(10) + np.uint64(d)
        else:
            exp10 += 1
        ndig += 1
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            d = buf[i] - 48
            if nd < 19:
                if mant != 0 or d != 0:
                    nd += 1
                mant = mant * np.uint64(10) + np.uint64(d)
                exp10 -= 1
            ndig += 1
            i += 1
    if ndig == 0:
        return 0, 0.0
    ok, ev, i = _parse_exponent(buf, i, e)
    if not ok or i != e:
        return 0, 0.0
    return 2, _scale(float(mant), exp10 + ev, neg, pow10)


@njit(cache=True, inline="always")
def _parse_exponent(buf, i, e):
    """Optional ``(e|E)[+-]digits`` from ``i``: (ok, exponent, next index)."""
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        ed = 0
        ev = 0
        while i < e and 48 <= buf[i] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[i] - 48)
            ed += 1
            i += 1
        if ed == 0:
            return False, 0, i
        return True, (-ev if eneg else ev), i
    return True, 0, i


@njit(cache=True, inline="always")
def _scale(v, exp10, neg, pow10):
    if v != 0.0 and exp10 != 0:
        if 0 < exp10 <= 22:
            v = v * pow10[exp10]
        elif -22 <= exp10 < 0:
            v = v / pow10[-exp10]
        elif exp10 < -300:
            v = (v / 1e22) * 10.0 ** (exp10 + 22)
        else:
            v = v * 10.0 ** exp10
    return -v if neg else v


@njit(cache=True, inline="always")
def parse_number(buf, s, e, pow10):
    """Parse ``buf[s:e]`` as a plain decimal number: (status, value) with status 0 (not a
    number), 1 (the correctly rounded double: mantissa <= 2**53 and |exponent| <= 22, one
    rounding) or 2 (approximate, within a few ulp: the caller re-parses the token)."""
    i = s
    neg = False
    c = buf[i]
    if c == 45:
        neg = True
        i += 1
    elif c == 43:
        i += 1
    mant = 0
    ndig = 0
    frac = 0
    while i < e:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        mant = mant * 10 + d
        ndig += 1
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            mant = mant * 10 + d
            ndig += 1
            frac += 1
            i += 1
    if ndig == 0:
        return 0, 0.0
    if ndig > 18:
        return _parse_number_long(buf, s, e, pow10)
    ok, ev, i = _parse_exponent(buf, i, e)
    if not ok or i != e:
        return 0, 0.0
    exp10 = ev - frac
    exact = mant <= 9007199254740992 and -22 <= exp10 <= 22
    return 1 if exact else 2, _scale(float(mant), exp10, neg, pow10)


@njit(cache=True)
def _name_matches(buf, s, e, names, lens, b):
    n = e - s
    if lens[b] != n:
        return False
    for q in range(n):
        if buf[s + q] != names[b, q]:
            return False
    return True


@njit(cache=True)
def count_lines(buf, pos):
    """Number of lines from byte ``pos`` (newlines + 1)."""
    count = 1
    for i in range(pos, buf.size):
        if buf[i] == 10:
            count += 1
    return count


@njit(cache=True, inline="always")
def _skip_blanks(buf, i, n, cls):
    while i < n and cls[buf[i]] == 1:
        i += 1
    return i


@njit(cache=True, inline="always")
def _token_end(buf, i, n, cls):
    while i < n and cls[buf[i]] == 0:
        i += 1
    return i


@njit(cache=True, inline="always")
def _next_line(buf, i, n):
    """Index just past the next newline at or after ``i`` (or ``n``)."""
    while i < n and buf[i] != 10:
        i += 1
    return i + 1


@njit(cache=True)
def scan_amc(buf, pos, line, names, lens, ndof, col0, ncols, required, fix_cap):
    """Parse AMC frames from byte ``pos`` (1-based line ``line``) to the end.

    Returns ``(values (T, ncols), frame_numbers (T,), frame_lines (T,), err (7,), fix, nfix)``
    with ``err = [code, line, span_start, span_end, aux0, aux1, 0]``, ``fix`` the
    (row, column, start, end) of the values to re-parse exactly (see :func:`parse_number`),
    at most ``fix_cap`` of them, and ``nfix`` their number (call again with a larger
    ``fix_cap`` when it is larger: the array is never grown inside the loop, which would slow
    every iteration down).
    """
    n = buf.size
    nb = lens.size
    cls = _CLS_AMC
    pow10 = _POW10
    n_req = 0
    for b in range(nb):
        if required[b]:
            n_req += 1
    # every frame but the last takes 1 + n_req lines (else it is an error before the next)
    cap = count_lines(buf, pos) // (1 + n_req) + 1
    vals = np.zeros((cap, ncols))
    fnum = np.zeros(cap, np.int64)
    fline = np.zeros(cap, np.int64)
    err = np.zeros(7, np.int64)
    fix = np.zeros((fix_cap, 4), np.int64)  # (row, column, start, end) of approximate numbers
    nfix = 0
    seen = np.full(nb, -1, np.int64)       # frame index in which the bone was last seen
    seen_line = np.zeros(nb, np.int64)
    nxt = np.full(nb + 1, -1, np.int64)    # bone that followed bone b - 1 in the last frame
    T = 0
    got = 0
    last = -1
    i = pos
    while i < n:
        i = _skip_blanks(buf, i, n, cls)
        if i >= n:
            break
        k0 = cls[buf[i]]
        if k0 == 2:                          # blank line
            i += 1
            line += 1
            continue
        if k0 == 3:                          # comment line
            i = _next_line(buf, i, n)
            line += 1
            continue
        c = buf[i]
        te = _token_end(buf, i, n, cls)
        if 48 <= c <= 57:                    # a frame number line
            num = 0
            for q in range(i, te):
                d = np.int64(buf[q]) - 48
                if d < 0 or d > 9:
                    err[0] = E_BAD_FRAME_NUMBER
                    err[1] = line
                    err[2] = i
                    err[3] = te
                    return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
                if num < 1000000000000000:
                    num = num * 10 + d
            j = _skip_blanks(buf, te, n, cls)
            if j < n and cls[buf[j]] == 0:
                err[0] = E_FRAME_LINE_EXTRA
                err[1] = line
                err[2] = j
                err[3] = _token_end(buf, j, n, cls)
                return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
            if T > 0 and got < n_req:
                err[0] = E_MISSING_BONES
                err[1] = fline[T - 1]
                err[4] = T - 1
                return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
            if T > 0 and num != fnum[T - 1] + 1:
                err[0] = E_FRAME_SEQ
                err[1] = line
                err[2] = i
                err[3] = te
                err[4] = num
                err[5] = fnum[T - 1] + 1
                return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
            if T == cap:                     # cannot happen (see cap); never write past it
                err[0] = E_MISSING_BONES
                err[1] = fline[T - 1]
                err[4] = T - 1
                return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
            fnum[T] = num
            fline[T] = line
            T += 1
            got = 0
            last = -1
            i = _next_line(buf, j, n)
            line += 1
            continue
        if c == 58:                          # ':'
            err[0] = E_KEYWORD
            err[1] = line
            err[2] = i
            err[3] = te
            return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
        if T == 0:
            err[0] = E_BONE_BEFORE_FRAME
            err[1] = line
            err[2] = i
            err[3] = te
            return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
        b = nxt[last + 1]
        if b < 0 or not _name_matches(buf, i, te, names, lens, b):
            b = -1
            for q in range(nb):
                if _name_matches(buf, i, te, names, lens, q):
                    b = q
                    break
        if b < 0:
            err[0] = E_UNKNOWN_BONE
            err[1] = line
            err[2] = i
            err[3] = te
            return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
        if seen[b] == T - 1:
            err[0] = E_DUPLICATE_BONE
            err[1] = line
            err[2] = i
            err[3] = te
            err[4] = b
            err[5] = seen_line[b]
            return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
        seen[b] = T - 1
        seen_line[b] = line
        nxt[last + 1] = b
        last = b
        nd = ndof[b]
        base = col0[b]
        row = T - 1
        k = 0
        j = te
        while True:
            j = _skip_blanks(buf, j, n, cls)
            if j >= n or cls[buf[j]] != 0:
                break
            tj = _token_end(buf, j, n, cls)
            if k >= nd:
                cnt = k
                while j < n and cls[buf[j]] == 0:
                    cnt += 1
                    j = _skip_blanks(buf, _token_end(buf, j, n, cls), n, cls)
                err[0] = E_TOO_MANY
                err[1] = line
                err[2] = i
                err[3] = te
                err[4] = b
                err[5] = cnt
                return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
            ok, v = parse_number(buf, j, tj, pow10)
            if ok == 0:
                err[0] = E_BAD_NUMBER
                err[1] = line
                err[2] = j
                err[3] = tj
                return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
            if ok == 2:
                if nfix < fix_cap:
                    fix[nfix, 0] = row
                    fix[nfix, 1] = base + k
                    fix[nfix, 2] = j
                    fix[nfix, 3] = tj
                nfix += 1
            vals[row, base + k] = v
            k += 1
            j = tj
        if k < nd:
            err[0] = E_TOO_FEW
            err[1] = line
            err[2] = i
            err[3] = te
            err[4] = b
            err[5] = k
            return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix
        if required[b]:
            got += 1
        i = _next_line(buf, j, n)
        line += 1
    if T > 0 and got < n_req:
        err[0] = E_MISSING_BONES
        err[1] = fline[T - 1]
        err[4] = T - 1
        err[5] = 1
    return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix


@njit(cache=True)
def scan_rows(buf, pos, line, ncols, max_rows, fix_cap):
    """Parse whitespace-separated numeric rows of exactly ``ncols`` values from byte ``pos``.

    Blank lines are skipped. Returns ``(values (T, ncols), row_lines (T,), err (7,), fix,
    nfix)`` (as for :func:`scan_amc`); at most
    ``max_rows`` rows (``E_TOO_MANY_ROWS`` past that, with the line of the first extra row).
    """
    n = buf.size
    cls = _CLS
    pow10 = _POW10
    cap = min(max_rows, count_lines(buf, pos))
    vals = np.zeros((cap, ncols))
    rline = np.zeros(cap, np.int64)
    err = np.zeros(7, np.int64)
    fix = np.zeros((fix_cap, 4), np.int64)
    nfix = 0
    T = 0
    i = pos
    while i < n:
        i = _skip_blanks(buf, i, n, cls)
        if i >= n:
            break
        if buf[i] == 10:
            i += 1
            line += 1
            continue
        if T >= max_rows:
            err[0] = E_TOO_MANY_ROWS
            err[1] = line
            err[4] = max_rows
            return vals[:T], rline[:T], err, fix[:min(nfix, fix_cap)], nfix
        k = 0
        j = i
        while True:
            j = _skip_blanks(buf, j, n, cls)
            if j >= n or buf[j] == 10:
                break
            tj = _token_end(buf, j, n, cls)
            if k < ncols:
                ok, v = parse_number(buf, j, tj, pow10)
                if ok == 0:
                    err[0] = E_BAD_NUMBER
                    err[1] = line
                    err[2] = j
                    err[3] = tj
                    return vals[:T], rline[:T], err, fix[:min(nfix, fix_cap)], nfix
                if ok == 2:
                    if nfix < fix_cap:
                        fix[nfix, 0] = T
                        fix[nfix, 1] = k
                        fix[nfix, 2] = j
                        fix[nfix, 3] = tj
                    nfix += 1
                vals[T, k] = v
            k += 1
            j = tj
        if k != ncols:
            err[0] = E_ROW_COUNT
            err[1] = line
            err[4] = k
            err[5] = ncols
            return vals[:T], rline[:T], err, fix[:min(nfix, fix_cap)], nfix
        rline[T] = line
        T += 1
        i = j + 1
        line += 1
    return vals[:T], rline[:T], err, fix[:min(nfix, fix_cap)], nfix
