"""Preloaded by every worker of a LocalCluster that streamcov starts (``distributed.worker.preload``,
:data:`streamcov.stream.runtime.WORKER_PRELOAD`), a worker the nanny restarts included.

A terminal's Ctrl-C reaches the whole process group: every worker printed a KeyboardInterrupt traceback under
the command's one line. The workers ignore SIGINT; the command stops them itself (it closes the cluster on its
way out, as on any interruption).
"""
import signal


def dask_setup(worker):   # run by Dask in the worker's main thread, before the worker takes tasks
    signal.signal(signal.SIGINT, signal.SIG_IGN)
