"""Twin-GP experiments of paper 003 (Tonde & Elgammal), section 6.

* ``tgp-sshape``: the S-shape inverse problem (section 6.1.1), all four
  combinations of criterion (KL / HSIC) and basis (monomial / Gegenbauer),
  over several seeds.
* ``tgp-digits``: scikit-learn's 8x8 digits, predict the central 4x4 pixels
  from the outer 48 (the analogue of the USPS reconstruction task of section
  6.1.2), against kernel ridge regression and nearest neighbour.
* ``tgp-pose``: MSR-Action3D skeleton frames, predict the arm joints (elbows,
  wrists, hands) from the other joints, hip-relative, cross-subject.

"No map" is the twin GP on the Gaussian base kernels; "map" is the same
criterion on learned transformations, degrees chosen by cross-validated MAE on
the training set only. ``gain = (1 - MAE_map / MAE_no_map) * 100`` (section 6).
Each runner ``run_*(cfg, ctx)`` returns the JSON result; per-seed and
per-degree details go to ``<output>/<task>_details.json``.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
import warnings
from pathlib import Path

import numpy as np

from .._config import progress_bar
from ..errors import ConfigError
from ..structured import TwinGaussianProcess, median_heuristic_gamma

CRITERIA = ("kl", "hsic")
BASES = ("monomial", "gegenbauer")


def _tgp_cfg(cfg) -> dict:
    """The ``[tgp]`` table as a dict (validated by :class:`streamcov.tasks.schema.TGPTable`)."""
    return cfg.tgp.model_dump()


def _gamma(value, Z, seed, key: str) -> float:
    """``tgp.<key>``: a number, or the median heuristic on ``Z`` (the training inputs or targets), refused in
    one line naming the key when float64 cannot hold it."""
    if value != "median":
        return float(value)
    try:
        what = "targets" if key == "gamma_y" else "inputs"
        return median_heuristic_gamma(Z, random_state=seed, name=f"the training {what}")
    except ValueError as exc:
        raise ConfigError(f"tgp.{key} = \"median\": {exc}") from None


def _mae(P, Y) -> float:
    return float(np.abs(np.asarray(P, dtype=np.float64).reshape(Y.shape) - Y).mean())


def _gain(mae_map: float, mae_no_map: float) -> float:
    return float((1.0 - mae_map / mae_no_map) * 100.0)


def _bar(progress: bool, total: int, desc: str):
    """A context manager of the task's progress bar (None when ``progress`` is off), closed by an error too, so
    that the error's line starts a line of its own."""
    return progress_bar(None, progress, total=total, desc=desc, leave=False)


def _tick(bar, note: str = ""):
    if bar is not None:
        bar.set_postfix_str(note, refresh=False)   # redrawn by update at tqdm's rate
        bar.update(1)


def _evaluate(Xtr, Ytr, Xte, Yte, t: dict, seed: int, *args, **kw) -> dict:
    """:func:`_evaluate_split`, with a basis that overflows float64 (``tgp.gegenbauer_weight_input = 1e300``: a
    traceback) refused naming the keys that set it."""
    from ..structured.hsic import NonFiniteBasisError

    # the larger weight first: the message is put where that key was given
    key = max(("gegenbauer_weight_input", "gegenbauer_weight_output"), key=lambda k: abs(float(t[k])))
    try:
        return _evaluate_split(Xtr, Ytr, Xte, Yte, t, seed, *args, **kw)
    except NonFiniteBasisError as exc:
        raise ConfigError(f"tgp.{key} = {t[key]!r}: {exc}; lower the Gegenbauer weights (the paper's are 0.51 and "
                          f"0.52) or the degrees (tgp.degree_grid, tgp.degrees)") from None
    except np.linalg.LinAlgError as exc:   # a kernel matrix no diagonal shift made positive definite: a traceback
        # the basis of the fit that failed (_fit_of): the Gegenbauer weights are named only when that map failed
        if getattr(exc, "tgp_basis", None) != "gegenbauer":
            raise ConfigError(f"tgp.lambda_x = {t['lambda_x']!r}, tgp.lambda_y = {t['lambda_y']!r}: {exc}; raise "
                              f"tgp.lambda_x and tgp.lambda_y") from None
        raise ConfigError(f"tgp.{key} = {t[key]!r}: {exc}; lower the Gegenbauer weights (the paper's are 0.51 and "
                          f"0.52), or raise tgp.lambda_x and tgp.lambda_y") from None


def _evaluate_split(Xtr, Ytr, Xte, Yte, t: dict, seed: int, bar=None, max_train=None,
                    approximation="subsample", metric=None, train_fix="lower data.test_fraction",
                    test_fix="raise data.test_fraction", groups=None) -> dict:
    """No-map and mapped twin GPs for every (criterion, basis) on one split.

    ``groups``: the training rows' groups (subjects, where the split is cross-subject), kept apart by the
    degree selection's folds.

    ``metric(P, Y) -> float``: an extra error recorded as ``"metric"``. ``train_fix``, ``test_fix``: how the
    task's settings give a split more training or test rows, for the message refusing one too small.
    """
    if len(Xtr) < 2 or len(Xte) < 1:
        raise ConfigError(f"the split leaves {len(Xtr)} training and {len(Xte)} test rows; a twin GP needs 2 "
                          f"training rows and a test row at least: {train_fix if len(Xtr) < 2 else test_fix}")
    n_cv = min(len(Xtr), int(t["cv_max_train"])) if t["cv_max_train"] is not None else len(Xtr)
    if t["degrees"] is None and n_cv < 2 * int(t["cv"]):
        raise ConfigError(f"tgp.cv = {t['cv']}: choosing the degrees by {t['cv']}-fold cross-validation needs "
                          f"{2 * int(t['cv'])} training rows, the split gives it {n_cv}"
                          f"{' (tgp.cv_max_train)' if n_cv < len(Xtr) else ''}; lower tgp.cv, set "
                          f"tgp.degrees = [d_input, d_output], or "
                          f"{'raise tgp.cv_max_train' if n_cv < len(Xtr) else 'give the split more training rows'}")
    gx, gy = _gamma(t["gamma_x"], Xtr, seed, "gamma_x"), _gamma(t["gamma_y"], Ytr, seed, "gamma_y")
    base = dict(gamma_x=gx, gamma_y=gy, lambda_x=float(t["lambda_x"]),
                lambda_y=float(t["lambda_y"]), n_starts=int(t["n_starts"]),
                max_iter=int(t["max_iter"]), max_train=max_train, approximation=approximation,
                random_state=seed)
    geg = dict(gegenbauer_weight_input=float(t["gegenbauer_weight_input"]),
               gegenbauer_weight_output=float(t["gegenbauer_weight_output"]))
    grid = [int(d) for d in t["degree_grid"]]
    res: dict = {"gamma_x": gx, "gamma_y": gy, "no_map": {}, "map": {}}
    for crit in t["criteria"]:
        t0 = time.perf_counter()
        with _fit_of(None):
            est = TwinGaussianProcess(criterion=crit, **base).fit(Xtr, Ytr)
            P, (diverged, undefined) = _predict_said(est, Xte, f"{crit}, no map, seed {seed}")
        res["no_map"][crit] = {"mae": _mae(P, Yte), "diverged_rows": diverged, "undefined_rows": undefined,
                               "seconds": time.perf_counter() - t0}
        if metric is not None:
            res["no_map"][crit]["metric"] = metric(P, Yte)
        _tick(bar, f"{crit} no map")
    rng = np.random.RandomState(seed)
    cv_idx = np.arange(len(Xtr))
    if t["cv_max_train"] is not None and len(Xtr) > int(t["cv_max_train"]):
        cv_idx = np.sort(rng.choice(len(Xtr), int(t["cv_max_train"]), replace=False))
    # the rows of the degree CV keep their groups apart (tgp.cv_max_train drew them)
    cv_groups = None if groups is None else _two_groups_or_none(np.asarray(groups)[cv_idx])
    for crit, basis in itertools.product(t["criteria"], t["bases"]):
        with _fit_of(basis):   # a LinAlgError names the keys of the basis whose fit failed (_evaluate)
            t0 = time.perf_counter()
            entry: dict = {}
            if t["degrees"] is not None:
                d1, d2 = (int(d) for d in t["degrees"])
            else:
                sel = TwinGaussianProcess(criterion=crit, kernel_transform=basis, degree_grid=grid,
                                          cv=int(t["cv"]), **geg, **base)
                sel.fit(Xtr[cv_idx], Ytr[cv_idx], groups=cv_groups)
                d1, d2 = sel.degree_input_, sel.degree_output_
                entry["cv_mae"] = {f"{a},{b}": s for (a, b), s in
                                   zip(sel.cv_results_["params"], sel.cv_results_["mean_mae"])}
            est = TwinGaussianProcess(criterion=crit, kernel_transform=basis, degree_input=d1,
                                      degree_output=d2, **geg, **base).fit(Xtr, Ytr)
            P, (diverged, undefined) = _predict_said(est, Xte, f"{crit}, {basis} map of degrees ({d1}, {d2}), "
                                                                f"seed {seed}")
            if metric is not None:
                entry["metric"] = metric(P, Yte)
            entry.update(degrees=[d1, d2], mae=_mae(P, Yte), diverged_rows=diverged, undefined_rows=undefined,
                         alpha=est.transform_.alpha_.tolist(), beta=est.transform_.beta_.tolist(),
                         nonnegativity_warning=est.transform_.nonnegativity_warning_,
                         shift_x=est.shift_x_, shift_y=est.shift_y_)
            if t["oracle_grid"]:
                # The paper's Fig. 7 reads the gain off a degree grid evaluated on
                # the test set; kept apart from the cross-validated figure.
                og = {}
                for a, b in itertools.product(grid, grid):
                    e = TwinGaussianProcess(criterion=crit, kernel_transform=basis, degree_input=a,
                                            degree_output=b, **geg, **base).fit(Xtr, Ytr)
                    said = f"{crit}, {basis} map of degrees ({a}, {b}) of the test grid, seed {seed}"
                    og[f"{a},{b}"] = _mae(_predict_said(e, Xte, said)[0], Yte)
                entry["test_grid_mae"] = og
            entry["seconds"] = time.perf_counter() - t0
            res["map"][f"{crit}_{basis}"] = entry
            _tick(bar, f"{crit} {basis} d=({d1},{d2})")
    return res


@contextlib.contextmanager
def _fit_of(basis):
    """A ``LinAlgError`` raised within is marked with the ``basis`` of the fit (None: no map), for
    :func:`_evaluate`'s message."""
    try:
        yield
    except np.linalg.LinAlgError as exc:
        exc.tgp_basis = basis
        raise


def _predict_said(est, X, what: str) -> tuple[np.ndarray, tuple[int, int]]:
    """``est``'s predictions of ``X`` and how many rows fell back to their nearest training output (the
    minimization diverged, the criterion undefined), said with the fit they belong to (``what``): the same
    warning of four fits and several seeds did not say which figure was in part a nearest-neighbour one."""
    from ..structured.tgp import diverged_text

    P, (diverged, undefined) = est._predict(X)
    if diverged or undefined:
        warnings.warn(f"{what}: {diverged_text(diverged, len(P), undefined)}", RuntimeWarning, stacklevel=2)
    return P, (int(diverged), int(undefined))


def _summary(per_split: list[dict], t: dict) -> dict:
    """Mean / std over splits; top-level fields for the primary combination."""
    out: dict = {}
    mean_std = lambda v: (float(np.mean(v)), float(np.std(v)))  # noqa: E731
    for crit in t["criteria"]:
        m, s = mean_std([r["no_map"][crit]["mae"] for r in per_split])
        out[f"mae_no_map_{crit}"], out[f"mae_no_map_{crit}_std"] = m, s
    for crit, basis in itertools.product(t["criteria"], t["bases"]):
        key = f"{crit}_{basis}"
        maps = [r["map"][key]["mae"] for r in per_split]
        nomaps = [r["no_map"][crit]["mae"] for r in per_split]
        gains = [_gain(a, b) for a, b in zip(maps, nomaps)]
        out[f"mae_map_{key}"], out[f"mae_map_{key}_std"] = mean_std(maps)
        out[f"gain_percent_{key}"] = _gain(float(np.mean(maps)), float(np.mean(nomaps)))
        out[f"gain_percent_{key}_per_split_mean"], out[f"gain_percent_{key}_per_split_std"] = \
            mean_std(gains)
        out[f"degrees_{key}"] = [r["map"][key]["degrees"] for r in per_split]
        if t["oracle_grid"]:
            best = [_gain(min(r["map"][key]["test_grid_mae"].values()), r["no_map"][crit]["mae"])
                    for r in per_split]
            k = f"test_grid_best_gain_percent_{key}"
            out[k], out[f"{k}_std"] = mean_std(best)
    crit, basis = t["primary"]
    out = {"primary": f"{crit}_{basis}",
           "mae_no_map": out[f"mae_no_map_{crit}"],
           "mae_map": out[f"mae_map_{crit}_{basis}"],
           "gain_percent": out[f"gain_percent_{crit}_{basis}"], **out}
    return out


def _write_details(out_dir: Path, name: str, details) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from ..files import atomic_write_text

    atomic_write_text(out_dir / f"{name}_details.json", json.dumps(details, indent=1) + "\n")


# --------------------------------------------------------------------------
# S-shape
# --------------------------------------------------------------------------
def sshape_data(n_samples: int, noise: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """S-shape data of section 6.1.1: ``x ~ U(0, 1)``, ``r = x + 0.3 sin(2 pi x) + eps``.

    Returns inputs ``r`` of shape (n, 1) and targets ``x`` of shape (n,).
    """
    x = rng.uniform(0.0, 1.0, n_samples)
    r = x + 0.3 * np.sin(2.0 * np.pi * x) + rng.normal(0.0, noise, n_samples)
    return r[:, None], x


def run_sshape(cfg, ctx) -> dict:
    """S-shape: predict ``x`` from ``r``, MAE, all criterion x basis combinations.

    ``[data]``: ``n_samples`` (500), ``noise`` (0.05), ``test_fraction`` (0.5;
    the paper gives no split, so the 500 points are split at random),
    ``seeds`` ([0, 1, 2, 3, 4]). ``[tgp]``: see ``_TGP_DEFAULTS``; the
    pipeline file sets the paper's ``gamma_x = gamma_y = 1``.
    """
    t0 = time.perf_counter()
    d = cfg.data
    t = _tgp_cfg(cfg)
    n, noise, frac, seeds = int(d.n_samples), float(d.noise), float(d.test_fraction), [int(s) for s in d.seeds]
    progress, out_dir = ctx.progress, ctx.output
    per_total = len(t["criteria"]) * (1 + len(t["bases"]))
    per = []
    with _bar(progress, per_total * len(seeds), "tgp-sshape") as bar:
        for seed in seeds:
            rng = np.random.RandomState(seed)
            X, y = sshape_data(n, noise, rng)
            perm = rng.permutation(n)
            n_te = int(round(frac * n))
            te, tr = perm[:n_te], perm[n_te:]
            r = _evaluate(X[tr], y[tr], X[te], y[te], t, seed, bar,
                          train_fix="lower data.test_fraction, or raise data.n_samples",
                          test_fix="raise data.test_fraction, or data.n_samples")
            r["seed"] = seed
            r["mae_mean_predictor"] = _mae(np.full(len(te), y[tr].mean()), y[te])
            per.append(r)
    _write_details(out_dir, "tgp_sshape", per)
    res = _summary(per, t)
    res.update(n_samples=n, n_train=n - int(round(frac * n)), n_test=int(round(frac * n)),
               seeds=seeds, mae_mean_predictor=float(np.mean([r["mae_mean_predictor"]
                                                              for r in per])),
               paper_gain_percent={"kl_monomial": 31.27, "kl_gegenbauer": 39.49,
                                   "hsic_monomial": 22.31, "hsic_gegenbauer": 26.06},
               seconds=time.perf_counter() - t0)
    return res


# --------------------------------------------------------------------------
# digits
# --------------------------------------------------------------------------
def digits_center_task():
    """8x8 digits split into the outer 48 pixels (inputs) and central 4x4 (outputs), in [0, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    img = digits.images.astype(np.float64) / 16.0
    center = np.zeros((8, 8), dtype=bool)
    center[2:6, 2:6] = True
    X = img[:, ~center]
    Y = img[:, center]
    return X, Y, digits.target


def _two_groups_or_none(groups):
    """``groups`` where they hold 2 or more, for folds of whole groups; else None (folds of rows)."""
    return groups if len(np.unique(groups)) >= 2 else None


def _baselines(Xtr, Ytr, Xte, Yte, gamma_x, seed, groups=None) -> dict:
    """The baselines' errors; ``groups`` (the training rows' subjects) are kept apart by the kernel ridge's
    cross-validation, as the split keeps them."""
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.model_selection import GridSearchCV, GroupKFold
    from sklearn.neighbors import KNeighborsRegressor

    out = {"mae_mean_predictor": _mae(np.broadcast_to(Ytr.mean(0), Yte.shape), Yte)}
    nn = KNeighborsRegressor(n_neighbors=1).fit(Xtr, Ytr)
    out["mae_nn"] = _mae(nn.predict(Xte), Yte)
    grid = {"alpha": [1e-3, 1e-2, 1e-1, 1.0],
            "gamma": [gamma_x * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)]}
    # data.max_train = 2 was a traceback with 3 folds
    cv = min(3, len(Xtr)) if groups is None else GroupKFold(min(3, len(np.unique(groups))))
    krr = GridSearchCV(KernelRidge(kernel="rbf"), grid, cv=cv,
                       scoring="neg_mean_absolute_error").fit(Xtr, Ytr, groups=groups)
    out["mae_krr"] = _mae(krr.predict(Xte), Yte)
    out["krr_params"] = krr.best_params_
    return out


def run_digits(cfg, ctx) -> dict:
    """Digits reconstruction: central 4x4 from the outer 48 pixels (MAE on [0, 1] pixels).

    ``[data]``: ``test_fraction`` (0.25, stratified by digit, as the paper's
    quarter of USPS), ``seed`` (0), ``max_train`` (none: all ~1347 training
    images). Baselines: 1-nearest neighbour, kernel ridge regression (RBF,
    alpha and gamma by 3-fold CV), the training mean.
    """
    from sklearn.model_selection import train_test_split

    t0 = time.perf_counter()
    d = cfg.data
    t = _tgp_cfg(cfg)
    seed = int(d.seed if d.seed is not None else cfg.seed)
    frac = float(d.test_fraction)
    progress, out_dir = ctx.progress, ctx.output
    X, Y, labels = digits_center_task()
    n_classes, n_test = len(np.unique(labels)), int(np.ceil(frac * len(X)))
    if min(n_test, len(X) - n_test) < n_classes:   # the stratified split puts every digit on both sides
        raise ConfigError(f"data.test_fraction = {frac}: leaves {len(X) - n_test} training and {n_test} test "
                          f"images; the split stratified by digit needs {n_classes} on each side")
    Xtr, Xte, Ytr, Yte = train_test_split(X, Y, test_size=frac, stratify=labels,
                                          random_state=seed)
    max_train = d.max_train
    if max_train is not None and len(Xtr) > int(max_train):
        idx = np.sort(np.random.RandomState(seed).choice(len(Xtr), int(max_train), replace=False))
        Xtr, Ytr = Xtr[idx], Ytr[idx]
    with _bar(progress, len(t["criteria"]) * (1 + len(t["bases"])), "tgp-digits") as bar:
        r = _evaluate(Xtr, Ytr, Xte, Yte, t, seed, bar, train_fix="raise data.max_train, or lower data.test_fraction",
                      test_fix="raise data.test_fraction")
    b = _baselines(Xtr, Ytr, Xte, Yte, r["gamma_x"], seed)
    _write_details(out_dir, "tgp_digits", {**r, **b})
    res = _summary([r], t)
    res.update(b)
    res.update(n_train=len(Xtr), n_test=len(Xte), seed=seed, gamma_x=r["gamma_x"],
               gamma_y=r["gamma_y"], seconds=time.perf_counter() - t0)
    return res


# --------------------------------------------------------------------------
# MSR-Action3D pose
# --------------------------------------------------------------------------
HIP_CENTER = 6                      # 0-based joint index (joint 7 of the release)
ARM_JOINTS = (7, 8, 9, 10, 11, 12)  # elbows, wrists, hands (joints 8-13)
TRAIN_SUBJECTS = (1, 3, 5, 7, 9)


def pose_frames(data) -> tuple[np.ndarray, np.ndarray, str]:
    """All valid frames of MSR-Action3D as (F, 60) float64, the subject of each frame, and their units.

    From ``data.store`` (a skeleton store in the MSR-Action3D layout) when
    given, else read from ``data.source`` with the MSR-Action3D reader
    (all-zero frames are dropped by the reader and, defensively, again here).
    """
    frames, subjects, units = [], [], "m"
    if data.store is not None:
        from ..data.skeletons import SequenceStore

        store = SequenceStore(data.store)
        _check_pose_layout(store, data.store)
        units = str(store.attrs.get("units", "m"))
        seqs = zip(store.sequences(), store.subjects)
    else:
        from ..data.readers import open_reader

        if not Path(data.source).is_dir():
            raise ConfigError(f"data.source {data.source!r}: folder not found; set it to the folder "
                              f"holding the *_skeleton3D.txt files")
        seqs = ((seq.frames, seq.subject) for seq in open_reader("msr-action3d", data.source).sequences())
    for f, subject in seqs:
        f = np.asarray(f, dtype=np.float64)
        f = f[f.any(axis=1)]
        frames.append(f)
        subjects.append(np.full(len(f), int(subject)))
    return np.concatenate(frames), np.concatenate(subjects), units


#: the joints tgp-pose reads by index, by their names in any naming style (MSR-Action3D's left_elbow, the
#: generator's "left elbow"; centre or center)
POSE_JOINT_NAMES = {HIP_CENTER: "hip center", 7: "left elbow", 8: "right elbow", 9: "left wrist",
                    10: "right wrist", 11: "left hand", 12: "right hand"}


def _check_pose_layout(store, path) -> None:
    """Refuse a store whose joints are not MSR-Action3D's: only 20 joints were checked, so UTKinect's (hip
    centre joint 0) ran with a wrist as the hip and a shoulder among the "arm joints", and reported its error."""
    names = [str(n).lower().replace("_", " ").replace("centre", "center") for n in store.attrs.get("joint_names")
             or []]
    if all(re.fullmatch(r"joint ?\d+", n) for n in names):   # the generic reader's placeholders: no names
        names = []
    wrong = (store.n_joints != 20 or tuple(store.center) != (HIP_CENTER,)
             or (len(names) == 20 and any(names[j] != w for j, w in POSE_JOINT_NAMES.items())))
    if wrong:
        has = (f"{store.n_joints} joints, centre {list(store.center)}"
               + (f", joints 6-12 named {', '.join(names[6:13])}" if len(names) == 20 else ""))
        raise ConfigError(f"data.store: {path} does not have the MSR-Action3D joint layout that tgp-pose reads "
                          f"(20 joints: the hip centre at 6, then the elbows, wrists and hands at 7-12; it has "
                          f"{has}); give a store ingested with --format msr-action3d, or data.source")


def pose_inputs_outputs(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hip-relative coordinates: inputs = the non-arm joints without the hip centre
    (13 joints, 39 values), outputs = the arm joints (6 joints, 18 values)."""
    J = frames.reshape(len(frames), -1, 3)
    J = J - J[:, HIP_CENTER:HIP_CENTER + 1]
    inp = [j for j in range(J.shape[1]) if j not in ARM_JOINTS and j != HIP_CENTER]
    return J[:, inp].reshape(len(J), -1), J[:, list(ARM_JOINTS)].reshape(len(J), -1)


def joint_error(P, Y) -> float:
    """Mean Euclidean distance per joint (x, y, z triplets), in the units of Y."""
    D = (np.asarray(P, dtype=np.float64).reshape(Y.shape) - Y).reshape(len(Y), -1, 3)
    return float(np.linalg.norm(D, axis=2).mean())


def run_pose(cfg, ctx) -> dict:
    """MSR-Action3D: arm joints from the other joints, hip-relative metres, MAE, cross-subject.

    ``[data]``: ``source`` (folder of the skeleton files), ``max_train``
    (2000 frames drawn at random from subjects 1, 3, 5, 7, 9), ``max_test``
    (1000 frames from subjects 2, 4, 6, 8, 10; all if none), ``seed`` (0).
    MAE is per coordinate in metres; the mean per-joint Euclidean error
    (``joint_error_*``) is reported too.
    """
    t0 = time.perf_counter()
    d = cfg.data
    t = _tgp_cfg(cfg)
    seed = int(d.seed if d.seed is not None else cfg.seed)
    progress, out_dir = ctx.progress, ctx.output
    frames, subjects, units = pose_frames(d)
    X, Y = pose_inputs_outputs(frames)
    train = np.isin(subjects, TRAIN_SUBJECTS)
    rng = np.random.RandomState(seed)
    tr, te = np.flatnonzero(train), np.flatnonzero(~train)
    n_tr_all, n_te_all = len(tr), len(te)
    max_train, max_test = int(d.max_train), d.max_test
    if len(tr) > max_train:
        tr = np.sort(rng.choice(tr, max_train, replace=False))
    if max_test is not None and len(te) > int(max_test):
        te = np.sort(rng.choice(te, int(max_test), replace=False))
    # the degrees and the baseline's ridge are chosen on folds of whole training subjects, as the split is
    # cross-subject (folds of frames held frames of one sequence on both sides); one subject: folds of frames
    groups = _two_groups_or_none(subjects[tr])
    with _bar(progress, len(t["criteria"]) * (1 + len(t["bases"])), "tgp-pose") as bar:
        r = _evaluate(X[tr], Y[tr], X[te], Y[te], t, seed, bar, metric=joint_error,
                      train_fix=(f"raise data.max_train (it is {max_train})" if max_train < 2 else
                                 f"the store needs frames of the training subjects {list(TRAIN_SUBJECTS)}"),
                      test_fix=f"the store needs frames of subjects other than the training ones "
                               f"{list(TRAIN_SUBJECTS)}", groups=groups)
    b = _baselines(X[tr], Y[tr], X[te], Y[te], r["gamma_x"], seed, groups=groups)
    _write_details(out_dir, "tgp_pose", {**r, **b})
    res = _summary([r], t)
    res.update(b)
    crit, basis = t["primary"]
    res["joint_error_no_map"] = r["no_map"][crit]["metric"]
    res["joint_error_map"] = r["map"][f"{crit}_{basis}"]["metric"]
    res.update(units=units, n_frames_train_available=n_tr_all, n_frames_test_available=n_te_all,
               n_train=len(tr), n_test=len(te), input_dim=X.shape[1], output_dim=Y.shape[1],
               seed=seed, gamma_x=r["gamma_x"], gamma_y=r["gamma_y"],
               seconds=time.perf_counter() - t0)
    return res
