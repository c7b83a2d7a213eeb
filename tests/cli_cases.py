"""Table-driven command-line cases: a command a user could type and what it must give.

Shared by tests/test_bad_input.py and tests/test_mocap_bad_input.py. A case runs ``streamcov``
in-process and asserts either exit code 2 with exactly one ``streamcov <cmd>: error: ...``
line matching its pattern (and never a traceback), or another documented exit code and
output.
"""
from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from streamcov.cli import main


def cli(*argv) -> tuple[int, str, str]:
    """``streamcov ARGV`` in-process: (exit code, stderr, stdout)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:          # not expected: main returns its exit code
            rc = exc.code
    return rc, err.getvalue(), out.getvalue()


def assert_one_line_error(rc, err, pattern):
    assert "Traceback" not in err, err
    assert rc == 2, f"exit {rc}, stderr:\n{err}"
    lines = [ln for ln in err.splitlines() if re.match(r"streamcov [\w -]+: error: ", ln)]
    assert len(lines) == 1, err
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"


@dataclass
class Case:
    """``argv(env)`` builds the input and returns the command; ``pattern`` must match the error
    line (``rc`` 2) or the output; ``check(env, stderr, stdout)`` asserts more."""

    id: str
    argv: Callable[[Any], list]
    pattern: str
    rc: int = 2
    check: Callable[[Any, str, str], Any] | None = field(default=None)


def run_case(case: Case, env):
    argv = case.argv(env)
    rc, err, out = cli(*argv)
    if case.rc == 2:
        assert_one_line_error(rc, err, case.pattern)
    else:
        assert "Traceback" not in err, err
        assert rc == case.rc, f"exit {rc}, stderr:\n{err}"
        assert re.search(case.pattern, err + out), f"{case.pattern!r} not in:\n{err}{out}"
    if case.check is not None:
        # a check asserts, or returns a truth value (a lambda's comparison), which must then hold
        assert case.check(env, err, out) is not False, f"{case.id}: its check failed on:\n{err}{out}"
