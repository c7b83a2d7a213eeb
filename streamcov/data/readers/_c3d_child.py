"""The process that runs ezc3d for :mod:`.c3d` (started by path, so it imports numpy and ezc3d only).

ezc3d is compiled code: on some damaged files (a parameter whose type or dimensions were
overwritten) it dies of a segmentation fault or loops without end, which in the reading process
would end the ingestion (or the notebook's kernel) without a word. Here it can only end this
process, which the reader sees and reports as one line about the file.

Protocol: pickled objects in on stdin, out on the pipe whose descriptor is the first argument
(POSIX; anything Python prints as it starts goes to stdout, which the reader logs), or else on
stdout. The first message out is ``("ready",)``, sent once ezc3d is imported (a process that
cannot import it says so on stderr and exits: every file would fail otherwise, and be skipped as
damaged). Then for each ``(absolute path, seconds)``
received, ``("ok", contents)`` or ``("error", type name, message)``. EOF on stdin ends the
process; so does SIGALRM a few seconds after a file's time limit, where ezc3d loops (the reader
has stopped waiting by then, or has itself died without closing the pipe). Nothing printed here
reaches the protocol's stream.
"""
import math
import os
import pickle
import signal
import sys

#: seconds granted after a file's time limit before SIGALRM ends a process stuck in ezc3d
ALARM_GRACE = 5


def contents(path: str) -> dict:
    """What :func:`.c3d.read_c3d` needs of a file: points (4, N, T), residuals (1, N, T) or None,
    and the values of the POINT parameters (a few small arrays and lists of names)."""
    import ezc3d
    import numpy as np

    c = ezc3d.c3d(path)
    point = c["parameters"].get("POINT", {})
    params = {k: v["value"] for k, v in point.items() if isinstance(v, dict) and "value" in v}
    res = c["data"].get("meta_points", {}).get("residuals")
    return {"points": np.asarray(c["data"]["points"], dtype=np.float64),
            "residuals": None if res is None else np.asarray(res), "point": params}


def main() -> None:
    if len(sys.argv) > 1:            # the protocol's own pipe (POSIX), passed by the reader; fd 1 is its log
        out = os.fdopen(int(sys.argv[1]), "wb")
    else:                            # stdout is the protocol's stream: fd 1 now goes to stderr, so that
        out = os.fdopen(os.dup(1), "wb")   # a print of the compiled library cannot corrupt it
        os.dup2(2, 1)
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]   # this folder (started by path) holds modules whose names must not shadow others
    import ezc3d  # noqa: F401 - before "ready": a process without it must not answer for files
    import numpy  # noqa: F401 - imported once, before the first file's time limit runs

    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C is the reader's to handle
    inp = sys.stdin.buffer
    pickle.dump(("ready",), out)
    out.flush()
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
        pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


if __name__ == "__main__":
    main()
