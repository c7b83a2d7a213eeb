"""Reading a PyTorch ``state_dict`` file without torch and without running anything it holds.

A ``.pth`` file is a pickle, and unpickling can call any importable
function. :func:`read_state_dict` uses a :class:`pickle.Unpickler` whose
``find_class`` resolves only the names a ``state_dict`` of tensors needs
(:data:`ALLOWED_GLOBALS`: ``collections.OrderedDict``, torch's tensor
rebuild functions and the ``torch.<dtype>Storage`` type names), each mapped
to a harmless stand-in here; any other global (``os.system``,
``builtins.eval``, ...) raises :class:`~streamcov.errors.UnsafePickleError`
before it is called. Storages become numpy arrays; tensor views are
bounds-checked. Both of torch's formats are read: the zip archive (torch >=
1.6) and the legacy stream.

Private: :mod:`streamcov.descriptors.cnn` checks the file's SHA-256 first
and is the public entry point.
"""
from __future__ import annotations

import io
import math
import pickle
import zipfile

import numpy as np

from ..errors import UnsafePickleError, WeightsError


class _Frozen:
    """A stand-in a pickle cannot change: BUILD on a global (``ctorch\\nFloatStorage\\n ... b``) sets its
    attributes, and the stand-ins are shared by every load of the process (a file read without its hash check
    could have made the next, genuine file's floats bfloat16)."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise UnsafePickleError(f"a weight pickle may not change {self!r} (attribute {name!r})")

    __delattr__ = __setattr__


class _StorageType(_Frozen):
    """Stand-in for a ``torch.<X>Storage`` class: carries a dtype, cannot be called."""

    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", np.dtype(dtype))

    def __call__(self, *args, **kwargs):
        raise UnsafePickleError(f"torch.{self.name} may not be called from a pickle")

    def __repr__(self):
        return f"<storage type torch.{self.name} ({self.dtype})>"


STORAGE_TYPES = {n: _StorageType(n, dt) for n, dt in (
    ("FloatStorage", "<f4"), ("DoubleStorage", "<f8"), ("HalfStorage", "<f2"), ("BFloat16Storage", "<u2"),
    ("LongStorage", "<i8"), ("IntStorage", "<i4"), ("ShortStorage", "<i2"), ("CharStorage", "i1"),
    ("ByteStorage", "u1"), ("BoolStorage", "?"))}


class _Storage:
    """A storage named by a persistent id; its bytes are attached when read."""

    __slots__ = ("key", "stype", "numel", "data", "root", "offset")

    def __init__(self, key, stype, numel):
        self.key, self.stype, self.numel = key, stype, numel
        self.data = None                   # 1-d array of stype.dtype, numel long
        self.root, self.offset = None, 0   # views of the legacy format

    def array(self) -> np.ndarray:
        if self.root is not None:
            base = self.root.array()
            if self.offset + self.numel > base.size:
                raise WeightsError(f"storage view {self.key} runs past its root storage")
            return base[self.offset:self.offset + self.numel]
        if self.data is None:
            raise WeightsError(f"storage {self.key!r} has no data")
        return self.data


class _TensorRef:
    """What ``_rebuild_tensor_v2`` gives inside the pickle; an array once the storages are read."""

    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def materialize(self) -> np.ndarray:
        data = self.storage.array()
        size, stride, off = self.size, self.stride, self.offset
        if any(n == 0 for n in size):
            return np.zeros(size, dtype=data.dtype)
        last = off + sum((n - 1) * st for n, st in zip(size, stride))
        if off < 0 or last >= data.size or any(st < 0 for st in stride):
            raise WeightsError(f"tensor view (offset {off}, size {size}, stride {stride}) runs outside its "
                               f"storage of {data.size} elements")
        # a weight is its storage's elements, each once: a zero stride (or strides that overlap) spread one
        # element over a tensor as large as the file asked for, 2 GiB from a 1-element storage, or a MemoryError
        if any(st == 0 and n > 1 for n, st in zip(size, stride)) or math.prod(size) > data.size:
            raise WeightsError(f"tensor view (offset {off}, size {size}, stride {stride}) repeats the elements of "
                               f"its storage of {data.size} elements (a zero or overlapping stride): not a weight "
                               f"tensor")
        view = np.lib.stride_tricks.as_strided(data[off:], shape=size,
                                               strides=tuple(st * data.itemsize for st in stride), writeable=False)
        out = np.array(view, order="C")
        if self.storage.stype.name == "BFloat16Storage":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    if not isinstance(storage, _Storage):
        raise UnsafePickleError("_rebuild_tensor_v2 called on something that is not a storage")
    if not (_is_int(storage_offset) and isinstance(size, tuple) and isinstance(stride, tuple)
            and len(size) == len(stride) and all(_is_int(v) and v >= 0 for v in size)
            and all(_is_int(v) for v in stride)):
        raise WeightsError("malformed tensor description in the pickle")
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_tensor(storage, storage_offset, size, stride):   # torch < 1.0
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    if not isinstance(data, _TensorRef):
        raise UnsafePickleError("_rebuild_parameter called on something that is not a tensor")
    return data


class _StateDict(dict):
    """Stand-in for ``collections.OrderedDict`` (dicts keep their order)."""

    __slots__ = ("metadata",)

    def __setstate__(self, state):   # BUILD of OrderedDict's __dict__ ({'_metadata': ...})
        self.metadata = state


class _Global(_Frozen):
    """A callable global of a weight pickle (a function, or the dict type), frozen: what a pickle can reach
    of it is its call."""

    __slots__ = ("_call", "_name")

    def __init__(self, call, name):
        object.__setattr__(self, "_call", call)
        object.__setattr__(self, "_name", name)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __repr__(self):
        return f"<weight pickle global {self._name}>"


#: (module, name) -> stand-in: the only globals a weight pickle may name.
ALLOWED_GLOBALS = {
    ("collections", "OrderedDict"): _Global(_StateDict, "collections.OrderedDict"),
    ("torch._utils", "_rebuild_tensor_v2"): _Global(_rebuild_tensor_v2, "torch._utils._rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor"): _Global(_rebuild_tensor, "torch._utils._rebuild_tensor"),
    ("torch._utils", "_rebuild_parameter"): _Global(_rebuild_parameter, "torch._utils._rebuild_parameter"),
    **{("torch", n): t for n, t in STORAGE_TYPES.items()},
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals of :data:`ALLOWED_GLOBALS`."""

    def __init__(self, file, persistent_load=None):
        super().__init__(file)
        self._pload = persistent_load

    def find_class(self, module, name):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            allowed = ", ".join(sorted(f"{m}.{n}" for m, n in ALLOWED_GLOBALS))
            raise UnsafePickleError(f"refusing to load global {module}.{name} from a weight pickle: only tensor "
                                    f"rebuilding is allowed ({allowed})") from None

    def persistent_load(self, pid):
        if self._pload is None:
            raise UnsafePickleError("persistent ids are not allowed in this pickle")
        return self._pload(pid)


def safe_load(fileobj, persistent_load=None):
    """One object from ``fileobj``, unpickled with the restricted unpickler.

    Errors of a malformed stream (truncated, bad opcodes) become
    :class:`~streamcov.errors.WeightsError`.
    """
    try:
        return _RestrictedUnpickler(fileobj, persistent_load).load()
    except (UnsafePickleError, WeightsError):
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, UnicodeDecodeError, OverflowError) as exc:
        raise WeightsError(f"not a readable weight pickle ({exc.__class__.__name__}: {exc})") from None


def _storage_pid(pid, storages, legacy):
    if not (isinstance(pid, tuple) and pid and pid[0] in ("storage", b"storage")):
        raise UnsafePickleError(f"unexpected persistent id {pid!r:.80}")
    if legacy:
        if len(pid) != 6:
            raise WeightsError("malformed legacy storage id")
        _, stype, key, _loc, numel, view = pid
    else:
        if len(pid) != 5:
            raise WeightsError("malformed storage id")
        _, stype, key, _loc, numel = pid
        view = None
    if isinstance(key, bytes):
        key = key.decode("ascii")
    if not (isinstance(stype, _StorageType) and isinstance(key, str) and _is_int(numel) and numel >= 0):
        raise WeightsError(f"malformed storage id {pid!r:.80}")
    st = storages.get(key)
    if st is None:
        st = storages[key] = _Storage(key, stype, numel)
    if view is None:
        return st
    if not (isinstance(view, tuple) and len(view) == 3):
        raise WeightsError("malformed storage view id")
    vkey, voff, vnumel = view
    vkey = vkey.decode("ascii") if isinstance(vkey, bytes) else vkey
    if not (isinstance(vkey, str) and _is_int(voff) and _is_int(vnumel) and voff >= 0 and vnumel >= 0):
        raise WeightsError("malformed storage view id")
    vst = storages.get(vkey)
    if vst is None:
        vst = storages[vkey] = _Storage(vkey, stype, vnumel)
        vst.root, vst.offset = st, voff
    return vst


LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001


def _read_legacy(f, size):
    if safe_load(f) != LEGACY_MAGIC:
        raise WeightsError("not a PyTorch weight file (bad magic number)")
    if safe_load(f) != LEGACY_PROTOCOL:
        raise WeightsError("unsupported legacy PyTorch protocol version")
    sys_info = safe_load(f)
    if not isinstance(sys_info, dict):
        raise WeightsError("not a PyTorch weight file (its system information is not a table)")
    if not sys_info.get("little_endian", False):
        raise WeightsError("only little-endian weight files are supported")
    storages: dict = {}
    result = safe_load(f, lambda pid: _storage_pid(pid, storages, legacy=True))
    keys = safe_load(f)
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise WeightsError("malformed storage key list")
    for key in keys:
        st = storages.get(key)
        if st is None or st.root is not None:
            raise WeightsError(f"storage key {key!r} was not declared")
        head = f.read(8)
        if len(head) != 8:
            raise WeightsError("weight file is truncated")
        numel = int.from_bytes(head, "little", signed=True)
        if numel != st.numel:
            raise WeightsError(f"storage {key!r}: {numel} elements, expected {st.numel}")
        nbytes = numel * st.stype.dtype.itemsize
        if f.tell() + nbytes > size:
            raise WeightsError("weight file is truncated")
        st.data = np.frombuffer(f.read(nbytes), dtype=st.stype.dtype)
    if f.tell() != size:
        raise WeightsError("unexpected trailing data after the storages")
    return result


def _read_zip(path):
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        # what a member may hold once decompressed: torch stores its members uncompressed, so no more than the
        # archive (with room for a recompressed copy); a declared size past it is a zip bomb, read to the end
        most = 4 * max(path.stat().st_size, 1 << 20)

        def member_bytes(member: str, n: int | None = None) -> bytes:
            info = zf.getinfo(member)
            if info.file_size > most:
                raise WeightsError(f"zip member {member} declares {info.file_size} bytes, more than its archive "
                                   f"of {path.stat().st_size} bytes can hold (a zip bomb?)")
            with zf.open(info) as fh:
                return fh.read(info.file_size if n is None else min(n, info.file_size))

        pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise WeightsError("zip weight file without a single <archive>/data.pkl")
        prefix = pkl[0][:-len("data.pkl")]
        bo = prefix + "byteorder"
        if bo in names and member_bytes(bo, 64).strip() != b"little":
            raise WeightsError("only little-endian weight files are supported")
        storages: dict = {}

        def pload(pid):
            st = _storage_pid(pid, storages, legacy=False)
            if st.data is None:
                member = f"{prefix}data/{st.key}"
                if member not in names:
                    raise WeightsError(f"missing storage {member}")
                nbytes = st.numel * st.stype.dtype.itemsize
                raw = member_bytes(member, nbytes)
                if len(raw) < nbytes:
                    raise WeightsError(f"storage {member} is truncated")
                st.data = np.frombuffer(raw[:nbytes], dtype=st.stype.dtype)
            return st

        return safe_load(io.BytesIO(member_bytes(pkl[0])), pload)


def read_state_dict(path) -> dict:
    """name -> numpy array of the ``state_dict`` in the torch file ``path`` (no hash check here)."""
    from pathlib import Path

    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            obj = _read_zip(path)   # (a Path: its size bounds what a member may hold)
        else:
            with open(path, "rb") as f:
                obj = _read_legacy(f, path.stat().st_size)
    except zipfile.BadZipFile as exc:
        raise WeightsError(f"damaged zip archive ({exc})") from None
    if not isinstance(obj, dict):
        raise WeightsError("the pickle does not hold a state_dict")
    out = {}
    for k, v in obj.items():
        if not isinstance(k, str) or not isinstance(v, _TensorRef):
            raise WeightsError(f"state_dict entry {k!r:.60} is not a tensor")
        out[k] = v.materialize()
    return out
