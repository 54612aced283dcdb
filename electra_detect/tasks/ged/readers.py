"""Labelled GED data as ``GedSentence`` lists: M2, token TSV, BEA-2019 JSON and parallel text (ERRANT)."""

from __future__ import annotations

import bisect
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from electra_detect.errors import GedDataError
from electra_detect.tasks.ged.error_types import bea_edit_type
from electra_detect.tasks.ged.nlp import load_errant, sentence_splitter


@dataclass
class GedEdit:
    """A reference correction: ``tokens[start:end]`` (empty: an insertion before ``start``) become
    ``correction`` (None: the error was marked, not corrected); ``type`` is ERRANT-style, ``R:VERB:SVA``."""

    start: int
    end: int
    correction: str | None
    type: str


@dataclass
class GedSentence:
    tokens: list[str]
    labels: list[int]  # 1 = the token is part of an error
    types: list[list[str]] = field(default_factory=list)  # error types touching each token
    edits: list[GedEdit] = field(default_factory=list)  # the corrections, where the format gives them (M2, BEA)
    tags: list[str | None] = field(default_factory=list)  # each token's edit tag (edit_tags); None: unknown

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def _open_lines(path: Path) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GedDataError(f"GED data file not found: {path}") from None
    except UnicodeDecodeError:
        raise GedDataError(f"GED data file is not UTF-8 text: {path}") from None


def read_m2(path: str | Path, annotator: int = 0) -> list[GedSentence]:
    """CoNLL-2014 / BEA-2019 M2. An edit labels the tokens it spans; an insertion (empty span)
    labels the token after the gap (the last token at the end), as in the FCE GED conversion."""
    path = Path(path)
    sentences: list[GedSentence] = []
    current: GedSentence | None = None
    for number, line in enumerate(_open_lines(path), start=1):
        if line.startswith("S "):
            tokens = line[2:].split()
            current = GedSentence(tokens, [0] * len(tokens), [[] for _ in tokens])
            sentences.append(current)
        elif line.startswith("A "):
            if current is None:
                raise GedDataError(f"{path}:{number}: edit line before any sentence line")
            fields = line[2:].split("|||")
            try:
                start, end = (int(x) for x in fields[0].split())
                edit_type, who = fields[1], int(fields[-1])
            except (ValueError, IndexError):
                raise GedDataError(f"{path}:{number}: malformed edit line: {line[:80]!r}") from None
            if who != annotator or edit_type == "noop" or start < 0:
                continue
            if not 0 <= start <= end <= len(current.tokens):
                raise GedDataError(f"{path}:{number}: edit span {start}-{end} outside a "
                                   f"{len(current.tokens)}-token sentence")
            if not current.tokens:
                continue
            span = range(start, end) if end > start else [min(start, len(current.tokens) - 1)]
            for index in span:
                current.labels[index] = 1
                current.types[index].append(edit_type)
            correction = fields[2] if len(fields) > 3 and fields[2] != "-NONE-" else None  # [3:]: REQUIRED ...
            current.edits.append(GedEdit(start, end, correction, edit_type))
        elif line.strip():
            raise GedDataError(f"{path}:{number}: expected an 'S ' or 'A ' line, got {line[:80]!r}")
    return [s for s in sentences if s.tokens]


def read_token_tsv(path: str | Path) -> list[GedSentence]:
    """Token TSV, the FCE GED release and MultiGED-2023's: ``token<TAB>c|i`` per line, a blank line between
    sentences. MultiGED's test files label some tokens ``NA``; its scorer counts them as correct (``c``), so here."""
    path = Path(path)
    sentences: list[GedSentence] = []
    tokens: list[str] = []
    labels: list[int] = []
    for number, line in enumerate([*_open_lines(path), ""], start=1):
        if not line.strip():
            if tokens:
                sentences.append(GedSentence(tokens, labels, [[] for _ in tokens]))
            tokens, labels = [], []
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 2 or parts[-1] not in ("c", "i", "NA"):
            raise GedDataError(f"{path}:{number}: expected 'token<TAB>c|i|NA', got {line[:80]!r}")
        tokens.append(parts[0])
        labels.append(int(parts[-1] == "i"))
    return sentences


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_bea_json(path: str | Path, annotator: int = 0, nlp=None) -> list[GedSentence]:
    """BEA-2019 JSON (the FCE and W&I release): one essay per line, ``{"text": ..., "edits": [[annotator,
    [[char_start, char_end, correction(, type)], ...]], ...]}``.

    Each paragraph is split into sentences and tokens with spaCy's English rules; a token is an error when an
    edit's character span overlaps it; an insertion (empty span) labels the token after the gap, or the last
    token of the sentence when the gap ends it, as :func:`read_m2` does. A ``None`` correction (the error was
    marked, not corrected) still labels its tokens. Each edit's type is ERRANT-style (:func:`bea_edit_type`)."""
    path = Path(path)
    nlp = nlp or sentence_splitter()
    sentences: list[GedSentence] = []
    for number, line in enumerate(_open_lines(path), start=1):
        if not line.strip():
            continue
        try:
            essay = json.loads(line)
            text = essay["text"]
            edits = next((e for who, e in essay.get("edits", []) if who == annotator), [])
            edits = [(int(e[0]), int(e[1]), bea_edit_type(int(e[0]), int(e[1]), e[2], e[3] if len(e) > 3 else None),
                      None if e[2] is None else str(e[2])) for e in edits]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise GedDataError(f"{path}:{number}: not a BEA-2019 JSON essay ({type(exc).__name__}: {exc})") from None
        except RecursionError:  # json recurses per nesting level
            raise GedDataError(f"{path}:{number}: not a BEA-2019 JSON essay (nested too deeply)") from None
        if not isinstance(text, str):
            raise GedDataError(f"{path}:{number}: 'text' must be a string")
        if not text.isascii() and not _valid_unicode(text):  # a JSON \ud800 escape decodes to a lone surrogate
            raise GedDataError(f"{path}:{number}: 'text' is not valid Unicode (a lone surrogate)")
        # (sentence index, position in it, start, end) of every token, in text order
        spans: list[tuple[int, int, int, int]] = []
        for paragraph in re.finditer(r"[^\n]+", text):
            for sent in nlp(paragraph.group()).sents:
                words = [t for t in sent if not t.is_space]
                if not words:
                    continue
                sentences.append(GedSentence([t.text for t in words], [0] * len(words), [[] for _ in words]))
                base = paragraph.start()
                spans += [(len(sentences) - 1, i, base + t.idx, base + t.idx + len(t.text))
                          for i, t in enumerate(words)]
        starts = [span[2] for span in spans]
        for start, end, edit_type, correction in edits:
            if not 0 <= start <= end <= len(text):
                raise GedDataError(f"{path}:{number}: edit span {start}-{end} outside the {len(text)}-character text")
            if end > start:
                hit = [i for i, (_, _, s, e) in enumerate(spans) if s < end and e > start]
            else:
                after = bisect.bisect_left(starts, start)
                inside = after - 1 if after and spans[after - 1][3] > start else None
                if inside is not None:
                    hit = [inside]
                elif after < len(spans) and (after == 0 or starts[after] == start
                                             or spans[after][0] == spans[after - 1][0]):
                    hit = [after]
                else:  # the gap ends a sentence (or the text): its last token
                    hit = [after - 1] if after else []
            for i in hit:
                target, position = sentences[spans[i][0]], spans[i][1]
                target.labels[position] = 1
                target.types[position].append(edit_type)
            if end > start and hit and spans[hit[0]][0] == spans[hit[-1]][0]:  # a replacement inside one sentence
                first, last = spans[hit[0]], spans[hit[-1]]
                fixed = None if correction is None else text[first[2]:start] + correction + text[end:last[3]]
                sentences[first[0]].edits.append(GedEdit(first[1], last[1] + 1, fixed, edit_type))
            elif end == start and hit and correction is not None:  # an insertion before (or after) the token hit
                where = spans[hit[0]][1] + int(spans[hit[0]][2] < start)
                sentences[spans[hit[0]][0]].edits.append(GedEdit(where, where, correction, edit_type))
    return sentences


def read_parallel(source: str | Path, references: Sequence[str | Path], combine: str = "first",
                  annotator=None) -> list[GedSentence]:
    """Source sentences (whitespace-tokenised, one per line) and one or more corrections.

    ERRANT aligns each source to its correction; the source tokens an edit touches are errors
    (insertions label the token after the gap, as in :func:`read_m2`). With several references,
    ``combine`` = ``first`` uses the first, ``any`` labels a token wrong if any reference edits it,
    ``majority`` if more than half do.
    """
    if combine not in ("first", "any", "majority"):
        raise GedDataError(f"combine must be first, any or majority, got {combine!r}")
    sources = _open_lines(Path(source))
    refs = [_open_lines(Path(r)) for r in (references[:1] if combine == "first" else references)]
    if not refs:
        raise GedDataError("parallel data needs at least one reference file")
    for path, lines in zip(references, refs, strict=False):
        if len(lines) != len(sources):
            raise GedDataError(f"{path} has {len(lines)} lines but {source} has {len(sources)}")
    annotator = annotator or load_errant()
    sentences = []
    for index, text in enumerate(sources):
        tokens = text.split()
        if not tokens:
            continue
        votes = np.zeros(len(tokens))
        types: list[list[str]] = [[] for _ in tokens]
        original = annotator.parse(" ".join(tokens), tokenise=False)
        for lines in refs:
            touched = set()
            for edit in annotator.annotate(original, annotator.parse(lines[index].strip(), tokenise=False)):
                span = range(edit.o_start, edit.o_end) if edit.o_end > edit.o_start else \
                    [min(edit.o_start, len(tokens) - 1)]
                for position in span:
                    touched.add(position)
                    types[position].append(edit.type)
            for position in touched:
                votes[position] += 1
        needed = len(refs) / 2 if combine == "majority" else 0
        labels = [int(v > needed) for v in votes]
        sentences.append(GedSentence(tokens, labels, types))
    return sentences


def read_labelled(path: str | Path, fmt: str, refs: Sequence[str | Path] = (), combine: str = "first",
                  annotator: int = 0) -> list[GedSentence]:
    """GED sentences of a labelled file in ``fmt``: m2, tsv, bea (JSON), or parallel (``path`` the source,
    ``refs`` its corrections, ``combine`` how several make one label)."""
    if fmt == "parallel":
        if not refs:
            raise GedDataError("--format parallel needs --refs CORRECTION_FILE [...]")
        return read_parallel(path, refs, combine)
    if fmt == "m2":
        return read_m2(path, annotator)
    if fmt == "bea":
        return read_bea_json(path, annotator)
    if fmt == "tsv":
        return read_token_tsv(path)
    raise GedDataError(f"unknown GED data format {fmt!r}: m2, tsv, bea or parallel")


def split_sentences(sentences: Sequence[GedSentence], fraction: float = 0.5,
                    seed: int = 13) -> tuple[list[GedSentence], list[GedSentence]]:
    """A fixed-seed split into (tuning, report) parts."""
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    cut = round(len(order) * fraction)
    return [sentences[i] for i in sorted(order[:cut])], [sentences[i] for i in sorted(order[cut:])]
