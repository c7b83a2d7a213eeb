"""The process that runs ezc3d for :mod:`.c3d` (started by path, so it imports numpy and ezc3d only).

ezc3d is compiled code: on some damaged files (a parameter whose type or dimensions were
overwritten) it dies of a segmentation fault or loops without end, which in the reading process
would end the ingestion (or the notebook's kernel) without a word. Here it can only end this
process, which the reader sees and reports as one line about the file.

Protocol: pickled objects over stdin/stdout. The first message out is ``("ready",)``, sent once
ezc3d is imported (a process that cannot import it says so on stderr and exits: every file
would fail otherwise, and be skipped as damaged). Then for each ``(absolute path, seconds)``
received, ``("ok", contents)`` or ``("error", type name, message)``. EOF on stdin ends the
process; so does SIGALRM a few seconds after a file's time limit, where ezc3d loops (the reader
has stopped waiting by then, or has itself died without closing the pipe). Anything printed here
goes to stderr, never into the protocol's stream.
"""
import os
import sys

_OUT = os.fdopen(os.dup(1), "wb")   # the protocol's stream; fd 1 now goes to stderr, so that
os.dup2(2, 1)                       # a print (of the compiled library, of a .pth file) cannot corrupt it

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]   # this folder (started by path) holds modules whose names must not shadow others

import math  # noqa: E402
import pickle  # noqa: E402
import signal  # noqa: E402

import ezc3d  # noqa: E402,F401 - before "ready": a process without it must not answer for files
import numpy as np  # noqa: E402

#: seconds granted after a file's time limit before SIGALRM ends a process stuck in ezc3d
ALARM_GRACE = 5


def contents(path: str) -> dict:
    """What :func:`.c3d.read_c3d` needs of a file: points (4, N, T), residuals (1, N, T) or None,
    and the values of the POINT parameters (a few small arrays and lists of names)."""
    c = ezc3d.c3d(path)
    point = c["parameters"].get("POINT", {})
    params = {k: v["value"] for k, v in point.items() if isinstance(v, dict) and "value" in v}
    res = c["data"].get("meta_points", {}).get("residuals")
    return {"points": np.asarray(c["data"]["points"], dtype=np.float64),
            "residuals": None if res is None else np.asarray(res), "point": params}


def main() -> None:
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C is the reader's to handle
    inp = sys.stdin.buffer
    pickle.dump(("ready",), _OUT)
    _OUT.flush()
    while True:
        try:
            path, seconds = pickle.load(inp)
        except EOFError:
            return
        if hasattr(signal, "alarm"):
            signal.alarm(math.ceil(seconds) + ALARM_GRACE)   # default action: the process ends, in C++ too
        try:
            reply = ("ok", contents(path))
        except Exception as exc:  # noqa: BLE001 - every ezc3d error is reported on the file
            reply = ("error", type(exc).__name__, str(exc))
        if hasattr(signal, "alarm"):
            signal.alarm(0)
        pickle.dump(reply, _OUT, protocol=pickle.HIGHEST_PROTOCOL)
        _OUT.flush()


if __name__ == "__main__":
    main()
