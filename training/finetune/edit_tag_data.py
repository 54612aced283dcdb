"""Edit-tag training data: each source token's tag (``electra_detect/edit_tags.py``) from the corrections.

Detection labels stay as the data gives them (MultiGED-2023's FCE TSV; W&I's M2); the tags come from the same
sentences' corrections, as ERRANT edits on the source tokens:

- W&I+LOCNESS's M2 holds ERRANT's edits already.
- FCE: ``fce-train.json``'s character edits are aligned to the MultiGED TSV's tokens (the TSV has no essay ids and
  splits the essays its own way; its quotes are written ``\\"``): each TSV sentence is found in the essays' text
  with the whitespace taken out (:func:`align_tsv_to_bea`), the edits inside it are applied to make the corrected
  sentence, and ERRANT aligns the TSV's tokens to it (the edits, and their types, as the field's scorer sees them).
  A sentence that is not found, or an edit that crosses a sentence, leaves its tokens out of the tag loss.

An edit without a correction, or two edits on one token, leave their tokens out of the tag loss (not ``$KEEP``):
tags_from_edits.py makes the tags. The vocabulary of tags a model learns: tag_vocabulary.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_detect.tasks.ged.readers import GedEdit, GedSentence, read_m2, read_token_tsv
from electra_detect.training.finetune.tags_from_edits import IGNORE, tags_of


@dataclass
class TaggedSentence:
    """A training sentence: tokens, detection labels, one tag per token (None: out of the tag loss), the ERRANT
    edits behind the tags, and the essay it came from (-1: unknown)."""

    tokens: list[str]
    labels: list[int | float]  # 0/1, or a teacher's p (distill_labels.teacher_tagged's soft targets)
    tags: list[str | None]
    edits: list[GedEdit] = field(default_factory=list)
    essay: int = -1

    def ged(self) -> GedSentence:
        """As a ``GedSentence``: its edits' types on the tokens they touch, and its tags."""
        types = [[] for _ in self.tokens]
        for edit in self.edits:
            span = range(edit.start, edit.end) if edit.end > edit.start else [min(edit.start, len(self.tokens) - 1)]
            for i in span:
                types[i].append(edit.type)
        return GedSentence(self.tokens, self.labels, types, self.edits, list(self.tags))


# ---------------------------------------------------------------------------------------------- aligning FCE's forms

def unescape_tsv(token: str) -> str:
    """A MultiGED token as the essay wrote it (its quotes are ``\\"``)."""
    return token.replace('\\"', '"')


def align_tsv_to_bea(sentences: Sequence[GedSentence], essays: Sequence[dict]
                     ) -> list[tuple[int, list[tuple[int, int]]] | None]:
    """For each TSV sentence, (essay index, each token's [start, end) in that essay's text), or None where its
    characters are not found in order in the essays' text (whitespace ignored on both sides)."""
    stream, where = [], []  # the essays' non-space characters, and each one's (essay, offset)
    for e, essay in enumerate(essays):
        for m in re.finditer(r"\S", essay["text"]):
            stream.append(m.group())
            where.append((e, m.start()))
    text = "".join(stream)
    out: list[tuple[int, list[tuple[int, int]]] | None] = []
    cursor = 0
    for sentence in sentences:
        tokens = [re.sub(r"\s", "", unescape_tsv(t)) for t in sentence.tokens]
        joined = "".join(tokens)
        found = text.find(joined, cursor, cursor + len(joined) + 2000) if joined else -1
        if found < 0 and len(joined) >= 30:  # lost the thread (text the TSV lacks): a long sentence finds it again
            found = text.find(joined, cursor)
        if found < 0:
            out.append(None)
            continue
        spans, at = [], found
        essay = where[found][0]
        for token in tokens:
            if not token:  # a token of whitespace alone: an empty span where the next one starts
                spans.append((where[at][1], where[at][1]))
                continue
            first, last = where[at], where[at + len(token) - 1]
            spans.append((first[1], last[1] + 1))
            at += len(token)
        if where[at - 1][0] != essay:  # a sentence that runs across two essays: not one sentence of either
            out.append(None)
            continue
        out.append((essay, spans))
        cursor = found + len(joined)
    return out


def corrected_sentence(text: str, spans: Sequence[tuple[int, int]], edits: Iterable[Sequence[Any]]
                       ) -> tuple[str, set[int]]:
    """The sentence at ``spans`` of ``text`` with the edits inside it applied, and the tokens left out of the
    tag loss (edits without a correction, or crossing the sentence's bounds)."""
    start, end = spans[0][0], spans[-1][1]
    inside, unknown = [], set()
    for edit in edits:
        e_start, e_end, correction = int(edit[0]), int(edit[1]), edit[2]
        touched = [i for i, (s, t) in enumerate(spans) if s < e_end and t > e_start]
        if e_end <= start and not (e_start == e_end == start) or e_start > end:
            continue
        if e_start < start or e_end > end or correction is None:
            unknown.update(touched or [i for i, (s, _) in enumerate(spans) if s >= e_start][:1])
            continue
        inside.append((e_start, e_end, str(correction)))
    pieces, at = [], start
    for e_start, e_end, correction in sorted(inside):
        if e_start < at:  # overlapping edits: the first wins, the other's tokens leave the tag loss
            unknown.update(i for i, (s, t) in enumerate(spans) if s < e_end and t > e_start)
            continue
        pieces += [text[at:e_start], correction]
        at = e_end
    pieces.append(text[at:end])
    return "".join(pieces), unknown


def fce_tagged(tsv_path: str | Path, bea_path: str | Path, annotator: Any, progress: bool = True
               ) -> tuple[list[TaggedSentence], dict[str, int]]:
    """MultiGED's FCE TSV with tags from the BEA JSON's corrections; counts of what aligned."""
    from tqdm.auto import tqdm

    sentences = read_token_tsv(tsv_path)
    essays = [json.loads(line) for line in Path(bea_path).read_text(encoding="utf-8").splitlines() if line.strip()]
    alignment = align_tsv_to_bea(sentences, essays)
    out, counts = [], Counter(sentences=len(sentences))
    for sentence, aligned in tqdm(list(zip(sentences, alignment, strict=True)), desc="FCE edits",
                                  disable=not progress, mininterval=5):
        if aligned is None:
            out.append(TaggedSentence(sentence.tokens, sentence.labels, [IGNORE] * len(sentence.tokens)))
            continue
        counts["aligned"] += 1
        essay, spans = aligned
        raw = next((e for who, e in essays[essay].get("edits", []) if who == 0), [])
        corrected, unknown = corrected_sentence(essays[essay]["text"], spans, raw)
        source = [unescape_tsv(t) for t in sentence.tokens]
        edits = errant_edits(annotator, source, corrected)
        counts["unknown_tokens"] += len(unknown)
        out.append(TaggedSentence(sentence.tokens, sentence.labels, tags_of(source, edits, unknown), edits, essay))
    return out, dict(counts)


def errant_edits(annotator: Any, source: Sequence[str], corrected: str) -> list[GedEdit]:
    """ERRANT's edits from ``source`` tokens to the ``corrected`` text, with their types."""
    original = annotator.parse(" ".join(source), tokenise=False)
    # one space between words: a deletion in the BEA text leaves two, which spaCy makes a token of (R:OTHER -> " ")
    fixed = annotator.parse(" ".join(corrected.split()), tokenise=True)
    return [GedEdit(e.o_start, e.o_end, e.c_str, e.type) for e in annotator.annotate(original, fixed)
            if e.type != "noop"]


def wi_tagged(m2_path: str | Path) -> list[TaggedSentence]:
    """W&I+LOCNESS's M2 (ERRANT's edits already) with tags."""
    out = []
    for sentence in read_m2(m2_path):
        unknown = {i for e in sentence.edits if e.correction is None
                   for i in (range(e.start, e.end) if e.end > e.start else [min(e.start, len(sentence.tokens) - 1)])}
        edits = [e for e in sentence.edits if e.correction is not None]
        out.append(TaggedSentence(sentence.tokens, sentence.labels, tags_of(sentence.tokens, edits, unknown), edits))
    return out


# --------------------------------------------------------------------------------------------- synthetic errors

def diff_edits(source: Sequence[str], target: Sequence[str], types: Sequence[Sequence[str]] = ()) -> list[GedEdit]:
    """The edits that turn ``source`` tokens into ``target`` tokens (difflib's opcodes), each typed by the first
    type ``types`` gives a token it touches (an insertion: the token after the gap), else ``R:OTHER``."""
    import difflib

    edits = []
    matcher = difflib.SequenceMatcher(a=list(source), b=list(target), autojunk=False)
    def typed(lo: int, hi: int) -> str:
        at = [i for i in range(lo, max(hi, lo + 1)) if i < len(types) and types[i]]
        return types[at[0]][0] if at else "R:OTHER"

    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:  # neighbouring word errors: one edit each, each its own type
            edits += [GedEdit(i, i + 1, target[j1 + k], typed(i, i + 1)) for k, i in enumerate(range(i1, i2))]
        elif op != "equal":
            edits.append(GedEdit(i1, i2, " ".join(target[j1:j2]), typed(i1, i2)))
    return edits


def synthetic_tagged(sentences: Sequence[Sequence[str]], seed: int = 0, mix: str = "learner"
                     ) -> list[TaggedSentence]:
    """``sentences`` (clean tokens) with synthetic errors (``training/synthetic``, ``mix``), each token tagged by
    the edit that undoes its error: the corrupted sentence diffed against the clean one, then :func:`tags_of` as
    for learner data (a clean sentence: every token ``$KEEP``)."""
    from electra_detect.training.synthetic.synthetic_errors import ErrorConfig, ErrorMaker

    clean = [list(tokens) for tokens in sentences]
    maker = ErrorMaker.for_corpus(clean, ErrorConfig(mix=mix), seed)
    out = []
    for tokens in clean:
        corrupted = maker.corrupt(list(tokens))
        edits = diff_edits(corrupted.tokens, tokens, corrupted.types)
        out.append(TaggedSentence(corrupted.tokens, corrupted.labels, tags_of(corrupted.tokens, edits), edits))
    return out


# ------------------------------------------------------------------------------------------------------- the build

def write_tagged(path: str | Path, sentences: Iterable[TaggedSentence]) -> None:
    """JSON lines: tokens, labels, tags, edits ([start, end, correction, type]), essay."""
    from electra_detect.fileio import atomic_write_text

    lines = [json.dumps({"tokens": s.tokens, "labels": s.labels, "tags": s.tags, "essay": s.essay,
                         "edits": [[e.start, e.end, e.correction, e.type] for e in s.edits]}, ensure_ascii=False)
             for s in sentences]
    atomic_write_text(Path(path), "\n".join(lines) + "\n")


def detection_target(value: Any) -> int | float:
    """A tagged file's label: 0 or 1, or a teacher's p in between (``distill_labels.teacher_tagged``'s soft targets)."""
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"a label must lie in [0, 1], not {value!r}")
    return int(number) if number in (0.0, 1.0) else number


def read_tagged(path: str | Path) -> list[TaggedSentence]:
    """The sentences :func:`write_tagged` wrote (a malformed line: ``GedDataError`` naming it)."""
    from electra_detect.errors import GedDataError

    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GedDataError(f"cannot read tagged data {path}: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            sentence = TaggedSentence(list(d["tokens"]), [detection_target(x) for x in d["labels"]], list(d["tags"]),
                                      [GedEdit(*e) for e in d["edits"]], int(d.get("essay", -1)))
        except (ValueError, KeyError, TypeError) as exc:
            raise GedDataError(f"{path}:{number}: not an edit-tagged sentence ({type(exc).__name__})") from None
        if not len(sentence.tokens) == len(sentence.labels) == len(sentence.tags):
            raise GedDataError(f"{path}:{number}: tokens, labels and tags differ in length")
        out.append(sentence)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m electra_detect.training.finetune.edit_tag_data fce TSV BEA OUT`` | ``wi M2... OUT`` |
    ``synthetic COUNT [CORPUS...] OUT`` (COUNT corpus sentences, the embedded corpus when none is named, with the
    learner mix of synthetic errors) | ``dev TSV BEA OUT_DIR`` (FCE dev tagged, and its halves by essay in each
    form: :func:`write_dev_halves`)."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if args[0] in ("fce", "dev"):
        from electra_detect.tasks.ged.nlp import load_errant

        sentences, counts = fce_tagged(args[1], args[2], load_errant())
        if args[0] == "fce":
            write_tagged(args[3], sentences)
        else:  # FCE dev: the whole set, then its halves by essay in each form
            write_tagged(Path(args[3]) / "fce_dev.jsonl", sentences)
            counts["halves"] = write_dev_halves(sentences, args[2], args[3])
        print(json.dumps(counts))
    elif args[0] == "wi":
        write_tagged(args[-1], [s for path in args[1:-1] for s in wi_tagged(path)])
    elif args[0] == "synthetic":
        from electra_detect.training.pretraining.data import corpus_sentences

        sentences = synthetic_tagged(corpus_sentences(args[2:-1], int(args[1])))
        write_tagged(args[-1], sentences)
        print(json.dumps({"sentences": len(sentences), "with_errors": sum(any(s.labels) for s in sentences)}))



def essay_halves(essays: int, seed: int = 13) -> tuple[set[int], set[int]]:
    """(tuning, report) essay indices: a fixed-seed half each, so a sentence's half follows its essay in every form
    of the set (FCE dev's BEA JSON and MultiGED TSV share one split)."""
    import random

    order = list(range(essays))
    random.Random(seed).shuffle(order)
    cut = essays // 2
    return set(order[:cut]), set(order[cut:])


def write_dev_halves(tagged: Sequence[TaggedSentence], bea_path: str | Path, out: str | Path, seed: int = 13) -> dict:
    """FCE dev's halves by essay in each form: ``fce_dev_{tune,report}.tsv`` (MultiGED's labels),
    ``.json`` (BEA essays) and ``.jsonl`` (tagged, with ERRANT's edits): counts of each."""
    from electra_detect.fileio import atomic_write_text

    out = Path(out)
    essays = [line for line in Path(bea_path).read_text(encoding="utf-8").splitlines() if line.strip()]
    halves = dict(zip(("tune", "report"), essay_halves(len(essays), seed), strict=True))
    counts = {}
    for name, chosen in halves.items():
        mine = [s for s in tagged if s.essay in chosen]
        atomic_write_text(out / f"fce_dev_{name}.tsv", "".join(
            "".join(f"{t}\t{'i' if label else 'c'}\n" for t, label in zip(s.tokens, s.labels, strict=True)) + "\n"
            for s in mine))
        atomic_write_text(out / f"fce_dev_{name}.json", "\n".join(essays[i] for i in sorted(chosen)) + "\n")
        write_tagged(out / f"fce_dev_{name}.jsonl", mine)
        counts[name] = {"essays": len(chosen), "sentences": len(mine)}
    return counts


if __name__ == "__main__":
    main()
