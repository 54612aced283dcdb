"""Corpus resolution, document splitting, tokenizer, packing, split and cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

import electra_detect.training.pretraining.data as data
from electra_detect.training.pretraining.data import (
    BlockSampler,
    CorpusError,
    PackedBlocks,
    iter_documents,
    prepare_corpus,
    resolve_corpus,
    split_blocks,
)


def test_resolve_files_folders_and_globs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.txt").write_text("x\n")
    (tmp_path / "a" / "two.txt").write_text("y\n")
    (tmp_path / "b.txt").write_text("z\n")
    assert len(resolve_corpus([str(tmp_path / "a")]).files) == 2
    assert len(resolve_corpus([str(tmp_path / "*.txt")]).files) == 1
    assert len(resolve_corpus([str(tmp_path / "b.txt"), str(tmp_path / "a")]).files) == 3
    assert resolve_corpus([]).embedded
    with pytest.raises(CorpusError, match="not found"):
        resolve_corpus([str(tmp_path / "missing.txt")])
    with pytest.raises(CorpusError, match="matches no files"):
        resolve_corpus([str(tmp_path / "*.md")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="holds no files"):
        resolve_corpus([str(tmp_path / "empty")])


def test_documents_split_on_blank_lines_or_per_line(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("First line\ncontinues.\n\n\nSecond doc.\nThird?\n")
    source = resolve_corpus([str(path)])
    assert list(iter_documents(source, "blank")) == ["First line continues.", "Second doc. Third?"]
    assert list(iter_documents(source, "line")) == ["First line", "continues.", "Second doc.", "Third?"]


def test_embedded_corpus_streams_state_of_the_union() -> None:
    docs = iter_documents(resolve_corpus([]))
    first = next(docs)
    assert first.startswith("Fellow-Citizens of the Senate")


def test_non_utf8_and_empty_corpora_fail_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\x00binary\n")
    with pytest.raises(CorpusError, match="not UTF-8"):
        list(iter_documents(resolve_corpus([str(bad)])))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    with pytest.raises(CorpusError, match="empty"):
        prepare_corpus(resolve_corpus([str(empty)]), tmp_path / "cache", 200, True, "blank", 32)


def test_tokenizer_loads_with_autotokenizer_and_cache_is_reused(corpus_file: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    source = resolve_corpus([str(corpus_file)])
    prepared = prepare_corpus(source, tmp_path, 200, True, "blank", 32)
    tokenizer = AutoTokenizer.from_pretrained(prepared.tokenizer_dir)
    assert tokenizer.is_fast and len(tokenizer) <= 200
    assert tokenizer.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) == [0, 1, 2, 3, 4]
    tokens = prepared.tokens()
    assert isinstance(tokens, np.memmap) and len(tokens) == prepared.num_tokens > 1000
    # One [SEP] per document was written.
    assert int((np.asarray(tokens) == tokenizer.sep_token_id).sum()) == 600

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("tokenizer retrained although the cache holds it")

    monkeypatch.setattr(data, "train_tokenizer", boom)
    again = prepare_corpus(source, tmp_path, 200, True, "blank", 32)
    assert again.tokens_path == prepared.tokens_path and again.num_tokens == prepared.num_tokens
    assert not list(tmp_path.glob(".*partial*")), "staging dirs left behind"


def test_blocks_split_and_sampler(corpus_file: Path, tmp_path: Path) -> None:
    prepared = prepare_corpus(resolve_corpus([str(corpus_file)]), tmp_path, 200, True, "blank", 32)
    tokens = prepared.tokens()
    blocks = PackedBlocks(tokens, 32, cls_id=2, sep_id=3)
    batch = blocks.batch([0, 5])
    assert batch.shape == (2, 32)
    assert (batch[:, 0] == 2).all() and (batch[:, -1] == 3).all()
    assert batch[1, 1:-1].tolist() == tokens[5 * 30:6 * 30].tolist()

    train, val = split_blocks(blocks.num_blocks, 0.05, 4)
    assert not set(train) & set(val) and len(train) + len(val) == blocks.num_blocks
    train2, val2 = split_blocks(blocks.num_blocks, 0.05, 4)
    assert np.array_equal(val, val2), "split is not deterministic"
    with pytest.raises(CorpusError, match="too small"):
        split_blocks(5, 0.05, 8)

    sampler = BlockSampler(train, seed=3)
    first = sampler.next(7)
    state = sampler.state()
    rest = sampler.next(len(train))  # crosses an epoch boundary
    resumed = BlockSampler(train, seed=3, **state)
    assert np.array_equal(resumed.next(len(train)), rest)
    assert set(first) <= set(train)
    assert sampler.epoch == 1
