"""Exact Log-Euclidean Gaussian kernel SVM (paper 000, eq. (1)) as a baseline.

The kernel is evaluated on vec(log X) (unit-normalized or not, as the
descriptor chose): ``K = exp(-||v_i - v_j||^2 / (2 sigma^2))``, and
scikit-learn's SVC is trained on the precomputed Gram matrix. sigma and C are
chosen by leave-one-subject-out cross-validation on the training subjects
only.
"""
from __future__ import annotations

import numpy as np


def squared_distances(A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
    """Pairwise squared Euclidean distances, clipped at 0 against round-off."""
    A = np.asarray(A, dtype=np.float64)
    B = A if B is None else np.asarray(B, dtype=np.float64)
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    np.maximum(d2, 0.0, out=d2)
    if B is A:
        np.fill_diagonal(d2, 0.0)
    return d2


def gaussian_kernel(d2: np.ndarray, sigma: float) -> np.ndarray:
    """Eq. (1) from squared Log-Euclidean distances."""
    return np.exp(-d2 / (2.0 * float(sigma) ** 2))


def select_sigma_C(d2_train: np.ndarray, y: np.ndarray, groups: np.ndarray, sigma_grid, C_grid):
    """Grid search of (sigma, C) by leave-one-group-out CV on a precomputed kernel.

    Returns ``(sigma, C, cv_accuracy, table)`` with ``table`` the CV accuracy
    of every pair (rows sigma, columns C).
    """
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
    from sklearn.svm import SVC

    groups = np.asarray(groups)
    if len(np.unique(groups)) < 2:
        raise ValueError("cross-validation over subjects needs at least 2 training subjects")
    table = np.zeros((len(sigma_grid), len(C_grid)))
    cv = LeaveOneGroupOut()
    for a, sigma in enumerate(sigma_grid):
        K = gaussian_kernel(d2_train, sigma)
        for b, C in enumerate(C_grid):
            table[a, b] = cross_val_score(SVC(kernel="precomputed", C=C), K, y, groups=groups,
                                          cv=cv).mean()
    a, b = np.unravel_index(np.argmax(table), table.shape)
    return float(sigma_grid[a]), float(C_grid[b]), float(table[a, b]), table


def exact_svm_fold(V: np.ndarray, y: np.ndarray, subjects: np.ndarray, train: np.ndarray,
                   test: np.ndarray, sigma_grid, C_grid) -> dict:
    """Train on ``train`` rows with CV-chosen (sigma, C); accuracy on ``test`` rows."""
    from sklearn.svm import SVC

    d2_tr = squared_distances(V[train])
    sigma, C, cv_acc, _ = select_sigma_C(d2_tr, y[train], subjects[train], sigma_grid, C_grid)
    clf = SVC(kernel="precomputed", C=C).fit(gaussian_kernel(d2_tr, sigma), y[train])
    K_te = gaussian_kernel(squared_distances(V[test], V[train]), sigma)
    acc = float((clf.predict(K_te) == y[test]).mean())
    return {"accuracy": acc, "sigma": sigma, "C": C, "cv_accuracy": cv_acc}
