"""The process that runs ezc3d for :mod:`.c3d` (started by path, so it imports numpy and ezc3d only).

ezc3d is compiled code: on some damaged files (a parameter whose type or dimensions were
overwritten) it dies of a segmentation fault or loops without end, which in the reading process
would end the ingestion (or the notebook's kernel) without a word. Here it can only end this
process, which the reader sees and reports as one line about the file.

Protocol: pickled objects over stdin/stdout. The first message out is ``("ready",)``; then for
each path received, ``("ok", contents)`` or ``("error", type name, message)``. EOF on stdin ends
the process. Anything ezc3d prints goes to stderr, never into the protocol's stream.
"""
import os
import pickle
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]   # this folder (started by path) holds modules whose names must not shadow others

import numpy as np  # noqa: E402


def contents(path: str) -> dict:
    """What :func:`.c3d.read_c3d` needs of a file: points (4, N, T), residuals (1, N, T) or None,
    and the values of the POINT parameters (a few small arrays and lists of names)."""
    import ezc3d
    c = ezc3d.c3d(path)
    point = c["parameters"].get("POINT", {})
    params = {k: v["value"] for k, v in point.items() if isinstance(v, dict) and "value" in v}
    res = c["data"].get("meta_points", {}).get("residuals")
    return {"points": np.asarray(c["data"]["points"], dtype=np.float64),
            "residuals": None if res is None else np.asarray(res), "point": params}


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")     # the protocol's stream; fd 1 now goes to stderr, so that
    os.dup2(2, 1)                        # a print of the compiled library cannot corrupt it
    inp = sys.stdin.buffer
    pickle.dump(("ready",), out)
    out.flush()
    while True:
        try:
            path = pickle.load(inp)
        except EOFError:
            return
        try:
            reply = ("ok", contents(path))
        except Exception as exc:  # noqa: BLE001 - every ezc3d error is reported on the file
            reply = ("error", type(exc).__name__, str(exc))
        pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


if __name__ == "__main__":
    main()
