"""N-best lists and their readers: mlm-scoring JSON, our JSONL, Kaldi n-best text, ESPnet decode folders, and the
one-string form (a hypothesis per line, an optional score after a TAB or ' ||| ').

Readers stream: JSONL and Kaldi text are read one line at a time, so large files never sit in memory whole (the
mlm-scoring JSON is one object and is loaded). ``-`` is standard input, read once, as it comes."""

from __future__ import annotations

import io
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_detect.errors import RerankError


class StdinLines:
    """Standard input (UTF-8) as a reader's file: read once, its first lines kept back to tell the format; it
    stands where a reader takes a path (``str`` names it in messages, ``read_text`` is all of it)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
        self.head: list[str] = []

    def __str__(self) -> str:
        return "standard input"

    def first_line(self) -> str | None:
        """The first non-blank line (kept for the reader), or None for empty input."""
        try:  # readline, not `for`: a generator left early would close the stream it delegates to
            while line := self.stream.readline():
                self.head.append(line)
                if line.strip():
                    return line
        except UnicodeDecodeError:
            raise RerankError(f"{self}: not UTF-8 text") from None
        return None

    def __iter__(self) -> Iterator[str]:
        head, self.head = self.head, []
        yield from head
        while line := self.stream.readline():  # not `yield from`: closing this generator must not close stdin
            yield line

    def __enter__(self) -> StdinLines:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read_text(self, encoding: str = "utf-8") -> str:
        return "".join(self)


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


def read_mlm_json(path: str | Path | StdinLines) -> Iterator[Utterance]:
    """awslabs/mlm-scoring format: ``{utt: {"hyp_1": {"score", "text"}, ..., "ref": "..."}}``."""
    path = _as_path(path)
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


def read_jsonl(path: str | Path | StdinLines) -> Iterator[Utterance]:
    """Our JSONL: one ``{"id", "hyps": [{"text", "score"}], "ref"?}`` per line."""
    path = _as_path(path)
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


def read_kaldi(path: str | Path | StdinLines, scores: str | Path | None = None, refs: str | Path | None = None
               ) -> Iterator[Utterance]:
    """Kaldi-style n-best text: ``UTT-N word word ...`` per line (``nbest-to-linear`` + ``int2sym.pl``).

    A hypothesis's lines must be contiguous per utterance. ``scores``: lines ``UTT-N SCORE`` (a
    log-likelihood, higher = better; negate Kaldi costs). ``refs``: a Kaldi ``text`` file ``UTT words``.
    """
    path = _as_path(path)
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
    """``mlm-json`` for .json, ``jsonl`` for .jsonl, else sniff: '{' starting a JSON line = jsonl, else kaldi.
    An empty file is ``jsonl`` (it holds no utterances in any format)."""
    path = Path(path)
    if path.suffix == ".json":
        return "mlm-json"
    if path.suffix == ".jsonl":
        return "jsonl"
    with _open_text(path) as handle:
        for line in _lines(handle, path):
            if line.strip():
                return _sniff(line)
    return "jsonl"


def _sniff(line: str) -> str:
    """The format whose first non-blank line is ``line``."""
    first = line.strip()
    if first.startswith("{"):
        try:
            obj = json.loads(first)
        except (json.JSONDecodeError, RecursionError):
            return "mlm-json"  # a multi-line JSON object (its reader reports what is wrong)
        return "jsonl" if isinstance(obj, dict) and "hyps" in obj else "mlm-json"
    return "kaldi"


def read_nbest(path: str | Path, fmt: str = "auto", scores: str | Path | None = None,
               refs: str | Path | None = None) -> Iterator[Utterance]:
    """Utterances from any supported n-best file (``-``: standard input), streamed where the format allows. An
    empty file or input holds no utterances: an empty iterator."""
    if fmt not in FORMATS:
        raise RerankError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if str(path) == "-":
        return _read_stdin(fmt, scores, refs)
    path = Path(path)
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


def _read_stdin(fmt: str, scores: str | Path | None, refs: str | Path | None) -> Iterator[Utterance]:
    source = StdinLines()
    if fmt == "espnet":
        raise RerankError("--format espnet reads a decode folder, not standard input")
    first = source.first_line()
    if first is None:
        return iter(())
    fmt = _sniff(first) if fmt == "auto" else fmt
    if fmt != "kaldi" and (scores or refs):
        raise RerankError("--scores/--refs files belong to --format kaldi; JSON formats carry their own")
    return read_mlm_json(source) if fmt == "mlm-json" else read_jsonl(source) if fmt == "jsonl" else \
        read_kaldi(source, scores, refs)


def _as_path(path: str | Path | StdinLines) -> Path | StdinLines:
    return path if isinstance(path, StdinLines) else Path(path)


def _open_text(path: Path | StdinLines):
    if isinstance(path, StdinLines):
        return path
    try:
        return path.open("r", encoding="utf-8")
    except FileNotFoundError:
        raise RerankError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise RerankError(f"{path} is a directory, not an n-best file") from None


def _lines(handle: Any, path: Path | StdinLines) -> Iterator[str]:
    try:
        yield from handle
    except UnicodeDecodeError:
        raise RerankError(f"{path}: not UTF-8 text") from None


def write_mlm_json_obj(utterances: Iterable[Utterance]) -> dict[str, Any]:
    """Utterances as an mlm-scoring JSON object (what benchmarks/quality/asr writes)."""
    out: dict[str, Any] = {}
    for utt in utterances:
        entry: dict[str, Any] = {f"hyp_{i + 1}": {"score": h.asr_score, "text": h.text} for i, h in enumerate(utt.hyps)}
        if utt.ref is not None:
            entry["ref"] = utt.ref
        out[utt.id] = entry
    return out
