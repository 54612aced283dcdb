"""What the verbs read: text arguments and files, streamed in bounded batches, and labelled GED data.

Known failures print one ``error:`` line (exit 2) through ``CliError`` or ``SystemExit``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from electra_detect.errors import CliError

STREAM_TEXTS = 64  # texts scored per batch when reading --file: memory stays bounded whatever the file's size
STREAM_BIG = 512  # ... or this many for the scoring pipeline: longer runs to sort by length, less padding
STREAM_CHARS = 256_000  # ... and at most about this many characters per batch
MAX_LINE_CHARS = 1_000_000  # one line longer than this is an error, not a memory blow-up


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def check_unit_interval(value: float | None, flag: str) -> None:
    """Thresholds are probabilities: a finite number in [0, 1] (nan and 5 are refused, as the server does)."""
    from electra_detect.detector import DetectorError, check_threshold

    if value is not None:
        try:
            check_threshold(value, flag)
        except DetectorError as exc:
            raise CliError(str(exc)) from None


def open_texts(args: argparse.Namespace) -> Any:
    """Open --file now (so a missing file is reported before the model loads); None without --file."""
    if not args.file:
        return None
    try:
        return sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    except FileNotFoundError:
        raise SystemExit(fail(f"input file not found: {args.file}")) from None
    except OSError as exc:
        raise SystemExit(fail(f"cannot read {args.file}: {exc.strerror}")) from None


def text_batches(args: argparse.Namespace, handle: Any, per_batch: int = STREAM_TEXTS) -> Iterator[list[str]]:
    """The text arguments, then --file's non-empty lines, in batches of up to ``per_batch`` texts and about
    STREAM_CHARS characters (the first batch smaller, so that results show soon); read as they are needed,
    with a progress bar (bytes read) when stderr is a terminal. Fails with one ``error:`` line when there
    is no text at all."""
    from tqdm import tqdm

    batch = [t for t in args.text if t.strip()]
    sent, number, error = 0, 0, None
    chars, limit = sum(map(len, batch)), 8
    size = None
    if handle is not None and handle is not sys.stdin:
        try:
            size = os.fstat(handle.fileno()).st_size
        except OSError:
            pass
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=args.verb, file=sys.stderr, leave=False,
               disable=handle is None or not sys.stderr.isatty())
    try:
        if handle is not None:
            with handle:
                while line := handle.readline(MAX_LINE_CHARS + 2):
                    number += 1
                    bar.update(len(line.encode("utf-8")))
                    if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                        error = f"{args.file}: line {number} is longer than {MAX_LINE_CHARS:,} characters; split it"
                        break
                    text = line.rstrip("\n")
                    if not text.strip():
                        continue
                    batch.append(text)
                    chars += len(text)
                    if len(batch) >= limit or chars >= STREAM_CHARS:
                        sent += len(batch)
                        yield batch
                        batch, chars, limit = [], 0, per_batch
    except UnicodeDecodeError:
        error = f"input file is not UTF-8 text: {args.file}"
    except OSError as exc:
        error = f"cannot read {args.file}: {exc.strerror}"
    finally:
        bar.close()  # before any error line: the bar never follows or overwrites it
    if error is None and not batch and not sent:
        error = "no text to score: give text arguments or --file"
    if error is not None:
        raise SystemExit(fail(error))
    if batch:
        yield batch


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


def read_labelled(args: argparse.Namespace, path: str):
    """GED sentences of a labelled file in ``args.fmt`` (m2, tsv, bea JSON, or parallel with ``args.refs``)."""
    from electra_detect.tasks import ged

    if args.fmt == "parallel":
        if not args.refs:
            raise ged.GedDataError("--format parallel needs --refs CORRECTION_FILE [...]")
        return ged.read_parallel(path, args.refs, args.combine)
    if args.fmt == "m2":
        return ged.read_m2(path, getattr(args, "annotator", 0))
    if args.fmt == "bea":
        return ged.read_bea_json(path, getattr(args, "annotator", 0))
    return ged.read_token_tsv(path)
