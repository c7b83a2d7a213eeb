"""The one schema of pipeline files: every table of every task, typed and range-checked.

A pipeline file is TOML: top-level keys (``task``, ``name``, ``seed``,
``output``) and one table per stage. Each task declares its tables here as
pydantic models in strict mode: a value of the wrong type (``"many"`` for an
integer, ``"false"`` for a boolean, ``2.5`` epochs), out of range, not among
the allowed values, a key that no table declares, or a key that the chosen
option does not read (a ``[model]`` key of another learner,
:data:`LEARNER_KEYS`; a ``[method]`` key of another method or classifier,
:data:`METHOD_KEYS`, :data:`STREAM_METHOD_KEYS`; a ``[split]`` key of
another kind, :data:`SPLIT_KEYS`; Gabor options without the Gabor feature;
:data:`DESCRIPTOR_READ_WHEN`) is refused by
:func:`streamcov.tasks.config.load_config` with one line naming the file,
the line (or the ``--set`` flag), the key as the user wrote it and what was
expected. An error about one key names it in ``ctx["key"]``
(:data:`KEYED_ERRORS`), so that the line is that key's.

Bandwidths: every ``sigma`` means ``exp(-||x - y||^2 / (2 sigma^2))``
(:mod:`streamcov.kernels`), except the image tasks' ``sigma1`` and
``sigma2``, which keep paper 004's ``exp(-||x - y||^2 / s^2)`` and are
converted where the task reads them.
"""
from __future__ import annotations

from typing import ClassVar, Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .._config import MAX_WORKERS
from ..data.readers import FORMATS
from ..data.synth import NOISE_MAX
from ..descriptors.skeleton import RBF_MATRICES, RBF_NO_MEAN
from ..structured.hsic import MAX_DEGREE
from ..errors import did_you_mean, toml_value
from ..splits import SPLIT_KINDS

PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# a Gaussian bandwidth: its square and 1 / (2 sigma^2) must be ordinary floats (1e-300 squares to 0 and
# 1e300 to infinity); 1e-20 to 1e20 spans coordinates in metres, millimetres and pixel values alike
Bandwidth = Annotated[float, Field(ge=1e-20, le=1e20, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
PosInt = Annotated[int, Field(ge=1)]
# a polynomial degree of the kernel transformations (paper 003): D + 1 matrices of kernel values each
Degree = Annotated[int, Field(ge=1, le=MAX_DEGREE)]
NonNegInt = Annotated[int, Field(ge=0)]
Seed = Annotated[int, Field(ge=0, lt=2 ** 32)]
# passes of SGD over the training features: the pipelines ask for 30 to 200 (scikit-learn's default max_iter is
# 1000); 1e8 was accepted and ran practically forever
MAX_EPOCHS = 10_000
Epochs = Annotated[int, Field(ge=1, le=MAX_EPOCHS)]
# repeated draws of a split, and of a study's map seeds: the papers take 10 (1e30 built its folds' row masks
# until memory ran out, without a word)
MAX_REPEATS = 10_000

# a name that makes one folder under the output (runs/{name}): no path separator
FOLDER_NAME = r"^[^/\\]+$"
# each `pattern` of the schema in the words of its messages ("expected a name without / or \")
PATTERN_WORDS = {FOLDER_NAME: "a name without / or \\"}

SKELETON_FORMATS = FORMATS   # every reader of streamcov.data.readers
MAP_NAMES = ("rgw", "rff", "rff-blocks", "orf", "qmc", "maclaurin", "fastfood", "nystroem", "none")
STUDY_MAPS = ("rgw", "rff", "orf", "qmc", "maclaurin", "fastfood", "nystroem")
SGD_LOSSES = ("hinge", "log_loss", "modified_huber", "squared_hinge", "perceptron", "squared_error",
              "huber", "epsilon_insensitive", "squared_epsilon_insensitive")
LEARNING_RATES = ("optimal", "constant", "invscaling", "adaptive", "pa1", "pa2")


class Table(BaseModel):
    """A pipeline table: strict types, no undeclared keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _a_path(v: str) -> str:
    # "" read as no path (a store's reader keys dropped, then "unknown skeleton format None"), or as the
    # current folder
    if not v.strip():
        raise ValueError("a path, not an empty text (leave the key out for none)")
    return v


# a path given in a pipeline file: a text that is not empty
PathText = Annotated[str, AfterValidator(_a_path)]


# Errors that name one key of the table that raises them, in ctx["key"] (dotted, from that table): the loader
# (streamcov.tasks.config) says where that key came from, the file and line or the --set flag.
KEYED_ERRORS = ("learner_key", "method_key", "split_key", "pixels_key", "descriptor_key", "map_key", "tgp_key",
                "data_key")


def key_error(kind: str, key: str, msg: str) -> PydanticCustomError:
    """A :data:`KEYED_ERRORS` error: ``msg`` about the table's ``key`` (dotted, from the table that raises).

    pydantic fills ``{key}`` in a message from ``ctx``; no other brace is touched, and no message here
    writes that one.
    """
    assert kind in KEYED_ERRORS, kind
    return PydanticCustomError(kind, msg, {"key": key})


def _quoted_or(values) -> str:
    """``"a"``, ``"a" or "b"``, ``"a", "b" or "c"``."""
    q = [f'"{v}"' for v in values]
    return q[0] if len(q) == 1 else f"{', '.join(q[:-1])} or {q[-1]}"


def _each_once(v, same=None):
    """A list whose every entry appears once, or a ValueError naming the first repeated entry (``same(x)``:
    what makes two entries one, by default the entry itself)."""
    if v is None:
        return v
    keys = [x if same is None else same(x) for x in v]
    if len(set(keys)) != len(keys):
        raise ValueError(f"each entry once; {toml_value(next(x for x, k in zip(v, keys) if keys.count(k) > 1))} "
                         f"is listed twice")
    return v


SubjectName = Annotated[str, Field(min_length=1)]


def _subjects_once(key: str, v) -> None:
    """``split.<key>`` naming a subject twice, refused as a splits file's list is (:func:`streamcov.splits.folds`)."""
    from ..splits import subjects_twice

    twice = subjects_twice(v or [])
    if twice:
        raise key_error("split_key", key, f"split.{key} = {toml_value(v)} {twice}")


# ---------------------------------------------------------------- shared tables
class SplitTable(Table):
    """``[split]``: which rows train and which test, fold by fold (:mod:`streamcov.splits`).

    :data:`SPLIT_KEYS` says which kinds read ``train_subjects``, ``test_subjects``, ``file``,
    ``n_train``, ``n_test``, ``n_repeats``, ``n_splits`` and ``seed``; one of them set (in the file
    or by ``--set``) for a kind that does not read it is refused, naming the key where it was written.
    """

    kind: Literal[SPLIT_KINDS] = "subject-parity"
    # numbers, or names where the store names its subjects (HDM05's bd, bk, ...: streamcov.splits.subject_codes)
    train_subjects: Optional[Annotated[list[Union[int, SubjectName]], Field(min_length=1)]] = None
    test_subjects: Optional[Annotated[list[Union[int, SubjectName]], Field(min_length=1)]] = None   # None: the rest
    file: Optional[str] = None
    n_splits: Annotated[int, Field(ge=2)] = 10
    seed: Optional[Seed] = None
    n_train: Optional[PosInt] = None
    n_test: Optional[PosInt] = None
    n_repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS)] = 1
    folds: Optional[Annotated[list[NonNegInt], Field(min_length=1)]] = None

    @model_validator(mode="after")
    def _needs(self):
        if self.folds is not None and len(set(self.folds)) != len(self.folds):
            raise key_error("split_key", "folds", f"split.folds = {self.folds} names a fold twice; list each fold once")
        used = SPLIT_KEYS.get(self.kind, ())
        for key in _SPLIT_READ_BY_SOME:
            if key in self.model_fields_set and getattr(self, key) is not None and key not in used:
                raise key_error("split_key", key, f"split.{key} is not used by split.kind = {toml_value(self.kind)} "
                                f"(kinds that use it: {', '.join(k for k, v in SPLIT_KEYS.items() if key in v)})")
        for key in ("train_subjects", "test_subjects"):
            # a subject listed twice is likely a typo for another, which then trains or tests where it was not
            # meant to: refused, as a splits file refuses it
            _subjects_once(key, getattr(self, key))
        train = list(self.train_subjects or ())
        both = [v for v in dict.fromkeys(self.test_subjects or ()) if v in train]   # names and numbers: unsortable
        if both:
            raise key_error("split_key", "test_subjects",
                            f"subjects {toml_value(both)} are in both split.train_subjects and split.test_subjects; "
                            f"a subject trains or tests, not both")
        if self.kind == "subjects" and not self.train_subjects:
            raise key_error("split_key", "kind", "split.kind = 'subjects' needs split.train_subjects = [..]")
        if self.kind == "subject-splits-file" and self.file is not None and not self.file.strip():
            # an empty path given: named as given (it blamed split.kind and asked for the key it had)
            raise key_error("split_key", "file", "split.file = \"\": an empty path; give the TOML file of [[split]] "
                            "tables")
        if self.kind == "subject-splits-file" and not self.file:
            raise key_error("split_key", "kind", "split.kind = 'subject-splits-file' needs split.file (a TOML file "
                            "of [[split]] tables)")
        if self.kind == "per-class" and self.n_train is None:
            raise key_error("split_key", "kind", "split.kind = 'per-class' needs split.n_train (training rows per "
                            "class)")
        return self


# The [split] keys that only some kinds read (streamcov.splits.folds), kind by kind; any of them set for
# another kind is refused: it would be ignored. `kind` and `folds` are read by every kind.
SPLIT_KEYS = {"subjects": ("train_subjects", "test_subjects"), "subject-splits-file": ("file",),
              "stratified-kfold": ("n_splits", "seed"), "per-class": ("n_train", "n_test", "n_repeats", "seed"),
              "group-kfold": ("n_splits",)}
_SPLIT_READ_BY_SOME = tuple(dict.fromkeys(k for keys in SPLIT_KEYS.values() for k in keys))


class DaskTable(Table):
    """``[dask]``: where the graph runs and how it is cut."""

    scheduler: str = "threads"
    workers: Optional[Annotated[int, Field(ge=1, le=MAX_WORKERS)]] = None
    block_size: Optional[PosInt] = None     # rows per block; default per task (sequences 512, images 64);
    # also SGD's unit of shuffling (another size, another SGD model)
    prefetch: PosInt = 2

    @field_validator("scheduler")
    @classmethod
    def _scheduler(cls, v: str):
        from ..stream.runtime import expected_scheduler, is_scheduler

        if is_scheduler(v):
            return v
        raise ValueError(expected_scheduler(v))

    @model_validator(mode="after")
    def _workers(self):
        # as --workers: the threads of "threads" or the processes of "local-cluster"; elsewhere it is not read
        from ..stream.runtime import workers_unread

        why = workers_unread(self.scheduler)
        if self.workers is not None and why is not None:
            raise ValueError(f"dask.workers = {self.workers} is not read with dask.scheduler = \"{self.scheduler}\": it "
                             f"sets the threads of \"threads\" or the processes of \"local-cluster\"; {why}")
        return self


LBFGS_LOSSES = ("log_loss", "squared_hinge")

# The [model] keys each learner reads, the one place that says so (besides `learner`, which every one
# reads). sgd: make_sgd, SGDPlan.from_model and train_sgd (streamcov/stream/sgd.py); lbfgs: make_lbfgs and
# train_lbfgs (streamcov/stream/lbfgs.py; `penalty` is checked to be "l2", the only one it fits);
# exact-svm: exact_svm_fold (streamcov/stream/exact.py), which chooses sigma and C by CV over the grids.
# It holds for every task with a [model] table (skeleton-classification, image-stream-classification,
# which refuses exact-svm, and the pipeline files kernel-approx-study reads). A key set in the file or
# by --set that the chosen learner does not read is refused: it would be silently ignored.
LEARNER_KEYS = {
    "sgd": ("loss", "C", "alpha", "penalty", "epochs", "average", "learning_rate", "eta0", "scale",
            "validation_fraction", "n_iter_no_change", "checkpoint_blocks", "shuffle_blocks", "cache"),
    "lbfgs": ("loss", "C", "alpha", "penalty", "scale", "validation_fraction", "n_iter_no_change", "max_iter",
              "tol", "cache", "span"),
    "exact-svm": ("sigma_grid", "C_grid"),
}


def learner_key_error(table, keys: list[str]) -> PydanticCustomError:
    """``model.<key> = <value> is not read by learner "..."``: what reads it, what to do.

    ``keys``: every such key of the table, in its order; the first is named, the others listed after
    it. The error's ``ctx["key"]`` names that key (dotted, from the table that raises), so that the
    loader can say where it came from (the file and line, or the ``--set`` flag).
    """
    key, learner = keys[0], table.learner
    readers = [f'"{name}"' for name, read in LEARNER_KEYS.items() if key in read]
    use = " or ".join(f"model.learner = {r}" for r in readers)
    also = f" (also not read: {', '.join('model.' + k for k in keys[1:])})" if len(keys) > 1 else ""
    msg = (f"model.{key} = {toml_value(getattr(table, key))} is not read by learner \"{learner}\": remove it"
           f"{', or set ' + use if use else ''} (learner \"{learner}\" reads {', '.join(LEARNER_KEYS[learner])})"
           f"{also}")
    # no braces reach pydantic's message template: the values of [model] hold none
    return PydanticCustomError("learner_key", msg, {"key": key})


class ModelTable(Table):
    """``[model]``: the learner and its parameters.

    ``sgd``: incremental ``SGDClassifier.partial_fit`` over shuffled blocks
    (``epochs``, ``learning_rate``, ...); ``lbfgs``: full-batch L-BFGS over
    the feature store (:mod:`streamcov.stream.lbfgs`; ``max_iter``, ``tol``),
    ``loss`` ``log_loss`` (the default for it) or ``squared_hinge``;
    ``exact-svm``: the exact kernel SVM in memory, ``sigma`` and ``C`` chosen
    by CV over ``sigma_grid`` and ``C_grid``. ``C``, ``alpha``, ``loss``,
    ``penalty``, ``scale``, ``validation_fraction``, ``n_iter_no_change`` and
    ``cache`` mean the same for sgd and lbfgs. :data:`LEARNER_KEYS` says which
    keys each learner reads; a key set (in the file or by ``--set``) that the
    chosen learner does not read is refused, naming the key and the learners
    that read it. When ``--set model.learner=...`` changes the file's learner,
    :func:`streamcov.tasks.config.load_config` drops the file's keys that the
    new learner does not read, with a note.
    """

    learner: Literal["sgd", "exact-svm", "lbfgs"] = "sgd"
    loss: Literal[SGD_LOSSES] = "hinge"
    C: PosFloat = 10.0
    alpha: Optional[PosFloat] = None
    epochs: Epochs = 40
    # sklearn's SGD keeps the count where averaging starts in a C int
    average: Union[bool, Annotated[int, Field(ge=1, le=2 ** 31 - 1)]] = True
    learning_rate: Literal[LEARNING_RATES] = "optimal"
    eta0: PosFloat = 0.01
    penalty: Literal["l2", "l1", "elasticnet", "none"] = "l2"
    scale: Literal["none", "center", "standard"] = "none"
    validation_fraction: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.0
    n_iter_no_change: PosInt = 5
    checkpoint_blocks: NonNegInt = 0
    shuffle_blocks: PosInt = 8
    max_iter: PosInt = 300
    tol: PosFloat = 1e-4
    cache: Literal["auto", "memory", "stream"] = "auto"
    span: Literal["auto", "rows", "features"] = "auto"
    sigma_grid: Annotated[list[Bandwidth], Field(min_length=1)] = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0]
    C_grid: Annotated[list[PosFloat], Field(min_length=1)] = [0.1, 1.0, 10.0, 100.0, 1000.0]

    @model_validator(mode="before")
    @classmethod
    def _lbfgs_loss(cls, data):
        # the loss default follows the learner: hinge for sgd, log_loss for lbfgs
        if isinstance(data, dict) and data.get("learner") == "lbfgs" and "loss" not in data:
            data = {**data, "loss": "log_loss"}
        return data

    @model_validator(mode="after")
    def _learner_keys(self):
        reads = LEARNER_KEYS[self.learner]
        unread = [k for k in type(self).model_fields
                  if k in self.model_fields_set and k != "learner" and k not in reads]
        if unread:
            raise learner_key_error(self, unread)
        return self

    @model_validator(mode="after")
    def _lbfgs_keys(self):
        if self.learner == "lbfgs":
            if self.loss not in LBFGS_LOSSES:
                raise ValueError(f'model.loss = "{self.loss}" is not a loss of learner "lbfgs": use "log_loss" '
                                 f'or "squared_hinge" (a smooth loss), or learner = "sgd"')
            if self.penalty != "l2":
                raise ValueError(f'model.penalty = "{self.penalty}": learner "lbfgs" fits the l2 penalty only '
                                 f'(use learner = "sgd" for l1 or elasticnet)')
        if self.learner == "sgd" and self.learning_rate in ("pa1", "pa2") and self.loss != "hinge":
            # scikit-learn's passive-aggressive steps are those of the hinge loss (a traceback at fit before)
            raise key_error("learner_key", "loss", f'model.loss = "{self.loss}": model.learning_rate = '
                            f'"{self.learning_rate}" (passive-aggressive steps) works with loss "hinge" only; set '
                            f'model.loss = "hinge", or another model.learning_rate (e.g. "optimal")')
        return self

    def learner_params(self) -> dict:
        """``learner`` and the keys it reads (defaults included), for results and reports."""
        return {"learner": self.learner, **{k: getattr(self, k) for k in LEARNER_KEYS[self.learner]}}


def map_reads(name: str) -> tuple:
    """The declared ``[features]`` keys that map ``name`` reads (besides ``map``): every map its width,
    bandwidth and fit options; RGW's own options (``theta``, ``sampling``, ``center``, ``max_degree``)
    only the maps that take them (RGW, and Maclaurin ``center`` and ``sampling``); ``none`` nothing."""
    if name == "none":
        return ()
    from ..features.registry import RGW_ONLY

    own = map_params_of(name)
    return ("n_components", "sigma", "bandwidth", "fit_sample", *(k for k in RGW_ONLY if k in own))


def map_params_of(name) -> frozenset:
    """The parameters of map ``name``'s class (a map's own further ``[features]`` keys are among them); empty
    for ``none`` or a name no map has."""
    if name not in MAP_NAMES or name == "none":
        return frozenset()
    from ..features.registry import map_class

    return frozenset(map_class(name)().get_params())


class FeaturesTable(BaseModel):
    """``[features]``: the explicit feature map (:mod:`streamcov.features.registry`).

    Declared keys are typed; a map's own further parameters (e.g. RGW's
    ``max_degree``, Fastfood's) are passed through and checked against the map.
    """

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    map: Literal[MAP_NAMES] = "rgw"
    n_components: PosInt = 1000
    sigma: Bandwidth = 1.0
    theta: Fraction = 0.5
    sampling: Literal["iid", "stratified"] = "iid"
    center: bool = False
    # 0 keeps only the constant term of the kernel's series: every feature the same for every row (chance)
    max_degree: PosInt = 50
    fit_sample: Annotated[int, Field(ge=2)] = 2048
    bandwidth: Literal["absolute", "median"] = "absolute"

    @model_validator(mode="after")
    def _map_keys(self):
        # a key written in the file or by --set that the map does not read would be silently ignored
        if "random_state" in (self.model_extra or {}):
            raise key_error("map_key", "random_state", "features.random_state: the map's random draws follow the "
                                                       "pipeline's top-level seed (one seed for every stage); "
                                                       "set seed = N instead")
        if "blocks" in (self.model_extra or {}):
            raise key_error("map_key", "blocks", "features.blocks: the kernel's column blocks are the windows of the "
                                                 "descriptor's temporal pyramid, set by streamcov from "
                                                 "descriptor.levels and descriptor.level_weights; remove it")
        if "views" in (self.model_extra or {}):
            raise key_error("map_key", "views", "features.views: the views of a row (the sequence and its mirror "
                                                "image) are set by streamcov from descriptor.mirror; remove it")
        if self.map == "nystroem" and self.n_components > self.fit_sample:
            # its landmarks are rows of the fitting sample: more would be silently fewer
            raise key_error("map_key", "n_components",
                            f"features.n_components = {self.n_components} is more than features.fit_sample = "
                            f"{self.fit_sample}, the training rows map \"nystroem\" draws its landmarks from; "
                            f"raise features.fit_sample to at least {self.n_components}, or lower "
                            f"features.n_components")
        if self.map == "none" and self.model_extra:   # no map to check them against: they would go unread
            key = next(iter(self.model_extra))
            raise key_error("map_key", key, f"features.{key} is not read by map \"none\" (no feature map): remove "
                                            f"it, or set features.map to the map it belongs to")
        reads = map_reads(self.map)
        unread = [k for k in type(self).model_fields if k in self.model_fields_set and k != "map" and k not in reads]
        if unread:
            key = unread[0]
            readers = [f'"{m}"' for m in MAP_NAMES if key in map_reads(m)]
            also = f" (also not read: {', '.join('features.' + k for k in unread[1:])})" if len(unread) > 1 else ""
            raise key_error("map_key", key, f"features.{key} = {toml_value(getattr(self, key))} is not read by map "
                                            f"\"{self.map}\": remove it, or set features.map = "
                                            f"{' or '.join(readers)} (map \"{self.map}\" reads "
                                            f"{', '.join(reads) or 'nothing'}){also}")
        return self

    def params(self) -> dict:
        """Every key (declared, with defaults, and map-specific), for the feature-map registry."""
        return self.model_dump()


def _visible(v: str, what: str) -> None:
    """A folder's name or path as text someone can see and type: not blank (" " made a folder named by a space,
    where --output " " is refused), no control characters (a tab, a line break)."""
    if not v.strip():
        raise ValueError(f"{what}, not a blank text")
    bad = next((c for c in v if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"{what} without control characters (it holds {bad!r})")


class Top(Table):
    """Keys shared by every task."""

    task: str
    name: Annotated[str, Field(min_length=1, pattern=FOLDER_NAME)] = "pipeline"
    seed: Seed = 0
    output: Annotated[str, Field(min_length=1)] = "runs/{name}"
    paper_accuracy: Optional[Annotated[float, Field(ge=0, le=1)]] = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str):
        if v in (".", ".."):   # output = "runs/{name}" would be runs/ itself, or its parent
            raise ValueError('a name, not "." or ".." (it names the output folder, runs/{name} by default)')
        _visible(v, "a name")
        return v

    @field_validator("output")
    @classmethod
    def _output(cls, v: str):
        if "{" in v.replace("{name}", "") or "}" in v.replace("{name}", ""):   # else a folder named "{nme}"
            raise ValueError("a folder whose only placeholder is {name}, e.g. \"runs/{name}\"")
        _visible(v, "a folder")
        return v


# ------------------------------------------------------- skeleton-classification
class SyntheticTable(Table):
    """``[data.synthetic]``: the built-in generator (:class:`~streamcov.data.synth.SyntheticSkeletons`)."""

    n_sequences: PosInt = 400
    n_subjects: PosInt = 10
    n_classes: Annotated[int, Field(ge=1, le=12)] = 10
    seed: Seed = 0
    frames: Annotated[list[Annotated[int, Field(ge=2)]], Field(min_length=2, max_length=2)] = [30, 60]
    noise: Annotated[float, Field(ge=0, le=NOISE_MAX, allow_inf_nan=False)] = 0.01   # metres

    @field_validator("frames")
    @classmethod
    def _frames(cls, v):
        if v[0] > v[1]:
            raise ValueError(f"[shortest, longest] sequence length, the shortest first; got {v}")
        return v


class SkeletonData(Table):
    """``[data]`` of skeleton tasks: a store, or a raw archive ingested into it, or the generator."""

    # read only to ingest `source` into `store` (tasks/config drops them, with a note, when there is no source)
    READER_KEYS: ClassVar[tuple] = ("format", "options", "on_error")

    store: Optional[PathText] = None
    source: Optional[PathText] = None
    format: Optional[Literal[SKELETON_FORMATS]] = None
    options: dict[str, Any] = {}
    # a file of the archive that is damaged or not of the format: stop (its error), or skip it (recorded in the
    # store's skipped list); streamcov.data.skeletons.ingest
    on_error: Literal["stop", "skip"] = "stop"
    synthetic: Optional[SyntheticTable] = None

    @model_validator(mode="after")
    def _needs(self):
        if not (self.store or self.synthetic is not None):
            raise ValueError("[data] needs `store` (a skeleton store path) or a [data.synthetic] table")
        if self.source and self.synthetic is not None:   # the generator was used, the archive not read, silently
            raise key_error("data_key", "source", "data.source (an archive to ingest) and [data.synthetic] (the "
                            "generator) are two sources of sequences: give one of them (for the embedded demo's "
                            "generator, a pipeline file with data.source, or --store with a store of the archive)")
        if self.source and not self.format:
            raise ValueError(f"[data] `source` needs `format` ({', '.join(SKELETON_FORMATS)})")
        return self

    @property
    def source_read(self) -> str | None:
        """The archive folder the run reads (ingested, or checked against its store), or None: none given, or
        [data.synthetic] given, which the run reads instead."""
        return self.source if self.synthetic is None else None


class SkeletonDescriptor(Table):
    """``[descriptor]``: the log-covariance descriptor of paper 000, and its options.

    The options (:class:`streamcov.descriptors.skeleton.PyramidPlan`, docs/descriptors.md):
    frame ``features`` (positions and their Savitzky-Golay velocities and accelerations over
    ``window`` frames, per frame or per normalized ``time``), a subset of ``joints``, a
    temporal pyramid (``levels``, half ``overlap``, ``level_weights``: a weighted sum of
    Log-E kernels, one per window), a ``body_frame`` (yaw about the camera's ``up_axis``,
    from the hips; or the torso frame of the hips and spine, per sequence or per frame), a ``scale`` by the body size, the Gaussian embedding of the mean
    (``mean_weight``), relative positions of joint ``pairs`` (indices, joint names or roles
    of the store) and the ``matrix`` of each window: the covariance, or ``"rbf"``, the
    kernelized covariance of Cavazza et al. (ICPR 2016) with bandwidth ``kernel_sigma``
    (standardized coordinates), or ``"rbf-raw"``, the same of the coordinates as they are
    (no mean embedding for either); ``mirror``: the sequence and its mirror image
    (left and right joints swapped by name, across the ``up_axis``) as two views of one
    kernel averaged over them, so that a performance and its mirror image are the same.
    """

    kind: Literal["log-covariance"] = "log-covariance"
    center: Union[Literal["store", "none"], Annotated[list[NonNegInt], Field(min_length=1)]] = "store"
    gamma: NonNegFloat = 1e-4
    normalize: bool = True
    ddof: Literal[0, 1] = 1           # 1: unbiased covariance; 0: maximum likelihood
    dtype: Literal["float64", "float32"] = "float64"
    features: Annotated[list[Literal["positions", "velocities", "accelerations"]], Field(min_length=1)] = \
        ["positions"]
    joints: Union[Literal["all"], Annotated[list[NonNegInt], Field(min_length=1)]] = "all"
    window: Annotated[int, Field(ge=3, le=101)] = 5
    time: Literal["frame", "normalized"] = "frame"
    levels: Annotated[int, Field(ge=1, le=6)] = 1
    overlap: bool = False
    level_weights: Optional[Annotated[list[PosFloat], Field(min_length=1)]] = None
    body_frame: Literal["none", "yaw", "torso", "torso-frames"] = "none"
    # "auto": the axis the spines of the store lie along (stream/skeleton.find_up_axis), resolved once
    up_axis: Literal["x", "y", "z", "auto"] = "auto"
    scale: Literal["none", "body"] = "none"
    # the mean enters the descriptor as m mu and m^2 mu mu^T beside C: beyond 1e4 it swamps C and the log's
    # precision (1e300 overflowed inside the log kernel)
    mean_weight: Annotated[float, Field(ge=0, le=1e4, allow_inf_nan=False)] = 0.0
    pairs: list[Annotated[list[Union[NonNegInt, Annotated[str, Field(min_length=1)]]],
                          Field(min_length=2, max_length=2)]] = []
    matrix: Literal["covariance", "rbf", "rbf-raw"] = "covariance"
    kernel_sigma: Bandwidth = 1.0
    mirror: bool = False

    @model_validator(mode="after")
    def _options(self):
        def bad(key, msg):
            return key_error("descriptor_key", key, msg)

        if len(set(self.features)) != len(self.features):
            raise bad("features", f"descriptor.features = {toml_value(self.features)} names a feature twice")
        if self.window % 2 == 0:
            raise bad("window", f"descriptor.window must be odd (a centred window), got {self.window}")
        if self.level_weights is not None and len(self.level_weights) != self.levels:
            raise bad("level_weights", f"descriptor.level_weights has {len(self.level_weights)} weights for "
                      f"descriptor.levels = {self.levels}; give one per level")
        if self.joints != "all" and len(set(self.joints)) != len(self.joints):
            raise bad("joints", f"descriptor.joints = {self.joints} names a joint twice")
        if isinstance(self.center, list) and len(set(self.center)) != len(self.center):
            # [6, 6] kept the centre joint as a constant zero joint (a single centre joint is dropped)
            raise bad("center", f"descriptor.center = {self.center} names a joint twice; name each joint once")
        for p in self.pairs:
            if p[0] == p[1]:
                raise bad("pairs", f"descriptor.pairs: {toml_value(p)} pairs a joint with itself")
        if len({tuple(p) for p in self.pairs}) != len(self.pairs):
            raise bad("pairs", "descriptor.pairs names a pair twice")
        if self.matrix in RBF_MATRICES and self.mean_weight > 0:
            raise bad("mean_weight", "descriptor." + RBF_NO_MEAN.format(matrix=toml_value(self.matrix),
                                                                        key="descriptor.mean_weight"))
        for key, reads, reader, fix in DESCRIPTOR_READ_WHEN:
            if key in self.model_fields_set and not reads(self):
                raise bad(key, f"descriptor.{key} = {toml_value(getattr(self, key))} is not read: only {reader} "
                          f"reads it; remove it, or {fix}")
        return self

    def options(self) -> dict:
        """The options beyond paper 000, as :func:`streamcov.stream.skeleton.skeleton_source` takes them."""
        keys = ("features", "joints", "window", "time", "levels", "overlap", "level_weights", "body_frame",
                "up_axis", "scale", "mean_weight", "pairs", "matrix", "kernel_sigma", "mirror")
        return {k: getattr(self, k) for k in keys}


# The [descriptor] options read only under another option (streamcov.descriptors.skeleton): the derivative
# window and its time unit by the velocities and accelerations, the up axis by the yaw body frame and the mirror, the
# bandwidth by the kernelized covariance, the denominator and the body-size scale by the covariance. Rows
# (key, reads it?, what reads it, the fix), a key in as many rows as it has conditions; one of them set in the
# file or by --set where it is not read is refused: it would be silently ignored. The pyramid's `overlap` and
# `level_weights` (no effect with one level) are not refused: grids and the README's paper-000 flags set
# `levels = 1` on files that set them.
_DERIVATIVES = 'descriptor.features with "velocities" or "accelerations"'
_COVARIANCE = ('descriptor.matrix = "covariance" or "rbf-raw" (the kernelized covariance of matrix = "rbf" '
               'standardizes each coordinate series, which cancels it)')
DESCRIPTOR_READ_WHEN = [
    ("window", lambda d: any(f != "positions" for f in d.features), _DERIVATIVES,
     'add "velocities" or "accelerations" to descriptor.features'),
    ("time", lambda d: any(f != "positions" for f in d.features), _DERIVATIVES,
     'add "velocities" or "accelerations" to descriptor.features'),
    # normalized time multiplies a sequence's velocities by its length T (accelerations by T^2): a factor that the
    # standardized series of matrix = "rbf" cancel, as they cancel the body-size scale
    ("time", lambda d: d.matrix != "rbf" or d.time == "frame", _COVARIANCE,
     'set descriptor.time = "frame" (the same descriptor), or descriptor.matrix = "covariance" or "rbf-raw"'),
    ("up_axis", lambda d: d.body_frame == "yaw" or d.mirror, 'descriptor.body_frame = "yaw" or descriptor.mirror',
     'set descriptor.body_frame = "yaw" or descriptor.mirror = true'),
    ("kernel_sigma", lambda d: d.matrix in RBF_MATRICES, 'descriptor.matrix = "rbf" or "rbf-raw"',
     'set descriptor.matrix = "rbf" or "rbf-raw"'),
    # the kernelized covariance is built from the correlation matrix of each window, which neither the
    # covariance's denominator nor one scale factor per sequence changes (tests/test_descriptor_kcov.py);
    # their defaults say what "rbf" does and stay allowed, so that --set can switch a file that sets them
    ("ddof", lambda d: d.matrix != "rbf" or d.ddof == 1, _COVARIANCE,
     'set descriptor.ddof = 1 (the same descriptor), or descriptor.matrix = "covariance" or "rbf-raw"'),
    ("scale", lambda d: d.matrix != "rbf" or d.scale == "none", _COVARIANCE,
     'set descriptor.scale = "none" (the same descriptor), or descriptor.matrix = "covariance" or "rbf-raw"'),
]


class SkeletonClassification(Top):
    task: Literal["skeleton-classification"] = "skeleton-classification"
    data: SkeletonData
    descriptor: SkeletonDescriptor = SkeletonDescriptor()
    features: FeaturesTable = FeaturesTable()
    model: ModelTable = ModelTable()
    split: SplitTable = SplitTable()
    dask: DaskTable = DaskTable()


# -------------------------------------------------------------------- image tasks
class PixelsTable(Table):
    """``[pixels]``: the data matrix of an image, one row per pixel.

    ``source = "handcrafted"`` (default): per-pixel features of paper 004,
    eq. (38) (:mod:`streamcov.descriptors.pixels`): ``preset`` or
    ``features``, Gabor options, ``stride``. ``source = "cnn"``: ConvNet
    hypercolumns, one row per grid cell, and the pooled head (section 5,
    :mod:`streamcov.descriptors.cnn`, needs ``pip install 'streamcov[cnn]'``):
    ``blocks``, ``input_size`` (or ``"keep"``), ``grid`` (``"finest"`` or
    cells per side), ``head``, ``backend``, ``batch_size``.
    """

    source: Literal["handcrafted", "cnn"] = "handcrafted"
    preset: Optional[str] = None
    features: Optional[Annotated[list[str], Field(min_length=1)]] = None
    gabor_orientations: Optional[PosInt] = None
    gabor_scales: Optional[PosInt] = None
    gabor_fmax: Optional[Annotated[float, Field(gt=0, le=0.5)]] = None
    gabor_radius: Optional[NonNegInt] = None
    stride: Optional[PosInt] = None
    blocks: Optional[Annotated[list[str], Field(min_length=1)]] = None
    input_size: Optional[Union[Annotated[int, Field(ge=8, le=4096)], Literal["keep"]]] = None
    grid: Optional[Union[Literal["finest"], Annotated[int, Field(ge=2, le=1024)]]] = None   # 1 cell: a covariance of 0
    head: Optional[bool] = None
    backend: Optional[Literal["auto", "onnxruntime", "numpy"]] = None
    batch_size: Optional[PosInt] = None

    @field_validator("preset")
    @classmethod
    def _preset(cls, v):
        from ..descriptors.pixels import PRESETS

        if v is None or v in PRESETS:
            return v
        raise ValueError(f"one of {', '.join(sorted(PRESETS))}{did_you_mean(v, sorted(PRESETS), show=toml_value)}")

    @field_validator("features")
    @classmethod
    def _features_once(cls, v):
        # a feature twice is a column twice: every image's covariance would be singular (bars are ignored:
        # "Ix" and "|Ix|" are one feature)
        _each_once(v, same=lambda f: f.strip("|"))
        from ..descriptors.pixels import parse_feature_name

        for f in v or ():   # an unknown name, refused where it was written (it failed when the images were read)
            try:
                parse_feature_name(f.strip("|"))
            except ValueError:
                raise ValueError(f"names among x, y, I, R, G, B, <C><d> with C in I/R/G/B and d in x/y/xx/yy "
                                 f"(e.g. Ix, Ryy) and gabor; {toml_value(f)} is not one") from None
        return v

    @field_validator("blocks")
    @classmethod
    def _blocks(cls, v):
        if v is None:
            return v
        from ..descriptors.cnn import CNNSpec

        try:
            CNNSpec(blocks=tuple(v))
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix("blocks: ")) from None
        return v

    @model_validator(mode="after")
    def _needs(self):
        cnn_keys = [k for k in _CNN_KEYS if getattr(self, k) is not None]
        hand_keys = [k for k in _HANDCRAFTED_KEYS if getattr(self, k) is not None]
        if self.source == "cnn":
            if hand_keys:
                raise key_error("pixels_key", hand_keys[0], f"pixels.{hand_keys[0]} belongs to hand-crafted "
                                f"features; with source = \"cnn\" use {', '.join(_CNN_KEYS)}")
            return self
        if cnn_keys:
            raise key_error("pixels_key", cnn_keys[0], f"pixels.{cnn_keys[0]} belongs to ConvNet features: add "
                            f"source = \"cnn\"")
        if self.preset is None and self.features is None:
            raise ValueError("[pixels] needs `preset` (e.g. \"virus\"), `features` (e.g. [\"I\", \"Ix\"]) "
                             "or source = \"cnn\"")
        gabor = [k for k in _GABOR_KEYS if getattr(self, k) is not None]
        if gabor and "gabor" not in self._feature_names():
            # the Gabor bank is built only for the "gabor" feature (streamcov.descriptors.pixels.FeatureSpec)
            where = "pixels.features" if self.features is not None else f'preset "{self.preset}"'
            raise key_error("pixels_key", gabor[0], f"pixels.{gabor[0]} = {toml_value(getattr(self, gabor[0]))} is "
                            f"not read: the features ({where}: {', '.join(self._feature_names())}) hold no Gabor "
                            f"magnitudes; remove it, or add \"gabor\" to pixels.features")
        return self

    def _feature_names(self) -> tuple:
        """The hand-crafted features: ``features``, or the preset's."""
        if self.features is not None:
            return tuple(self.features)
        from ..descriptors.pixels import PRESETS

        return tuple(PRESETS[self.preset]["features"])

    @property
    def has_head(self) -> bool:
        return self.source == "cnn" and self.head is not False

    def spec(self):
        """A :class:`~streamcov.descriptors.pixels.FeatureSpec` or :class:`~streamcov.descriptors.cnn.CNNSpec`.

        Raises ValueError on unknown names, and
        :class:`~streamcov.errors.MissingExtraError` for ConvNet features
        without the ``cnn`` extra.
        """
        if self.source == "cnn":
            from ..descriptors.cnn import CNNSpec, require

            require('pixels.source = "cnn" (ConvNet features)')
            d = {k: getattr(self, k) for k in _CNN_KEYS if getattr(self, k) is not None}
            if "blocks" in d:
                d["blocks"] = tuple(d["blocks"])
            return CNNSpec(**d)
        from ..descriptors.pixels import get_spec

        return get_spec({k: getattr(self, k) for k in _HANDCRAFTED_KEYS if getattr(self, k) is not None})


_CNN_KEYS = ("blocks", "input_size", "grid", "head", "backend", "batch_size")
_HANDCRAFTED_KEYS = ("preset", "features", "gabor_orientations", "gabor_scales", "gabor_fmax", "gabor_radius", "stride")
_GABOR_KEYS = ("gabor_orientations", "gabor_scales", "gabor_fmax", "gabor_radius")   # read with the "gabor" feature
HeadWeight = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
HeadNorm = Literal["l2", "power"]
HeadCombine = Literal["product", "sum"]


def _check_head(pixels: PixelsTable, method) -> None:
    """The head methods need ConvNet features with their head (which keys a method reads: its table)."""
    if (method.name == "head" or method.head_weight is not None) and not pixels.has_head:
        key = "name" if method.name == "head" else "head_weight"
        what = "method.name = \"head\"" if key == "name" else "method.head_weight"
        raise key_error("method_key", f"method.{key}", f"{what} uses the ConvNet's pooled head: it needs [pixels] "
                        f"source = \"cnn\" (with head = true)")


def _head_keys(m) -> None:
    """``head_combine`` and ``head_norm`` are read only with a head: refused (naming the key) without one."""
    if "head_combine" in m.model_fields_set and m.head_weight is None:
        raise key_error("method_key", "head_combine", "method.head_combine combines the operators' kernel K2 with "
                        "the head's: it needs method.head_weight (conv + head)")
    if "head_norm" in m.model_fields_set and m.name != "head" and m.head_weight is None:
        raise key_error("method_key", "head_norm", "method.head_norm normalises the ConvNet's pooled head: it needs "
                        "method.name = \"head\" or method.head_weight (conv + head)")


def method_key_error(m, keys: list[str], reads, by: str, who: str, fix: str) -> PydanticCustomError:
    """``method.<key> = <value> is not read by <by>: remove it, or <fix> (<who> reads ...)``.

    ``keys``: every key of the table that is set and not read, in the table's order; the first is named
    (``ctx["key"]``, for the loader to say where it came from), the others listed after it. ``reads``: the
    keys the chosen method does read (listed in the table's order).
    """
    key = keys[0]
    listed = ", ".join(k for k in type(m).model_fields if k in reads) or "no other key"
    also = f" (also not read: {', '.join('method.' + k for k in keys[1:])})" if len(keys) > 1 else ""
    return key_error("method_key", key, f"method.{key} = {toml_value(getattr(m, key))} is not read by {by}: "
                     f"remove it{', or ' + fix if fix else ''} ({who} reads {listed}){also}")


def _unread(m, reads) -> list[str]:
    """The keys of table ``m`` set in the file (or by ``--set``) that ``reads`` does not hold (name, classifier
    aside: every method reads them)."""
    return [k for k in type(m).model_fields if k in m.model_fields_set and k not in ("name", "classifier")
            and k not in reads]


class ImageData(Table):
    """``[data]`` of image-stream-classification: an image store, or a folder ingested into it."""

    READER_KEYS: ClassVar[tuple] = ("format", "group_level", "exclude", "pixel_dtype", "on_error")

    store: Optional[PathText] = None
    source: Optional[PathText] = None
    format: Literal["folders"] = "folders"
    group_level: PosInt = 1
    exclude: list[str] = ["maps"]
    pixel_dtype: Literal["auto", "uint8", "uint16", "float32"] = "auto"
    on_error: Literal["stop", "skip"] = "stop"   # a damaged image: stop, or skip it (streamcov.data.images)

    @model_validator(mode="after")
    def _needs(self):
        if not self.store:
            raise ValueError("[data] needs `store` (an image store written by `streamcov ingest images`)")
        return self

    @property
    def source_read(self) -> str | None:
        """The image folder the run reads (ingested, or checked against its store), or None."""
        return self.source


# The [method] keys each method of image-stream-classification reads (besides `name`), the one place that
# says so (streamcov/tasks/classify.py run_image_stream, streamcov/stream/image.py, featurize): the
# operators' methods read them all, `fit_sample` for the median bandwidth of K2; "head" learns on the unit
# pooled heads alone (no operator, no feature scale, no map) and reads only head_norm. head_combine and
# head_norm are read only with a head (head_weight; head_norm also by "head"). A key set in the file or by
# --set that the chosen method does not read is refused: it would be silently ignored.
_STREAM_OPERATOR_KEYS = ("D", "sigma1", "gamma", "sigma2", "n_components", "scaling", "fit_sample", "head_weight",
                         "head_combine", "head_norm")
STREAM_METHOD_KEYS = {"approx_loghs": _STREAM_OPERATOR_KEYS, "qapprox_loghs": _STREAM_OPERATOR_KEYS,
                      "head": ("head_norm",)}


class StreamMethod(Table):
    """``[method]`` of image-stream-classification: fixed hyperparameters of paper 004's scalable path.

    :data:`STREAM_METHOD_KEYS` says which keys each method reads.
    """

    name: Literal["approx_loghs", "qapprox_loghs", "head"] = "approx_loghs"
    D: PosInt = 200
    sigma1: Bandwidth = 1.0
    gamma: PosFloat = 1e-3
    sigma2: Bandwidth = 1.0
    n_components: PosInt = 4096
    scaling: Literal["global", "per-feature"] = "global"
    fit_sample: Annotated[int, Field(ge=2)] = 256
    head_weight: Optional[HeadWeight] = None
    head_combine: HeadCombine = "product"
    head_norm: HeadNorm = "l2"

    @model_validator(mode="before")
    @classmethod
    def _no_grids(cls, data):
        for key in ("sigma1", "gamma", "sigma2", "head_weight", "head_combine"):
            if isinstance(data, dict) and isinstance(data.get(key), list):
                raise ValueError(f"method.{key} must be one number, got the list {toml_value(data[key])}: the "
                                 f"streaming path takes fixed hyperparameters (the grid search lives "
                                 f"in the in-memory task image-classification)")
        return data

    @model_validator(mode="after")
    def _method_keys(self):
        reads = STREAM_METHOD_KEYS[self.name]
        unread = _unread(self, reads)
        if unread:
            others = [n for n, r in STREAM_METHOD_KEYS.items() if unread[0] in r]
            raise method_key_error(self, unread, reads, f'method.name = "{self.name}"', f'method "{self.name}"',
                                   f"set method.name = {_quoted_or(others)}" if others else "")
        _head_keys(self)
        return self


class ImageStreamClassification(Top):
    task: Literal["image-stream-classification"] = "image-stream-classification"
    data: ImageData
    pixels: PixelsTable
    method: StreamMethod = StreamMethod()
    model: ModelTable = ModelTable()
    split: SplitTable = SplitTable(kind="stratified-kfold")
    dask: DaskTable = DaskTable()

    @model_validator(mode="before")
    @classmethod
    def _store_learners(cls, data):
        # before [model] itself is checked: its keys are judged against a learner this task has
        model = data.get("model") if isinstance(data, dict) else None
        learner = model.get("learner") if isinstance(model, dict) else None
        if isinstance(learner, str) and learner not in ("sgd", "lbfgs") and learner in LEARNER_KEYS:
            raise PydanticCustomError("learner_key", f"model.learner must be 'sgd' or 'lbfgs' here (learners over the "
                                      f"feature store), got {learner!r}", {"key": "model.learner"})
        return data

    @model_validator(mode="after")
    def _head(self):
        _check_head(self.pixels, self.method)
        return self


Grid = Union[PosFloat, Annotated[list[PosFloat], Field(min_length=1)]]
# an SVM's C: 5e-324 gave every dual coefficient 0 (chance accuracy without a word); the learners' own range
Cost = Annotated[float, Field(ge=1e-300, le=1e300, allow_inf_nan=False)]
CostGrid = Union[Cost, Annotated[list[Cost], Field(min_length=1)]]
BandwidthGrid = Union[Bandwidth, Annotated[list[Bandwidth], Field(min_length=1)]]
EVAL_METHODS = ("e", "loge", "stein", "hs", "approx_hs", "loghs", "approx_loghs", "qapprox_loghs", "head")
HeadGrid = Union[HeadWeight, Annotated[list[HeadWeight], Field(min_length=1)], Literal["alignment"]]
CombineGrid = Union[HeadCombine, Annotated[list[HeadCombine], Field(min_length=1)]]


class EvalData(Table):
    """``[data]`` of image-classification: an image store, a folder per class, or scikit-image's textures."""

    # read only with a folder (``format = "folders"``): dropped with a note otherwise (tasks/config)
    READER_KEYS: ClassVar[tuple] = ("group_level", "exclude")
    #: the keys each format reads, besides ``format`` and ``max_per_class`` (and the READER_KEYS of a folder)
    FORMAT_READS: ClassVar[dict] = {"folders": ("source",), "store": ("store",),
                                    "skimage-textures": ("textures", "patch")}

    store: Optional[PathText] = None
    source: Optional[PathText] = None
    format: Literal["folders", "store", "skimage-textures"] = "folders"
    group_level: PosInt = 1
    exclude: list[str] = ["maps"]
    textures: Annotated[list[str], Field(min_length=2)] = ["brick", "grass", "gravel"]
    patch: Annotated[int, Field(ge=4)] = 64
    max_per_class: Optional[PosInt] = None

    @field_validator("textures")
    @classmethod
    def _textures_once(cls, v):
        # a texture twice is two classes of the same patches: learned and scored as if they differed
        return _each_once(v)

    @model_validator(mode="after")
    def _needs(self):
        if self.format == "folders" and not self.source:
            raise ValueError("[data] with format = \"folders\" needs `source` (a folder per class)")
        if self.format == "store" and not self.store:
            raise ValueError("[data] with format = \"store\" needs `store` (an image store)")
        # a key of another format was not read, and `source` was still recorded as the run's dataset
        for key in ("source", "store", "textures", "patch"):
            if key in self.model_fields_set and key not in self.FORMAT_READS[self.format]:
                reads = next(f for f, keys in self.FORMAT_READS.items() if key in keys)
                raise key_error("data_key", key, f"data.{key} is not read with data.format = \"{self.format}\" "
                                f"(format \"{reads}\" reads it): remove it, or set data.format = \"{reads}\"")
        return self

    @property
    def source_read(self) -> str | None:
        """The image folder the run reads (``format = "folders"``), or None."""
        return self.source if self.format == "folders" else None


EVAL_CLASSIFIERS = ("svc", "1nn", "sgd")


def eval_classifier(name: str, classifier: str | None) -> str:
    """The classifier of image-classification's method ``name``: ``classifier``, or the default, ``1nn`` for
    stein (a divergence: no Gaussian kernel of it) and ``svc`` for the others."""
    return classifier or ("1nn" if name == "stein" else "svc")

_SCALE = ("standardize", "scaling")
_HEAD = ("head_weight", "head_combine", "head_norm")
_LOG_APPROX = ("D", "sigma1", "gamma", "mu")

# The [method] keys each (name, classifier) of image-classification reads (besides `name` and `classifier`),
# the one place that says so; `classifier` unset is 1nn for stein, svc for the others. From
# streamcov/tasks/image_eval.py:
# * the representation (build_candidates, approx_operator_vectors, select_and_test_sgd): D by the approximate
#   operators (approx_hs, approx_loghs, qapprox_loghs); sigma1 (K1) by the operator methods; gamma by the log
#   methods and stein (approx_hs takes no log, e none), and mu with it (a check: it must equal gamma);
#   max_pixels_exact by the exact operators (hs, loghs); standardize and scaling (the feature scale) by every
#   method but head;
# * the classifier: svc (select_and_test_svc, K2 of the distance) reads sigma2, C and inner_folds; sgd
#   (select_and_test_sgd, random features of K2) also n_components and epochs; 1nn (select_and_test_1nn,
#   leave-one-out on the training images) none of them;
# * conv + head, with svc or sgd: head_weight, and with it head_combine and head_norm (_head_keys); not with
#   stein (a divergence, not a distance, under K2);
# * "head" (svc only): a linear-kernel SVM on the unit pooled heads (select_and_test_linear): C, inner_folds
#   and head_norm.
# A key set in the file or by --set that the chosen pair does not read is refused: it would be silently ignored.
METHOD_KEYS = {
    ("e", "svc"): ("sigma2", "C", "inner_folds", *_SCALE, *_HEAD),
    ("e", "1nn"): _SCALE,
    ("loge", "svc"): ("gamma", "mu", "sigma2", "C", "inner_folds", *_SCALE, *_HEAD),
    ("loge", "1nn"): ("gamma", "mu", *_SCALE),
    ("stein", "svc"): ("gamma", "mu", "sigma2", "C", "inner_folds", *_SCALE),
    ("stein", "1nn"): ("gamma", "mu", *_SCALE),
    ("hs", "svc"): ("sigma1", "sigma2", "C", "inner_folds", "max_pixels_exact", *_SCALE, *_HEAD),
    ("hs", "1nn"): ("sigma1", "max_pixels_exact", *_SCALE),
    ("approx_hs", "svc"): ("D", "sigma1", "sigma2", "C", "inner_folds", *_SCALE, *_HEAD),
    ("approx_hs", "1nn"): ("D", "sigma1", *_SCALE),
    ("loghs", "svc"): ("sigma1", "gamma", "mu", "sigma2", "C", "inner_folds", "max_pixels_exact", *_SCALE, *_HEAD),
    ("loghs", "1nn"): ("sigma1", "gamma", "mu", "max_pixels_exact", *_SCALE),
    ("approx_loghs", "svc"): (*_LOG_APPROX, "sigma2", "C", "inner_folds", *_SCALE, *_HEAD),
    ("approx_loghs", "1nn"): (*_LOG_APPROX, *_SCALE),
    ("approx_loghs", "sgd"): (*_LOG_APPROX, "sigma2", "C", "inner_folds", "n_components", "epochs", *_SCALE, *_HEAD),
    ("qapprox_loghs", "svc"): (*_LOG_APPROX, "sigma2", "C", "inner_folds", *_SCALE, *_HEAD),
    ("qapprox_loghs", "1nn"): (*_LOG_APPROX, *_SCALE),
    ("qapprox_loghs", "sgd"): (*_LOG_APPROX, "sigma2", "C", "inner_folds", "n_components", "epochs", *_SCALE, *_HEAD),
    ("head", "svc"): ("C", "inner_folds", "head_norm"),
}


class EvalMethod(Table):
    """``[method]`` of image-classification; grid values are searched by CV on training images.

    :data:`METHOD_KEYS` says which keys each (``name``, ``classifier``) reads; a key set (in the file or by
    ``--set``) that the chosen pair does not read is refused, naming the key where it was written and what
    reads it.
    """

    name: Literal[EVAL_METHODS] = "approx_loghs"
    classifier: Optional[Literal[EVAL_CLASSIFIERS]] = None
    D: PosInt = 200
    sigma1: BandwidthGrid = [0.5, 1.0, 2.0]
    gamma: Grid = [1e-4, 1e-3, 1e-2]
    mu: Optional[Grid] = None
    sigma2: BandwidthGrid = [0.25, 0.5, 1.0, 2.0]
    C: CostGrid = [1.0, 10.0, 100.0]
    inner_folds: Annotated[int, Field(ge=2)] = 5
    max_pixels_exact: PosInt = 256
    n_components: PosInt = 4096
    epochs: Epochs = 30
    standardize: Literal["train", "all"] = "train"
    scaling: Literal["global", "per-feature"] = "global"
    head_weight: Optional[HeadGrid] = None
    head_combine: CombineGrid = "product"
    head_norm: HeadNorm = "l2"

    @property
    def classifier_used(self) -> str:
        """``classifier``, or the method's default (:func:`eval_classifier`)."""
        return eval_classifier(self.name, self.classifier)

    @model_validator(mode="after")
    def _checks(self):
        if self.classifier == "sgd" and self.name not in ("approx_loghs", "qapprox_loghs"):
            raise key_error("method_key", "classifier", f"method.classifier = 'sgd' (the scalable path) needs "
                            f"method.name approx_loghs or qapprox_loghs, got {self.name!r}")
        if self.name == "head" and self.classifier not in (None, "svc"):
            raise key_error("method_key", "classifier", f"method.name = 'head' is a linear-kernel SVM on the pooled "
                            f"head (classifier svc), got classifier {self.classifier!r}")
        name, clf = self.name, self.classifier_used
        reads = METHOD_KEYS[(name, clf)]
        unread = _unread(self, reads)
        if unread:
            default = "" if self.classifier else " (its default)"
            raise method_key_error(self, unread, reads, f'method.name = "{name}" with classifier "{clf}"{default}',
                                   f"{name} with {clf}", self._fix(unread[0]))
        if self.mu is not None and _as_list(self.mu) != _as_list(self.gamma):
            raise key_error("method_key", "mu", "method.mu must equal method.gamma: with gamma != mu the approximate "
                            "Log-HS distance grows without bound as D grows (paper 004, Theorem 1)")
        _head_keys(self)
        if self.head_alignment:
            if self.classifier not in (None, "svc"):
                raise key_error("method_key", "head_weight", f"method.head_weight = \"alignment\" weights the "
                                f"precomputed kernels of the SVM (classifier svc), got classifier {self.classifier!r}")
            if "head_combine" in self.model_fields_set and self.combine_grid() != ["sum"]:
                raise key_error("method_key", "head_combine", f"method.head_weight = \"alignment\" weights the sum "
                                f"(1 - w) K2 + w <h, h'> by centred kernel alignment: method.head_combine must be "
                                f"\"sum\" or left out, got {self.head_combine!r}")
        return self

    @property
    def head_alignment(self) -> bool:
        """``head_weight = "alignment"``: the head's weight by centred kernel alignment, not a grid."""
        return self.head_weight == "alignment"

    def _fix(self, key) -> str:
        """What reads ``key``: another classifier of this method, or other methods, or both."""
        name, clf = self.name, self.classifier_used
        other = [c for c in EVAL_CLASSIFIERS if c != clf and key in METHOD_KEYS.get((name, c), ())]
        if other:
            return f"set method.classifier = {_quoted_or(other)}"
        names = [n for n in EVAL_METHODS if n != name and key in METHOD_KEYS.get((n, clf), ())]
        if names:
            return f"set method.name = {_quoted_or(names)}"
        groups = {c: [n for n in EVAL_METHODS if key in METHOD_KEYS.get((n, c), ())] for c in EVAL_CLASSIFIERS}
        pairs = [f"method.name = {_quoted_or(ns)} with method.classifier = \"{c}\"" for c, ns in groups.items()
                 if ns and not any(set(ns) < set(other) for other in groups.values())]   # the widest choices
        return f"set {' or '.join(pairs)}" if pairs else ""

    def grid(self, key) -> list[float]:
        if key == "head_weight" and self.head_alignment:
            raise ValueError('method.head_weight = "alignment" is not a grid')
        return _as_list(getattr(self, key))

    def combine_grid(self) -> list[str]:
        """The head combinations searched by inner CV (``product``, ``sum``), in the file's order
        (``["sum"]`` with ``head_weight = "alignment"``)."""
        if self.head_alignment and "head_combine" not in self.model_fields_set:
            return ["sum"]
        c = self.head_combine
        return list(dict.fromkeys(c if isinstance(c, list) else [c]))


def _as_list(v) -> list[float]:
    return [float(x) for x in (v if isinstance(v, list) else [v])]


class ImageClassification(Top):
    task: Literal["image-classification"] = "image-classification"
    data: EvalData
    pixels: PixelsTable
    method: EvalMethod = EvalMethod()
    split: SplitTable = SplitTable(kind="stratified-kfold")

    @model_validator(mode="after")
    def _head(self):
        _check_head(self.pixels, self.method)
        return self


# ------------------------------------------------------- switching a table's choice
# the keys that make each table's choice (switched_reads)
SWITCH_KEYS = {ModelTable: ("learner",), EvalMethod: ("name", "classifier"), StreamMethod: ("name",),
               SplitTable: ("kind",), FeaturesTable: ("map",), EvalData: ("format",)}


def switched_reads(table, values: dict):
    """``(keys, reads)`` of a table whose choice decides which of its keys are read, at ``values``.

    ``table``: :class:`ModelTable` (choice ``learner``), :class:`EvalMethod` (``name`` and
    ``classifier``), :class:`StreamMethod` (``name``) or :class:`SplitTable` (``kind``); ``keys``: the
    table's keys that depend on the choice, ``reads``: those the choice in ``values`` (a raw table, as
    written) reads (:data:`LEARNER_KEYS`, :data:`METHOD_KEYS`, :data:`STREAM_METHOD_KEYS`,
    :data:`SPLIT_KEYS`). None for another table, or a choice the tables do not know (the schema then
    says what is wrong with it). The loader uses it to drop the file's keys that a choice switched by
    ``--set`` does not read.
    """
    def get(key):
        return values.get(key, table.model_fields[key].default)

    if table in SWITCH_KEYS and not all(isinstance(get(k), (str, type(None))) for k in SWITCH_KEYS[table]):
        return None   # a list or a table as the choice (it would not look up): the schema names the key
    if table is ModelTable:
        reads = LEARNER_KEYS.get(get("learner"))
    elif table is EvalMethod:
        reads = METHOD_KEYS.get((get("name"), eval_classifier(get("name"), get("classifier"))))
    elif table is StreamMethod:
        reads = STREAM_METHOD_KEYS.get(get("name"))
    elif table is SplitTable:
        reads = SPLIT_KEYS.get(get("kind"), ())
    elif table is FeaturesTable:
        reads = map_reads(get("map")) if get("map") in MAP_NAMES else None
    elif table is EvalData:
        fmt = get("format")
        reads = (None if fmt not in EvalData.FORMAT_READS else
                 (*EvalData.FORMAT_READS[fmt], *(EvalData.READER_KEYS if fmt == "folders" else ())))
    else:
        return None
    if table is EvalData:   # the keys one format reads and another does not
        keys = (*(k for keys in EvalData.FORMAT_READS.values() for k in keys), *EvalData.READER_KEYS)
    else:
        keys = _SPLIT_READ_BY_SOME if table is SplitTable else tuple(k for k in table.model_fields
                                                                     if k not in SWITCH_KEYS[table])
    return None if reads is None else (keys, tuple(reads))


# --------------------------------------------------------------------- TGP tasks
class TGPTable(Table):
    """``[tgp]``: Twin GP settings of paper 003 (:mod:`streamcov.tasks.tgp`)."""

    # the twin GP squares gamma: beyond these its square is 0 or infinite in floating point
    gamma_x: Union[Literal["median"], Annotated[float, Field(ge=1e-150, le=1e150, allow_inf_nan=False)]] = "median"
    gamma_y: Union[Literal["median"], Annotated[float, Field(ge=1e-150, le=1e150, allow_inf_nan=False)]] = "median"
    lambda_x: PosFloat = 1e-3
    lambda_y: PosFloat = 1e-3
    n_starts: PosInt = 1
    max_iter: PosInt = 50
    gegenbauer_weight_input: Annotated[float, Field(gt=-0.5, allow_inf_nan=False)] = 0.51
    gegenbauer_weight_output: Annotated[float, Field(gt=-0.5, allow_inf_nan=False)] = 0.52
    degree_grid: Annotated[list[Degree], Field(min_length=1)] = [1, 2, 3, 5, 7, 11]
    cv: Annotated[int, Field(ge=2)] = 3
    cv_max_train: Optional[PosInt] = None
    criteria: Annotated[list[Literal["kl", "hsic"]], Field(min_length=1)] = ["kl", "hsic"]
    bases: Annotated[list[Literal["monomial", "gegenbauer"]], Field(min_length=1)] = ["monomial", "gegenbauer"]
    primary: Annotated[list[str], Field(min_length=2, max_length=2)] = ["kl", "gegenbauer"]
    degrees: Optional[Annotated[list[Degree], Field(min_length=2, max_length=2)]] = None
    oracle_grid: bool = False

    @field_validator("degree_grid", "criteria", "bases")
    @classmethod
    def _distinct(cls, v):
        # a repeated entry would fit the same models twice (the degree CV, every criterion and basis)
        return _each_once(v)

    @model_validator(mode="after")
    def _primary(self):
        if self.primary[0] not in self.criteria or self.primary[1] not in self.bases:
            raise key_error("tgp_key", "primary", f"tgp.primary must be [criterion, basis] among tgp.criteria and "
                                                  f"tgp.bases, got {toml_value(self.primary)}")
        for key in ("gegenbauer_weight_input", "gegenbauer_weight_output"):
            # the Gegenbauer polynomials of weight 0 are Chebyshev's, another formula (read with that basis only)
            if getattr(self, key) == 0 and "gegenbauer" in self.bases:
                raise key_error("tgp_key", key, f"tgp.{key} = 0: expected a weight > -0.5 other than 0")
        return self


class SShapeData(Table):
    # an exact (Twin) GP holds n x n kernel matrices: 1e5 points are 80 GB each
    n_samples: Annotated[int, Field(ge=20, le=100_000)] = 500
    # the curve spans about 1.3; a noise of 1e200 overflowed the inputs' covariance (a traceback), and one a
    # thousand times the curve is noise alone already
    noise: Annotated[float, Field(ge=0, le=1e3, allow_inf_nan=False)] = 0.05
    test_fraction: Fraction = 0.5
    seeds: Annotated[list[Seed], Field(min_length=1)] = [0, 1, 2, 3, 4]

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v):
        # a repeated seed draws the same data and split again: the mean would weigh it twice and the std
        # across seeds would shrink toward 0 without a word
        return _each_once(v)


class TGPSShape(Top):
    task: Literal["tgp-sshape"] = "tgp-sshape"
    data: SShapeData = SShapeData()
    tgp: TGPTable = TGPTable()


class DigitsData(Table):
    test_fraction: Fraction = 0.25
    seed: Optional[Seed] = None
    max_train: Optional[PosInt] = None


class TGPDigits(Top):
    task: Literal["tgp-digits"] = "tgp-digits"
    data: DigitsData = DigitsData()
    tgp: TGPTable = TGPTable()


class PoseData(Table):
    store: Optional[PathText] = None
    source: PathText = "../shared/data/msr_action3d/raw"
    max_train: PosInt = 2000
    max_test: Optional[PosInt] = 1000
    seed: Optional[Seed] = None

    @model_validator(mode="after")
    def _one_source(self):
        # the store was read and the archive given beside it not even looked at (another dataset's, silently)
        if self.store and "source" in self.model_fields_set:
            raise key_error("data_key", "source", "data.source (the MSR-Action3D archive) and data.store (a store "
                            "of it) are two sources of frames, and the store would be read alone: give one of them "
                            "(a file's data.source is replaced by `streamcov run FILE --store STORE`)")
        return self

    @property
    def source_read(self) -> str | None:
        """The MSR-Action3D archive folder the run reads, or None: ``store`` given, which it reads instead."""
        return None if self.store else self.source


class TGPPose(Top):
    task: Literal["tgp-pose"] = "tgp-pose"
    data: PoseData = PoseData()
    tgp: TGPTable = TGPTable()


# ------------------------------------------------------------------------- study
class StudyTable(Table):
    """``[study]`` of kernel-approx-study (paper 000, Figure 1; :mod:`streamcov.tasks.study`)."""

    datasets: Annotated[list[Literal["msr", "florence", "utkinect", "hdm05"]], Field(min_length=1)] = \
        ["msr", "florence"]
    maps: Optional[Annotated[list[Literal[STUDY_MAPS]], Field(min_length=1)]] = None
    nus: Annotated[list[PosInt], Field(min_length=1)] = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    seeds: Annotated[int, Field(ge=1, le=MAX_REPEATS)] = 10
    learners: Annotated[list[Literal["sgd", "svm"]], Field(min_length=1)] = ["sgd", "svm"]
    jobs: PosInt = 1
    data_root: Optional[PathText] = None
    gram_sample: Annotated[int, Field(ge=2)] = 300
    gram_seeds: Annotated[int, Field(ge=1, le=MAX_REPEATS)] = 20

    @field_validator("datasets", "maps", "nus", "learners")
    @classmethod
    def _distinct(cls, v):
        # a repeated entry would run (hours of) the same cells twice and merge them as one
        return _each_once(v)


class KernelApproxStudy(Top):
    task: Literal["kernel-approx-study"] = "kernel-approx-study"
    output: Annotated[str, Field(min_length=1)] = "runs/study_kernel_approx"
    study: StudyTable = StudyTable()
