"""Slow, obvious numpy/scipy versions of what the kernels compute."""
import numpy as np
import scipy.linalg


def hip_relative(frames, n_joints, center):
    X = np.asarray(frames, dtype=np.float64).reshape(len(frames), n_joints, 3)
    c = X[:, list(center)].mean(axis=1, keepdims=True)
    R = X - c
    if len(center) == 1:
        R = np.delete(R, center[0], axis=1)
    return R.reshape(len(frames), -1)


def covariances(frames, offsets, n_joints, center):
    R = hip_relative(frames, n_joints, center)
    return np.stack([np.cov(R[a:b].T) for a, b in zip(offsets[:-1], offsets[1:])])


def logm(A):
    return np.real(scipy.linalg.logm(A))


def vec(A):
    d = A.shape[0]
    out = []
    for i in range(d):
        for j in range(i, d):
            out.append(A[i, j] if i == j else np.sqrt(2) * A[i, j])
    return np.array(out)


def log_vectors(frames, offsets, n_joints, center, gamma, normalize):
    out = []
    for C in covariances(frames, offsets, n_joints, center):
        v = vec(logm(C + gamma * np.eye(len(C))))
        out.append(v / np.linalg.norm(v) if normalize else v)
    return np.array(out)


def gaussian_gram(X, sigma):
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * sigma ** 2))


# ------------------------------------------------------------ ConvNet (paper 004, section 5)
# EfficientNet-Lite0 written from its definition (Tan & Le 2019; TF efficientnet_lite_builder):
# float64, NCHW, BatchNorm applied as such (not folded), convolutions as explicit sums over
# output positions, TF "SAME" padding. Stages: repeats, kernel, stride, expansion, out channels.
LITE0_STAGES = [(1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80),
                (3, 5, 1, 6, 112), (4, 5, 2, 6, 192), (1, 3, 1, 6, 320)]


def _bn(w, prefix, x, eps=1e-3):
    g, b = w[f"{prefix}.weight"], w[f"{prefix}.bias"]
    m, v = w[f"{prefix}.running_mean"], w[f"{prefix}.running_var"]
    return (x - m[None, :, None, None]) / np.sqrt(v[None, :, None, None] + eps) * g[None, :, None, None] \
        + b[None, :, None, None]


def _pad_same(x, k, s):
    n, c, h, wd = x.shape
    oh, ow = -(-h // s), -(-wd // s)
    ph, pw = max((oh - 1) * s + k - h, 0), max((ow - 1) * s + k - wd, 0)
    xp = np.zeros((n, c, h + ph, wd + pw))
    xp[:, :, ph // 2:ph // 2 + h, pw // 2:pw // 2 + wd] = x
    return xp, oh, ow


def conv_same(x, W, s, depthwise=False):
    """TF-SAME convolution: out[n, o, i, j] = sum_{c, a, b} W[o, c, a, b] xpad[n, c, i s + a, j s + b]."""
    k = W.shape[-1]
    xp, oh, ow = _pad_same(x, k, s)
    out = np.zeros((x.shape[0], W.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * s:i * s + k, j * s:j * s + k]
            if depthwise:
                out[:, :, i, j] = np.einsum("ncab,cab->nc", patch, W[:, 0])
            else:
                out[:, :, i, j] = np.einsum("ncab,ocab->no", patch, W)
    return out


def relu6(x):
    return np.minimum(np.maximum(x, 0.0), 6.0)


def efficientnet_lite0(w, x, outputs=("block3", "block5", "head")):
    """The named outputs for a normalised NCHW input ``x`` (stage outputs ``block<s>``, ``head``, ``logits``)."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    out = {}
    x = relu6(_bn(w, "_bn0", conv_same(np.asarray(x, np.float64), w["_conv_stem.weight"], 2)))
    idx, cin = 0, 32
    for stage, (rep, k, s, e, cout) in enumerate(LITE0_STAGES, start=1):
        for r in range(rep):
            p, inp = f"_blocks.{idx}", x
            stride = s if r == 0 else 1
            if e != 1:
                x = relu6(_bn(w, f"{p}._bn0", conv_same(x, w[f"{p}._expand_conv.weight"], 1)))
            x = relu6(_bn(w, f"{p}._bn1", conv_same(x, w[f"{p}._depthwise_conv.weight"], stride, depthwise=True)))
            x = _bn(w, f"{p}._bn2", conv_same(x, w[f"{p}._project_conv.weight"], 1))
            if stride == 1 and cin == cout:
                x = x + inp
            idx, cin = idx + 1, cout
        out[f"block{stage}"] = x
    f = relu6(_bn(w, "_bn1", conv_same(x, w["_conv_head.weight"], 1)))
    out["head"] = f.mean(axis=(2, 3))
    out["logits"] = out["head"] @ w["_fc.weight"].T + w["_fc.bias"]
    return {o: out[o] for o in outputs}


def bilinear_1d(n_in, n_out):
    """(n_out, n_in) interpolation matrix of enlarging (n_out >= n_in), half-pixel centres, edges clamped.

    Output i samples the input at c = (i + 1/2) n_in / n_out - 1/2, clamped to
    [0, n_in - 1]: (1 - t) x[floor c] + t x[floor c + 1], t = c - floor c.
    """
    M = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = min(max((i + 0.5) * n_in / n_out - 0.5, 0.0), n_in - 1.0)
        a = int(np.floor(c))
        t = c - a
        M[i, a] += 1 - t
        if t > 0:
            M[i, a + 1] += t
    return M


def hypercolumns(maps, grid):
    """Maps (C_b, h_b, w_b) enlarged to ``grid`` = (gh, gw) bilinearly, concatenated per cell: (gh gw, sum C_b)."""
    cols = []
    for m in maps:
        up = np.einsum("ia,cab,jb->cij", bilinear_1d(m.shape[1], grid[0]), np.asarray(m, np.float64),
                       bilinear_1d(m.shape[2], grid[1]))
        cols.append(up.reshape(len(m), -1).T)
    return np.hstack(cols)


def product_kernel(V, H, sigma, w, V2=None, H2=None):
    """Paper 004's conv + head kernel, weighted: exp(-|v - v'|^2 / (2 sigma^2)) ((1 - w) + w <h, h'>)."""
    V2 = V if V2 is None else V2
    H2 = H if H2 is None else H2
    D2 = ((np.asarray(V, np.float64)[:, None, :] - np.asarray(V2, np.float64)[None, :, :]) ** 2).sum(-1)
    return np.exp(-D2 / (2 * sigma ** 2)) * ((1 - w) + w * np.asarray(H, np.float64) @ np.asarray(H2, np.float64).T)


def sum_kernel(V, H, sigma, w, V2=None, H2=None):
    """The sum alternative of the conv + head kernel: (1 - w) exp(-|v - v'|^2 / (2 sigma^2)) + w <h, h'>."""
    V2 = V if V2 is None else V2
    H2 = H if H2 is None else H2
    K2 = product_kernel(V, H, sigma, 0.0, V2, H2)
    return (1 - w) * K2 + w * np.asarray(H, np.float64) @ np.asarray(H2, np.float64).T


def normalize_heads(H, norm):
    """Head normalisation entry by entry: "l2" h / |h|, "power" sign(h) sqrt(|h|) / |.|; zero rows stay zero."""
    import math

    out = np.zeros((len(H), len(H[0])))
    for i, row in enumerate(H):
        r = [float(x) for x in row]
        if norm == "power":
            r = [math.copysign(math.sqrt(abs(x)), x) for x in r]
        n = math.sqrt(sum(x * x for x in r))
        out[i] = [x / n for x in r] if n > 0 else r
    return out


def count_sketch_of_outer(z, a, hz, sz, ha, sa, n):
    """The count sketch of the outer product z a^T under hash (hz_i + ha_j) mod n and sign sz_i sa_j."""
    out = np.zeros(n)
    for i in range(len(z)):
        for j in range(len(a)):
            out[(hz[i] + ha[j]) % n] += sz[i] * sa[j] * z[i] * a[j]
    return out
def savgol_derivative(P, window, order):
    """scipy's Savitzky-Golay derivative (polynomial degree 2, mode "interp"); short sequences
    use the largest odd window that fits, or a line through two frames."""
    from scipy.signal import savgol_filter

    T = len(P)
    n = min(window, T if T % 2 else T - 1)
    if n >= 3:
        return savgol_filter(P, n, 2, deriv=order, axis=0, mode="interp")
    if order == 1:
        return np.repeat((P[1:] - P[:1]), T, axis=0)      # T == 2
    return np.zeros_like(P)


def kernelized_covariance(W, sigma, ddof=1, rtol=1e-20):
    """Cavazza et al. (ICPR 2016) from the raw series: the columns of ``W`` (frames x d) standardized
    (mean 0, variance 1 with ``ddof``; a column whose variance is at most ``rtol`` times the largest is
    constant and becomes 0), mean squared distances between every two series, Gaussian of them."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape
    Z = W - W.mean(axis=0)
    var = (Z ** 2).sum(axis=0) / max(n - ddof, 1)
    const = (var <= rtol * var.max()) | (var <= 0)
    Z = np.where(const, 0.0, Z / np.sqrt(np.where(const, 1.0, var)))
    K = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            K[i, j] = np.exp(-((Z[:, i] - Z[:, j]) ** 2).sum() / max(n - ddof, 1) / (2 * sigma ** 2))
    return K


def raw_kernelized_covariance(W, sigma, ddof=1):
    """The kernelized covariance of the series as they are (``matrix="rbf-raw"``): for every two columns
    of ``W`` (frames x d), the variance of their difference (with ``ddof``; 0 for one frame) plus the square
    of its mean, Gaussian of it."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape
    K = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            diff = W[:, i] - W[:, j]
            var = ((diff - diff.mean()) ** 2).sum() / max(n - ddof, 1)
            K[i, j] = np.exp(-(var + diff.mean() ** 2) / (2 * sigma ** 2))
    return K


def pyramid_descriptor(X, n_joints, center, keep, features=("positions",), window=5, time="frame", levels=1,
                       overlap=False, yaw=None, up=1, neck=None, mean_weight=0.0, gamma=1e-4, pairs=(),
                       matrix="covariance", kernel_sigma=1.0, torso=None, torso_frames=False, ddof=1):
    """One sequence (T, 3J), the obvious way: hip-relative kept joints, derivatives by scipy,
    relative positions of joint ``pairs`` appended, the whole sequence rotated (yaw: (left hip
    joints, right hip joints); torso: (left hip, right hip, neck joints), the frame of the mean hip
    line and spine, or of each frame's with ``torso_frames``) and scaled by the mean neck distance
    (neck joints), one
    covariance per window (np.cov with ``ddof``; 0 for fewer than ddof + 1 frames) or its kernelized covariance (``matrix="rbf"`` or ``"rbf-raw"``, from the
    window's series), log by scipy, unit norm."""
    T = len(X)
    J3 = np.asarray(X, dtype=np.float64).reshape(T, n_joints, 3)
    hc = J3[:, list(center)].mean(axis=1)
    rel = J3[:, list(keep)] - hc[:, None, :]
    pr = np.stack([J3[:, a] - J3[:, b] for a, b in pairs], axis=1) if len(pairs) else np.zeros((T, 0, 3))
    if torso is not None:
        hips = J3[:, list(torso[1])].mean(1) - J3[:, list(torso[0])].mean(1)
        spine = J3[:, list(torso[2])].mean(1) - hc

        def frame_of(h, s):
            tol = 1e-6 * max(np.linalg.norm(h), np.linalg.norm(s))
            if not np.linalg.norm(h) > tol or tol == 0:
                return np.eye(3)                       # degenerate: left as it is
            r = h / np.linalg.norm(h)
            u = s - (s @ r) * r
            if not np.linalg.norm(u) > tol:
                return np.eye(3)
            u /= np.linalg.norm(u)
            return np.stack([r, u, np.cross(r, u)])

        if torso_frames:           # each frame in its own torso frame (a rotation about the hip centre)
            Rs = [frame_of(hips[t], spine[t]) for t in range(T)]
            rel = np.stack([rel[t] @ Rs[t].T for t in range(T)])
            pr = np.stack([pr[t] @ Rs[t].T for t in range(T)])
        else:
            R = frame_of(hips.mean(0), spine.mean(0))
            rel, pr = rel @ R.T, pr @ R.T
    if yaw is not None:
        lr = (J3[:, list(yaw[1])].mean(1) - J3[:, list(yaw[0])].mean(1)).mean(0)
        u = np.eye(3)[up]
        r = lr - (lr @ u) * u
        r /= np.linalg.norm(r)
        R = np.stack([r, u, np.cross(r, u)])
        rel = rel @ R.T
        pr = pr @ R.T
    if neck is not None:
        size = np.linalg.norm(J3[:, list(neck)].mean(1) - hc, axis=1).mean()
        rel, pr = rel / size, pr / size
    P = rel.reshape(T, -1)
    blocks = []
    for f in features:
        order = {"positions": 0, "velocities": 1, "accelerations": 2}[f]
        D = P if order == 0 else savgol_derivative(P, window, order)
        blocks.append(D * (T ** order if time == "normalized" else 1.0))
    blocks.append(pr.reshape(T, -1))
    F = np.concatenate(blocks, axis=1)
    out = []
    # the windows of the library: their convention (floor/ceil, widening) is pinned by hand-worked
    # cases in test_descriptor_options.py; this reference checks what is computed inside them
    from streamcov.descriptors.skeleton import window_bounds

    for s, e in window_bounds(T, levels, overlap):
        W = F[s:e]
        C = (np.cov(W.T, ddof=ddof).reshape(F.shape[1], F.shape[1]) if len(W) > max(ddof, 1)
             else np.zeros((F.shape[1],) * 2))
        if matrix == "rbf":
            C = kernelized_covariance(W, kernel_sigma, ddof=ddof)
        elif matrix == "rbf-raw":
            C = raw_kernelized_covariance(W, kernel_sigma, ddof=ddof)
        if mean_weight > 0:
            m = mean_weight * W.mean(0)
            C = np.block([[C + np.outer(m, m), m[:, None]], [m[None, :], np.ones((1, 1))]])
        v = vec(logm(C + gamma * np.eye(len(C))))
        out.append(v / np.linalg.norm(v))
    return np.concatenate(out)


def signed_model_doc(doc):
    """A model.json description with its ``doc_sha256`` taken again, as a model edited and re-signed (a
    crafted file) would carry: the SHA-256 of the description without it, keys sorted, JSON without spaces."""
    import hashlib
    import json

    body = {k: v for k, v in doc.items() if k != "doc_sha256"}
    return {**body, "doc_sha256": hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
            .hexdigest()}


def block_sum_gram(X, Y, blocks, sigma):
    """sum_b w_b exp(-||x_b - y_b||^2 / (2 sigma^2)), one pair of rows at a time."""
    K = np.zeros((len(X), len(Y)))
    for i in range(len(X)):
        for j in range(len(Y)):
            c = 0
            for width, w in blocks:
                d = X[i, c:c + width] - Y[j, c:c + width]
                K[i, j] += w * np.exp(-(d @ d) / (2 * sigma ** 2))
                c += width
    return K


def nystroem_features(X, L, blocks, sigma):
    """k(X, L) K_LL^{-1/2} with the symmetric inverse square root from an eigendecomposition."""
    s, U = np.linalg.eigh(block_sum_gram(L, L, blocks, sigma))
    return block_sum_gram(X, L, blocks, sigma) @ U @ np.diag(1 / np.sqrt(s)) @ U.T


def view_mean_gram(X, Y, blocks, sigma, views):
    """(1 / V^2) sum over the pairs of views (s, t) of block_sum_gram(view s of X, view t of Y): rows are
    ``views`` copies of the ``blocks`` layout side by side."""
    width = sum(w for w, _ in blocks)
    K = np.zeros((len(X), len(Y)))
    for s in range(views):
        for t in range(views):
            K += block_sum_gram(X[:, s * width:(s + 1) * width], Y[:, t * width:(t + 1) * width], blocks, sigma)
    return K / views ** 2


def mirror_sequence(X, pairs, axis=0):
    """Frames (T, 3J) mirrored the obvious way: swap the coordinates of each (left, right) joint pair, then
    negate coordinate ``axis`` of every joint."""
    T = len(X)
    J3 = np.array(X, dtype=np.float64).reshape(T, -1, 3)
    out = J3.copy()
    for a, b in pairs:
        out[:, a], out[:, b] = J3[:, b], J3[:, a]
    out[:, :, axis] = -out[:, :, axis]
    return out.reshape(T, -1)
