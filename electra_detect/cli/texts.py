"""What the verbs read: text arguments and files, streamed in bounded batches.

Known failures raise ``CliError`` (or the task's own error): the CLI prints it as one ``error:`` line (exit 2).
"""

from __future__ import annotations

import io
import itertools
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from electra_detect.errors import CliError

STREAM_TEXTS = 64  # texts scored per batch when reading --file: memory stays bounded whatever the file's size
STREAM_BIG = 512  # ... or this many for the scoring pipeline: longer runs to sort by length, less padding
STREAM_CHARS = 256_000  # ... and at most about this many characters per batch
MAX_LINE_CHARS = 1_000_000  # one line longer than this is an error, not a memory blow-up
T = TypeVar("T")


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def check_unit_interval(value: float | None, flag: str) -> None:
    """Thresholds are probabilities: a finite number in [0, 1] (nan and 5 are refused, as the server does)."""
    from electra_detect.errors import DetectorError
    from electra_detect.model_dir import check_threshold

    if value is not None:
        try:
            check_threshold(value, flag)
        except DetectorError as exc:
            raise CliError(str(exc)) from None


def open_texts(file: str | None, texts: list[str] | None = None) -> Any:
    """Open ``file`` now (so a missing file is reported before the model loads); '-', or no file and no ``texts``,
    is standard input (UTF-8, as a file is), unless it is a terminal: then there is nothing to wait for, and that
    is an error rather than a hang. None when the texts come from the arguments alone."""
    if not file:
        if texts:
            return None
        if sys.stdin is None or sys.stdin.isatty():
            raise CliError("no text to score: give text arguments, --file, or pipe text on standard input")
        file = "-"
    if file == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
    try:
        return open(file, encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"input file not found: {file}") from None
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror}") from None


def text_batches(texts: list[str], file: str | None, handle: Any, per_batch: int = STREAM_TEXTS,
                 label: str = "") -> Iterator[list[str]]:
    """``texts``, then the non-empty lines of ``handle`` (``file`` opened by :func:`open_texts`), in batches
    (:func:`batched`), read as they are needed, with a progress bar (bytes read, named ``label``) when stderr is a
    terminal. No text at all (an empty file, empty standard input) gives no batch: a pipeline over many files goes
    on. Raises CliError when a line cannot be read."""
    lines = (text for _number, text in numbered_lines(handle, file, label)) if handle is not None else ()
    return batched(itertools.chain((t for t in texts if t.strip()), lines), per_batch)


def batched(items: Iterable[T], per_batch: int, text: Callable[[T], str] = str) -> Iterator[list[T]]:
    """``items`` in batches of up to ``per_batch`` (the first of 8, so that results show soon) and about
    STREAM_CHARS characters of ``text(item)``, taken from ``items`` only as each batch is needed."""
    batch: list[T] = []
    chars, limit = 0, 8
    for item in items:
        batch.append(item)
        chars += len(text(item))
        if len(batch) >= limit or chars >= STREAM_CHARS:
            yield batch
            batch, chars, limit = [], 0, per_batch
    if batch:
        yield batch


def numbered_lines(handle: Any, file: str | None, label: str = "") -> Iterator[tuple[int, str]]:
    """The non-empty lines of ``handle`` (``file`` opened by :func:`open_texts`; closed at the end) with their
    1-based numbers in the file, without their line break, read one at a time; a progress bar (bytes read, named
    ``label``) when stderr is a terminal. Raises CliError when a line cannot be read."""
    from tqdm import tqdm

    size, name = None, "standard input" if file in (None, "-") else file
    try:
        info = os.fstat(handle.fileno())
        size = info.st_size if stat.S_ISREG(info.st_mode) else None  # a pipe has no size to show
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=label, file=sys.stderr, leave=False,
               disable=not sys.stderr.isatty())
    number = 0
    try:
        with handle:
            while line := handle.readline(MAX_LINE_CHARS + 2):
                number += 1
                bar.update(len(line.encode("utf-8")))
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    raise CliError(f"{name}: line {number} is longer than {MAX_LINE_CHARS:,} characters; split it")
                text = line.rstrip("\n")
                if text.strip():
                    yield number, text
    except UnicodeDecodeError:
        raise CliError(f"input file is not UTF-8 text: {name}") from None
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror}") from None
    finally:
        bar.close()  # before any error line: the bar never follows or overwrites it


def read_text_files(paths: list[str]) -> list[str]:
    """Non-empty lines of UTF-8 text files, one text per line. calibrate and pos-bias fit and test on all of
    them together, so they hold the texts (not the files) in memory; score, ged and rerank stream instead."""
    texts: list[str] = []
    for path in paths:  # line by line: the file's text is never held twice (whole and split)
        try:
            with open(path, encoding="utf-8") as handle:
                while line := handle.readline(MAX_LINE_CHARS + 2):
                    if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                        raise CliError(f"text file {path} has a line longer than {MAX_LINE_CHARS:,} characters")
                    if line.strip():
                        texts.append(line.strip())
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"cannot read text file {path}: {exc}") from None
    return texts


def input_batches(texts: list[str], file: str | None, label: str):
    """The verb's texts in batches (no text and no --file: standard input), or None when there are none at all
    (an empty file or input gives no output, so a pipeline over many files goes on). The first batch is read
    here, so an unreadable first line is reported before a model loads."""
    batches = text_batches(texts, file, open_texts(file, texts), per_batch=STREAM_BIG, label=label)
    first = next(batches, None)
    return None if first is None else itertools.chain([first], batches)
