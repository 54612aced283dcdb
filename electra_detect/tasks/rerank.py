"""N-best reranking with the discriminator's sentence score: readers, score fusion, tuning, WER.

One discriminator pass scores a whole hypothesis, where masked-LM pseudo-log-likelihood (Salazar et
al. 2020) needs one pass per token; this module fuses that cheap score with the recogniser's:

    total = asr_score + lm_weight * lm_score + length_weight * words

``lm_score`` is the Detector's sentence score (``sum`` of log(1 - p) by default, or ``mean``); the
PLL of our own generator can stand in for it, for comparison only. Weights are tuned on a dev set
by grid search on corpus WER (``jiwer``). Readers stream: JSONL and Kaldi text are read one line at
a time, so large files never sit in memory whole (the mlm-scoring JSON is one object and is loaded).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from electra_detect.errors import RerankError


@dataclass
class Hypothesis:
    text: str
    asr_score: float = 0.0


@dataclass
class Utterance:
    id: str
    hyps: list[Hypothesis]
    ref: str | None = None
    source: str = ""  # where it was read (file:line), for error messages


@dataclass
class Scored:
    """An utterance with its features: one row per hypothesis."""

    utt: Utterance
    asr: np.ndarray
    lm: np.ndarray
    length: np.ndarray
    errors: np.ndarray | None = None  # word errors against the reference, per hypothesis
    ref_words: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------- the shared API

_SEPARATOR = re.compile(r"\t| \|\|\| ")


def parse_hypothesis_lines(text: str) -> list[tuple[str, float | None]]:
    """One hypothesis per line; optional ASR score after a TAB (or ' ||| '); blank lines ignored.

    Raises RerankError naming the 1-based line number when a score is not a finite number.
    """
    hyps: list[tuple[str, float | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = _SEPARATOR.split(line, maxsplit=1)
        hyp_text = parts[0].strip()
        score: float | None = None
        if len(parts) == 2:
            raw = parts[1].strip()
            try:
                score = float(raw)
            except ValueError:
                raise RerankError(f"line {number}: score {raw!r} is not a number") from None
            if not math.isfinite(score):
                raise RerankError(f"line {number}: score {raw!r} is not finite")
        if not hyp_text:
            raise RerankError(f"line {number}: empty hypothesis text before the score")
        hyps.append((hyp_text, score))
    return hyps


def word_count(text: str) -> int:
    return len(text.split())


def electra_scores(detector: Any, texts: Sequence[str], score: str = "sum", batch_size: int = 64,
                   calibrated: bool = True) -> list[float]:
    """The Detector's sentence score for each text (higher = more fluent)."""
    if score not in ("sum", "mean"):
        raise RerankError(f"unknown sentence score {score!r} (use 'sum' or 'mean')")
    if not texts:
        return []
    results = detector.score(list(texts), batch_size=batch_size, calibrated=calibrated)
    return [sentence_score(r, score) for r in results]


def sentence_score(result: Any, score: str = "sum") -> float:
    """``sum`` or ``mean`` of log(1 - p) over a text's tokens (a ``TextScores``)."""
    return result.sentence_sum if score == "sum" else result.sentence_mean


def rerank_hypotheses(detector: Any, hyps: list[tuple[str, float | None]], lm_weight: float = 1.0,
                      length_weight: float = 0.0, score: str = "sum", calibrated: bool = True) -> list[dict]:
    """Rows best first: text, asr_score (None -> 0.0), electra_score, length (words), total, rank (1 = best)."""
    _check_rerank(hyps, lm_weight, length_weight)
    return rank_hypotheses(hyps, electra_scores(detector, [text for text, _ in hyps], score, calibrated=calibrated),
                           lm_weight, length_weight)


def _check_rerank(hyps: Sequence[tuple[str, float | None]], lm_weight: float, length_weight: float) -> None:
    if not hyps:
        raise RerankError("no hypotheses to rerank")
    for weight, name in ((lm_weight, "lm_weight"), (length_weight, "length_weight")):
        if not isinstance(weight, int | float) or not math.isfinite(weight):
            raise RerankError(f"{name} must be a finite number, got {weight!r}")


def rank_hypotheses(hyps: Sequence[tuple[str, float | None]], lm: Sequence[float], lm_weight: float = 1.0,
                    length_weight: float = 0.0) -> list[dict]:
    """``rerank_hypotheses`` over sentence scores already computed (the server scores in its batcher)."""
    _check_rerank(hyps, lm_weight, length_weight)
    rows = []
    for index, ((text, asr), electra) in enumerate(zip(hyps, lm, strict=True)):
        asr_score = 0.0 if asr is None else float(asr)
        length = word_count(text)
        rows.append({"text": text, "asr_score": asr_score, "electra_score": float(electra), "length": length,
                     "total": asr_score + lm_weight * float(electra) + length_weight * length, "index": index})
    rows.sort(key=lambda row: (-row["total"], row["index"]))  # ties keep the recogniser's order
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
        del row["index"]
    return rows


# --------------------------------------------------------------------------------------- readers

def _hyp_from(obj: Any, where: str) -> Hypothesis:
    if isinstance(obj, str):
        return Hypothesis(obj.strip(), 0.0)
    if not isinstance(obj, dict) or "text" not in obj:
        raise RerankError(f"{where}: a hypothesis must be an object with 'text' (and 'score')")
    text = obj["text"]
    if not isinstance(text, str):
        raise RerankError(f"{where}: hypothesis 'text' must be a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a JSON \ud800 escape decodes to a lone surrogate
        raise RerankError(f"{where}: hypothesis 'text' is not valid Unicode (a lone surrogate)") from None
    raw = obj.get("score", 0.0)
    if raw is None:
        raw = 0.0
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise RerankError(f"{where}: hypothesis 'score' must be a finite number, got {raw!r}")
    return Hypothesis(text.strip(), float(raw))


def _ref_from(obj: Any, where: str) -> str | None:
    if obj is None:
        return None
    if not isinstance(obj, str):
        raise RerankError(f"{where}: 'ref' must be a string")
    return obj.strip()


def _check(utt: Utterance) -> Utterance:
    if not utt.hyps:
        raise RerankError(f"{utt.source}: utterance {utt.id!r} has no hypotheses")
    return utt


def read_mlm_json(path: str | Path) -> Iterator[Utterance]:
    """awslabs/mlm-scoring format: ``{utt: {"hyp_1": {"score", "text"}, ..., "ref": "..."}}``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RerankError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:  # json recurses per nesting level
        raise RerankError(f"{path}: JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise RerankError(f"{path}: not UTF-8 text") from None
    if not isinstance(data, dict):
        raise RerankError(f"{path}: expected a JSON object of utterances (mlm-scoring format)")
    for utt_id, entry in data.items():
        where = f"{path}: utterance {utt_id!r}"
        if not isinstance(entry, dict):
            raise RerankError(f"{where}: expected an object of hyp_N entries")
        keys = [k for k in entry if k.startswith("hyp_")]
        try:
            keys.sort(key=lambda k: int(k[4:]))
        except ValueError:
            raise RerankError(f"{where}: hypothesis keys must be hyp_1, hyp_2, ...") from None
        hyps = [_hyp_from(entry[k], f"{where} {k}") for k in keys]
        yield _check(Utterance(str(utt_id), hyps, _ref_from(entry.get("ref"), where), where))


def read_jsonl(path: str | Path) -> Iterator[Utterance]:
    """Our JSONL: one ``{"id", "hyps": [{"text", "score"}], "ref"?}`` per line."""
    path = Path(path)
    with _open_text(path) as handle:
        for number, line in enumerate(_lines(handle, path), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RerankError(f"{where}: not valid JSON ({exc.msg})") from None
            except RecursionError:  # json recurses per nesting level
                raise RerankError(f"{where}: JSON nested too deeply") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("hyps"), list):
                raise RerankError(f"{where}: expected an object with 'id' and a 'hyps' list")
            utt_id = str(obj.get("id", number))
            hyps = [_hyp_from(h, f"{where} hyp {i + 1}") for i, h in enumerate(obj["hyps"])]
            yield _check(Utterance(utt_id, hyps, _ref_from(obj.get("ref"), where), where))


_KALDI_KEY = re.compile(r"^(?P<utt>.+)-(?P<n>\d+)$")


def _read_key_values(path: str | Path, what: str) -> dict[str, str]:
    values: dict[str, str] = {}
    path = Path(path)
    with _open_text(path) as handle:
        for number, line in enumerate(_lines(handle, path), start=1):
            if not line.strip():
                continue
            key, _, rest = line.strip().partition(" ")
            if key in values:
                raise RerankError(f"{path}:{number}: {what} for {key!r} given twice")
            values[key] = rest.strip()
    return values


def read_kaldi(path: str | Path, scores: str | Path | None = None, refs: str | Path | None = None
               ) -> Iterator[Utterance]:
    """Kaldi-style n-best text: ``UTT-N word word ...`` per line (``nbest-to-linear`` + ``int2sym.pl``).

    A hypothesis's lines must be contiguous per utterance. ``scores``: lines ``UTT-N SCORE`` (a
    log-likelihood, higher = better; negate Kaldi costs). ``refs``: a Kaldi ``text`` file ``UTT words``.
    """
    path = Path(path)
    score_map = _read_key_values(scores, "a score") if scores else {}
    ref_map = _read_key_values(refs, "a reference") if refs else {}
    current: Utterance | None = None
    seen: set[str] = set()
    with _open_text(path) as handle:
        for number, line in enumerate(_lines(handle, path), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            key, _, text = line.strip().partition(" ")
            match = _KALDI_KEY.match(key)
            if not match:
                raise RerankError(f"{where}: key {key!r} is not UTT-N (Kaldi n-best naming)")
            score = 0.0
            if scores:
                if key not in score_map:
                    raise RerankError(f"{where}: no score for {key!r} in {scores}")
                try:
                    score = float(score_map[key])
                except ValueError:
                    raise RerankError(f"{scores}: score for {key!r} is not a number: {score_map[key]!r}") from None
                if not math.isfinite(score):
                    raise RerankError(f"{scores}: score for {key!r} is not finite")
            utt_id = match["utt"]
            if current is None or current.id != utt_id:
                if current is not None:
                    yield current
                if utt_id in seen:
                    raise RerankError(f"{where}: hypotheses of utterance {utt_id!r} are not contiguous")
                seen.add(utt_id)
                current = Utterance(utt_id, [], ref_map.get(utt_id), where)
            current.hyps.append(Hypothesis(text.strip(), score))
    if current is not None:
        yield current


_ESPNET_DIR = re.compile(r"^(?P<n>\d+)best_recog$")
_ESPNET_SCORE = re.compile(r"^tensor\((?P<value>[^,()]+)(?:,[^()]*)?\)$")  # str(hyp.score) of a torch scalar


def _espnet_score(raw: str, where: str) -> float:
    match = _ESPNET_SCORE.match(raw)
    try:
        score = float(match["value"] if match else raw)
    except ValueError:
        raise RerankError(f"{where}: score is not a number: {raw[:80]!r}") from None
    if not math.isfinite(score):
        raise RerankError(f"{where}: score is not finite")
    return score


def read_espnet(path: str | Path, refs: str | Path | None = None) -> Iterator[Utterance]:
    """An ESPnet decode folder: ``1best_recog/``, ``2best_recog/``, ... each with ``text`` (``UTT words``) and
    ``score`` (``UTT SCORE``, plain or as ESPnet writes a tensor, ``tensor(-12.3)``); utterances in the order of
    ``1best_recog/text``, hypotheses by rank. ``refs``: a Kaldi ``text`` file ``UTT words``."""
    path = Path(path)
    ranks = sorted((int(m["n"]), d) for d in path.iterdir() if d.is_dir() and (m := _ESPNET_DIR.match(d.name)))
    if not ranks or ranks[0][0] != 1:
        raise RerankError(f"{path}: no 1best_recog/ folder (ESPnet writes 1best_recog/, 2best_recog/, …)")
    ref_map = _read_key_values(refs, "a reference") if refs else {}
    texts = [_read_key_values(d / "text", "a hypothesis") for _, d in ranks]
    scores = [_read_key_values(d / "score", "a score") if (d / "score").is_file() else {} for _, d in ranks]
    for utt_id in texts[0]:
        hyps = []
        for (_, folder), text, score in zip(ranks, texts, scores, strict=True):
            if utt_id not in text:
                continue
            raw = score.get(utt_id)
            where = f"{folder / 'score'}: {utt_id!r}"
            hyps.append(Hypothesis(text[utt_id], 0.0 if raw is None else _espnet_score(raw, where)))
        yield _check(Utterance(utt_id, hyps, ref_map.get(utt_id), f"{ranks[0][1] / 'text'}: {utt_id!r}"))


FORMATS = ("auto", "mlm-json", "jsonl", "kaldi", "espnet")


def detect_format(path: str | Path) -> str:
    """``mlm-json`` for .json, ``jsonl`` for .jsonl, else sniff: '{' starting a JSON line = jsonl, else kaldi."""
    path = Path(path)
    if path.suffix == ".json":
        return "mlm-json"
    if path.suffix == ".jsonl":
        return "jsonl"
    with _open_text(path) as handle:
        for line in _lines(handle, path):
            if line.strip():
                first = line.strip()
                if first.startswith("{"):
                    try:
                        obj = json.loads(first)
                    except (json.JSONDecodeError, RecursionError):
                        return "mlm-json"  # a multi-line JSON object (its reader reports what is wrong)
                    return "jsonl" if isinstance(obj, dict) and "hyps" in obj else "mlm-json"
                return "kaldi"
    raise RerankError(f"{path} is empty")


def read_nbest(path: str | Path, fmt: str = "auto", scores: str | Path | None = None,
               refs: str | Path | None = None) -> Iterator[Utterance]:
    """Utterances from any supported n-best file, streamed where the format allows."""
    path = Path(path)
    if fmt not in FORMATS:
        raise RerankError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if path.is_dir() and fmt in ("auto", "espnet"):
        if scores:
            raise RerankError("--scores belongs to --format kaldi; an ESPnet folder carries its own score files")
        return read_espnet(path, refs)
    if not path.is_file():
        raise RerankError(f"n-best file not found: {path}")
    if fmt == "espnet":
        raise RerankError(f"{path}: --format espnet reads a decode folder (1best_recog/, 2best_recog/ …), not a file")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt != "kaldi" and (scores or refs):
        raise RerankError("--scores/--refs files belong to --format kaldi; JSON formats carry their own")
    if fmt == "mlm-json":
        return read_mlm_json(path)
    if fmt == "jsonl":
        return read_jsonl(path)
    return read_kaldi(path, scores, refs)


def _open_text(path: Path):
    try:
        return path.open("r", encoding="utf-8")
    except FileNotFoundError:
        raise RerankError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise RerankError(f"{path} is a directory, not an n-best file") from None


def _lines(handle: Any, path: Path) -> Iterator[str]:
    try:
        yield from handle
    except UnicodeDecodeError:
        raise RerankError(f"{path}: not UTF-8 text") from None


def write_mlm_json_obj(utterances: Iterable[Utterance]) -> dict[str, Any]:
    """Utterances as an mlm-scoring JSON object (what benchmarks/asr writes)."""
    out: dict[str, Any] = {}
    for utt in utterances:
        entry: dict[str, Any] = {f"hyp_{i + 1}": {"score": h.asr_score, "text": h.text} for i, h in enumerate(utt.hyps)}
        if utt.ref is not None:
            entry["ref"] = utt.ref
        out[utt.id] = entry
    return out


# --------------------------------------------------------------------------------------- WER

def normalise(text: str) -> str:
    """Lower case, letters/digits/apostrophes only: references and recogniser output differ in casing
    and punctuation, which is not what WER should count here."""
    return " ".join(re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split())


def word_errors(ref: str, hyps: Sequence[str]) -> tuple[np.ndarray, int]:
    """Word errors (S + D + I, jiwer) of each hypothesis against the reference, and the reference length."""
    import jiwer

    ref_n = normalise(ref)
    if not ref_n:
        raise RerankError("empty reference: WER is undefined")
    errors = np.zeros(len(hyps))
    for i, hyp in enumerate(hyps):
        out = jiwer.process_words(ref_n, normalise(hyp))
        errors[i] = out.substitutions + out.deletions + out.insertions
    return errors, len(ref_n.split())


def hypothesis_word_errors(ref: str, hyp: str, mark_deletions: bool = False) -> list[int | None]:
    """For each whitespace word of ``hyp``: 1 when the minimum-edit alignment with ``ref`` (jiwer, on normalised
    words) substitutes or inserts it, 0 when it matches; None for a word normalisation empties (punctuation).
    ``mark_deletions`` also marks the word after a deleted reference word (the last at the end), GED's convention
    for training labels; confidence is judged without it."""
    import jiwer

    ref_n = normalise(ref)
    if not ref_n:
        raise RerankError("empty reference: word errors are undefined")
    words = [normalise(w) for w in hyp.split()]
    kept = [i for i, w in enumerate(words) if w]
    labels: list[int | None] = [None] * len(words)
    if not kept:
        return labels
    out = jiwer.process_words(ref_n, " ".join(words[i] for i in kept))
    for chunk in out.alignments[0]:
        for position in range(chunk.hyp_start_idx, chunk.hyp_end_idx):
            labels[kept[position]] = 0 if chunk.type == "equal" else 1
    if mark_deletions:
        for chunk in out.alignments[0]:
            if chunk.type == "delete":
                labels[kept[min(chunk.hyp_start_idx, len(kept) - 1)]] = 1
    return labels


def word_confidence(result: Any) -> list[dict[str, Any]]:
    """Each recogniser word (whitespace-separated) of a scored hypothesis (a ``TextScores``) with its probability
    of being wrong: the highest p(replaced) among the Detector's words inside it (its pre-tokenizer splits
    "she'll" into three)."""
    rows, words, index = [], result.words, 0
    for match in re.finditer(r"\S+", result.text):
        start, end = match.span()
        while index < len(words) and words[index].end <= start:  # both are in text order: one pass
            index += 1
        scores = []
        for word in words[index:]:
            if word.start >= end:
                break
            scores.append(word.score)
        rows.append({"word": match.group(), "start": start, "end": end, "p_wrong": max(scores, default=0.0)})
    return rows


# --------------------------------------------------------------------------------------- scoring + fusion

LmScorer = Callable[[Sequence[str]], list[float]]


def detector_scorer(detector: Any, score: str = "sum", batch_size: int = 64) -> LmScorer:
    if score not in ("sum", "mean"):
        raise RerankError(f"unknown sentence score {score!r} (use 'sum' or 'mean')")
    return lambda texts: electra_scores(detector, texts, score, batch_size)


def pll_scorer(generator: Any, batch_size: int = 64) -> LmScorer:
    """PLL with our generator (GeneratorScorer): one masked copy per token. Comparison only."""
    def score(texts: Sequence[str]) -> list[float]:
        nonempty = [t for t in texts if t.strip()]
        plls = iter([r.pll for r in generator.score(nonempty, batch_size=batch_size)] if nonempty else [])
        return [next(plls) if t.strip() else 0.0 for t in texts]
    return score


def score_utterances(utts: Sequence[Utterance], scorer: LmScorer) -> list[Scored]:
    """Features for a chunk of utterances; all their hypotheses go to the scorer in one call (batched)."""
    texts = [h.text for u in utts for h in u.hyps]
    lm = scorer(texts)
    if len(lm) != len(texts):
        raise RerankError("scorer returned the wrong number of scores")
    out: list[Scored] = []
    start = 0
    for utt in utts:
        n = len(utt.hyps)
        item = Scored(utt, np.array([h.asr_score for h in utt.hyps], dtype=np.float64),
                      np.asarray(lm[start:start + n], dtype=np.float64),
                      np.array([word_count(h.text) for h in utt.hyps], dtype=np.float64))
        if utt.ref is not None:
            item.errors, item.ref_words = word_errors(utt.ref, [h.text for h in utt.hyps])
        out.append(item)
        start += n
    return out


def totals(item: Scored, lm_weight: float, length_weight: float) -> np.ndarray:
    return item.asr + lm_weight * item.lm + length_weight * item.length


def choose(item: Scored, lm_weight: float, length_weight: float) -> int:
    """Index of the best hypothesis (ties: the recogniser's earlier one)."""
    return int(np.argmax(totals(item, lm_weight, length_weight)))


def utterance_row(item: Scored, lm_weight: float, length_weight: float, lm_name: str = "electra_score") -> dict:
    """The output JSONL row: every hypothesis's component scores, and the chosen one."""
    total = totals(item, lm_weight, length_weight)
    order = sorted(range(len(total)), key=lambda i: (-total[i], i))
    ranks = {index: rank for rank, index in enumerate(order, start=1)}
    hyps = []
    for i, hyp in enumerate(item.utt.hyps):
        row = {"text": hyp.text, "asr_score": float(item.asr[i]), lm_name: float(item.lm[i]),
               "length": int(item.length[i]), "total": float(total[i]), "rank": ranks[i]}
        if item.errors is not None:
            row["word_errors"] = int(item.errors[i])
        hyps.append(row)
    best = order[0]
    out: dict[str, Any] = {"id": item.utt.id, "chosen": item.utt.hyps[best].text, "chosen_index": best + 1,
                           "hyps": hyps}
    if item.utt.ref is not None:
        out["ref"] = item.utt.ref
    return out


class WerTally:
    """Corpus WER before (1-best), after (reranked) and oracle, accumulated while streaming."""

    def __init__(self) -> None:
        self.ref_words = 0
        self.before = 0.0
        self.after = 0.0
        self.oracle = 0.0
        self.utterances = 0
        self.with_refs = 0

    def add(self, item: Scored, chosen: int) -> None:
        self.utterances += 1
        if item.errors is None:
            return
        self.with_refs += 1
        self.ref_words += item.ref_words
        self.before += item.errors[0]
        self.after += item.errors[chosen]
        self.oracle += item.errors.min()

    def summary(self) -> dict[str, float | None]:
        if not self.ref_words:
            return {"wer_before": None, "wer_after": None, "wer_oracle": None}
        return {"wer_before": self.before / self.ref_words, "wer_after": self.after / self.ref_words,
                "wer_oracle": self.oracle / self.ref_words}


def corpus_wer(items: Sequence[Scored], lm_weight: float, length_weight: float) -> float:
    tally = WerTally()
    for item in items:
        tally.add(item, choose(item, lm_weight, length_weight))
    wer = tally.summary()["wer_after"]
    if wer is None:
        raise RerankError("no references: WER cannot be computed")
    return float(wer)


DEFAULT_LM_GRID = tuple([0.0] + [float(x) for x in np.geomspace(1e-3, 1e3, 61)])
DEFAULT_LENGTH_GRID = tuple(sorted({0.0, *(float(s * x) for s in (-1, 1) for x in np.geomspace(1e-2, 1e3, 31))}))


def tune_weights(items: Sequence[Scored], lm_grid: Sequence[float] = DEFAULT_LM_GRID,
                 length_grid: Sequence[float] = DEFAULT_LENGTH_GRID) -> dict[str, float]:
    """Grid search for (lm_weight, length_weight) minimising corpus WER on a dev set.

    Ties go to the smallest |weights| (fewest changes to the recogniser's choice), so an
    uninformative score keeps lm_weight 0. Vectorised: per-hypothesis errors are computed once.
    """
    items = [item for item in items if item.errors is not None]
    if not items:
        raise RerankError("the tuning set has no references ('ref'): cannot tune by WER")
    width = max(len(item.asr) for item in items)
    n = len(items)

    def pad(name: str, fill: float) -> np.ndarray:
        out = np.full((n, width), fill)
        for row, item in enumerate(items):
            values = getattr(item, name)
            out[row, :len(values)] = values
        return out

    asr, lm, length = pad("asr", -np.inf), pad("lm", 0.0), pad("length", 0.0)
    errors = pad("errors", np.inf)  # padded slots are never chosen (asr = -inf)
    ref_words = sum(item.ref_words for item in items)
    best: tuple[float, float, float, float] | None = None  # (wer, |weights|, lm, length)
    for lw in lm_grid:
        base = asr + lw * lm
        for bw in length_grid:
            chosen = np.argmax(base + bw * length, axis=1)
            wer = float(errors[np.arange(n), chosen].sum() / ref_words)
            key = (wer, abs(lw) + abs(bw), lw, bw)
            if best is None or key[:2] < best[:2]:
                best = key
    assert best is not None
    before = float(errors[:, 0].sum() / ref_words)
    oracle = float(errors.min(axis=1).sum() / ref_words) if width else before
    return {"lm_weight": best[2], "length_weight": best[3], "dev_wer_after": best[0], "dev_wer_before": before,
            "dev_wer_oracle": oracle, "dev_utterances": n}
