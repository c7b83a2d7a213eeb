"""One error hierarchy for everything a user can cause.

Every error a user can cause with an input (a pipeline file, a flag, a raw
archive, a store, a model) is a :class:`StreamcovError`; the command line
turns it into one line ``streamcov <cmd>: error: <message>`` and exit code 2.
Anything else that escapes is a bug in streamcov and keeps its traceback.
Messages name the culprit (file and line, the pipeline key or flag as the
user typed it), say what was expected and how to fix it.
"""
from __future__ import annotations


class StreamcovError(Exception):
    """Base class of the errors a user can cause; never a bug in streamcov."""


class ConfigError(StreamcovError, ValueError):
    """A pipeline file, a ``--set`` override or a command-line flag is invalid."""


class FormatError(StreamcovError, ValueError):
    """An input file does not have the expected format.

    The message names the file and, where there is one, the 1-based line,
    and says what was expected.
    """

    def __init__(self, path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # picklable across Dask workers despite the custom __init__
        return (type(self), (self.path, self.reason, self.line))


class MissingInputError(FormatError, FileNotFoundError):
    """An input file or folder that a reader needs is not there (also a ``FileNotFoundError``)."""


class StoreError(StreamcovError):
    """A store cannot be used as asked: missing, another kind, incomplete, damaged."""


class IncompleteStoreError(StoreError):
    """The store has no completion marker: an ingestion did not finish."""


class NotSPDError(StreamcovError, ValueError):
    """A matrix that should be symmetric positive definite is not."""


class ModelError(StreamcovError, ValueError):
    """A model folder is missing, damaged, or does not fit the data it is applied to."""


class MissingExtraError(ConfigError, ImportError):
    """An optional extra of streamcov is not installed (e.g. ``pip install streamcov[cnn]``)."""


class WeightsError(StreamcovError, ValueError):
    """A file of pretrained weights is not the expected one: wrong hash, damaged, or another format."""


class UnsafePickleError(WeightsError):
    """A weight pickle asks for something the restricted unpickler does not allow; nothing was run."""


def toml_error(name, exc: Exception) -> "ConfigError":
    """A TOML syntax error as one line: ``file, line L, column C: invalid TOML: ...``."""
    import re

    msg = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
    if m:
        msg = msg[:m.start()]
        name = f"{name}, line {m.group(1)}, column {m.group(2)}"
    else:
        msg = re.sub(r"\s*\(at end of document\)$", " at the end of the file", msg)
    return ConfigError(f"{name}: invalid TOML: {msg[0].lower() + msg[1:]} (TOML: key = value, text in double "
                       f"quotes, each key once per table)")


__all__ = ["ConfigError", "FormatError", "IncompleteStoreError", "MissingExtraError", "MissingInputError", "ModelError",
           "NotSPDError", "StoreError", "StreamcovError", "UnsafePickleError", "WeightsError", "toml_error"]
