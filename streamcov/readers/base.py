"""What every skeleton reader yields, and the error it raises on bad input."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np


class SkeletonFormatError(ValueError):
    """A source file does not have the expected format.

    The message always names the file and, where there is one, the line
    (1-based), and says what was expected.
    """

    def __init__(self, path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


@dataclass
class SkeletonSequence:
    """One labelled sequence: ``frames`` is (T, 3*J) float32, joint-major x, y, z."""

    id: str
    frames: np.ndarray
    label: str
    subject: int
    split: str | None = None


@dataclass
class SkeletonSourceInfo:
    """Metadata common to all sequences of a source; written to store attributes."""

    n_joints: int
    joint_names: list[str]
    units: str
    source: str
    center: tuple[int, ...]          # 0-based joints whose mean is the hip centre
    label_names: list[str] | None = None   # fixed class order, if the source defines one
    extra: dict = field(default_factory=dict)


@dataclass
class SkippedSequence:
    id: str
    reason: str


class SkeletonSource:
    """A reader: ``info``, an iterator over sequences, and what it dropped.

    ``sequences()`` yields in a deterministic order so that an interrupted
    ingestion can resume by sequence id. ``skipped`` and ``repairs`` are filled
    while iterating (e.g. all-zero sequences skipped, all-zero frames dropped,
    duplicated frames removed) and are recorded in the store.
    """

    info: SkeletonSourceInfo

    def __init__(self):
        self.skipped: list[SkippedSequence] = []
        self.repairs: dict[str, int] = {}

    def _repair(self, what: str, count: int = 1):
        if count:
            self.repairs[what] = self.repairs.get(what, 0) + int(count)

    def sequences(self) -> Iterator[SkeletonSequence]:  # pragma: no cover - interface
        raise NotImplementedError
