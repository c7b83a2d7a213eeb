"""The feature store's chunks: checksummed, not compressed; stores written with zstd still read."""
import re

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from streamcov.data import integrity
from streamcov.errors import StoreError
from streamcov.stream.featurestore import FeatureStore


def codecs(array) -> list[str]:
    return [type(c).__name__ for c in array.compressors]


def filled(path, rows: np.ndarray, block: int = 4) -> FeatureStore:
    n, dim = rows.shape
    bounds = np.arange(0, n + block, block).clip(max=n)
    fs = FeatureStore.open_or_create(path, n, dim, bounds, str(rows.dtype), {"test": 1})
    fs.group["X"][:] = rows
    return fs


def test_features_are_checksummed_and_not_compressed(tmp_path, rng):
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    assert codecs(fs.group["X"]) == ["Crc32cCodec"]
    np.testing.assert_array_equal(fs.read_blocks(0, fs.n_blocks), rows)
    np.testing.assert_array_equal(fs.read_block(1), rows[4:8])
    # the options of every other store keep zstd before the checksum
    assert [type(c).__name__ for c in integrity.array_options()["compressors"]] == ["ZstdCodec", "Crc32cCodec"]


def test_a_temporary_chunk_file_left_by_a_kill_is_removed_when_the_store_is_reopened(tmp_path, rng):
    """zarr writes a chunk as <chunk>.<uuid>.partial, then renames it: a block task killed between the two left
    the file (as large as the chunk) in the feature store for good. Reopening the store for the same features
    (a resumed run) removes it and keeps the chunks written."""
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    left = tmp_path / "f.zarr" / "X" / "c" / "2" / "0.0123456789abcdef0123456789abcdef.partial"
    left.write_bytes(b"half a chunk")
    again = FeatureStore.open_or_create(tmp_path / "f.zarr", 10, 7, fs.bounds, "float32", {"test": 1})
    assert not left.exists()
    np.testing.assert_array_equal(again.read_blocks(0, again.n_blocks), rows)


def test_a_flipped_byte_in_an_uncompressed_chunk_is_refused(tmp_path, rng):
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    chunk = tmp_path / "f.zarr" / "X" / "c" / "1" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[5] ^= 0x40                        # a value's bits, not the checksum's
    chunk.write_bytes(bytes(raw))
    np.testing.assert_array_equal(fs.read_block(0), rows[:4])     # other chunks still read
    with pytest.raises(StoreError, match=r"chunk 1/0"):
        fs.read_block(1)


def test_a_store_written_with_zstd_still_reads(tmp_path, rng):
    """Feature stores created before the change (zstd, then the checksum) are read as they are."""
    rows = rng.standard_normal((10, 7))
    path = tmp_path / "old.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.create_array("X", shape=rows.shape, chunks=(4, 7), dtype="float64", fill_value=0,
                   compressors=[ZstdCodec(), Crc32cCodec()], config={"write_empty_chunks": True})
    g.create_array("done", shape=(3,), chunks=(1,), dtype="uint8", fill_value=0)
    g["X"][:] = rows
    g.attrs.update({"bounds": [0, 4, 8, 10], "fingerprint": "{}"})
    fs = FeatureStore(path)
    assert codecs(fs.group["X"]) == ["ZstdCodec", "Crc32cCodec"]
    np.testing.assert_array_equal(fs.read_blocks(0, 3), rows)


class _Lost:
    """A runtime on a cluster, and its feature store, whose first ``fail`` computations lose a worker after
    writing the blocks ``written``; the tasks are the block indices."""

    def __init__(self, n_blocks, fail, written=(0, 2)):
        from types import SimpleNamespace

        self.flags = np.zeros(n_blocks, dtype=bool)
        self.calls, self.waited, self.fail, self.written = [], 0, fail, list(written)
        self.client = SimpleNamespace(wait_for_workers=self._wait)
        self.reshared = 0

    def _wait(self, n, timeout):
        self.waited += 1

    def reshare(self):                  # Runtime.reshare: what a lost worker held is scattered again
        self.reshared += 1

    def compute(self, *tasks):
        from distributed.client import FutureCancelledError

        self.calls.append(list(tasks))
        if len(self.calls) <= self.fail:
            self.flags[[t for t in tasks if t in self.written]] = True
            raise FutureCancelledError("write_block-1", "already forgotten")
        self.flags[list(tasks)] = True

    compute_once = compute              # Runtime.compute_once: the featurization does its own retries

    def done(self):                     # FeatureStore.done
        return self.flags.copy()


def test_featurize_window_submits_again_the_blocks_lost_with_a_worker():
    from streamcov.stream.featurize import _compute_window

    rt = _Lost(4, fail=1)
    _compute_window(rt, rt, [(i, i) for i in range(4)])
    # blocks 0 and 2 were written before the worker died: only 1 and 3 go again, after waiting for workers
    assert rt.calls == [[0, 1, 2, 3], [1, 3]] and rt.flags.all() and rt.waited == 1 and rt.reshared == 1
    # every block written before the error: nothing is submitted again
    rt = _Lost(4, fail=1, written=(0, 1, 2, 3))
    _compute_window(rt, rt, [(i, i) for i in range(4)])
    assert rt.calls == [[0, 1, 2, 3]] and rt.flags.all() and rt.waited == 1


def test_featurize_window_gives_up_after_max_recoveries():
    from concurrent.futures import CancelledError

    from streamcov.stream.featurize import _compute_window
    from streamcov.stream.runtime import MAX_RECOVERIES

    rt = _Lost(4, fail=99, written=())
    with pytest.raises(CancelledError, match="already forgotten"):
        _compute_window(rt, rt, [(i, i) for i in range(4)])
    assert len(rt.calls) == MAX_RECOVERIES + 1 and rt.waited == MAX_RECOVERIES
    # on threads (no cluster) nothing is lost with a worker: the error is raised at once
    rt = _Lost(4, fail=99, written=())
    rt.client = None
    with pytest.raises(CancelledError, match=r"^write_block-1 cancelled for reason: already forgotten\.$"):
        _compute_window(rt, rt, [(i, i) for i in range(4)])
    assert len(rt.calls) == 1


class _Flaky:
    """A cluster client whose work loses a worker on the first ``fail`` attempts."""

    def __init__(self, fail, error):
        self.fail, self.error, self.attempts, self.waited = fail, error, 0, []

    def wait_for_workers(self, n, timeout):
        self.waited.append((n, timeout))

    def work(self):
        self.attempts += 1
        if self.attempts <= self.fail:
            raise self.error
        return "result"


def _killed_worker():
    from types import SimpleNamespace

    from distributed import KilledWorker

    # as the scheduler raises it: the task, the last worker's state (its address) and the allowed failures
    return KilledWorker("load_partition-1", SimpleNamespace(address="tcp://127.0.0.1:1"), 3)


@pytest.mark.parametrize("make_error, message", [
    (lambda: __import__("concurrent.futures").futures.CancelledError("write_block-1 already forgotten"),
     r"^write_block-1 already forgotten$"),
    (_killed_worker, r"^Attempted to run task 'load_partition-1' on 4 different workers, .* The last worker that "
                     r"attempt to run the task was tcp://127\.0\.0\.1:1\."),
], ids=["cancelled", "killed-worker"])
def test_retry_lost_repeats_work_lost_with_a_worker(make_error, message):
    from streamcov.stream.runtime import MAX_RECOVERIES, RECOVERY_WAIT, retry_lost

    c = _Flaky(fail=2, error=make_error())
    assert retry_lost(c, c.work) == "result"
    assert c.attempts == 3 and c.waited == [(1, RECOVERY_WAIT)] * 2
    c = _Flaky(fail=99, error=make_error())
    with pytest.raises(type(c.error), match=message) as raised:
        retry_lost(c, c.work)
    assert raised.value is c.error   # the last error itself, not another one
    assert c.attempts == MAX_RECOVERIES + 1 and len(c.waited) == MAX_RECOVERIES


def test_retry_lost_raises_other_errors_and_errors_on_threads_at_once():
    from concurrent.futures import CancelledError

    from streamcov.stream.runtime import retry_lost

    c = _Flaky(fail=1, error=ValueError("a task's own error"))
    with pytest.raises(ValueError, match="a task's own error"):
        retry_lost(c, c.work)
    assert c.attempts == 1 and c.waited == []
    c = _Flaky(fail=1, error=CancelledError("lost"))
    with pytest.raises(CancelledError, match="lost"):
        retry_lost(None, c.work)          # threads: no client, no worker to lose
    assert c.attempts == 1


def test_shared_objects_are_kept_for_reshare_only_while_their_futures_live(monkeypatch):
    """A learner shares a model per pass: those of passes gone are neither held nor scattered again."""
    import gc

    from distributed import LocalCluster

    from streamcov.stream import runtime as R

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            R.dask_runtime(cluster.scheduler_address) as rt:
        first = np.arange(3)
        kept = rt.share(first)
        for i in range(5):
            rt.share((np.full(4, float(i)), np.zeros(2)))   # a pass's model, dropped at once
            gc.collect()
        assert [obj is first for _, _, obj in rt._shared] == [True, False]   # `kept` and the last pass's only
        scattered = []
        original = rt.client.scatter
        monkeypatch.setattr(rt.client, "scatter", lambda obj, **kw: scattered.append(obj) or original(obj, **kw))
        rt.reshare()
        assert len(scattered) == 1 and list(scattered[0].values())[0] is first   # under its key: kept's
        assert list(scattered[0]) == [kept.key] and kept.status == "finished"


def _first(pair):
    return float(pair[0].sum())


def test_sharing_an_equal_object_again_takes_a_key_of_its_own():
    """Two shares of equal objects are two keys: under the content's hash the second reused the key that
    the scheduler was still releasing for the first one's dropped future, and tasks on it could hang."""
    import gc

    import dask
    from distributed import LocalCluster

    from streamcov.stream import runtime as R

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            R.dask_runtime(cluster.scheduler_address) as rt:
        model = (np.arange(5.0), np.zeros(2))
        keys = set()
        for _ in range(20):   # as a learner's passes and a run's predictions share one model again and again
            shared = rt.share(model)
            keys.add(shared.key)
            assert rt.compute(*[dask.delayed(_first)(shared) for _ in range(4)]) == [10.0] * 4
            del shared
            gc.collect()
        assert len(keys) == 20


def test_cluster_runtime_compute_retries_and_threads_compute_does_not(monkeypatch):
    """The runtime's ``compute`` on a cluster goes through retry_lost with its client; ``compute_once``
    and the threaded runtime do not."""
    import dask
    from distributed import LocalCluster

    from streamcov.stream import runtime as R

    seen = []
    monkeypatch.setattr(R, "retry_lost", lambda client, attempt, before_retry=None: seen.append(client) or attempt())
    with R.dask_runtime("threads", 1) as rt:
        assert rt.compute_once is rt.compute
        assert rt.compute(dask.delayed(sum)([1, 2])) == (3,)
    assert seen == []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            R.dask_runtime(cluster.scheduler_address) as rt:
        assert seen == [rt.client]   # the worker plugins' registration, retried where a worker dies under it
        seen.clear()
        assert rt.compute(dask.delayed(sum)([1, 2])) == [3]
        assert seen == [rt.client]
        assert rt.compute_once(dask.delayed(sum)([3, 4])) == [7]
        assert seen == [rt.client]


def _sum_plus(a, b):
    return float(a.sum()) + b


def test_cluster_compute_recovers_when_shared_data_is_lost():
    """A worker's death loses the shared data it alone held (the scheduler trims broadcast replicas), and
    the scheduler cancels the tasks that need it. The retry scatters the data again and submits the same
    graph (the same keys): it must be computed, not handed the first attempt's cancelled futures, which the
    failed gather's traceback keeps alive."""
    import dask
    from distributed import LocalCluster
    from distributed.client import FutureCancelledError

    from streamcov.stream import runtime as R

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            R.dask_runtime(cluster.scheduler_address) as rt:
        shared = rt.share(np.arange(10.0))
        tasks = [dask.delayed(_sum_plus)(shared, i) for i in range(3)]
        assert rt.compute(*tasks) == [45.0, 46.0, 47.0]
        rt.client.cancel(shared, force=True)       # lost, as with the only worker that held it
        # the reason given is "lost dependencies", or "unknown" on distributed 2024.8
        with pytest.raises(FutureCancelledError, match="cancelled"):
            rt.compute_once(*tasks)
        assert rt.compute(*tasks) == [45.0, 46.0, 47.0]   # retry_lost: reshare, the same keys again


# ------------------------------------------------- a fitted map's arrays: kept in the store, drawn again
def _maps():
    from sklearn.kernel_approximation import RBFSampler

    from streamcov.features import RandomMaclaurinSampler, RGWSampler
    from streamcov.features.registry import make_feature_map

    blocks = make_feature_map({"map": "rgw", "sigma": 1.0, "center": True, "n_components": 30,
                               "blocks": [[4, 0.5], [5, 0.5]]}, seed=3)
    return [RGWSampler(n_components=30, center=True, random_state=3),
            RandomMaclaurinSampler(n_components=30, center=True, sampling="stratified", random_state=3),
            blocks, RBFSampler(n_components=30, random_state=3)]


@pytest.mark.parametrize("index", range(4))
def test_declared_data_arrays_are_those_that_differ_from_the_map_drawn_without_data(index, rng):
    """A map that names its data-dependent arrays is not compared with a second map (the saving in memory);
    what it names must be exactly what the comparison finds, or a reused store would hold a wrong map."""
    from sklearn.base import clone

    from streamcov.features.registry import data_arrays
    from streamcov.stream.featurestore import _same_bytes
    from streamcov.stream.model import dump_estimator

    est = _maps()[index]
    X = rng.standard_normal((40, 9)) + 2.0
    fitted = clone(est).fit(X)
    reference = clone(est).fit(np.zeros((1, 9)))
    arrays, ref = {}, {}
    dump_estimator(fitted, "map.", arrays)
    dump_estimator(reference, "map.", ref)
    differ = {k for k, a in arrays.items() if not _same_bytes(ref[k], a)}
    declared = data_arrays(fitted, "map.")
    if index in (1, 3):   # Maclaurin (its weights take the data's dtype) and scikit-learn's RBFSampler declare
        assert declared is None   # nothing: they are compared with the reference
    else:
        assert declared == differ and differ   # the mean row(s), and nothing drawn from the seed


@pytest.mark.parametrize("index", range(4))
def test_save_fit_draws_the_reference_only_when_the_map_does_not_name_its_data_arrays(tmp_path, index, rng):
    from sklearn.base import clone

    est = _maps()[index]
    X = rng.standard_normal((40, 9)) + 2.0
    fitted = clone(est).fit(X)
    calls = []

    def reference():
        calls.append(1)
        return clone(est).fit(np.zeros((1, 9)))

    fs = filled(tmp_path / "f.zarr", rng.standard_normal((6, 3)).astype(np.float32))
    fs.save_fit({}, fitted, {}, reference)
    assert len(calls) == (1 if index in (1, 3) else 0)
    _, back, _ = FeatureStore(fs.path).load_fit(clone(est).fit(np.zeros((1, 9))))
    np.testing.assert_array_equal(back.transform(X), fitted.transform(X))


@pytest.mark.parametrize("index", range(4))
def test_a_map_fitted_on_float32_rows_comes_back_with_its_dtypes(tmp_path, index, rng):
    """Maclaurin's weights take the dtype of the rows it is fitted on, the reference is drawn on float64
    zeros: the store must give back the fitted map, not the reference's dtype."""
    from sklearn.base import clone

    from streamcov.stream.model import dump_estimator

    est = _maps()[index]
    X = (rng.standard_normal((40, 9)) + 2.0).astype(np.float32)
    fitted = clone(est).fit(X)
    fs = filled(tmp_path / "f.zarr", rng.standard_normal((6, 3)).astype(np.float32))
    fs.save_fit({}, fitted, {}, lambda: clone(est).fit(np.zeros((1, 9))))
    _, back, _ = FeatureStore(fs.path).load_fit(clone(est).fit(np.zeros((1, 9))))
    want, got = {}, {}
    dump_estimator(fitted, "", want)
    dump_estimator(back, "", got)
    assert {k: a.dtype for k, a in got.items()} == {k: a.dtype for k, a in want.items()}
    np.testing.assert_array_equal(back.transform(X), fitted.transform(X))


@pytest.mark.parametrize("edit", ["state", "record", "map-param", "shapes", "copied-arrays", "no-digest"])
def test_an_edited_or_foreign_fit_is_refused_and_not_reused(tmp_path, rng, edit):
    """The fit is a cache's identity as much as X: an edited record (a feature scale, the map's sigma, the
    stored shapes) or fitted arrays copied from another store (whole chunks with their own checksums) was
    reused under a model it did not make (a run at 33% that its saved model predicted at 7%)."""
    import shutil

    from sklearn.base import clone

    from streamcov.errors import StoreError

    est = _maps()[0]
    X = rng.standard_normal((40, 9)) + 2.0
    fs = filled(tmp_path / "f.zarr", rng.standard_normal((6, 3)).astype(np.float32))
    fs.save_fit({"scale": 2.0}, clone(est).fit(X), {"median_distance": 1.5})
    other = filled(tmp_path / "g.zarr", rng.standard_normal((6, 3)).astype(np.float32))
    other.save_fit({"scale": 2.0}, clone(est).fit(X + 1.0), {"median_distance": 1.5})
    assert FeatureStore(fs.path).load_fit() is not None   # as written: taken
    rec = dict(fs.group.attrs["fit"])
    if edit == "copied-arrays":
        for name in rec["stored"]:
            shutil.rmtree(fs.path / "fit" / name)
            shutil.copytree(other.path / "fit" / name, fs.path / "fit" / name)
        match = r"its fitted arrays are not the ones this store wrote \(copied from another store\?\)"
    else:
        if edit == "state":
            rec["state"] = {"scale": 1.5}
        elif edit == "record":
            rec["record"] = {"median_distance": 15.0}
        elif edit == "map-param":
            rec["map"] = {**rec["map"], "params": {**rec["map"]["params"], "gamma": 40.0}}
        elif edit == "shapes":
            name = rec["stored"][0]
            rec["shapes"] = {**rec["shapes"], name: rec["shapes"][name][::-1] + [1]}
        else:
            del rec["digest"]
        fs.group.attrs["fit"] = rec
        match = r"its fit record \(.*\) is not as it was written \(edited, or written by an earlier streamcov\)"
    with pytest.raises(StoreError, match=match + r"; the store is damaged: it is a cache of `streamcov run`"):
        FeatureStore(fs.path).load_fit()


def test_same_bytes_tells_signed_zeros_dtypes_and_shapes_apart():
    from streamcov.stream.featurestore import _same_bytes

    a = np.zeros(3)
    assert _same_bytes(a, np.zeros(3))
    assert not _same_bytes(a, -np.zeros(3))                 # equal as numbers, not as bytes
    assert not _same_bytes(a, np.zeros(3, dtype=np.float32))
    assert not _same_bytes(a, np.zeros((3, 1)))
    assert _same_bytes(np.array(2.0), np.array(2.0))          # 0-d
    assert _same_bytes(np.arange(6.0).reshape(2, 3)[:, 1], np.array([1.0, 4.0]))   # a strided view


def test_a_non_finite_feature_is_refused_before_the_block_is_written(tmp_path):
    """An overflowing map (a tiny bandwidth, a high degree) is the user's settings: one line naming the row,
    and the block stays unwritten (not marked done), so nothing non-finite is ever read back."""
    from streamcov.errors import ConfigError
    from streamcov.stream.featurestore import write_block

    X = np.ones((4, 3))
    X[2, 1] = np.inf
    with pytest.raises(ConfigError, match=r"non-finite feature in row 12: the feature map overflowed .*nothing "
                                          r"of the block was written"):
        write_block(str(tmp_path / "never-opened.zarr"), 1, 10, 14, X)
    assert not (tmp_path / "never-opened.zarr").exists()


def test_array_digests_are_sha256_of_dtype_shape_and_bytes():
    """The one array digest (models' left-out arrays, the weight cache): against hashlib on the obvious
    recipe, and blind to memory layout but not to dtype, shape or signed zeros."""
    import hashlib

    from streamcov.data.integrity import array_sha256, arrays_sha256

    a = np.arange(6.0).reshape(2, 3)
    assert array_sha256(a) == hashlib.sha256(b"<f8(2, 3)" + a.tobytes()).hexdigest()
    assert array_sha256(np.asfortranarray(a)) == array_sha256(a)          # the values in C order
    assert array_sha256(a[:, 1]) == array_sha256(np.array([1.0, 4.0]))   # a strided view
    digests = {array_sha256(x) for x in (np.zeros(3), -np.zeros(3), np.zeros(3, np.float32),
                                         np.zeros((3, 1)), np.zeros((1, 3)), np.array(0.0))}
    assert len(digests) == 6
    named = {"b": a, "a": np.ones(2)}
    recipe = hashlib.sha256(b"".join(f"{k}\0{array_sha256(named[k])}\n".encode() for k in ("a", "b")))
    assert arrays_sha256(named) == recipe.hexdigest() == arrays_sha256(dict(reversed(named.items())))
    assert arrays_sha256({"a": np.ones(2)}) != arrays_sha256({"c": np.ones(2)})   # names count


def test_estimators_are_tokenized_by_their_state_without_pickling_them(monkeypatch, rng):
    """dask would pickle a shared feature map whole to name it (gigabytes of projections at large nu)."""
    import copy

    from dask.base import tokenize

    from streamcov.features import RGWSampler
    from streamcov.stream.runtime import register_tokens

    register_tokens()
    X = rng.standard_normal((20, 6))
    a = RGWSampler(n_components=50, center=True, random_state=0).fit(X)

    try:    # where dask's fallback (pickle the object, hash the bytes) lives: dask.base before 2024.9
        import dask.tokenize as where
    except ImportError:
        import dask.base as where
    original = where._normalize_pickle
    from sklearn.base import BaseEstimator

    def refuse(o, *args, **kwargs):
        # dask before 2024.9 tokenizes numpy arrays by this route too (protocol 5: their buffers are not
        # copied); what must not happen is the estimator pickled whole
        if isinstance(o, BaseEstimator):
            raise AssertionError("pickled to tokenize")
        return original(o, *args, **kwargs)

    monkeypatch.setattr(where, "_normalize_pickle", refuse)
    b = copy.deepcopy(a)
    assert tokenize(a) == tokenize(b)
    assert tokenize(a) != tokenize(RGWSampler(n_components=50, center=True, random_state=1).fit(X))
    b.mean_[0] = np.nextafter(b.mean_[0], np.inf)      # one ulp of one fitted number
    assert tokenize(a) != tokenize(b)
    c = copy.deepcopy(a)
    c.set_params(sigma=2.0)                             # a parameter
    assert tokenize(a) != tokenize(c)


def test_register_tokens_registers_each_class_once_and_takes_back_a_claimed_one(monkeypatch, rng):
    """Every share of a model calls register_tokens: a class already tokenized by its state is not registered
    again; one that another package's handler claimed since (dask-ml registers one for ``BaseEstimator``) or
    that dask resolved and cached before is registered again; tokens stay the same throughout."""
    import copy

    from dask.base import normalize_token, tokenize
    from sklearn.base import BaseEstimator

    from streamcov.features import RGWSampler
    from streamcov.stream.model import FittedPipeline
    from streamcov.stream.runtime import _normalize_by_state, register_tokens

    monkeypatch.setattr(normalize_token, "_lookup", dict(normalize_token._lookup))   # dask's table, restored after
    registered = []
    register = normalize_token.register
    monkeypatch.setattr(normalize_token, "register",
                        lambda cls, func=None: registered.append(cls) or register(cls, func))
    a = RGWSampler(n_components=20, random_state=0).fit(rng.standard_normal((10, 4)))
    nested = {"maps": [a, (a,)]}
    register_tokens(nested)
    assert all(normalize_token.dispatch(c) is _normalize_by_state for c in (BaseEstimator, FittedPipeline, RGWSampler))
    assert registered.count(RGWSampler) <= 1 and len(registered) <= 3
    token = tokenize(a)
    registered.clear()
    register_tokens(nested)
    register_tokens()
    assert registered == []                 # the second call registers nothing
    assert tokenize(a) == token == tokenize(copy.deepcopy(a))

    def foreign(est):                       # another package's handler, by parameters only
        return type(est).__name__, sorted(est.get_params().items())

    register(BaseEstimator, foreign)
    register(RGWSampler, foreign)
    assert tokenize(a) != token
    register_tokens(a)
    assert registered == [BaseEstimator, RGWSampler]
    assert tokenize(a) == token


@pytest.mark.parametrize("params", [{"map": "rgw", "theta": 0.7, "sampling": "stratified"},
                                    {"map": "rgw", "theta": 0.3, "sampling": "iid"},
                                    {"map": "maclaurin", "sampling": "stratified"},
                                    {"map": "maclaurin", "sampling": "iid"}])
def test_the_memory_check_counts_a_projection_per_degree(params):
    """The product maps hold sum(degrees) projections, 1 / theta per feature for RGW's stratified degrees:
    the check before a map is drawn counts them (it counted one per feature, 1.43x too few at theta 0.7).
    The mean of the drawn degrees is within 2% of the expected one at 20000 features (its standard error
    is below 0.5% for these laws)."""
    from streamcov.features.registry import make_feature_map, projection_columns

    fmap = make_feature_map({**params, "n_components": 20000, "sigma": 1.0}, seed=0).fit(np.zeros((1, 3)))
    drawn = (fmap.projections_ if params["map"] == "rgw" else fmap.random_weights_).shape[1] / 20000
    assert drawn == pytest.approx(projection_columns(params), rel=0.02)


def test_a_map_beyond_memory_is_refused_by_its_projections_not_its_width(monkeypatch):
    from streamcov import _config
    from streamcov.errors import ConfigError
    from streamcov.features.registry import fit_feature_map

    # 20000 features x 1000 columns x 8 bytes = 160 MB with one projection each; RGW at theta 0.25
    # (stratified) draws 4 per feature: 640 MB, more than a machine of 400 MB
    monkeypatch.setattr(_config, "total_memory", lambda: 400e6)
    params = {"map": "rgw", "n_components": 20000, "theta": 0.25, "sampling": "stratified", "sigma": 1.0}
    with pytest.raises(ConfigError, match=r"features\.n_components = 20000 on 1000-dimensional descriptors: "
                                          r"needs 610\.4 MiB of memory, this process may use 381\.5 MiB"):
        fit_feature_map(params, 0, 1000)
    fmap, _ = fit_feature_map({**params, "map": "rff"}, 0, 1000)   # 160 MB: drawn
    assert fmap.random_weights_.shape == (1000, 20000)


def test_sharing_an_estimator_overrides_a_handler_dask_resolved_or_was_given_before():
    """dask caches the handler it resolved for each class, and a package may register its own for an
    estimator class (dask-ml does, from str() of the arrays, which numpy abbreviates): sharing an object
    registers the concrete classes in it, nested ones too."""
    from dask.base import normalize_token
    from sklearn.base import BaseEstimator

    from streamcov.features.registry import BlockSumFeatures
    from streamcov.stream.runtime import _normalize_by_state, dask_runtime

    class Inner(BaseEstimator):
        pass

    class Outer(BaseEstimator):
        pass

    for cls in (Inner, Outer):
        normalize_token.register(cls)(lambda o: "stale")
    outer = Outer()
    outer.inner_ = Inner()
    with dask_runtime("threads", 1) as rt:
        rt.share(outer)
    assert normalize_token.dispatch(Outer) is _normalize_by_state
    assert normalize_token.dispatch(Inner) is _normalize_by_state
    assert normalize_token.dispatch(BlockSumFeatures) is _normalize_by_state


def test_nystroem_beyond_memory_is_refused_by_its_landmarks_of_full_width(monkeypatch):
    """Nystroem keeps its landmarks at the full width of the descriptor (not a block's share, as a map per block
    does) and, while fitting, an m x m kernel per block and its eigenvectors: 8 (m d + 4 m^2) bytes. With
    m = 1500 rows of 11 blocks of 600 columns that is 144.2 MiB; the per-block estimate said 6.9 MiB."""
    from streamcov import _config
    from streamcov.errors import ConfigError
    from streamcov.features.registry import fit_feature_map

    monkeypatch.setattr(_config, "total_memory", lambda: 100e6)
    params = {"map": "nystroem", "n_components": 1500, "sigma": 1.0, "blocks": [[600, 1 / 11]] * 11}
    rows = np.zeros((1500, 6600))
    with pytest.raises(ConfigError, match=r"features\.n_components = 1500 on 6600-dimensional descriptors: "
                                          r"needs 144\.2 MiB of memory, this process may use 95\.4 MiB"):
        fit_feature_map(params, 0, 6600, rows)
    # fewer fitted rows than n_components: the landmarks that will be, 100 of them
    fmap, _ = fit_feature_map(params, 0, 6600, rows[:100] + 0.01 * np.arange(100)[:, None])   # within sigma
    assert fmap.components_.shape == (100, 6600)


def _crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit: the checksum zarr's codec appends."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _rows_with_crc_zero(rng) -> np.ndarray:
    """4 x 3 finite float32 rows whose bytes have CRC-32C 0: the last 4 bytes solved for over GF(2) (the CRC of a
    message is affine in each of its bits)."""
    while True:
        X = rng.standard_normal((4, 3)).astype(np.float32)
        head = X.tobytes()[:-4]
        base = _crc32c(head + bytes(4))
        cols = [_crc32c(head + (1 << k).to_bytes(4, "little")) ^ base for k in range(32)]
        basis: dict = {}
        for k, v in enumerate(cols):
            combo = 1 << k
            for bit in reversed(range(32)):
                if not (v >> bit) & 1:
                    continue
                if bit in basis:
                    v, combo = v ^ basis[bit][0], combo ^ basis[bit][1]
                else:
                    basis[bit] = (v, combo)
                    break
        v, combo = base, 0
        for bit in reversed(range(32)):
            if (v >> bit) & 1 and bit in basis:
                v, combo = v ^ basis[bit][0], combo ^ basis[bit][1]
        if v:
            continue
        X.reshape(-1)[-1] = np.frombuffer(combo.to_bytes(4, "little"), np.float32)[0]
        if np.isfinite(X).all():
            assert _crc32c(X.tobytes()) == 0
            return X


def test_a_block_whose_chunk_checksum_is_zero_counts_as_done(tmp_path, rng):
    """Each block records its X chunk's checksum plus one (0 means none recorded): a chunk whose CRC-32C is 0 (one
    in 2^32) is done like any other (recorded as 0 it read as not done, was written again with the same bytes,
    and featurize then called its own store a bug on every run)."""
    from streamcov.stream.featurestore import FeatureStore, write_block

    X = _rows_with_crc_zero(rng)
    path = tmp_path / "f.zarr"
    FeatureStore.open_or_create(path, 8, 3, np.array([0, 4, 8]), "float32", {"a": 1})
    write_block(str(path), 0, 0, 4, X)
    write_block(str(path), 1, 4, 8, rng.standard_normal((4, 3)).astype(np.float32))
    fs = FeatureStore(path)
    assert int.from_bytes((path / "X" / "c" / "0" / "0").read_bytes()[-4:], "little") == 0
    done, redo = fs.done_blocks()
    assert done.tolist() == [True, True] and redo == [] and fs.done().tolist() == [True, True]
    np.testing.assert_array_equal(fs.read_block(0), X)


# ------------------------------------------------------- blocks read from their chunk files
from hypothesis import given, settings, strategies as st  # noqa: E402


@given(n=st.integers(1, 40), dim=st.integers(1, 9), block=st.integers(1, 12), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2 ** 32 - 1))
@settings(max_examples=40, deadline=None)
def test_blocks_read_from_their_chunk_files_are_zarrs_rows(tmp_path_factory, n, dim, block, dtype, seed):
    """Round trip: every block, the last (short) one included, read straight from its chunk file into one
    reused buffer is bit for bit what zarr decodes; the result is a view of that buffer."""
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(dtype)
    fs = filled(tmp_path_factory.mktemp("raw") / "f.zarr", rows, block)
    buf = fs.block_buffer()
    block = min(block, n)     # the store's chunks hold its first block's rows
    assert buf is not None and buf.nbytes == block * dim * rows.itemsize + 4
    for i in range(fs.n_blocks):
        X = fs.read_block_into(i, buf)
        assert X is not None and np.shares_memory(X, buf) and X.dtype == rows.dtype
        assert X.tobytes() == fs.read_blocks(i, i + 1).tobytes() == rows[i * block:(i + 1) * block].tobytes()
        assert fs.read_block(i).tobytes() == X.tobytes()


@pytest.mark.parametrize("damage, match", [
    ("flip", r"chunk 1/0: .*checksum"),
    ("truncate", r"chunk 1/0"),
    ("extend", r"chunk 1/0"),
    ("missing", r"chunk 1/0: the chunk file is missing"),
])
def test_a_damaged_chunk_file_is_left_to_zarr_which_names_it(tmp_path, rng, damage, match):
    """A chunk that is not as the store writes it (a flipped bit, cut short, a byte too many, gone) is not
    read as rows by the direct read (None): zarr's read then refuses it with the chunk's name."""
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    chunk = tmp_path / "f.zarr" / "X" / "c" / "1" / "0"
    raw = bytearray(chunk.read_bytes())
    if damage == "flip":
        raw[5] ^= 0x40
        chunk.write_bytes(bytes(raw))
    elif damage == "truncate":
        chunk.write_bytes(bytes(raw[:-9]))
    elif damage == "extend":
        chunk.write_bytes(bytes(raw) + b"\0")
    else:
        chunk.unlink()
    buf = fs.block_buffer()
    assert fs.read_block_into(1, buf) is None
    np.testing.assert_array_equal(fs.read_block_into(0, buf), rows[:4])
    with pytest.raises(StoreError, match=match):
        fs.read_block(1)


def test_a_store_of_another_encoding_is_read_by_zarr_alone(tmp_path, rng):
    """zstd before the checksum (feature stores of earlier versions): no direct read, zarr's rows."""
    rows = rng.standard_normal((10, 7))
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="w")
    g.create_array("X", shape=rows.shape, chunks=(4, 7), dtype="float64", fill_value=0,
                   compressors=[ZstdCodec(), Crc32cCodec()], config={"write_empty_chunks": True})
    g["X"][:] = rows
    g.attrs.update({"bounds": [0, 4, 8, 10], "fingerprint": "{}"})
    fs = FeatureStore(tmp_path / "z.zarr")
    assert fs.block_buffer() is None
    np.testing.assert_array_equal(fs.read_block(2), rows[8:])


def test_blocks_not_aligned_with_chunks_are_read_by_zarr(tmp_path, rng):
    """Bounds that do not start each block at its chunk (not a layout streamcov writes) are not read directly."""
    rows = rng.standard_normal((10, 7)).astype(np.float32)
    fs = filled(tmp_path / "f.zarr", rows)
    fs.bounds = np.array([0, 3, 8, 10])
    buf = fs.block_buffer()
    assert fs.read_block_into(1, buf) is None and fs.read_block_into(0, buf) is not None
    np.testing.assert_array_equal(fs.read_block(1), rows[3:8])


def test_read_block_into_refuses_a_buffer_of_another_kind(tmp_path, rng):
    fs = filled(tmp_path / "f.zarr", rng.standard_normal((10, 7)).astype(np.float32))
    with pytest.raises(ValueError, match=r"buf: a 1-d uint8 buffer of at least 116 bytes \(block_buffer\(\)\), got "
                                         r"float32 of shape \(29,\)"):
        fs.read_block_into(0, np.empty(29, dtype=np.float32))
    with pytest.raises(ValueError, match=r"at least 116 bytes .*got uint8 of shape \(115,\)"):
        fs.read_block_into(0, np.empty(115, dtype=np.uint8))


@pytest.mark.parametrize("params, key, cause", [
    ({"map": "rff", "n_components": 64, "sigma": 1.0}, "features.n_components", r"features\.n_components = 64"),
    ({"map": "rff", "n_components": 64, "sigma": 1.0}, "method.n_components", r"method\.n_components = 64"),
    ({"map": "none"}, "features.n_components", r'features\.map = "none": the descriptors themselves'),
    ({"map": "none"}, "method.n_components", r'method\.name = "head": the pooled head features themselves')])
def test_a_feature_store_larger_than_the_free_disk_is_refused_before_it_is_made(tmp_path, monkeypatch, params,
                                                                                 key, cause):
    """Its size is known before any block runs (rows x width x itemsize): refused in one line naming what sizes
    it, where the writer filled the disk first; written where there is room."""
    import shutil

    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.errors import ConfigError
    from streamcov.stream.featurize import featurize
    from streamcov.stream.runtime import dask_runtime
    from streamcov.stream.skeleton import skeleton_source
    from streamcov.stream.source import block_bounds

    store = ingest(SyntheticSkeletons(n_sequences=40, seed=1), tmp_path / "s.zarr")
    source = skeleton_source(store, "store", 1e-2, True)
    dim = 64 if params["map"] == "rff" else source.dim
    lower = rf"lower {re.escape(key)}, or " if params["map"] == "rff" else ""   # without a map no key sizes it
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1000))
    bounds = block_bounds(source.n, 16)
    with dask_runtime("threads", 2) as rt:
        with pytest.raises(ConfigError, match=rf"^the feature store of 40 rows x {dim} numbers \({cause}\): needs "
                                              rf"about [\d.]+ [KM]iB of disk, \S+ has 1000 bytes free; {lower}"
                                              rf"write the run where there is room \(--output\)$"):
            featurize(source, params, seed=0, train=np.ones(source.n, dtype=bool), path=tmp_path / "f.zarr",
                      runtime=rt, bounds=bounds, size_key=key)
        assert not (tmp_path / "f.zarr").exists()
        monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=2 ** 40))
        feat = featurize(source, params, seed=0, train=np.ones(source.n, dtype=bool), path=tmp_path / "f.zarr",
                         runtime=rt, bounds=bounds)
    assert feat.store.done().all() and feat.store.dim == dim


def test_the_feature_stores_of_every_fold_are_checked_together(tmp_path, monkeypatch):
    """A map fitted on each fold's training rows gives every fold a feature store of its own, all kept: checked
    one at a time, the first folds passed and the disk filled (or a later fold was refused) after their hours."""
    import shutil

    from conftest import REPO
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons
    from streamcov.errors import ConfigError
    from streamcov.tasks import run
    from streamcov.tasks.config import load_config

    store = ingest(SyntheticSkeletons(n_sequences=40, n_subjects=4, n_classes=3, seed=1), tmp_path / "s.zarr")
    cfg = load_config(REPO / "pipelines" / "msr_action3d.toml",
                      [f'output="{tmp_path / "o"}"', "descriptor.levels=1", "features.n_components=20",
                       'split.kind="leave-one-subject-out"'], store=store.path)
    usage = shutil.disk_usage(tmp_path)
    one = 40 * 20 * 8   # rows x landmarks x float64: one fold's store fits, four do not
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=2 * one))
    with pytest.raises(ConfigError, match=r"^the feature stores of 4 folds \(40 rows x up to 20 numbers each, "
                                          r"features\.n_components = 20\): needs about 25\.0 KiB of disk, \S+ has "
                                          r"12\.5 KiB free; lower features\.n_components, run fewer folds "
                                          r"\(split\.folds\), or write the run where there is room \(--output\)$"):
        run(cfg, scheduler="synchronous")
    assert not list((tmp_path / "o").glob("features-*.zarr"))
