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


def pyramid_windows(T, levels, overlap, min_window=3):
    out = []
    for l in range(levels):
        n = 2 ** l
        starts = [k * T / (2 * n) for k in range(2 * n - 1)] if overlap and l > 0 else [k * T / n for k in range(n)]
        for a in starts:
            s, e = int(np.floor(a)), int(np.ceil(a + T / n))
            e = max(e, s + 1)
            if e - s < min_window:
                mid = 0.5 * (s + e)
                s = int(max(0, min(T - min_window, round(mid - min_window / 2))))
                e = min(T, s + min_window)
            out.append((s, e))
    return out


def pyramid_descriptor(X, n_joints, center, keep, features=("positions",), window=5, time="frame", levels=1,
                       overlap=False, yaw=None, up=1, neck=None, mean_weight=0.0, gamma=1e-4):
    """One sequence (T, 3J), the obvious way: hip-relative kept joints, derivatives by scipy,
    the whole sequence rotated (yaw: (left hip joints, right hip joints)) and scaled by the mean
    neck distance (neck joints), one covariance per window (np.cov), log by scipy, unit norm."""
    T = len(X)
    J3 = np.asarray(X, dtype=np.float64).reshape(T, n_joints, 3)
    hc = J3[:, list(center)].mean(axis=1)
    rel = J3[:, list(keep)] - hc[:, None, :]
    if yaw is not None:
        lr = (J3[:, list(yaw[1])].mean(1) - J3[:, list(yaw[0])].mean(1)).mean(0)
        u = np.eye(3)[up]
        r = lr - (lr @ u) * u
        r /= np.linalg.norm(r)
        R = np.stack([r, u, np.cross(r, u)])
        rel = rel @ R.T
    if neck is not None:
        rel = rel / np.linalg.norm(J3[:, list(neck)].mean(1) - hc, axis=1).mean()
    P = rel.reshape(T, -1)
    blocks = []
    for f in features:
        order = {"positions": 0, "velocities": 1, "accelerations": 2}[f]
        D = P if order == 0 else savgol_derivative(P, window, order)
        blocks.append(D * (T ** order if time == "normalized" else 1.0))
    F = np.concatenate(blocks, axis=1)
    out = []
    for s, e in pyramid_windows(T, levels, overlap):
        W = F[s:e]
        C = np.cov(W.T).reshape(F.shape[1], F.shape[1]) if len(W) > 1 else np.zeros((F.shape[1],) * 2)
        if mean_weight > 0:
            m = mean_weight * W.mean(0)
            C = np.block([[C + np.outer(m, m), m[:, None]], [m[None, :], np.ones((1, 1))]])
        v = vec(logm(C + gamma * np.eye(len(C))))
        out.append(v / np.linalg.norm(v))
    return np.concatenate(out)
