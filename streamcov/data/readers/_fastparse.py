"""Compiled (numba) scanners for the text motion formats: one pass over the file's bytes.

The AMC and BVH motion sections are millions of small numbers; splitting lines and calling
``float`` per value in Python costs about 0.2 us per value. These scanners walk the raw bytes
once, parse every plain decimal number where it stands (no separate tokenising pass), check
the structure, and report the first problem as an error code with its line and byte span,
which the readers turn into a :class:`FormatError` message. They never return partial data as
if it were whole: on an error the arrays they return must be ignored.

Numbers: ``[+-]digits[.digits][(e|E)[+-]digits]`` (``.5`` and ``5.`` too). Anything else
(``nan``, ``inf``, ``1_000``, ``0x10``, ``1,5``) is an error. The value is computed as
``mantissa * 10**exponent`` with the mantissa exact and one rounding for
exponents within +-22 and mantissas up to 2**53 (the classic exact fast path); the few other
tokens are reported back and re-parsed with Python's ``float``, so every value is the
correctly rounded double, bit for bit what ``float(token)`` gives.

Use :func:`scan` (it sizes the re-parse list and re-parses) rather than the kernels directly.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..._config import CACHE, stamp_kernels_by_their_sources

stamp_kernels_by_their_sources()   # before this module's first njit

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
# (10: unused; a number out of the double range is raised by the re-parse in scan())
E_KEYWORD = 11              # a ':' keyword line inside the frame data (span = token)
E_BAD_FRAME_NUMBER = 12     # frame number line is not an integer (span = token)
E_ROW_COUNT = 13            # BVH row with a wrong number of values (aux0 = got, aux1 = expected)
E_TOO_MANY_ROWS = 14        # more rows than declared (aux0 = declared)

#: the readers' message for E_BAD_NUMBER (field: tok)
BAD_NUMBER = ("value {tok!r} is not a number (expected a plain decimal such as -12.5 or "
              "3.9e-15)")

_POW10 = np.array([10.0 ** k for k in range(23)])


def scan(path, data: bytes, kernel, *args):
    """Run a scanner over a file's bytes and make every value exact.

    Parameters
    ----------
    path : str or Path
        The file, for messages.
    data : bytes or uint8 array
        Its content.
    kernel : callable
        :func:`scan_amc` or :func:`scan_rows`.
    *args
        The kernel's arguments after the buffer, without ``fix_cap``.

    Returns
    -------
    tuple
        The kernel's arrays (values first), then ``err``. When ``err[0]`` is ``OK`` the values
        the kernel could only approximate have been re-parsed with Python's ``float``.

    Raises
    ------
    FormatError
        A value out of the double range, with its line.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    cap = 256
    while True:
        *arrays, err, fix, nfix = kernel(buf, *args, cap)
        # the re-parse list is never grown inside the loop (it would slow every value down):
        # when it overflowed, scan again with room for all of them
        if nfix <= cap or err[0] != OK:
            break
        cap = nfix
    if err[0] == OK:
        _reparse(path, data, arrays[0], fix)
    return (*arrays, err)


def _reparse(path, data: bytes, vals: np.ndarray, fix: np.ndarray) -> None:
    """Re-parse with Python's ``float`` the values the scanner could only approximate
    (``fix`` rows: row, column, start, end); raises FormatError for one out of range."""
    from .base import FormatError
    for row, col, s, e in fix.tolist():
        tok = bytes(data[s:e])                  # data: bytes or a uint8 array
        v = float(tok)
        if not np.isfinite(v):
            raise FormatError(path, f"value {tok.decode('latin-1')!r} is out of range "
                              "(not finite)", line=bytes(data[:s]).count(b"\n") + 1)
        vals[row, col] = v


# byte classes: 0 token byte, 1 blank (space, tab, CR, VT, FF), 2 newline, 3 '#' (comment)
_CLS = np.zeros(256, dtype=np.uint8)
_CLS[[32, 9, 13, 11, 12]] = 1
_CLS[10] = 2
_CLS_AMC = _CLS.copy()
_CLS_AMC[35] = 3


@njit(cache=CACHE, inline="always")
def _fail(err, code, line, s, e, a0, a1):
    err[0] = code
    err[1] = line
    err[2] = s
    err[3] = e
    err[4] = a0
    err[5] = a1


@njit(cache=CACHE, inline="always")
def _run_end(buf, i, n, cls, k):
    """Index past the bytes of class ``k`` from ``i``: ``k = 1`` skips blanks, ``k = 0``
    finds where a token ends."""
    while i < n and cls[buf[i]] == k:
        i += 1
    return i


@njit(cache=CACHE, inline="always")
def _next_line(buf, i, n):
    """Index just past the next newline at or after ``i`` (or ``n``)."""
    while i < n and buf[i] != 10:
        i += 1
    return i + 1


@njit(cache=CACHE, inline="always")
def _exponent(buf, i, n):
    """Optional ``(e|E)[+-]digits`` from ``i``: (ok, exponent, next index)."""
    if i < n and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        ed = 0
        ev = 0
        while i < n and 48 <= buf[i] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[i] - 48)
            ed += 1
            i += 1
        if ed == 0:
            return False, 0, i
        return True, (-ev if eneg else ev), i
    return True, 0, i


@njit(cache=CACHE, inline="always")
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


@njit(cache=CACHE)
def _number_general(buf, s, n, cls, pow10):
    """:func:`_number` for every token: an exponent, more than 18 digits, or not a number.

    Kept out of line: the common short decimals then run in a loop small enough for the
    compiler to keep in registers (inlined, this code slows every number down by half).
    With more than 18 significant digits the first 19 are kept and the others only move the
    decimal exponent; the value is then approximate.
    """
    e = _run_end(buf, s, n, cls, 0)
    i = s
    neg = False
    if buf[i] == 43 or buf[i] == 45:
        neg = buf[i] == 45
        i += 1
    mant = np.uint64(0)
    nd = 0                                   # significant digits kept (at most 19)
    ndig = 0                                 # digits seen
    exp10 = 0
    approx = False
    dot = False
    while i < e:
        c = buf[i]
        if c == 46 and not dot:
            dot = True
        elif 48 <= c <= 57:
            ndig += 1
            if nd < 19:
                if mant != 0 or c != 48:
                    nd += 1
                mant = mant * np.uint64(10) + np.uint64(c - 48)
                if dot:
                    exp10 -= 1
            else:
                approx = True
                if not dot:
                    exp10 += 1
        else:
            break
        i += 1
    if ndig == 0:
        return 0, 0.0, e
    ok, ev, i = _exponent(buf, i, e)
    if not ok or i != e:
        return 0, 0.0, e
    exp10 += ev
    exact = not approx and mant <= np.uint64(9007199254740992) and -22 <= exp10 <= 22
    return 1 if exact else 2, _scale(float(mant), exp10, neg, pow10), e


@njit(cache=CACHE, inline="always")
def _number(buf, s, n, cls, pow10):
    """Parse the token that starts at ``buf[s]`` (a token byte) where it stands.

    Returns ``(status, value, end)``: ``end`` is where the token ends (the next byte whose
    class is not 0, or ``n``); status 0 (not a plain number), 1 (the correctly rounded double:
    mantissa <= 2**53 and |exponent| <= 22, one rounding) or 2 (approximate, within a few ulp:
    the caller re-parses the token).

    The integer and fraction digits are two copies of one loop on purpose: a helper for
    them, inlined or not, doubled the time per number (numba keeps its returned tuple out of
    registers).
    """
    c = buf[s]
    neg = c == 45
    i = s + np.int64((c == 45) | (c == 43))  # no branch: signs come at random
    mant = 0
    ndig = 0
    while i < n:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        mant = mant * 10 + d
        ndig += 1
        i += 1
    frac = 0
    if i < n and buf[i] == 46:
        i += 1
        while i < n:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            mant = mant * 10 + d
            frac += 1
            i += 1
    ndig += frac
    if ndig == 0 or ndig > 18 or (i < n and cls[buf[i]] == 0):
        # an exponent, a long mantissa (the int64 above may have wrapped) or not a number
        return _number_general(buf, s, n, cls, pow10)
    v = float(mant)
    if frac:
        v = v / pow10[frac]                  # frac <= 18: one correctly rounded division
    return 1 if mant <= 9007199254740992 else 2, (-v if neg else v), i


@njit(cache=CACHE)
def _note_fix(fix, nfix, row, col, s, e):
    """List an approximate value for the re-parse (while there is room); the new count.

    Out of line, and called from the scanning loops directly rather than through a helper
    returning a tuple: either way of inlining it doubled the time per number."""
    if nfix < fix.shape[0]:
        fix[nfix, 0] = row
        fix[nfix, 1] = col
        fix[nfix, 2] = s
        fix[nfix, 3] = e
    return nfix + 1


@njit(cache=CACHE)
def _name_matches(buf, s, e, names, lens, b):
    n = e - s
    if lens[b] != n:
        return False
    for q in range(n):
        if buf[s + q] != names[b, q]:
            return False
    return True


@njit(cache=CACHE)
def scan_amc(buf, pos, line, names, lens, ndof, col0, ncols, required, fix_cap):
    """Parse AMC frames from byte ``pos`` (1-based line ``line``) to the end.

    Returns ``(values (T, ncols), frame_numbers (T,), frame_lines (T,), err (7,), fix, nfix)``
    with ``err = [code, line, span_start, span_end, aux0, aux1, 0]``, ``fix`` the
    (row, column, start, end) of the values to re-parse exactly (see :func:`_number`),
    at most ``fix_cap`` of them, and ``nfix`` their number.
    """
    n_req = 0
    for b in range(lens.size):
        if required[b]:
            n_req += 1
    # a frame takes at least 2 + 4 n_req bytes ("1\n", then "b 0\n" per required bone) but
    # the last one's final newline: an upper bound on the frames, without a counting pass
    # (pages of the array that are never written cost nothing)
    cap = (buf.size - pos) // (2 + 4 * n_req) + 1
    vals = np.zeros((cap, ncols))            # zeros: a bone without dof leaves its columns
    fnum = np.zeros(cap, np.int64)
    fline = np.zeros(cap, np.int64)
    err = np.zeros(7, np.int64)
    fix = np.zeros((fix_cap, 4), np.int64)
    T, nfix = _amc_frames(buf, pos, line, names, lens, ndof, col0, required, n_req, vals, fnum,
                          fline, err, fix)
    return vals[:T], fnum[:T], fline[:T], err, fix[:min(nfix, fix_cap)], nfix


@njit(cache=CACHE)
def _amc_frames(buf, pos, line, names, lens, ndof, col0, required, n_req, vals, fnum, fline,
                err, fix):
    """The loop of :func:`scan_amc`: fills the arrays, returns (frames, nfix)."""
    n = buf.size
    nb = lens.size
    cls = _CLS_AMC
    pow10 = _POW10
    cap = fnum.size
    nfix = 0
    seen = np.full(nb, -1, np.int64)       # frame index in which the bone was last seen
    seen_line = np.zeros(nb, np.int64)
    nxt = np.full(nb + 1, -1, np.int64)    # bone that followed bone b - 1 in the last frame
    T = 0
    got = 0
    last = -1
    i = pos
    while i < n:
        i = _run_end(buf, i, n, cls, 1)
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
        te = _run_end(buf, i, n, cls, 0)
        if 48 <= c <= 57:                    # a frame number line
            num = 0
            for q in range(i, te):
                d = np.int64(buf[q]) - 48
                if d < 0 or d > 9:
                    _fail(err, E_BAD_FRAME_NUMBER, line, i, te, 0, 0)
                    return T, nfix
                if num < 1000000000000000:
                    num = num * 10 + d
            j = _run_end(buf, te, n, cls, 1)
            if j < n and cls[buf[j]] == 0:
                _fail(err, E_FRAME_LINE_EXTRA, line, j, _run_end(buf, j, n, cls, 0), 0, 0)
                return T, nfix
            # T == cap cannot happen (see cap in scan_amc) but must never write past it
            if T > 0 and (got < n_req or T == cap):
                _fail(err, E_MISSING_BONES, fline[T - 1], 0, 0, T - 1, 0)
                return T, nfix
            if T > 0 and num != fnum[T - 1] + 1:
                _fail(err, E_FRAME_SEQ, line, i, te, num, fnum[T - 1] + 1)
                return T, nfix
            fnum[T] = num
            fline[T] = line
            T += 1
            got = 0
            last = -1
            i = _next_line(buf, j, n)
            line += 1
            continue
        if c == 58:                          # ':'
            _fail(err, E_KEYWORD, line, i, te, 0, 0)
            return T, nfix
        if T == 0:
            _fail(err, E_BONE_BEFORE_FRAME, line, i, te, 0, 0)
            return T, nfix
        # bones usually come in the same order every frame: try the one that followed last time
        b = nxt[last + 1]
        if b < 0 or not _name_matches(buf, i, te, names, lens, b):
            b = -1
            for q in range(nb):
                if _name_matches(buf, i, te, names, lens, q):
                    b = q
                    break
        if b < 0:
            _fail(err, E_UNKNOWN_BONE, line, i, te, 0, 0)
            return T, nfix
        if seen[b] == T - 1:
            _fail(err, E_DUPLICATE_BONE, line, i, te, b, seen_line[b])
            return T, nfix
        seen[b] = T - 1
        seen_line[b] = line
        nxt[last + 1] = b
        last = b
        nd = ndof[b]
        base = col0[b]
        k = 0
        j = te
        while True:
            j = _run_end(buf, j, n, cls, 1)
            if j >= n or cls[buf[j]] != 0:
                break
            if k >= nd:                      # count the rest for the message
                cnt = k
                while j < n and cls[buf[j]] == 0:
                    cnt += 1
                    j = _run_end(buf, _run_end(buf, j, n, cls, 0), n, cls, 1)
                _fail(err, E_TOO_MANY, line, i, te, b, cnt)
                return T, nfix
            status, v, tj = _number(buf, j, n, cls, pow10)
            if status != 1:
                if status == 0:
                    _fail(err, E_BAD_NUMBER, line, j, tj, 0, 0)
                    return T, nfix
                nfix = _note_fix(fix, nfix, T - 1, base + k, j, tj)
            vals[T - 1, base + k] = v
            k += 1
            j = tj
        if k < nd:
            _fail(err, E_TOO_FEW, line, i, te, b, k)
            return T, nfix
        if required[b]:
            got += 1
        i = _next_line(buf, j, n)
        line += 1
    if T > 0 and got < n_req:
        _fail(err, E_MISSING_BONES, fline[T - 1], 0, 0, T - 1, 1)
    return T, nfix


@njit(cache=CACHE)
def scan_rows(buf, pos, line, ncols, max_rows, fix_cap):
    """Parse whitespace-separated numeric rows of exactly ``ncols`` values from byte ``pos``.

    Blank lines are skipped. Returns ``(values (T, ncols), row_lines (T,), err (7,), fix,
    nfix)`` (as for :func:`scan_amc`); at most
    ``max_rows`` rows (``E_TOO_MANY_ROWS`` past that, with the line of the first extra row).
    """
    # a row takes at least 2 ncols bytes ("0 0 ... 0\n") but the last one's final newline
    cap = min(max_rows, (buf.size - pos) // (2 * ncols) + 1)
    vals = np.empty((cap, ncols))            # every returned row is written in full
    rline = np.zeros(cap, np.int64)
    err = np.zeros(7, np.int64)
    fix = np.zeros((fix_cap, 4), np.int64)
    T, nfix = _rows(buf, pos, line, ncols, max_rows, vals, rline, err, fix)
    return vals[:T], rline[:T], err, fix[:min(nfix, fix_cap)], nfix


@njit(cache=CACHE)
def _rows(buf, pos, line, ncols, max_rows, vals, rline, err, fix):
    """The loop of :func:`scan_rows`: fills the arrays, returns (rows, nfix).

    The plain decimals of motion rows (``-12.3456``) are parsed in this loop itself rather
    than by :func:`_number`: written out here the loop ran about 1.7 times as fast (4.4 ms
    against 2.6 ms for a 3,000-frame, 96-column file); the same code as an inlined helper,
    returning a tuple or only the end index, ran no faster than :func:`_number`. Every other
    token still goes through :func:`_number`.
    """
    n = buf.size
    cls = _CLS
    pow10 = _POW10
    nfix = 0
    T = 0
    i = pos
    while i < n:
        i = _run_end(buf, i, n, cls, 1)
        if i >= n:
            break
        if buf[i] == 10:
            i += 1
            line += 1
            continue
        if T >= vals.shape[0]:               # max_rows (the byte bound cannot be reached)
            _fail(err, E_TOO_MANY_ROWS, line, 0, 0, max_rows, 0)
            return T, nfix
        k = 0
        j = i
        while True:
            j = _run_end(buf, j, n, cls, 1)
            if j >= n or buf[j] == 10:
                break
            if k < ncols:
                # fast path, written out here on purpose (see the docstring):
                # [-]digits[.digits] with at most 15 digits, then a blank, newline or the end
                neg = buf[j] == 45
                q = j + np.int64(neg)
                mant = np.uint64(0)
                while q < n:
                    d = np.uint64(buf[q]) - np.uint64(48)   # wraps: one test for '0'..'9'
                    if d > np.uint64(9):
                        break
                    mant = mant * np.uint64(10) + d
                    q += 1
                nint = q - j - np.int64(neg)
                frac = 0
                if q < n and buf[q] == 46:
                    q += 1
                    f0 = q
                    while q < n:
                        d = np.uint64(buf[q]) - np.uint64(48)
                        if d > np.uint64(9):
                            break
                        mant = mant * np.uint64(10) + d
                        q += 1
                    frac = q - f0
                if nint + frac == 0 or nint + frac > 15 or (q < n and cls[buf[q]] == 0):
                    # a sign '+', an exponent, a long mantissa or not a number
                    status, v, tj = _number(buf, j, n, cls, pow10)
                    if status != 1:
                        if status == 0:
                            _fail(err, E_BAD_NUMBER, line, j, tj, 0, 0)
                            return T, nfix
                        nfix = _note_fix(fix, nfix, T, k, j, tj)
                else:
                    # mant < 10**15 < 2**53 and 10**frac are exact doubles: one correctly
                    # rounded division gives the double that float(token) gives
                    v = float(mant)
                    if frac:
                        v = v / pow10[frac]
                    if neg:
                        v = -v
                    tj = q
                vals[T, k] = v
            else:                            # only counted, for the message
                tj = _run_end(buf, j, n, cls, 0)
            k += 1
            j = tj
        if k != ncols:
            _fail(err, E_ROW_COUNT, line, 0, 0, k, ncols)
            return T, nfix
        rline[T] = line
        T += 1
        i = j + 1
        line += 1
    return T, nfix
