"""The core's error types, in one module that imports nothing: every module may raise them without
importing another (the detector and the engines used to import each other for ``DetectorError``).

Every failure a user can fix derives from :class:`UserError`, whichever layer raises it: the CLI prints it as one
``error:`` line (exit 2), so a verb need not list what it may raise.
"""

from __future__ import annotations


class UserError(Exception):
    """A failure the user can fix: one ``error:`` line and exit 2 from the CLI; a 4xx on the server."""


class DetectorError(UserError, ValueError):
    """The model directory or the input text cannot be used."""


class GedOptionsError(UserError, ValueError):
    """GED options that cannot be applied together (an unknown level, enabledOnly with nothing enabled, ...)."""


class GedDataError(UserError, ValueError):
    """A GED data file is malformed; the message names the file and line."""


class RerankError(UserError, ValueError):
    """An n-best file or a reranking setting cannot be used."""


class ExportError(UserError, RuntimeError):
    """An ONNX export cannot be made or fails its parity check."""


class CliError(UserError, ValueError):
    """A flag value the verb cannot use."""


class RulesUnavailable(UserError, RuntimeError):
    """``ged --with-rules`` cannot run: the rule-based checker is not installed or the model has no rules setting."""


class MarkupError(UserError, ValueError):
    """A markup name this layer does not know, or a document it cannot read (fronts report it as a bad request or an
    ``error:`` line)."""


class CorruptExport(DetectorError):
    """An ONNX export's file does not match the hash its manifest recorded (replaced, truncated or tampered with)."""


class BaseEncoderError(UserError, ValueError):
    """A base encoder (a short name such as ``mpnet``, or a folder) cannot be found, installed or unpacked."""
