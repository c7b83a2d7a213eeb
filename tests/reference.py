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
