"""Where a Dask graph runs: threads on this machine, or a dask.distributed cluster."""
from __future__ import annotations

import contextlib

from .._config import thread_plan


@contextlib.contextmanager
def dask_runtime(scheduler: str = "threads", workers: int | None = None):
    """Yield ``(compute, info)``: a function computing delayed objects, and a description.

    ``scheduler``: ``threads`` (embedded default), ``synchronous`` (debugging),
    ``local-cluster`` (a LocalCluster of ``workers`` single-threaded worker
    processes) or a scheduler address ``tcp://host:port``.
    """
    import dask
    from threadpoolctl import threadpool_limits

    if scheduler in ("threads", "synchronous"):
        plan = thread_plan(workers)
        n = plan.dask_threads if scheduler == "threads" else 1
        info = {"scheduler": scheduler, **plan.as_dict(), "dask_threads": n}

        def compute(*objs):
            with threadpool_limits(limits=plan.blas_threads):
                return dask.compute(*objs, scheduler=scheduler, num_workers=n)

        yield compute, info, plan.numba_threads
        return

    from distributed import Client, LocalCluster

    cluster = None
    if scheduler == "local-cluster":
        n = int(workers or thread_plan().cores)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        client = Client(cluster)
    elif scheduler.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        client = Client(scheduler)
    else:
        raise ValueError(f"unknown scheduler {scheduler!r}: use threads, synchronous, "
                         f"local-cluster or a scheduler address tcp://HOST:PORT")
    try:
        nthreads = client.nthreads()
        info = {"scheduler": scheduler if cluster is None else "local-cluster",
                "workers": len(nthreads), "threads_per_worker": sorted(set(nthreads.values()))}

        def compute(*objs):
            return client.compute(list(objs), sync=True)

        # One numba thread per Dask thread on workers: workers own their cores.
        yield compute, info, 1
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
