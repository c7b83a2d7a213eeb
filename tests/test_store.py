import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from streamcov.data import skeletons as S
from streamcov.data.ragged import store_status
from streamcov.errors import FormatError, IncompleteStoreError, StoreError
from streamcov.data.readers.base import SkeletonSequence, SkeletonReader, SkeletonInfo


class ListSource(SkeletonReader):
    def __init__(self, seqs, joints=4, source="test"):
        super().__init__()
        self.seqs = seqs
        self.info = SkeletonInfo(n_joints=joints, joint_names=[f"j{i}" for i in range(joints)],
                                       units="m", source=source, center=(0,))

    def sequences(self):
        yield from self.seqs


def make_seqs(rng, n, joints=4, max_len=9):
    return [SkeletonSequence(id=f"s{i:04d}", frames=rng.normal(size=(rng.integers(2, max_len), 3 * joints)).astype(np.float32),
                             label=f"c{i % 3}", subject=int(i % 5) + 1,
                             split=("train" if i % 2 else "test") if i % 7 else None)
            for i in range(n)]


def check_equal(store, seqs):
    assert store.n_sequences == len(seqs)
    assert store.ids() == [s.id for s in seqs]
    for i, s in enumerate(seqs):
        np.testing.assert_array_equal(store.sequence(i), s.frames)
        assert store.id_of(i) == s.id
    assert list(store.label_strings()) == [s.label for s in seqs]
    assert list(store.subjects) == [s.subject for s in seqs]
    assert list(store.split_strings()) == [s.split for s in seqs]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 25), chunk=st.integers(2, 50), seed=st.integers(0, 1000))
def test_round_trip(tmp_path_factory, n, chunk, seed):
    rng = np.random.default_rng(seed)
    seqs = make_seqs(rng, n)
    path = tmp_path_factory.mktemp("rt") / "s.zarr"
    store = S.ingest(ListSource(seqs), path, chunk_frames=chunk)
    check_equal(store, seqs)
    assert store.attrs["complete"] is True
    assert store.frames.chunks[0] == chunk


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 20), stop=st.integers(1, 19), chunk=st.integers(2, 20), seed=st.integers(0, 1000))
def test_interrupted_ingestion_resumes_exactly_once(tmp_path_factory, n, stop, chunk, seed):
    stop = min(stop, n - 1)
    rng = np.random.default_rng(seed)
    seqs = make_seqs(rng, n)
    path = tmp_path_factory.mktemp("resume") / "s.zarr"
    assert S.ingest(ListSource(seqs), path, chunk_frames=chunk, limit=stop) is None
    status = store_status(path)
    assert status["complete"] is False and status["committed_sequences"] == stop
    with pytest.raises(IncompleteStoreError, match=r"incomplete skeleton store .* Re-run the command that wrote it"):
        S.open_store(path)
    store = S.ingest(ListSource(seqs), path, chunk_frames=chunk)
    check_equal(store, seqs)


def test_half_written_tail_is_cut_on_resume(tmp_path, rng):
    """Frames written past the commit point (a crash mid-flush) are discarded on resume."""
    seqs = make_seqs(rng, 12)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=5)
    import zarr
    g = zarr.open_group(str(path), mode="r+")
    committed = g.attrs["committed"]["frames"]
    g["frames"].resize((committed + 3, 12))      # simulate a crash after a frames write
    g["frames"][committed:] = 99.0
    g["labels"].resize((g["labels"].shape[0] + 1,))
    store = S.ingest(ListSource(seqs), path, chunk_frames=4)
    check_equal(store, seqs)


def test_a_temporary_chunk_file_left_by_a_kill_is_removed_on_resume(tmp_path, rng):
    """zarr writes a chunk as <chunk>.<uuid>.partial, then renames it: one a kill -9 left stayed in the completed
    store, which --verify passed."""
    seqs = make_seqs(rng, 12)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=5)
    left = path / "offsets" / "c" / "0.0123456789abcdef0123456789abcdef.partial"
    left.write_bytes(b"half a chunk")
    store = S.ingest(ListSource(seqs), path, chunk_frames=4)
    check_equal(store, seqs)
    assert not list(path.rglob("*.partial"))


def test_resume_keeps_the_chunk_size_and_refuses_another(tmp_path, rng):
    """A store keeps its chunk size: resumed without one it keeps its own (the default would not be used
    either), and another one given is refused naming both (it was ignored without a word); --restart writes
    the store anew with it."""
    seqs = make_seqs(rng, 10)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=3)
    with pytest.raises(StoreError, match=r"s\.zarr: the incomplete skeleton store was started with chunks of 4 "
                                         r"frames, and a store keeps its chunk size: chunk_frames=7 would not be "
                                         r"used; resume without it \(or with 4\), or start over with it: add "
                                         r"--restart"):
        S.ingest(ListSource(seqs), path, chunk_frames=7)
    assert store_status(path)["committed_sequences"] == 3   # refused before anything was cut or written
    store = S.ingest(ListSource(seqs), path)
    check_equal(store, seqs)
    assert store.chunk_frames == 4 and store.group["frames"].chunks[0] == 4
    S.ingest(ListSource(seqs), tmp_path / "t.zarr", chunk_frames=4, limit=3)
    store = S.ingest(ListSource(seqs), tmp_path / "t.zarr", chunk_frames=7, mode="restart")
    check_equal(store, seqs)
    assert store.chunk_frames == 7 and store.group["frames"].chunks[0] == 7


@pytest.mark.parametrize("edit, problem", [
    ({"arrays": None}, r"attribute arrays = None is not a list of array names"),
    ({"arrays": "frames"}, r"attribute arrays = 'frames' is not a list of array names"),
    ({"label_names": None}, r"attribute label_names = None is not a list of names"),
    ({"committed": None}, r"attribute committed = None is not the counts of committed sequences and frames"),
    ({"committed": {"frames": 100}}, r"attribute committed = \{'frames': 100\} is not the counts"),
    ({"committed": {"sequences": "x", "frames": 1}}, r"attribute committed = .* is not the counts"),
    ({"committed": {"sequences": -1, "frames": -5}}, r"attribute committed = .* is not the counts"),
    ({"committed": {"sequences": 1, "frames": 1000000}}, r"attribute committed = .* does not match the arrays"),
    ({"committed": {"sequences": 3, "frames": 1}}, r"attribute committed = .* does not match the arrays"),
])
def test_damaged_progress_attributes_of_an_incomplete_store(tmp_path, rng, edit, problem):
    """An incomplete store whose zarr.json was edited or damaged where its resume reads it (its arrays, names,
    commit point): `info` reports it damaged (exit 3; it said "re-run it to resume"), resuming refuses it in
    one line naming the attribute (a traceback before), and --restart writes it anew."""
    import zarr

    from cli_cases import cli

    seqs = make_seqs(rng, 10)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=3)
    zarr.open_group(str(path), mode="r+").attrs.update(edit)
    status = store_status(path)
    assert any(re.search(problem, p) for p in status["problems"]), status["problems"]
    rc, err, _ = cli("info", path)
    assert rc == 3 and re.search(r"DAMAGED store: .*" + problem, err), err
    with pytest.raises(StoreError, match=r"s\.zarr: " + problem + r".*; the incomplete store is damaged: delete it"):
        S.ingest(ListSource(seqs), path, chunk_frames=4)
    check_equal(S.ingest(ListSource(seqs), path, chunk_frames=4, mode="restart"), seqs)


@pytest.mark.parametrize("damage", ["labels/c/0", "id_offsets/c/0", "offsets/c/0", "id_bytes/c/0", "frames/c/0/0",
                                    "last-frames-chunk", "flip:labels/c/0", "flip:frames/c/1/0"])
def test_resuming_over_a_damaged_committed_chunk_is_refused(tmp_path, rng, damage):
    """A chunk of what an incomplete store had committed, deleted or with a byte changed: resuming refuses it
    in one line naming the array and chunk. zarr read a missing chunk as zeros and the resume wrote them back
    (labels of 0, ids stored twice, zeros in committed frames), sealing a complete store that --verify passed;
    a changed byte was a traceback."""
    seqs = make_seqs(rng, 10)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=6)
    if damage == "last-frames-chunk":   # the chunk holding the commit point, which the resume goes on filling
        f = store_status(path)["committed_frames"]
        damage = f"frames/c/{(f - 1) // 4}/0"
    kind, _, chunk = damage.rpartition(":")
    target = path / chunk
    assert target.is_file()
    if kind == "flip":
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
    else:
        target.unlink()
    array = chunk.split("/")[0]
    with pytest.raises(StoreError, match=rf"^\S*s\.zarr: array '{array}', chunk [\d/]+: (the chunk file is missing|"
                                         rf"checksum mismatch .*); the (incomplete )?store is damaged: delete it and ingest again "
                                         rf"\(or add --restart"):
        S.ingest(ListSource(seqs), path, chunk_frames=4)
    check_equal(S.ingest(ListSource(seqs), path, chunk_frames=4, mode="restart"), seqs)


@pytest.mark.parametrize("arrays", [(), ("labels",), ("frames", "offsets")])
def test_a_zarr_group_of_the_users_is_never_replaced(tmp_path, rng, arrays):
    """A group without streamcov's format attribute is the user's, even when its arrays bear the names a store
    uses (or it has attributes alone): it was deleted and written over, without --restart."""
    import zarr

    path = tmp_path / "mine.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.attrs["project"] = "mine"
    for name in arrays:
        g.create_array(name, data=np.arange(5, dtype=np.int64))
    with pytest.raises(StoreError, match=r"mine\.zarr: a zarr store that streamcov did not write \(no format "
                                         r"attribute\); will not touch it: choose another output path$"):
        S.ingest(ListSource(make_seqs(rng, 3)), path)
    back = zarr.open_group(str(path), mode="r")
    assert back.attrs["project"] == "mine" and sorted(back.keys()) == sorted(arrays)


def test_resuming_over_an_array_of_another_type_is_refused(tmp_path, rng):
    """An incomplete store whose frames were retyped in zarr.json: resumed and sealed before (int8 pixels were
    later blamed on the images)."""
    import json

    seqs = make_seqs(rng, 10)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=6)
    meta = path / "frames" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["data_type"] = "float64" if doc["data_type"] != "float64" else "float32"
    meta.write_text(json.dumps(doc))
    with pytest.raises(StoreError, match=r"s\.zarr: array 'frames' holds float\d+ rows of shape \(\d+,\), where this "
                                         r"store writes float\d+ rows of shape \(\d+,\) \(its zarr\.json was edited\); "
                                         r"the incomplete store is damaged: delete it"):
        S.ingest(ListSource(seqs), path, chunk_frames=4)


def test_info_of_a_store_being_written_says_so_and_does_not_judge_its_commit_point(tmp_path, rng):
    """While a live process holds the store's lock, its commit point moves as `info` reads it: `info` says who
    writes it (not "interrupted") and reports no damage from the progress attributes; once the lock is a dead
    process's (kill -9), the same store is judged again."""
    import json
    import os
    import socket

    import zarr

    from cli_cases import cli

    seqs = make_seqs(rng, 10)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=4, limit=3)
    zarr.open_group(str(path), mode="r+").attrs.update({"committed": {"sequences": 3, "frames": 1}})
    lock = tmp_path / "s.zarr.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": "streamcov ingest",
                                "started": "2026-11-30 16:00:00"}))
    import fcntl

    held = os.open(lock, os.O_RDONLY)   # a live writer holds its lock file's flock (one nobody holds is stale)
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    status = store_status(path)
    assert status["being_written_by"]["pid"] == os.getpid() and "problems" not in status
    rc, err, _ = cli("info", path)
    assert rc == 3 and re.search(rf"INCOMPLETE store \(3 sequences committed\): being written by process "
                                 rf"{os.getpid()} on \S+ since 2026-11-30 16:00:00$", err.strip()), err
    # a run on it says the same (it said "the ingestion was interrupted ... or delete it", under a live writer)
    with pytest.raises(StoreError, match=rf"s\.zarr: incomplete skeleton store, being written by process "
                                         rf"{os.getpid()} on \S+ since 2026-11-30 16:00:00 \(streamcov ingest\); "
                                         r"wait for it to finish, then run again$"):
        S.open_store(path)
    os.close(held)
    lock.write_text(json.dumps({"pid": 2 ** 22 + 12345, "host": socket.gethostname()}))   # no such process
    status = store_status(path)
    assert "being_written_by" not in status and any("does not match the arrays" in p for p in status["problems"])


def test_restart_discards_incomplete(tmp_path, rng):
    seqs = make_seqs(rng, 10)
    path = tmp_path / "s.zarr"
    S.ingest(ListSource(seqs), path, chunk_frames=3, limit=4)
    store = S.ingest(ListSource(seqs[::-1]), path, chunk_frames=3, mode="restart")
    check_equal(store, seqs[::-1])


@pytest.mark.parametrize("empty_folder", [False, True])
def test_a_creation_killed_half_way_leaves_no_store(tmp_path, rng, monkeypatch, empty_folder):
    """The empty store is built in a hidden folder and renamed into place once its arrays and attributes
    are written: stopped before that (here a Ctrl-C at the rename), nothing lies at the path (before: a folder
    without a format attribute, which every later run refused as 'not a streamcov store') and the hidden folder
    goes too; the one a kill -9 leaves is removed by the next ingestion, which writes the store."""
    from streamcov.data import ragged

    seqs = make_seqs(rng, 5)
    path = tmp_path / "s.zarr"
    if empty_folder:
        path.mkdir()

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ragged, "_move_into_place", killed)
    with pytest.raises(KeyboardInterrupt):
        S.ingest(ListSource(seqs), path)
    assert not path.exists() or not any(path.iterdir())
    assert not list(tmp_path.glob(".s.zarr.creating-*"))
    (tmp_path / ".s.zarr.creating-999999").mkdir()   # what a kill -9 at that point leaves
    monkeypatch.undo()
    check_equal(S.ingest(ListSource(seqs), path), seqs)
    assert not list(tmp_path.glob(".s.zarr.creating-*"))


def test_complete_store_is_never_overwritten(tmp_path, rng):
    seqs = make_seqs(rng, 3)
    S.ingest(ListSource(seqs), tmp_path / "s.zarr")
    for mode in ("resume", "restart", "create"):
        with pytest.raises(StoreError, match="a complete store is already here"):
            S.ingest(ListSource(seqs), tmp_path / "s.zarr", mode=mode)


def test_resume_from_another_source_is_refused(tmp_path, rng):
    seqs = make_seqs(rng, 6)
    S.ingest(ListSource(seqs), tmp_path / "s.zarr", chunk_frames=2, limit=2)
    with pytest.raises(StoreError, match="started with source_record.source = .test., this ingestion has .other.; resuming would mix two sources"):
        S.ingest(ListSource(seqs, source="other"), tmp_path / "s.zarr")


def test_bad_sequences_are_rejected_before_writing(tmp_path, rng):
    bad = make_seqs(rng, 3)
    bad[1].frames = np.zeros((4, 12), np.float32)
    bad[1].frames[2, 5] = np.inf
    with pytest.raises(FormatError, match=r"sequence s0001: non-finite value at frame 3, joint 2 \(coordinate z\): a coordinate beyond "
                                          r"float32.s range"):
        S.ingest(ListSource(bad), tmp_path / "a.zarr")
    assert not store_status(tmp_path / "a.zarr")["complete"]
    wrong = make_seqs(rng, 2)
    wrong[0].frames = np.zeros((3, 10), np.float32)
    with pytest.raises(ValueError, match=r"sequence s0000: frames shape \(3, 10\), expected \(T, 12\)"):
        S.ingest(ListSource(wrong), tmp_path / "b.zarr")
    empty = make_seqs(rng, 1)
    empty[0].frames = np.zeros((0, 12), np.float32)   # skipped: nothing left to write
    with pytest.raises(StoreError, match=r"c.zarr: every sequence was skipped, none written \(1 skipped \(s0000: no "
                                         r"frames\)\); no store was written"):
        S.ingest(ListSource(empty), tmp_path / "c.zarr")
    # nothing left for `info` to call an interrupted ingestion
    assert not (tmp_path / "c.zarr").exists()
    with pytest.raises(StoreError, match="no sequence was written"):
        S.ingest(ListSource([]), tmp_path / "d.zarr")


def test_open_errors(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        store_status(tmp_path / "missing.zarr")
    import zarr
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w").attrs["format"] = "something-else"
    with pytest.raises(StoreError, match="not a streamcov store .*, but a skeleton store is needed here"):
        S.open_store(tmp_path / "other.zarr")
    with pytest.raises(ValueError, match=r"^chunk_frames=0: expected an integer >= 1 \(frames per chunk\)$"):
        S.SequenceStoreWriter(tmp_path / "x.zarr", ListSource([]).info, chunk_frames=0)
    with pytest.raises(ValueError, match="mode must be create, resume or restart"):
        S.SequenceStoreWriter(tmp_path / "x.zarr", ListSource([]).info, mode="append")


def test_memory_is_bounded_by_a_chunk(tmp_path, rng):
    """The writer holds at most one chunk of frames (plus one sequence) in memory."""
    seqs = make_seqs(rng, 60, max_len=30)
    w = S.SequenceStoreWriter(tmp_path / "s.zarr", ListSource([]).info, chunk_frames=16)
    peak = 0
    for s in seqs:
        w.append(s)
        assert w._buffered == sum(len(p) for p in w._parts)
        peak = max(peak, w._buffered)
    w.close()
    assert peak < 16


def test_sequences_without_two_distinct_frames_are_skipped_and_recorded(tmp_path, rng):
    """The one rule for every reader: fewer than 2 distinct frames give no covariance."""
    good = make_seqs(rng, 3)
    still = np.repeat(rng.normal(size=(1, 12)).astype(np.float32), 5, axis=0)
    bad = [SkeletonSequence("one", good[0].frames[:1], "c0", 1), SkeletonSequence("none", good[0].frames[:0], "c0", 1),
           SkeletonSequence("still", still, "c1", 2)]
    store = S.ingest(ListSource(good + bad), tmp_path / "s.zarr", chunk_frames=4)
    assert store.ids() == [s.id for s in good]
    reasons = {s["id"]: s["reason"] for s in store.attrs["skipped"]}
    assert reasons == {"one": "1 frame; a covariance needs at least 2 distinct frames", "none": "no frames",
                       "still": "all 5 frames are identical; a covariance needs at least 2 distinct frames"}


def test_a_stores_columns_are_read_only(tmp_path):
    """``y = store.labels; y[:] = 0`` changed the store's own labels (and label_strings) in memory."""
    from streamcov.data.skeletons import ingest
    from streamcov.data.synth import SyntheticSkeletons

    store = ingest(SyntheticSkeletons(n_sequences=12, n_subjects=2, n_classes=3, seed=0), tmp_path / "s.zarr")
    for name in ("labels", "subjects", "split", "offsets"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(store, name)[:] = 0


def test_info_on_an_interrupted_store_names_every_way_to_finish_it(tmp_path, rng):
    """An ingestion stopped at a file it could not read leaves an incomplete store like a killed one: re-running
    it stops at that file again, so info names --on-error skip too (it said only to re-run)."""
    from cli_cases import cli

    S.ingest(ListSource(make_seqs(rng, 10)), tmp_path / "s.zarr", chunk_frames=4, limit=3)
    rc, err, _ = cli("info", tmp_path / "s.zarr")
    assert rc == 3 and re.search(r"INCOMPLETE store \(3 sequences committed\): the ingestion was interrupted, or "
                                 r"stopped at a file it could not read; re-run it to resume \(with --on-error skip "
                                 r"to leave such a file out, with --restart if its source changed since\)$",
                                 err.strip()), err


def test_float32_rounding_of_far_coordinates_is_said_over_an_interrupted_ingestion(tmp_path, rng):
    """Coordinates near 1e6 moving by tenths lose their motion to float32 (steps of 0.06): said by the ingestion,
    with the sequences of an interrupted run counted by the run that resumes it (each run counted only its
    own, and an interrupted one warned of none)."""
    import warnings

    seqs = make_seqs(rng, 10)
    for s in seqs[:4]:   # the first four far from the origin
        s.frames = (s.frames.astype(np.float64) * 0.1 + 1e6).astype(np.float32)
    path = tmp_path / "s.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert S.ingest(ListSource(seqs), path, chunk_frames=4, limit=3) is None   # interrupted after 3
    with pytest.warns(UserWarning, match=r"^4 sequence\(s\) lie so far from the origin that storing them as float32 "
                                         r"rounds their coordinates by up to 0\.0312, over 0\.1% of their motion "
                                         r"\(first: s0000, rounding 0\.0312 against a range of"):
        store = S.ingest(ListSource(seqs), path, chunk_frames=4)
    assert [r[0] for r in store.attrs["float32_rounded"]] == ["s0000", "s0001", "s0002", "s0003"]
    with warnings.catch_warnings():   # ordinary coordinates: no word
        warnings.simplefilter("error")
        S.ingest(ListSource(make_seqs(rng, 6)), tmp_path / "t.zarr", chunk_frames=4)


def test_the_ingest_bar_shows_the_count_the_source_knows(tmp_path, monkeypatch, capsys):
    """The bar of an ingest counts to the source's number of sequences (it showed a bare count, no share and no
    time left, for a million sequences); resumed, it starts at those already stored. With a limit (which stops
    early) it counts without a total."""
    from streamcov import _config
    from streamcov.data.synth import SyntheticSkeletons

    monkeypatch.setattr(_config, "BAR_DISABLE", False)
    src = SyntheticSkeletons(n_sequences=30, frames=(10, 12))
    S.ingest(src, tmp_path / "s.zarr", progress=True, limit=12)   # stops early: a count, no total to reach
    assert re.search(r"\b12seq ", capsys.readouterr().err)
    S.ingest(src, tmp_path / "s.zarr", progress=True)
    err = capsys.readouterr().err
    assert re.search(r"\b12/30 ", err) and re.search(r"\b30/30 ", err), err[-500:]
