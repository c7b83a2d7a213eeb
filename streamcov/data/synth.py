"""Procedural synthetic skeleton actions: the dataset that needs no download.

:class:`SyntheticSkeletons` draws labelled skeleton sequences in the
MSR-Action3D layout (20 joints, metres, y up, the subject facing the sensor
along -z) from a kinematic model:

* a bone tree rooted at the hip centre, with per-subject bone lengths drawn
  around anthropometric means (the median Kinect bone lengths of MSR-Action3D);
* per-bone joint angles ``(flexion about x, abduction about z, rotation about
  y)`` built from a rest pose, per-subject posture offsets, a class-specific
  parametric trajectory (with per-sequence phase, amplitude, tempo and time
  warp, and a per-subject style of each action) and a small idle sway;
* forward kinematics, a root that keeps the lowest foot on the floor (plus a
  class-specific bounce), drifts slowly and is turned by a random global yaw;
* additive Gaussian joint noise.

Every sequence is a pure function of ``(seed, i)`` and the source parameters:
its random numbers come from ``np.random.SeedSequence(seed, spawn_key=(0, i))``
and those of its subject from ``SeedSequence(seed, spawn_key=(1, subject))``.
Sequence ``i`` can therefore be generated alone, and a run over millions of
sequences can be resumed or split across workers in bounded memory
(:meth:`SyntheticSkeletons.sequences` takes ``start``/``stop``).

The arithmetic is elementwise numpy (float64 for the trajectories, float32
for the kinematics; no BLAS, no reductions over frames), so a sequence is
bit-identical whether it is generated alone or in a batch with others. The
same seed gives the same arrays on a given platform and numpy version;
across CPUs or numpy versions the vectorized sine and cosine may differ in
the last bits.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Iterator, Sequence

import numpy as np

from .readers.base import SkeletonSequence, SkeletonReader, SkeletonInfo

# the largest joint noise (metres; the body is about 2 m tall): beyond, the covariances of the sequences are
# rounding (noise = 1e30 stopped the run with advice to rescale data no one can rescale) or overflow float32
# (1e300: 'fix the file'); a thousand times the body is noise alone already
NOISE_MAX = 1e3

#: Bump when any change alters the generated numbers for a given seed.
GENERATOR_VERSION = 1

#: Joint names in MSR-Action3D order (0-based index = MSR joint number - 1).
JOINT_NAMES = (
    "left shoulder", "right shoulder", "neck", "spine", "left hip", "right hip",
    "hip centre", "left elbow", "right elbow", "left wrist", "right wrist",
    "left hand", "right hand", "left knee", "right knee", "left ankle",
    "right ankle", "left foot", "right foot", "head",
)

#: Action classes in label order; ``n_classes`` takes the first ones.
ACTIONS = (
    "high arm wave", "two hand wave", "forward punch", "side kick", "bend",
    "squat", "jumping jack", "hand clap", "jog in place", "draw circle",
    "horizontal arm wave", "forward kick",
)

(LSH, RSH, NECK, SPINE, LHIP, RHIP, HIPC, LELB, RELB, LWRI, RWRI, LHAND, RHAND,
 LKNEE, RKNEE, LANK, RANK, LFOOT, RFOOT, HEAD) = range(20)
N_JOINTS = 20
ROOT = HIPC

# Bones (child, parent) in topological order. The rotation stored at a child
# index turns the bone parent->child and everything below it, so angles at
# RELB are the right shoulder's, at RWRI the right elbow's, at RKNEE the right
# hip's, at RANK the right knee's.
_BONES = (
    (SPINE, HIPC), (NECK, SPINE), (HEAD, NECK), (RSH, NECK), (LSH, NECK),
    (RELB, RSH), (LELB, LSH), (RWRI, RELB), (LWRI, LELB), (RHAND, RWRI),
    (LHAND, LWRI), (RHIP, HIPC), (LHIP, HIPC), (RKNEE, RHIP), (LKNEE, LHIP),
    (RANK, RKNEE), (LANK, LKNEE), (RFOOT, RANK), (LFOOT, LANK),
)
# Bones whose angles are zero in every pose: the rest pose, the posture
# offsets, the idle sway and no action touch them.
_STATIC = (LSH, RSH, LHIP, RHIP, HIPC)
_TURNING = [j for j in range(N_JOINTS) if j not in _STATIC]
_LEFT = (LSH, LELB, LWRI, LHAND, LHIP, LKNEE, LANK, LFOOT)
_FEET = (LANK, RANK, LFOOT, RFOOT)

# Rest-pose bone directions for the right side and the midline, in the body
# frame (x to the subject's right, y up, z backward); left bones mirror x.
# Lengths (m) are the median bone lengths of the MSR-Action3D skeletons.
_BONE_SPEC = {
    SPINE: ((0.0, 1.0, 0.0), 0.215),
    NECK: ((0.0, 1.0, -0.10), 0.278),
    HEAD: ((0.0, 1.0, 0.05), 0.239),
    RSH: ((1.0, -0.25, 0.05), 0.220),
    RELB: ((0.0, -1.0, 0.0), 0.273),
    RWRI: ((0.0, -1.0, 0.0), 0.289),
    RHAND: ((0.0, -1.0, 0.0), 0.069),
    RHIP: ((1.0, -0.10, 0.0), 0.217),
    RKNEE: ((-0.08, -1.0, 0.0), 0.545),
    RANK: ((0.0, -1.0, 0.03), 0.422),
    RFOOT: ((0.0, -0.20, -1.0), 0.168),
}
_MIRROR = {LSH: RSH, LELB: RELB, LWRI: RWRI, LHAND: RHAND, LHIP: RHIP,
           LKNEE: RKNEE, LANK: RANK, LFOOT: RFOOT}


def _rest_offsets() -> np.ndarray:
    off = np.zeros((N_JOINTS, 3))
    for j, (d, length) in _BONE_SPEC.items():
        d = np.asarray(d, float)
        off[j] = length * d / np.linalg.norm(d)
    for left, right in _MIRROR.items():
        off[left] = off[right] * (-1.0, 1.0, 1.0)
    return off


_REST_OFFSETS = _rest_offsets()
# Bones sharing one length factor (left/right pairs share theirs).
_LENGTH_GROUP = np.zeros(N_JOINTS, dtype=np.intp)
for _g, _joints in enumerate(((SPINE,), (NECK,), (HEAD,), (LSH, RSH), (LELB, RELB),
                              (LWRI, RWRI), (LHAND, RHAND), (LHIP, RHIP),
                              (LKNEE, RKNEE), (LANK, RANK), (LFOOT, RFOOT))):
    _LENGTH_GROUP[list(_joints)] = _g
_N_LENGTH_GROUPS = 11

# Rest pose (degrees): arms slightly away from the body, elbows and knees
# slightly bent. Columns: flexion (x), abduction (z), rotation (y).
_REST_ANGLES = np.zeros((N_JOINTS, 3))
_REST_ANGLES[[LELB, RELB], 1] = 8.0
_REST_ANGLES[[LWRI, RWRI], 0] = 10.0
_REST_ANGLES[[LKNEE, RKNEE], 1] = 2.0
_REST_ANGLES[[LANK, RANK], 0] = -3.0

# Bones whose angles get per-subject posture and per-action style offsets and
# idle sway.
_MOBILE = (SPINE, NECK, HEAD, LELB, RELB, LWRI, RWRI, LHAND, RHAND,
           LKNEE, RKNEE, LANK, RANK)
_MOBILE_IDX = list(_MOBILE)

# Generator constants. Together with ``noise`` they set how hard the classes
# are to tell apart; they were calibrated so that hip-relative log-covariance
# descriptors with a linear SVM reach roughly 80-97 % cross-subject accuracy.
_BONE_JITTER = 0.08        # per-subject bone length factor, uniform +-8 %
_STATURE_SD = 0.05         # per-subject overall scale, normal sd (clipped)
_STYLE_SD = 6.0            # per-subject posture offset per DOF, degrees
_ACTION_STYLE_SD = 10.0    # per-subject, per-action angle offset per DOF, degrees
_ACTION_AMP_SD = 0.15      # per-subject, per-action amplitude factor, normal sd
_SUBJ_AMP_SD = 0.10        # per-subject amplitude factor, normal sd
_SUBJ_TEMPO_SD = 0.12      # per-subject tempo factor, normal sd
_SEQ_AMP = (0.75, 1.25)    # per-sequence amplitude factor, uniform
_PERIOD = (16.0, 30.0)     # frames per action cycle at tempo 1, uniform
_WARP = 0.6                # max amplitude (rad) of the smooth time warp
_IDLE_DEG = 4.0            # max idle-sway amplitude per DOF, degrees
_YAW_DEG = 35.0            # global yaw, uniform +-
_DRIFT = 0.003             # root drift per frame (m), uniform +- in x and z

# Subjects whose parameters are kept between batches (cheap to redraw).
_SUBJECT_CACHE = 4096
# bytes a frame takes while its batch is made (the kinematics' float64 intermediates, the noise, the stored
# float32 copy): about 5.3 KB measured (one sequence of 100k frames peaked at 579 MiB)
FRAME_WORK_BYTES = 5632
# frames made together at most (a batch is cut there, with one sequence at least): 256 sequences of 2000 frames
# each had taken 2.5 GiB, 8 of a million frames were killed for memory
BATCH_FRAMES = 1 << 16
# sequences made together at most (the kinematics run once over all frames of a batch)
BATCH_SEQUENCES = 256

# Relative cycle length of each action (slow bends, quick jogging steps).
_PERIOD_FACTOR = {
    "bend": 1.5, "squat": 1.4, "jog in place": 0.7, "forward punch": 0.9,
    "jumping jack": 1.1,
}

# Layout of the per-sequence uniform draws.
_U_LEN, _U_PHASE, _U_AMP, _U_PERIOD, _U_WARP, _U_WPHASE, _U_YAW = range(7)
_U_X, _U_Z, _U_FLOOR, _U_VX, _U_VZ, _U_ONSET, _U_OFFSET = range(7, 14)
_U_IDLE = 14
_N_IDLE = 3 * len(_MOBILE)
_N_UNIFORM = _U_IDLE + 3 * _N_IDLE


# --------------------------------------------------------------------------
# Action trajectories. Each takes the phase s (radians) and amplitude factor
# a of its n frames and adds angle contributions to D (20, 3, n) in degrees,
# side-neutral (abduction and rotation are positive away from / across the
# body on both sides; the left side is mirrored later). It returns a root
# bounce (n,) in metres, or None.
# --------------------------------------------------------------------------

def _pulse(s):
    return 0.5 - 0.5 * np.cos(s)


def _a_high_arm_wave(s, a, D):
    D[RELB, 0] += 15.0
    D[RELB, 1] += 142.0 + 10.0 * a * np.sin(s)
    D[RWRI, 1] += 35.0 * a * np.sin(s)
    D[RWRI, 0] += 15.0
    return None


def _a_two_hand_wave(s, a, D):
    for elb, wri in ((RELB, RWRI), (LELB, LWRI)):
        D[elb, 0] += 10.0
        D[elb, 1] += 135.0 + 8.0 * a * np.sin(s)
        D[wri, 1] += 35.0 * a * np.sin(s)
        D[wri, 0] += 15.0
    return None


def _a_forward_punch(s, a, D):
    for elb, wri, shift in ((RELB, RWRI, 0.0), (LELB, LWRI, math.pi)):
        q = np.maximum(np.sin(s + shift), 0.0) ** 2 * a
        D[elb, 0] += 55.0 + 35.0 * q
        D[elb, 1] += 15.0 * (1.0 - q)
        D[elb, 2] += 12.0 * q
        D[wri, 0] += np.maximum(115.0 - 105.0 * q, 0.0)
    D[SPINE, 2] += 10.0 * a * np.sin(s)
    return None


def _a_side_kick(s, a, D):
    q = np.maximum(np.sin(s), 0.0) ** 1.5 * a
    D[RKNEE, 1] += 50.0 * q
    D[RKNEE, 0] += 10.0 * q
    D[RANK, 0] -= 15.0 * q
    D[SPINE, 1] += 12.0 * q
    D[RELB, 1] += 15.0 * q
    D[LELB, 1] += 15.0 * q
    return None


def _a_bend(s, a, D):
    p = _pulse(s) * a
    D[SPINE, 0] -= 75.0 * p
    D[NECK, 0] += 10.0 * p
    D[RELB, 0] += 65.0 * p
    D[LELB, 0] += 65.0 * p
    D[RKNEE, 0] += 10.0 * p
    D[LKNEE, 0] += 10.0 * p
    D[RANK, 0] -= 15.0 * p
    D[LANK, 0] -= 15.0 * p
    return None


def _a_squat(s, a, D):
    p = np.minimum(_pulse(s) * a, 1.1)
    for knee, ank, foot, elb in ((RKNEE, RANK, RFOOT, RELB), (LKNEE, LANK, LFOOT, LELB)):
        D[knee, 0] += 95.0 * p
        D[ank, 0] -= 115.0 * p
        D[foot, 0] += 20.0 * p
        D[elb, 0] += 80.0 * p
    D[SPINE, 0] -= 35.0 * p
    return None


def _a_jumping_jack(s, a, D):
    p = _pulse(s)
    for elb, wri, knee in ((RELB, RWRI, RKNEE), (LELB, LWRI, LKNEE)):
        D[elb, 1] += 150.0 * a * p
        D[wri, 1] += 10.0 * p
        D[knee, 1] += 18.0 * a * p
    return 0.06 * a * np.abs(np.sin(s))


def _a_hand_clap(s, a, D):
    p = _pulse(s)
    for elb, wri in ((RELB, RWRI), (LELB, LWRI)):
        D[elb, 0] += 65.0
        D[elb, 2] += -30.0 + 50.0 * a * p
        D[wri, 0] += 30.0
    return None


def _a_jog_in_place(s, a, D):
    sn = np.sin(s)
    for knee, ank, foot, elb, wri, sign in ((RKNEE, RANK, RFOOT, RELB, RWRI, 1.0),
                                           (LKNEE, LANK, LFOOT, LELB, LWRI, -1.0)):
        q = np.maximum(sign * sn, 0.0) * a
        D[knee, 0] += 60.0 * q
        D[ank, 0] -= 90.0 * q
        D[foot, 0] += 20.0 * q
        D[elb, 0] -= 30.0 * a * sign * sn
        D[wri, 0] += 80.0
    return 0.04 * a * np.abs(sn)


def _a_draw_circle(s, a, D):
    D[RELB, 0] += 75.0 + 25.0 * a * np.cos(s)
    D[RELB, 2] += 25.0 * a * np.sin(s)
    D[RELB, 1] += 10.0
    D[RWRI, 0] += 10.0
    return None


def _a_horizontal_arm_wave(s, a, D):
    D[RELB, 1] += 82.0
    D[RELB, 2] += 10.0 + 35.0 * a * np.sin(s)
    D[RWRI, 0] += 15.0
    return None


def _a_forward_kick(s, a, D):
    q = np.maximum(np.sin(s), 0.0) ** 1.5 * a
    D[RKNEE, 0] += 75.0 * q
    D[RANK, 0] -= 20.0 * q
    D[SPINE, 0] += 8.0 * q
    D[RELB, 1] += 20.0 * q
    D[LELB, 1] += 20.0 * q
    return None


_ACTION_FUNCS = {
    "high arm wave": _a_high_arm_wave, "two hand wave": _a_two_hand_wave,
    "forward punch": _a_forward_punch, "side kick": _a_side_kick, "bend": _a_bend,
    "squat": _a_squat, "jumping jack": _a_jumping_jack, "hand clap": _a_hand_clap,
    "jog in place": _a_jog_in_place, "draw circle": _a_draw_circle,
    "horizontal arm wave": _a_horizontal_arm_wave, "forward kick": _a_forward_kick,
}
assert tuple(_ACTION_FUNCS) == ACTIONS


# --------------------------------------------------------------------------
# Elementwise 3x3 algebra (batch-size independent rounding).
# --------------------------------------------------------------------------

def _euler(ax, az, ay):
    """Ry(ay) @ Rz(az) @ Rx(ax) for arrays of angles (radians) -> (3, 3, ...)."""
    ca, sa = np.cos(ax), np.sin(ax)
    cg, sg = np.cos(az), np.sin(az)
    cb, sb = np.cos(ay), np.sin(ay)
    sgca, sgsa = sg * ca, sg * sa
    R = np.empty((3, 3) + np.shape(ax))
    R[0, 0] = cb * cg
    R[0, 1] = sb * sa - cb * sgca
    R[0, 2] = cb * sgsa + sb * ca
    R[1, 0] = sg
    R[1, 1] = cg * ca
    R[1, 2] = -cg * sa
    R[2, 0] = -sb * cg
    R[2, 1] = sb * sgca + cb * sa
    R[2, 2] = cb * ca - sb * sgsa
    return R


# Matrices are stored component-first, (3, 3, n), so that every operation
# runs over contiguous frames.
def _matmul3(A, B):
    return A[:, 0:1] * B[0:1] + A[:, 1:2] * B[1:2] + A[:, 2:3] * B[2:3]


def _matvec3(A, v):
    return A[:, 0] * v[0] + A[:, 1] * v[1] + A[:, 2] * v[2]


def _check_int(name, value, minimum, maximum=None, hint=""):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum or (maximum is not None and value > maximum):
        rng = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ValueError(f"{name} must be {rng}, got {value}{hint}")
    return int(value)


class SyntheticSkeletons(SkeletonReader):
    """Seeded synthetic skeleton actions in the MSR-Action3D joint layout.

    Parameters
    ----------
    n_sequences : int, default=400
        Number of sequences. Sequence ``i`` has class ``i % n_classes`` and
        subject ``(i // n_classes) % n_subjects + 1``, so every block of
        ``n_classes * n_subjects`` consecutive sequences holds each
        (subject, class) pair once.
    n_subjects : int, default=10
        Number of subjects, numbered ``1..n_subjects`` (odd/even subject
        splits give a cross-subject protocol). Each subject has its own bone
        lengths, posture, amplitude, tempo and style of each action.
    n_classes : int, default=10
        Number of action classes, the first ``n_classes`` of :data:`ACTIONS`
        (at most 12).
    seed : int, default=0
        Non-negative seed; the same seed gives bit-identical sequences.
    frames : (int, int), default=(30, 60)
        Inclusive range of sequence lengths; each sequence draws its length
        uniformly from it. Both ends must satisfy ``2 <= min <= max``.
    noise : float, default=0.01
        Standard deviation (metres) of the Gaussian noise added to every
        joint coordinate, at most :data:`NOISE_MAX`.
    where : {None, "--", "data.synthetic"}
        How messages name the parameters, as the user gave them: Python
        keywords (``n_sequences=400``), ``streamcov synth``'s flags
        (``--sequences 400``) or a pipeline's keys
        (``data.synthetic.n_sequences = 400``).

    Attributes
    ----------
    info : SkeletonInfo
        20 joints in MSR-Action3D order, units ``"m"``, centre joint 6 (hip
        centre), the class names, and the generator parameters in ``extra``.
    label_names : list of str
        Class names in label order.

    Notes
    -----
    Sequence ``i`` draws its random numbers from
    ``np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, i)))``
    and its subject's from ``SeedSequence(seed, spawn_key=(1, subject))``, so
    sequences can be generated in any order, alone or in batches, with
    identical results. ``data/synthetic_skeletons.md`` describes the model.

    Examples
    --------
    >>> src = SyntheticSkeletons(n_sequences=20, seed=3)
    >>> seq = src.generate_sequence(7)
    >>> seq.id, seq.label, seq.subject, seq.frames.shape[1]
    ('syn_00000007', 'hand clap', 1, 60)
    """

    def __init__(self, n_sequences=400, n_subjects=10, n_classes=10, seed=0,
                 frames=(30, 60), noise=0.01, where=None):
        super().__init__()
        self.where = where
        self.n_sequences = n_sequences
        self.n_subjects = n_subjects
        self.n_classes = n_classes
        self.seed = seed
        self.frames = frames
        self.noise = noise

        self._n = _check_int("n_sequences", n_sequences, 1,
                             hint="; ask for at least one sequence")
        self._n_subjects = _check_int("n_subjects", n_subjects, 1)
        self._n_classes = _check_int(
            "n_classes", n_classes, 1, len(ACTIONS),
            hint=f"; the generator defines {len(ACTIONS)} actions: {', '.join(ACTIONS)}")
        self._seed = _check_int("seed", seed, 0, hint="; use a non-negative integer seed")
        try:
            lo, hi = frames
        except (TypeError, ValueError):
            raise ValueError(
                f"frames must be a pair (min, max) of integers, got {frames!r}") from None
        if any(isinstance(v, bool) or not isinstance(v, Integral) for v in (lo, hi)) \
                or not 2 <= lo <= hi:
            raise ValueError(
                f"frames must be a pair (min, max) of integers with 2 <= min <= max, "
                f"got {frames!r}; a covariance needs at least 2 frames")
        self._lo, self._hi = int(lo), int(hi)
        from .._config import check_memory

        # a sequence is made whole in memory (float64 positions, the noise, the float32 copy stored), with others
        # up to BATCH_FRAMES: a length no machine holds is one line here, not a MemoryError at the first sequence
        check_memory(float(FRAME_WORK_BYTES) * max(self._hi, min(BATCH_FRAMES, BATCH_SEQUENCES * self._hi)),
                     f"frames = {frames!r} (a sequence of up to {self._hi} frames)", "ask for shorter sequences")
        if isinstance(noise, bool) or not isinstance(noise, Real) \
                or not math.isfinite(noise) or not 0 <= noise <= NOISE_MAX:
            raise ValueError(f"noise must be a finite number >= 0 (metres), at most {NOISE_MAX:g}, got {noise!r}")
        self._noise = float(noise)

        self.record = {"format": "synthetic", "generator_version": GENERATOR_VERSION, "n_sequences": self._n,
                       "n_subjects": self._n_subjects, "n_classes": self._n_classes, "seed": self._seed,
                       "frames": [self._lo, self._hi], "noise": self._noise}
        self.label_names = list(ACTIONS[:self._n_classes])
        self._funcs = [_ACTION_FUNCS[name] for name in self.label_names]
        self._period_factor = np.array(
            [_PERIOD_FACTOR.get(name, 1.0) for name in self.label_names])
        self._subjects: dict[int, dict] = {}
        self.info = SkeletonInfo(
            n_joints=N_JOINTS,
            joint_names=list(JOINT_NAMES),
            units="m",
            source=f"streamcov synthetic generator v{GENERATOR_VERSION}",
            center=(HIPC,),
            label_names=list(self.label_names),
            roles={"hip_center": [HIPC], "left_hip": [4], "right_hip": [5], "spine": [3], "neck": [2],
                   "left_shoulder": [0], "right_shoulder": [1], "head": [19]},
            extra={"generator": "streamcov.data.synth.SyntheticSkeletons",
                   "generator_version": GENERATOR_VERSION,
                   "n_sequences": self._n, "n_subjects": self._n_subjects,
                   "n_classes": self._n_classes, "seed": self._seed,
                   "frames": [self._lo, self._hi], "noise": self._noise,
                   "axes": ("x toward the subject's right, y up, "
                            "z away from the sensor (the subject faces -z)")},
        )

    def check_room(self, out, limit: int | None = None) -> None:
        """Refuse, before any sequence is made, a store larger than the free disk space at ``out``: about
        float32 frames of the mean length (they compress by about 5%); of ``limit`` sequences when given."""
        from .._config import check_disk

        named = {None: f"n_sequences={self._n}", "--": f"--sequences {self._n}"}.get(
            self.where, f"{self.where}.n_sequences = {self._n}")
        n = self._n if limit is None else min(self._n, limit)
        check_disk(4.0 * 3 * N_JOINTS * n * (self._lo + self._hi) / 2, out,
                   f"{named} ({self._lo}-{self._hi} frames each)", "ask for fewer sequences, or write the store "
                   "elsewhere")

    def __len__(self) -> int:
        return self._n

    # -- public generation -------------------------------------------------

    def class_of(self, i: int) -> int:
        """Label index of sequence ``i``."""
        return int(i) % self._n_classes

    def subject_of(self, i: int) -> int:
        """Subject number (1-based) of sequence ``i``."""
        return (int(i) // self._n_classes) % self._n_subjects + 1

    def generate_sequence(self, i: int) -> SkeletonSequence:
        """Sequence ``i`` alone, identical to the ``i``-th one of :meth:`sequences`."""
        return self.generate_batch([i])[0]

    def generate_batch(self, indices: Sequence[int]) -> list[SkeletonSequence]:
        """Sequences for ``indices`` (any order, any subset), computed together.

        Faster per sequence than :meth:`generate_sequence` because the
        kinematics run once over all frames of the batch; the results are
        bit-identical to generating each index alone.
        """
        idx = [self._check_index(i) for i in indices]
        if not idx:
            return []
        return self._generate(idx)

    def sequences(self, start: int = 0, stop: int | None = None,
                  batch_size: int = BATCH_SEQUENCES) -> Iterator[SkeletonSequence]:
        """Yield sequences ``start..stop-1`` (default: all) in index order.

        ``start``/``stop`` let an interrupted run resume, or workers split the
        index range; memory is bounded by a batch of ``batch_size`` sequences and at most
        :data:`BATCH_FRAMES` frames (one sequence at least): a count of sequences alone let long ones take
        gigabytes. The sequences are the same bits whatever the batches.
        """
        stop = self._n if stop is None else stop
        start = _check_int("start", start, 0, self._n)
        stop = _check_int("stop", stop, start, self._n,
                          hint=f"; stop must lie in start..n_sequences ({start}..{self._n})")
        batch_size = _check_int("batch_size", batch_size, 1)
        b = start
        while b < stop:
            e, frames = b + 1, self._length(b)
            while e < stop and e - b < batch_size:
                more = self._length(e)
                if frames + more > BATCH_FRAMES:
                    break
                frames += more
                e += 1
            yield from self._generate(list(range(b, e)))
            b = e

    # -- internals ----------------------------------------------------------

    def _check_index(self, i) -> int:
        if isinstance(i, bool) or not isinstance(i, Integral):
            raise TypeError(f"sequence index must be an integer, got {i!r}")
        if not 0 <= i < self._n:
            raise IndexError(f"sequence index {i} out of range 0..{self._n - 1} "
                             f"(n_sequences={self._n})")
        return int(i)

    def _subject(self, s: int) -> dict:
        p = self._subjects.get(s)
        if p is None:
            rng = np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=(1, s)))
            stature = float(np.clip(1.0 + _STATURE_SD * rng.standard_normal(), 0.88, 1.12))
            group = rng.uniform(1.0 - _BONE_JITTER, 1.0 + _BONE_JITTER, _N_LENGTH_GROUPS)
            offsets = _REST_OFFSETS * (stature * group[_LENGTH_GROUP])[:, None]
            style = np.zeros((N_JOINTS, 3))
            style[list(_MOBILE)] = _STYLE_SD * rng.standard_normal((len(_MOBILE), 3))
            amp = float(np.clip(1.0 + _SUBJ_AMP_SD * rng.standard_normal(), 0.7, 1.3))
            tempo = float(np.clip(1.0 + _SUBJ_TEMPO_SD * rng.standard_normal(), 0.6, 1.4))
            # how this subject performs each action (drawn for all actions so
            # that a subject looks the same whatever n_classes is)
            act_style = np.zeros((len(ACTIONS), N_JOINTS, 3))
            act_style[:, list(_MOBILE)] = _ACTION_STYLE_SD * rng.standard_normal(
                (len(ACTIONS), len(_MOBILE), 3))
            act_amp = np.clip(1.0 + _ACTION_AMP_SD * rng.standard_normal(len(ACTIONS)), 0.6, 1.4)
            p = dict(offsets=offsets, style=style, amp=amp, tempo=tempo,
                     act_style=act_style, act_amp=act_amp)
            if len(self._subjects) >= _SUBJECT_CACHE:
                self._subjects.clear()      # bounded memory for huge n_subjects
            self._subjects[s] = p
        return p

    def _draw(self, i: int, length_only: bool = False):
        """The random numbers of sequence i: length, uniforms, noise (the length alone with ``length_only``)."""
        if length_only and self._lo == self._hi:
            return self._lo
        rng = np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=(0, i)))
        u = rng.random(_N_UNIFORM)
        T = self._lo + min(int(u[_U_LEN] * (self._hi - self._lo + 1)), self._hi - self._lo)
        if length_only:
            return T
        noise = rng.standard_normal((T, 3 * N_JOINTS)) if self._noise > 0 else None
        return T, u, noise

    def _length(self, i: int) -> int:
        """The number of frames of sequence i (drawn as :meth:`_draw` draws it, without its noise)."""
        return self._draw(i, length_only=True)

    def _generate(self, idx: list[int]) -> list[SkeletonSequence]:
        draws = [self._draw(i) for i in idx]
        lengths = np.array([d[0] for d in draws])
        U = np.stack([d[1] for d in draws])                      # (B, K)
        B, N = len(idx), int(lengths.sum())
        seq_of = np.repeat(np.arange(B), lengths)                # frame -> batch row
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        t = (np.arange(N) - starts[seq_of]).astype(float)        # frame index in sequence
        Tf = lengths[seq_of].astype(float)

        cls = np.array([self.class_of(i) for i in idx])
        subj = [self._subject(self.subject_of(i)) for i in idx]
        s_amp = np.array([p["amp"] * p["act_amp"][c] for p, c in zip(subj, cls)])
        s_tempo = np.array([p["tempo"] for p in subj])
        offsets = np.stack([p["offsets"] for p in subj]).transpose(1, 2, 0)[:, :, seq_of]
        # per-sequence angle offsets (20, 3, B): rest pose + subject posture, and
        # how the subject performs this action (faded in and out with it)
        base = (np.stack([p["style"] for p in subj]) + _REST_ANGLES).transpose(1, 2, 0)
        act_style = np.stack([p["act_style"][c] for p, c in zip(subj, cls)]).transpose(1, 2, 0)

        # phase: random start, random cycle length, smooth time warp
        period = (_PERIOD[0] + (_PERIOD[1] - _PERIOD[0]) * U[:, _U_PERIOD]) \
            * self._period_factor[cls] / s_tempo
        warp = _WARP * U[:, _U_WARP]
        ph = 2.0 * np.pi * U[:, _U_PHASE]
        wph = 2.0 * np.pi * U[:, _U_WPHASE]
        s = ph[seq_of] + 2.0 * np.pi * t / period[seq_of] \
            + warp[seq_of] * np.sin(2.0 * np.pi * t / Tf + wph[seq_of])
        amp = (_SEQ_AMP[0] + (_SEQ_AMP[1] - _SEQ_AMP[0]) * U[:, _U_AMP]) * s_amp

        # the action fades in after a short rest and may fade out before the end
        onset = 0.15 * U[:, _U_ONSET][seq_of] * Tf
        offset = Tf - 1.0 - 0.15 * U[:, _U_OFFSET][seq_of] * Tf
        ramp = 4.0
        env = np.clip((t - onset) / ramp, 0.0, 1.0) * np.clip((offset - t) / ramp, 0.0, 1.0)

        # joint angles (degrees), (20, 3, N): rest + posture + action + idle sway
        D = np.zeros((N_JOINTS, 3, N))
        bounce = np.zeros(N)
        for c in np.unique(cls):
            rows = np.flatnonzero(cls[seq_of] == c)
            Dc = np.zeros((N_JOINTS, 3, rows.size))
            bc = self._funcs[c](s[rows], amp[seq_of[rows]], Dc)
            D[:, :, rows] = Dc
            if bc is not None:
                bounce[rows] = bc
        D += act_style[:, :, seq_of]
        D *= env
        A = D
        A += base[:, :, seq_of]
        idle = U[:, _U_IDLE:].reshape(B, 3, _N_IDLE).transpose(1, 2, 0)
        omega = 2.0 * np.pi / (20.0 + 60.0 * idle[1])           # 20-80 frames per sway
        sway = np.sin(omega[:, seq_of] * t + 2.0 * np.pi * idle[2][:, seq_of])
        sway *= (_IDLE_DEG * idle[0])[:, seq_of]
        A[_MOBILE_IDX] += sway.reshape(len(_MOBILE), 3, N)
        A[list(_LEFT), 1:] *= -1.0                               # mirror the left side
        # float32 from here on: the output is float32 and single precision
        # keeps the kinematics' rounding (~1e-7 m) far below the joint noise
        A = (A * (np.pi / 180.0)).astype(np.float32)
        offsets = offsets.astype(np.float32)

        # forward kinematics, root at the origin, body turned by the yaw
        # joints that never turn (shoulder girdle, pelvis) keep L = I
        L = np.zeros((3, 3, N_JOINTS, N), dtype=np.float32)
        L[[0, 1, 2], [0, 1, 2]] = 1.0
        L[:, :, _TURNING] = _euler(A[_TURNING, 0], A[_TURNING, 1], A[_TURNING, 2])
        yaw = np.deg2rad(_YAW_DEG * (2.0 * U[:, _U_YAW] - 1.0)).astype(np.float32)[seq_of]
        zeros = np.zeros(N, dtype=np.float32)
        G = [None] * N_JOINTS
        P = np.zeros((N_JOINTS, 3, N), dtype=np.float32)
        G[ROOT] = _matmul3(_euler(zeros, zeros, yaw), L[:, :, ROOT])
        for child, parent in _BONES:
            G[child] = _matmul3(G[parent], L[:, :, child])
            P[child] = P[parent] + _matvec3(G[child], offsets[child])

        # root: lowest foot on the floor, bounce, placement and slow drift
        floor = (-1.15 + 0.2 * U[:, _U_FLOOR])[seq_of]
        root = np.empty((3, N))
        root[0] = (-0.4 + 0.8 * U[:, _U_X])[seq_of] \
            + _DRIFT * (2.0 * U[:, _U_VX] - 1.0)[seq_of] * t
        root[1] = floor - P[list(_FEET), 1].min(axis=0) + bounce * env
        root[2] = (2.2 + 1.0 * U[:, _U_Z])[seq_of] \
            + _DRIFT * (2.0 * U[:, _U_VZ] - 1.0)[seq_of] * t
        X = (P + root).transpose(2, 0, 1).reshape(N, 3 * N_JOINTS)

        out = []
        for b, i in enumerate(idx):
            x = X[starts[b]:starts[b] + lengths[b]]
            if draws[b][2] is not None:
                x = x + self._noise * draws[b][2]
            out.append(SkeletonSequence(
                id=f"syn_{i:08d}", frames=x.astype(np.float32),
                label=self.label_names[cls[b]], subject=self.subject_of(i), split=None))
        return out


__all__ = ["ACTIONS", "GENERATOR_VERSION", "JOINT_NAMES", "SyntheticSkeletons"]
