"""What the fuzzers feed each input path, and what they accept back.

A target writes a generated input where its reader expects it and calls the reader. The reader either
returns its records (``"accepted"``) or raises its declared error type with a non-empty one-line message
(``"rejected"``, what the CLI prints as one ``error:`` line); anything else is a crash and propagates.
``tests/test_fuzz.py`` runs every target for a bounded number of examples in ``make test``;
``benchmarks/robustness/fuzz.py`` runs them for 10,000 each and writes the counts.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# ------------------------------------------------------------------------------------------------ pieces

# characters a format's parser cares about, mixed with letters, digits, other scripts, emoji and controls
SYMBOLS = "\t |-_:.,;'\"{}[]\\/#=+*0123456789AS" + "\x00\x07\x0b\x0c\x1b\x7f\u00a0\u2028\u200b\ufeff"
WORDS = ["the", "cat", "sat", "a", "dog", "ran", "A", "S", "|||", "-NONE-", "noop", "c", "i", "hyp_1", "utt-1",
         "über", "naïve", "日本語", "Привет", "مرحبا", "🙂", "👩‍👩‍👧", "e\u0301", "1e400", "nan", "-0", "1e-5"]
texts = st.text(max_size=200)  # any Unicode scalar (no surrogates: files are UTF-8)
format_text = st.text(alphabet=st.sampled_from(list(SYMBOLS + string.ascii_letters)) | st.characters(), max_size=120)
word = st.sampled_from(WORDS) | st.text(alphabet=st.characters(exclude_categories=["Zs", "Cc"]), min_size=1,
                                        max_size=8)
sentence = st.lists(word, max_size=12).map(" ".join)
small_int = st.integers(-3, 40) | st.sampled_from([2**31, 2**63, -(2**63)])
number = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**20), 10**20)
          | st.sampled_from([True, False, None]))
number_text = st.one_of(number.map(str), st.sampled_from(["", " ", "1e999", "-inf", "NaN", "0x10", "1_0", "٣"]),
                        format_text)
json_values = st.recursive(st.none() | st.booleans() | number | texts,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                           max_leaves=12)
deep_json = st.integers(100, 5000).map(lambda depth: "[" * depth + "]" * depth)  # parsers that recurse


def lines_of(line: st.SearchStrategy[str], max_size: int = 8) -> st.SearchStrategy[str]:
    """Lines joined by a newline style (LF, CRLF, CR), sometimes with a trailing one."""
    return st.tuples(st.lists(line, max_size=max_size), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans()
                     ).map(lambda t: t[1].join(t[0]) + (t[1] if t[2] else ""))


def file_bytes(structured: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Mostly a structured text, sometimes raw bytes (invalid UTF-8 included) or a valid text with a bad byte."""
    encoded = structured.map(lambda t: t.encode("utf-8", "surrogatepass"))
    spliced = st.tuples(encoded, st.binary(min_size=1, max_size=4), st.integers(0, 400)).map(
        lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:])
    return st.one_of(encoded, encoded, encoded, spliced, st.binary(max_size=300))


# ------------------------------------------------------------------------------------------------ formats

m2_edit = st.builds(lambda a, b, kind, fix, who: f"A {a} {b}|||{kind}|||{fix}|||REQUIRED|||-NONE-|||{who}",
                    small_int, small_int, st.sampled_from(["R:VERB", "M:DET", "U:PREP", "noop", "UNK", ""]) | word,
                    sentence | st.just("-NONE-"), small_int)
m2_block = st.tuples(sentence, st.lists(m2_edit, max_size=3)).map(lambda t: "\n".join([f"S {t[0]}", *t[1]]))
m2_file = file_bytes(st.one_of(st.lists(m2_block, max_size=4).map("\n\n".join), st.lists(m2_block, max_size=4).map(
    "\n\n".join), lines_of(st.one_of(sentence.map(lambda t: f"S {t}"), m2_edit, st.just(""), format_text), 8)))

tsv_token = st.tuples(word, st.sampled_from(["c", "i"] * 6 + ["C", "x", ""])).map("\t".join)
tsv_file = file_bytes(st.one_of(st.lists(st.lists(tsv_token, min_size=1, max_size=6).map("\n".join), max_size=4).map(
    "\n\n".join), lines_of(st.one_of(tsv_token, st.tuples(word, word, word).map("\t".join), st.just(""),
                                     format_text), 10)))

bea_edit = st.one_of(st.tuples(small_int, small_int, sentence | st.none()).map(list),
                     st.tuples(small_int, small_int, sentence | st.none(), word | st.none()).map(list),
                     json_values)
bea_essay = st.one_of(
    st.fixed_dictionaries({"text": st.lists(sentence, max_size=3).map(lambda s: "\n".join(s)),
                           "edits": st.lists(st.tuples(st.sampled_from([0, 1, "0", None]),
                                                       st.lists(bea_edit, max_size=4)).map(list), max_size=2)}),
    json_values)
bea_file = file_bytes(lines_of(st.one_of(bea_essay.map(json.dumps), deep_json, format_text), 3))

def _parallel(n: int) -> st.SearchStrategy[Any]:
    side = file_bytes(st.lists(sentence, min_size=n, max_size=n).map("\n".join))
    return st.tuples(side, st.lists(side, min_size=1, max_size=2), st.sampled_from(["first", "any", "majority", "all"]))


parallel_pair = st.integers(0, 3).flatmap(_parallel)

hyp = st.one_of(st.fixed_dictionaries({"text": sentence, "score": number}), st.fixed_dictionaries({"text": sentence}),
                sentence, json_values)
mlm_json_file = file_bytes(st.one_of(
    st.dictionaries(word, st.dictionaries(st.sampled_from(["hyp_1", "hyp_2", "hyp_10", "hyp_x", "ref", "hyp_"])
                                          | word, hyp, max_size=4) | json_values, max_size=3).map(json.dumps),
    json_values.map(json.dumps), deep_json, format_text))
jsonl_file = file_bytes(lines_of(st.one_of(
    st.fixed_dictionaries({"id": word | number, "hyps": st.lists(hyp, max_size=4)},
                          optional={"ref": sentence | number}).map(json.dumps),
    json_values.map(json.dumps), deep_json, format_text), 4))
kaldi_key = st.tuples(word, small_int).map(lambda t: f"{t[0]}-{t[1]}") | word
kaldi_files = st.tuples(
    file_bytes(lines_of(st.tuples(kaldi_key, sentence).map(" ".join) | format_text, 8)),
    st.none() | file_bytes(lines_of(st.tuples(kaldi_key, number_text).map(" ".join), 8)),
    st.none() | file_bytes(lines_of(st.tuples(word, sentence).map(" ".join), 4)))
utt_key = st.sampled_from(["u1", "u2", "utt-1", "a b"]) | word
espnet_score = st.one_of(number_text, number_text.map(lambda v: f"tensor({v})"),
                         number.map(lambda v: f"tensor({v}, device='cuda:0')"))
espnet_rank = st.tuples(  # one {n}best_recog/ folder: text (None = missing) and score (None = no file)
    st.none() | file_bytes(lines_of(st.tuples(utt_key, sentence).map(" ".join) | format_text, 5)),
    st.none() | file_bytes(lines_of(st.tuples(utt_key, espnet_score).map(" ".join) | format_text, 5)))
espnet_folder = st.tuples(st.dictionaries(st.sampled_from(["1", "2", "3", "10", "01", "x"]), espnet_rank, max_size=4),
                          st.none() | file_bytes(lines_of(st.tuples(utt_key, sentence).map(" ".join), 4)))
nbest_file = st.tuples(st.sampled_from(["nbest.json", "nbest.jsonl", "nbest.txt"]),
                       st.one_of(mlm_json_file, jsonl_file, kaldi_files.map(lambda t: t[0])))
hypothesis_lines = lines_of(st.one_of(
    st.tuples(sentence, st.sampled_from(["\t", " ||| ", "\t\t"]), number_text).map("".join), sentence, format_text), 6)

corpus_file = st.tuples(st.sampled_from(["corpus.txt", "corpus.md", "notes"]),
                        file_bytes(lines_of(sentence | format_text | st.just(""), 10)))
config_value = st.one_of(number, texts, st.lists(number | word, max_size=3))
config_section = st.dictionaries(st.sampled_from(["preset", "hidden_size", "num_layers", "gen_fraction", "dropout",
                                                  "seq_len", "corpus", "mask_prob", "lr", "batch_size", "max_steps",
                                                  "seed", "objective", "embedding_sharing", "architecture"]) | word,
                                 config_value, max_size=4)
config_raw = st.dictionaries(st.sampled_from(["model", "data", "train"]) | word, config_section | json_values,
                             max_size=3)


def _toml(raw: dict[str, Any]) -> str:
    """A TOML rendering of generated sections (strings JSON-quoted, which TOML mostly accepts)."""
    out = []
    for name, section in raw.items():
        out.append(f"[{json.dumps(name)}]")
        for key, value in (section.items() if isinstance(section, dict) else []):
            out.append(f"{json.dumps(key)} = {json.dumps(value)}")
    return "\n".join(out) + "\n"


config_file = st.one_of(
    st.tuples(st.just("run.json"), file_bytes(config_raw.map(json.dumps) | json_values.map(json.dumps) | deep_json)),
    st.tuples(st.just("run.toml"), file_bytes(config_raw.map(_toml) | format_text)),
    st.tuples(st.just("run.yaml"), file_bytes(config_raw.map(json.dumps) | format_text | deep_json)))

# what Detector.score and the CLI's text reading meet: controls, mixed scripts, emoji, lone surrogates (a
# Python str the JSON of a request can hold), long and whitespace-only texts
score_text = st.one_of(texts, sentence, format_text, st.text(alphabet=st.characters(codec=None), max_size=60),
                       st.sampled_from(["", " ", "\t\n", "\u2028", "\ufeff", "\ud800", "a\udfffb", "🙂" * 300,
                                        "x" * 5000, "\x00" * 10]))
score_batch = st.lists(score_text, min_size=1, max_size=6)
text_file = file_bytes(lines_of(score_text, 6))  # lone surrogates encode to invalid UTF-8 (surrogatepass)


# ------------------------------------------------------------------------------------------------ targets

def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def one_line(exc: BaseException) -> bool:
    message = str(exc)
    return bool(message.strip()) and "\n" not in message and "\r" not in message


@dataclass
class Target:
    strategy: st.SearchStrategy[Any]
    run: Callable[[Any, Path, dict[str, Any]], Any]  # (example, scratch dir, shared context) -> records
    errors: tuple[type[BaseException], ...]
    needs: str = ""  # "nlp", "errant" or "detector": built once per run by the caller


def context_for(needs: str, model: str | Path) -> dict[str, Any]:
    """What a target needs, built once per run: spaCy's sentence splitter, ERRANT, or a Detector on ``model``."""
    from electra_detect.tasks.ged.nlp import load_errant, sentence_splitter

    if needs == "nlp":
        return {"nlp": sentence_splitter()}
    if needs == "errant":
        return {"errant": load_errant()}
    if needs == "detector":
        from electra_detect.detector import Detector

        return {"detector": Detector.load(str(model), engine="auto")}
    return {}


def check(target: Target, example: Any, scratch: Path, context: dict[str, Any]) -> str:
    """``accepted`` or ``rejected`` (its error type, one line); a crash or a multi-line error raises."""
    try:
        target.run(example, scratch, context)
    except target.errors as exc:
        if not one_line(exc):
            raise AssertionError(f"rejection is not one line: {type(exc).__name__}: {str(exc)[:300]!r}") from exc
        return "rejected"
    return "accepted"


def _ged():
    from electra_detect.tasks.ged import readers

    return readers


def _rerank():
    from electra_detect.tasks.rerank import nbest

    return nbest


def _run_m2(data: bytes, scratch: Path, context: dict[str, Any]) -> Any:
    return _ged().read_m2(_write(scratch / "data.m2", data))


def _run_tsv(data: bytes, scratch: Path, context: dict[str, Any]) -> Any:
    return _ged().read_token_tsv(_write(scratch / "data.tsv", data))


def _run_bea(data: bytes, scratch: Path, context: dict[str, Any]) -> Any:
    return _ged().read_bea_json(_write(scratch / "data.json", data), nlp=context.get("nlp"))


def _run_parallel(example: tuple[bytes, list[bytes], str], scratch: Path, context: dict[str, Any]) -> Any:
    source, references, combine = example
    refs = [_write(scratch / f"ref{i}.txt", r) for i, r in enumerate(references)]
    return _ged().read_parallel(_write(scratch / "source.txt", source), refs, combine=combine,
                                annotator=context.get("errant"))


def _run_nbest(example: tuple[str, bytes], scratch: Path, context: dict[str, Any]) -> Any:
    name, data = example
    return list(_rerank().read_nbest(_write(scratch / name, data)))


def _run_mlm_json(data: bytes, scratch: Path, context: dict[str, Any]) -> Any:
    return list(_rerank().read_nbest(_write(scratch / "nbest.json", data), fmt="mlm-json"))


def _run_jsonl(data: bytes, scratch: Path, context: dict[str, Any]) -> Any:
    return list(_rerank().read_nbest(_write(scratch / "nbest.jsonl", data), fmt="jsonl"))


def _run_kaldi(example: tuple[bytes, bytes | None, bytes | None], scratch: Path, context: dict[str, Any]) -> Any:
    nbest, scores, refs = example
    return list(_rerank().read_nbest(_write(scratch / "nbest.txt", nbest), fmt="kaldi",
                                     scores=_write(scratch / "scores", scores) if scores is not None else None,
                                     refs=_write(scratch / "text", refs) if refs is not None else None))


def _run_espnet(example: tuple[dict[str, tuple[bytes | None, bytes | None]], bytes | None], scratch: Path,
                context: dict[str, Any]) -> Any:
    ranks, refs = example
    folder = scratch / "decode"
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    for n, (text, score) in ranks.items():
        (folder / f"{n}best_recog").mkdir(parents=True)
        if text is not None:
            _write(folder / f"{n}best_recog" / "text", text)
        if score is not None:
            _write(folder / f"{n}best_recog" / "score", score)
    folder.mkdir(exist_ok=True)
    return list(_rerank().read_nbest(folder, refs=_write(scratch / "text", refs) if refs is not None else None))


def _run_hypothesis_lines(text: str, scratch: Path, context: dict[str, Any]) -> Any:
    return _rerank().parse_hypothesis_lines(text)


def _run_corpus(example: tuple[str, bytes], scratch: Path, context: dict[str, Any]) -> Any:
    from electra_detect.training.pretraining.data import iter_documents, resolve_corpus

    name, data = example
    return list(iter_documents(resolve_corpus([str(_write(scratch / name, data))])))


def _run_config(example: tuple[str, bytes], scratch: Path, context: dict[str, Any]) -> Any:
    from electra_detect.training.pretraining.config import RunConfig

    name, data = example
    return RunConfig.from_file(_write(scratch / name, data))


def _run_score(batch: list[str], scratch: Path, context: dict[str, Any]) -> Any:
    """The scores must also be sane: one result per text, probabilities in [0, 1], word spans inside the text."""
    results = context["detector"].score(batch)
    assert len(results) == len(batch)
    for text, result in zip(batch, results, strict=True):
        for w in result.words:
            assert 0.0 <= w.score <= 1.0, w
            assert 0 <= w.start <= w.end <= len(text), (w, len(text))
    return results


def _run_text_file(data: bytes, scratch: Path, context: dict[str, Any]) -> Any:
    """The CLI's --file reading (the batches every inference verb scores)."""
    from electra_detect.cli.texts import open_texts, text_batches

    file = str(_write(scratch / "texts.txt", data))
    handle = open_texts(file)
    try:
        return [t for batch in text_batches([], file, handle) for t in batch]
    finally:
        handle.close()


def _errors() -> dict[str, tuple[type[BaseException], ...]]:
    from electra_detect.errors import CliError, DetectorError, GedDataError, RerankError
    from electra_detect.training.pretraining.config import ConfigError
    from electra_detect.training.pretraining.data import CorpusError

    return {"ged": (GedDataError,), "rerank": (RerankError,), "corpus": (CorpusError,), "config": (ConfigError,),
            "score": (DetectorError,), "cli": (CliError,)}


def targets() -> dict[str, Target]:
    errors = _errors()
    return {
        "m2": Target(m2_file, _run_m2, errors["ged"]),
        "token-tsv": Target(tsv_file, _run_tsv, errors["ged"]),
        "bea-json": Target(bea_file, _run_bea, errors["ged"], needs="nlp"),
        "parallel": Target(parallel_pair, _run_parallel, errors["ged"], needs="errant"),
        "nbest-auto": Target(nbest_file, _run_nbest, errors["rerank"]),
        "nbest-mlm-json": Target(mlm_json_file, _run_mlm_json, errors["rerank"]),
        "nbest-jsonl": Target(jsonl_file, _run_jsonl, errors["rerank"]),
        "nbest-kaldi": Target(kaldi_files, _run_kaldi, errors["rerank"]),
        "nbest-espnet": Target(espnet_folder, _run_espnet, errors["rerank"]),
        "hypothesis-lines": Target(hypothesis_lines, _run_hypothesis_lines, errors["rerank"]),
        "corpus": Target(corpus_file, _run_corpus, errors["corpus"]),
        "config": Target(config_file, _run_config, errors["config"]),
        "text-file": Target(text_file, _run_text_file, errors["cli"]),
        "detector-score": Target(score_batch, _run_score, errors["score"], needs="detector"),
    }
