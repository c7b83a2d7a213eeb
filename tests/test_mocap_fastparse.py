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
