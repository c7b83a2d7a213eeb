"""The compiled number scanner gives exactly what Python's float() gives, token for token."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamcov.data.readers import _fastparse as fp
from streamcov.data.readers.base import FormatError


def scan(text: str, ncols: int):
    vals, lines, err = fp.scan("x", text.encode(), fp.scan_rows, 0, 1, ncols, 10**6)
    return vals, err


FORMATS = ["{!r}", "{:.3f}", "{:.6e}", "{:.17g}", "{:.1f}", "{:e}", "{:.20f}", "{:.3E}"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=8,
                max_size=8), st.sampled_from(FORMATS))
def test_numbers_match_python_float_bit_for_bit(values, fmt):
    tokens = [fmt.format(v) for v in values]
    assume(all(np.isfinite(float(t)) for t in tokens))     # '{:.3E}' can round up past max
    vals, err = scan(" ".join(tokens[:4]) + "\n" + "\t".join(tokens[4:]) + "\r\n", 4)
    assert err[0] == fp.OK
    want = np.array([float(t) for t in tokens]).reshape(2, 4)
    assert np.array_equal(vals, want), (tokens, vals - want)


def test_awkward_but_valid_tokens():
    tokens = ["3.85186e-034", "-7.62852e-016", ".5", "5.", "+12", "-0", "0.12345678901234567",
              "123456789012345678901234", "1e22", "1e23", "4.9e-324", "1.7976931348623157e308",
              "00012.5000", "1E+2", "0.000000000000000000001234", "0000000000000000000012.5",
              "-1234567890123456789.5e-3", "9007199254740993", "-0.0e5"]
    vals, err = scan(" ".join(tokens) + "\n", len(tokens))
    assert err[0] == fp.OK
    assert np.array_equal(vals[0], [float(t) for t in tokens])
    assert np.signbit(vals[0, 5])


def test_many_tokens_to_reparse_take_a_second_pass():
    tokens = [f"{k}.5e-40" for k in range(1, 600)]
    vals, err = scan("\n".join(tokens) + "\n", 1)
    assert err[0] == fp.OK and vals.shape == (599, 1)
    assert np.array_equal(vals[:, 0], [float(t) for t in tokens])


def test_rejected_tokens():
    for bad in ["nan", "inf", "1_000", "0x10", "1,5", "1e", "--1", "1.2.3", "e5", ".", "+", "1e+"]:
        vals, err = scan(f"1 {bad} 2\n", 3)
        assert err[0] == fp.E_BAD_NUMBER, bad
        assert err[1] == 1
    with pytest.raises(FormatError, match=r"^x, line 2: value '1e999' is out of range"):
        scan("0 0 0\n1 1e999 2\n", 3)


# --- motion rows: the scanner's written-out fast path against the obvious parser ------------

def plain_rows(text: str) -> np.ndarray:
    """The obvious reference: every non-blank line split, ``float()`` on every token."""
    rows = [[float(t) for t in line.split()] for line in text.split("\n") if line.strip()]
    return np.array(rows, dtype=np.float64)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    # array_equal takes -0.0 == 0.0; the scanner must give float()'s sign as well
    return a.shape == b.shape and a.tobytes() == b.tobytes()


# the ways exporters write motion values: fixed decimals (BVH files of most tools), repr,
# %g, integers, and fixed formats of 14 to 17 digits (both sides of the fast path's 15)
ROW_FORMATS = ["{:.4f}", "{:.6f}", "{:.2f}", "{:.1f}", "{:.0f}", "{!r}", "{:g}", "{:.13f}",
               "{:.14f}", "{:.15f}", "{:.6e}"]
SEPARATORS = [" ", "  ", "\t", " \t"]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6), st.sampled_from(ROW_FORMATS),
       st.sampled_from(SEPARATORS), st.sampled_from(["\n", "\r\n"]), st.booleans(),
       st.data())
def test_motion_rows_match_plain_parser_bit_for_bit(ncols, nrows, fmt, sep, eol, blank_lines,
                                                    data):
    scale = data.draw(st.sampled_from([1.0, 60.0, 180.0, 1e3, 1e-3]))
    values = data.draw(st.lists(st.floats(-scale, scale, allow_nan=False, width=64),
                                min_size=ncols * nrows, max_size=ncols * nrows))
    lines = [sep.join(fmt.format(v) for v in values[r * ncols:(r + 1) * ncols])
             for r in range(nrows)]
    if blank_lines:
        lines = [ln for row in lines for ln in (row, sep)]     # blank (or blank-only) lines
    text = eol.join(lines) + data.draw(st.sampled_from(["", eol]))   # with or without final eol
    vals, err = scan(text, ncols)
    assert err[0] == fp.OK
    assert same_bits(vals, plain_rows(text)), text


def test_fast_path_edges_match_plain_parser():
    tokens = ["-0", "-0.0", "0.", ".0", "-.5", "5.", "000123.4500", "-007", "1", "-1",
              "12345678901234.5", "123456789012345", "-0.123456789012345",      # 15 digits
              "1234567890123456", "-0.1234567890123456", "9999999999999999",     # 16: general
              "99999999999999999999", "0.30000000000000004", "+5.5", "-5.5e1"]
    text = " ".join(tokens) + "\n" + "\t".join(reversed(tokens)) + "\n"
    vals, err = scan(text, len(tokens))
    assert err[0] == fp.OK
    assert same_bits(vals, plain_rows(text))
    assert np.signbit(vals[0, :2]).all()


@pytest.mark.parametrize("bad", ["-", "-.", "1.2.3", "5-", "12a", "1.5.", "--1", ".e1"])
def test_fast_path_rejects_what_float_rejects(bad):
    with pytest.raises(ValueError, match="could not convert"):
        float(bad)
    vals, err = scan(f"1 {bad} 2\n", 3)
    assert err[0] == fp.E_BAD_NUMBER, bad
    assert (err[1], err[3] - err[2]) == (1, len(bad))       # the line, and the whole token
