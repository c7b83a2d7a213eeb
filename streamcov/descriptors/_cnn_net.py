"""EfficientNet-Lite0 as arrays: architecture, folded layers, an ONNX graph, a numpy forward pass, resizing.

Private numerics of :mod:`streamcov.descriptors.cnn` (which validates
inputs and is the public API): nothing here checks its arguments.

Architecture (``efficientnet_lite()`` of efficientnet-lite-pytorch 0.1.0 and
the TF ``efficientnet_lite_builder``): a 3 x 3 stride-2 stem (32 channels),
16 MBConv modules in 7 stages (table :data:`STAGES`), a 1 x 1 head
convolution to 1280 channels, global average pooling and a 1000-way fully
connected layer. Lite0 has width = depth = 1, ReLU6 everywhere, no
squeeze-excitation, and TF "SAME" padding (the extra row/column at the end).
BatchNorm (epsilon 1e-3) is folded into the convolutions.
"""
from __future__ import annotations

import functools

import numpy as np

BN_EPS = 1e-3
# stages: repeats, kernel, stride, expand ratio, in channels, out channels
STAGES = ((1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40), (3, 3, 2, 6, 40, 80),
          (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192), (1, 3, 1, 6, 192, 320))
STEM_CH = 32
HEAD_CH = 1280
N_CLASSES = 1000


def _block_table():
    """One row per MBConv module: (index, stage 1..7, kernel, stride, expand, cin, cout)."""
    rows, idx = [], 0
    for stage, (rep, k, s, e, cin, cout) in enumerate(STAGES, start=1):
        for r in range(rep):
            rows.append((idx, stage, k, s if r == 0 else 1, e, cin if r == 0 else cout, cout))
            idx += 1
    return tuple(rows)


BLOCKS = _block_table()
STAGE_LAST = {stage: max(r[0] for r in BLOCKS if r[1] == stage) for stage in range(1, 8)}


def stride_of_block(idx: int) -> int:
    s = 2   # the stem
    for r in BLOCKS[:idx + 1]:
        s *= r[3]
    return s


def layer_table() -> dict:
    """name -> (channels, stride w.r.t. the input, or None for vectors)."""
    info = {"stem": (STEM_CH, 2)}
    for stage, last in STAGE_LAST.items():
        info[f"block{stage}"] = (BLOCKS[last][6], stride_of_block(last))
    for r in BLOCKS:
        info[f"blocks.{r[0]}"] = (r[6], stride_of_block(r[0]))
    info["features"] = (HEAD_CH, 32)
    info["head"] = (HEAD_CH, None)
    info["logits"] = (N_CLASSES, None)
    return info


def block_index(name: str) -> int:
    """MBConv index whose output is the map ``name``; -1 for the stem."""
    if name == "stem":
        return -1
    if name.startswith("blocks."):
        return int(name.split(".", 1)[1])
    return STAGE_LAST[int(name[5:])]


def map_names(idx: int) -> tuple:
    """Output names of the map after MBConv ``idx`` (-1: the stem)."""
    if idx < 0:
        return ("stem",)
    return (f"blocks.{idx}",) + tuple(f"block{st}" for st, last in STAGE_LAST.items() if last == idx)


def expected_shapes() -> dict:
    """state_dict name -> shape, for every tensor the network uses."""
    shapes = {}

    def bn(prefix, c):
        for n in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{prefix}.{n}"] = (c,)

    shapes["_conv_stem.weight"] = (STEM_CH, 3, 3, 3)
    bn("_bn0", STEM_CH)
    for idx, _stage, k, _s, e, cin, cout in BLOCKS:
        p, mid = f"_blocks.{idx}", cin * e
        if e != 1:
            shapes[f"{p}._expand_conv.weight"] = (mid, cin, 1, 1)
            bn(f"{p}._bn0", mid)
        shapes[f"{p}._depthwise_conv.weight"] = (mid, 1, k, k)
        bn(f"{p}._bn1", mid)
        shapes[f"{p}._project_conv.weight"] = (cout, mid, 1, 1)
        bn(f"{p}._bn2", cout)
    shapes["_conv_head.weight"] = (HEAD_CH, STAGES[-1][5], 1, 1)
    bn("_bn1", HEAD_CH)
    shapes["_fc.weight"] = (N_CLASSES, HEAD_CH)
    shapes["_fc.bias"] = (N_CLASSES,)
    return shapes


# ------------------------------------------------------------------ folded layers
def _fold(w, conv, bn):
    """BatchNorm ``bn`` folded into the bias-free convolution ``conv``: (weight, bias), float32."""
    scale = w[f"{bn}.weight"].astype(np.float64) / np.sqrt(w[f"{bn}.running_var"].astype(np.float64) + BN_EPS)
    wt = w[conv].astype(np.float64) * scale.reshape(-1, *([1] * (w[conv].ndim - 1)))
    b = w[f"{bn}.bias"] - w[f"{bn}.running_mean"] * scale
    return wt.astype(np.float32), b.astype(np.float32)


def folded_layers(w) -> list:
    """The network as folded layers ``(kind, params)``, kind in stem | block | head | fc; both backends use it."""
    layers = [("stem", dict(zip(("w", "b"), _fold(w, "_conv_stem.weight", "_bn0")), k=3, s=2))]
    for idx, _stage, k, s, e, cin, cout in BLOCKS:
        p = f"_blocks.{idx}"
        d = dict(idx=idx, k=k, s=s, skip=(s == 1 and cin == cout))
        if e != 1:
            d["we"], d["be"] = _fold(w, f"{p}._expand_conv.weight", f"{p}._bn0")
        d["wd"], d["bd"] = _fold(w, f"{p}._depthwise_conv.weight", f"{p}._bn1")
        d["wp"], d["bp"] = _fold(w, f"{p}._project_conv.weight", f"{p}._bn2")
        layers.append(("block", d))
    wh, bh = _fold(w, "_conv_head.weight", "_bn1")
    layers.append(("head", dict(w=wh, b=bh)))
    layers.append(("fc", dict(w=w["_fc.weight"], b=w["_fc.bias"])))
    return layers


def needed(outputs) -> tuple:
    """How far the forward pass goes: (last MBConv index, head convolution needed, fc needed)."""
    last, head, fc = -1, False, False
    for o in outputs:
        if o in ("features", "head", "logits"):
            last, head = len(BLOCKS) - 1, True
            fc = fc or o == "logits"
        else:
            last = max(last, block_index(o))
    return last, head, fc


# ------------------------------------------------------------------ ONNX graph
def onnx_model(outputs, w, opset: int = 17):
    """``onnx.ModelProto`` of the network up to ``outputs``, built with ``onnx.helper``.

    Input ``input``: float32 NCHW of any height and width. BatchNorm is
    folded, ReLU6 is ``Clip(0, 6)``, TF "SAME" padding is
    ``auto_pad=SAME_UPPER``. Graph outputs are the named layers in order.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    last, need_head, need_fc = needed(outputs)
    nodes, inits = [], []
    want = set(outputs)
    produced = {}

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    six = init("relu6_max", np.array(6.0, np.float32))
    zero = init("relu6_min", np.array(0.0, np.float32))

    def conv(x, name, wt, b, k, s=1, group=1, act=True):
        attrs = dict(kernel_shape=[k, k], strides=[s, s], group=group)
        if k > 1:
            attrs["auto_pad"] = "SAME_UPPER"
        y = f"{name}_conv"
        nodes.append(helper.make_node("Conv", [x, init(f"{name}.w", wt), init(f"{name}.b", b)], [y],
                                      name=f"{name}.Conv", **attrs))
        if not act:
            return y
        z = f"{name}_relu6"
        nodes.append(helper.make_node("Clip", [y, zero, six], [z], name=f"{name}.Clip"))
        return z

    def mark(idx, x):
        for n in map_names(idx):
            if n in want:
                produced[n] = x

    layers = folded_layers(w)
    x = conv("input", "stem", layers[0][1]["w"], layers[0][1]["b"], 3, 2)
    mark(-1, x)
    for kind, d in layers[1:]:
        if kind != "block" or d["idx"] > last:
            continue
        p, inp = f"blocks.{d['idx']}", x
        if "we" in d:
            x = conv(x, f"{p}.expand", d["we"], d["be"], 1)
        x = conv(x, f"{p}.dw", d["wd"], d["bd"], d["k"], d["s"], group=d["wd"].shape[0])
        x = conv(x, f"{p}.project", d["wp"], d["bp"], 1, act=False)
        if d["skip"]:
            nodes.append(helper.make_node("Add", [x, inp], [f"{p}_out"], name=f"{p}.Add"))
            x = f"{p}_out"
        mark(d["idx"], x)
    if need_head:
        hd = layers[-2][1]
        x = conv(x, "head", hd["w"], hd["b"], 1)
        produced["features"] = x
        nodes.append(helper.make_node("GlobalAveragePool", [x], ["head_gap"], name="head.GAP"))
        nodes.append(helper.make_node("Flatten", ["head_gap"], ["head_vec"], axis=1, name="head.Flatten"))
        produced["head"] = "head_vec"
        if need_fc:
            fc = layers[-1][1]
            nodes.append(helper.make_node("Gemm", ["head_vec", init("fc.w", fc["w"]), init("fc.b", fc["b"])],
                                          ["logits_out"], transB=1, name="fc.Gemm"))
            produced["logits"] = "logits_out"
    info = layer_table()
    graph_outputs = []
    for o in outputs:
        t = produced[o]
        if t != o:
            nodes.append(helper.make_node("Identity", [t], [o], name=f"out.{o}"))
        c = info[o][0]
        shape = ["batch", c, f"{o}_h", f"{o}_w"] if info[o][1] else ["batch", c]
        graph_outputs.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "efficientnet_lite0",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                             ["batch", 3, "height", "width"])],
                              graph_outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="streamcov")
    model.ir_version = min(model.ir_version, 8)   # readable by older onnxruntime too
    onnx.checker.check_model(model)
    return model


# ------------------------------------------------------------------ numpy forward pass
def _same_pad(n, k, s):
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return out, total // 2, total - total // 2


def _pad_hw(x, k, s):
    """NHWC zero padding of TF SAME; the padded x and the output size."""
    _, h, wd, _ = x.shape
    oh, t, b = _same_pad(h, k, s)
    ow, le, r = _same_pad(wd, k, s)
    if t or b or le or r:
        x = np.pad(x, ((0, 0), (t, b), (le, r), (0, 0)))
    return x, oh, ow


def _relu6(x):
    return np.clip(x, 0.0, 6.0, out=x)


def conv_full(x, wt, b, k, s):
    """Dense k x k convolution (NHWC in and out) by im2col."""
    xp, oh, ow = _pad_hw(x, k, s)
    cols = np.concatenate([xp[:, dy:dy + s * (oh - 1) + 1:s, dx:dx + s * (ow - 1) + 1:s, :]
                           for dy in range(k) for dx in range(k)], axis=-1)
    return cols @ wt.transpose(2, 3, 1, 0).reshape(-1, wt.shape[0]) + b


def _conv_dw(x, wt, b, k, s):
    xp, oh, ow = _pad_hw(x, k, s)
    out = np.empty((x.shape[0], oh, ow, x.shape[3]), np.float32)
    out[...] = b
    for dy in range(k):
        for dx in range(k):
            out += xp[:, dy:dy + s * (oh - 1) + 1:s, dx:dx + s * (ow - 1) + 1:s, :] * wt[:, 0, dy, dx]
    return out


def _pointwise(x, wt, b):
    return x @ wt[:, :, 0, 0].T + b


class NumpyNet:
    """The forward pass in numpy (float32, NHWC inside), 5 to 10x slower than onnxruntime."""

    def __init__(self, weights, outputs):
        self.outputs = tuple(outputs)
        self.layers = folded_layers(weights)
        self.last, self.need_head, self.need_fc = needed(self.outputs)

    def run(self, x) -> list:
        want = set(self.outputs)
        res = {}

        def mark(idx, t):
            for n in map_names(idx):
                if n in want:
                    res[n] = np.ascontiguousarray(t.transpose(0, 3, 1, 2))

        x = np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 2, 3, 1))
        st = self.layers[0][1]
        x = _relu6(conv_full(x, st["w"], st["b"], 3, 2).astype(np.float32))
        mark(-1, x)
        for kind, d in self.layers[1:]:
            if kind != "block" or d["idx"] > self.last:
                continue
            inp = x
            if "we" in d:
                x = _relu6(_pointwise(x, d["we"], d["be"]))
            x = _relu6(_conv_dw(x, d["wd"], d["bd"], d["k"], d["s"]))
            x = _pointwise(x, d["wp"], d["bp"])
            if d["skip"]:
                x += inp
            mark(d["idx"], x)
        if self.need_head:
            hd = self.layers[-2][1]
            x = _relu6(_pointwise(x, hd["w"], hd["b"]))
            if "features" in want:
                res["features"] = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
            v = x.mean(axis=(1, 2), dtype=np.float64).astype(np.float32)
            res["head"] = v
            if self.need_fc:
                fc = self.layers[-1][1]
                res["logits"] = (v @ fc["w"].T + fc["b"]).astype(np.float32)
        return [res[o].astype(np.float32, copy=False) for o in self.outputs]


# ------------------------------------------------------------------ resizing
@functools.lru_cache(maxsize=256)
def resize_matrix(n_in: int, n_out: int, antialias: bool = True) -> np.ndarray:
    """(n_out, n_in) linear interpolation, half-pixel centres; the triangle widened by n_in/n_out when shrinking.

    Rows sum to 1 (a constant stays constant). Cached, read-only.
    """
    scale = n_in / n_out
    support = max(scale, 1.0) if antialias else 1.0
    centres = (np.arange(n_out) + 0.5) * scale - 0.5
    m = np.maximum(0.0, 1.0 - np.abs(np.arange(n_in)[None, :] - centres[:, None]) / support)
    s = m.sum(axis=1, keepdims=True)
    zero = s[:, 0] == 0
    if zero.any():   # cannot happen for support >= 1
        m[zero, np.clip(np.rint(centres[zero]).astype(int), 0, n_in - 1)] = 1.0
        s = m.sum(axis=1, keepdims=True)
    m = (m / s).astype(np.float32)
    m.setflags(write=False)
    return m


@functools.lru_cache(maxsize=256)
def _taps(n_in, n_out, antialias):
    """:func:`resize_matrix` as (n_out, K) indices and weights."""
    m = resize_matrix(n_in, n_out, antialias)
    nz = m > 0
    k = int(nz.sum(axis=1).max())
    idx = np.zeros((n_out, k), np.intp)
    wt = np.zeros((n_out, k), np.float32)
    for i in range(n_out):
        j = np.flatnonzero(nz[i])
        idx[i, :len(j)], wt[i, :len(j)] = j, m[i, j]
        idx[i, len(j):] = j[0]
    return idx, wt


def _resize_axis(a, axis, n_out, antialias):
    n_in = a.shape[axis]
    if n_in == n_out:
        return a
    idx, wt = _taps(n_in, n_out, antialias)
    shape = [1] * a.ndim
    shape[axis] = n_out
    out = np.take(a, idx[:, 0], axis=axis) * wt[:, 0].reshape(shape)
    for k in range(1, idx.shape[1]):
        out += np.take(a, idx[:, k], axis=axis) * wt[:, k].reshape(shape)
    return out


def resize_hw(a, size, antialias: bool = True) -> np.ndarray:
    """The last two axes of ``a`` (..., H, W) resized to ``size`` = (h, w).

    The product with :func:`resize_matrix` on each axis, done as a sum of a
    few gathered taps (2 per output when enlarging): no BLAS call, so no
    BLAS threads competing with onnxruntime or Dask threads.
    """
    a = np.asarray(a, dtype=np.float32)
    a = _resize_axis(a, a.ndim - 1, int(size[1]), antialias)
    return _resize_axis(a, a.ndim - 2, int(size[0]), antialias)
