"""Pre-training objectives (training/pretraining/objectives.py), two-stage training, CoLA fine-tuning and the
ablation benchmark end to end on micro runs."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from electra_detect.training.pretraining.config import PAPER_MODEL, ConfigError, RunConfig
from electra_detect.training.pretraining.masking import mask_tokens
from electra_detect.training.pretraining.model import ElectraPretrainingModel
from electra_detect.training.pretraining.objectives import OBJECTIVES, compute_loss, get
from tests.conftest import micro_config, synthetic_text

ROOT = Path(__file__).resolve().parent.parent


def _micro_model(objective: str, gen_fraction: float = 0.25) -> ElectraPretrainingModel:
    config = RunConfig()
    config.override("model", **PAPER_MODEL)  # the objectives' internals are checked on the paper's ELECTRA pair
    config.model.preset = "micro"
    config.model.gen_fraction = gen_fraction
    config.model.dropout = 0.0
    torch.manual_seed(0)
    return ElectraPretrainingModel.from_config(config.model, 120, mlm_head=get(objective).mlm_head)


def _batch(seed: int = 0):
    rng = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 120, (4, 24), generator=rng)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    attention = torch.ones_like(ids)
    masked = mask_tokens(ids, attention, mask_id=4, special_ids=[0, 1, 2, 3, 4], mask_prob=0.25, generator=rng)
    return masked, attention, rng


def test_config_accepts_every_objective_and_rejects_bad_two_stage() -> None:
    for objective in OBJECTIVES:
        config = RunConfig()
        config.train.objective = objective
        config.validate()
    config = RunConfig()
    config.train.objective = "gpt"
    with pytest.raises(ConfigError, match="unknown objective"):
        config.validate()
    config = RunConfig()
    config.train.objective, config.train.mlm_first_steps = "bert_mlm", 10
    with pytest.raises(ConfigError, match="needs objective 'electra'"):
        config.validate()
    config = RunConfig()
    config.model.gen_fraction, config.model.tie_all, config.train.mlm_first_steps = 1.0, True, 10
    with pytest.raises(ConfigError, match="tie_all"):
        config.validate()


def test_fingerprint_unchanged_without_two_stage() -> None:
    """Checkpoints written before the option existed must keep resuming."""
    config = RunConfig()
    assert set(config.model_fingerprint()) == {"model", "seq_len", "lowercase", "objective"}
    config.train.mlm_first_steps = 5
    assert config.model_fingerprint()["mlm_first_steps"] == 5


def test_registry_flags_are_the_one_source_of_truth() -> None:
    from electra_detect.training.pretraining.objectives import REGISTRY

    assert {n for n, o in REGISTRY.items() if o.rtd_head} == {"electra", "electra15", "all_tokens_mlm", "adversarial",
                                                              "electra_frozen_generator"}
    assert {n for n, o in REGISTRY.items() if o.mlm_head} == {"bert_mlm", "replace_mlm", "all_tokens_mlm"}
    assert set(OBJECTIVES) == {n for n, o in REGISTRY.items() if o.selectable}
    assert "generator_mlm" not in OBJECTIVES  # a stage of two-stage training, not a run's objective
    for objective in OBJECTIVES:
        assert (_micro_model(objective).mlm is not None) == get(objective).mlm_head


@pytest.mark.parametrize("objective", ["electra", "bert_mlm", "replace_mlm", "all_tokens_mlm", "generator_mlm",
                                       "electra_frozen_generator"])
def test_evaluation_reports_disc_metrics_exactly_for_objectives_with_a_replaced_token_head(objective: str) -> None:
    from electra_detect.training.pretraining.evaluation import evaluate

    model = _micro_model("replace_mlm" if get(objective).mlm_head else "electra")
    batches = [_batch(seed)[0].original for seed in range(2)]
    metrics = evaluate(model, objective, batches, mask_id=4, special_ids=[0, 1, 2, 3, 4], mask_prob=0.25,
                       disc_weight=50.0, temperature=1.0, seed=0, device=torch.device("cpu"))
    assert (metrics["val_disc_acc"] is not None) == get(objective).rtd_head
    assert 0.0 <= metrics["val_gen_acc"] <= 1.0


def test_an_objective_is_one_decorated_function_and_can_read_the_generators_top_k() -> None:
    from electra_detect.training.pretraining.objectives import REGISTRY, ElectraOutput, register

    @register("top2_probe", rtd_head=False)
    def top2_probe(out, batch, disc_weight):  # type: ignore[no-untyped-def]
        logits, ids = out.generator_top_k(2)  # what MC-BERT's / TEAMS' candidate sets start from
        assert logits.shape == ids.shape == (int(batch.masked.sum()), 2)
        loss = F.cross_entropy(out.generator_logits.float(), out.targets)
        zeros = torch.zeros_like(batch.original)
        return ElectraOutput(loss, loss, loss.detach() * 0, out.generator_logits, zeros.float(), zeros, ids[:, 0])

    try:
        masked, attention, rng = _batch()
        out = compute_loss(_micro_model("electra"), "top2_probe", masked, attention, rng, disc_weight=50.0)
        out.loss.backward()
        with pytest.raises(ValueError, match="registered twice"):
            register("top2_probe", rtd_head=False)(top2_probe)
    finally:
        REGISTRY.pop("top2_probe")
    with pytest.raises(ValueError, match="unknown objective"):
        get("top2_probe")


def test_two_stage_training_is_a_schedule_of_objectives() -> None:
    from electra_detect.training.pretraining.objectives import Phase, phase_at, schedule

    config = RunConfig()
    config.train.max_steps = 10
    assert schedule(config.train) == [Phase("electra", 10)]
    config.train.mlm_first_steps = 4
    phases = schedule(config.train)
    assert phases == [Phase("generator_mlm", 4), Phase("electra_frozen_generator", 10)]
    assert [phase_at(phases, s) for s in (0, 3, 4, 9)] == [(phases[0], 0), (phases[0], 0), (phases[1], 4),
                                                          (phases[1], 4)]
    assert get("electra_frozen_generator").on_enter is not None and get("generator_mlm").on_enter is None


def test_electra15_discriminator_loss_only_on_masked_positions() -> None:
    for objective, unmasked_grad in (("electra15", False), ("electra", True)):
        model = _micro_model(objective)
        masked, attention, rng = _batch()
        out = compute_loss(model, objective, masked, attention, rng, disc_weight=50.0)
        out.disc_logits.retain_grad()
        out.loss.backward()
        grad = out.disc_logits.grad
        assert grad[masked.masked].abs().sum() > 0
        assert bool(grad[~masked.masked].abs().sum() > 0) is unmasked_grad


def test_bert_mlm_trains_the_discriminator_encoder_without_generator() -> None:
    model = _micro_model("bert_mlm")
    masked, attention, rng = _batch()
    out = compute_loss(model, "bert_mlm", masked, attention, rng, disc_weight=50.0)
    out.loss.backward()
    assert model.mlm.electra is model.discriminator.electra
    assert all(p.grad is None for p in model.generator.electra.encoder.parameters())
    assert model.discriminator.electra.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    expected = F.cross_entropy(model.mlm_logits(masked.input_ids, attention, masked.masked), masked.original[
        masked.masked])
    assert torch.allclose(out.loss, expected, atol=1e-5)
    assert out.mlm_logits.shape == (int(masked.masked.sum()), 120)


def test_replace_mlm_feeds_generator_samples_not_mask() -> None:
    model = _micro_model("replace_mlm")
    seen: list[torch.Tensor] = []
    model.discriminator.electra.register_forward_hook(lambda _m, args, kwargs, _o: seen.append(kwargs["input_ids"]),
                                                      with_kwargs=True)
    masked, attention, rng = _batch()
    out = compute_loss(model, "replace_mlm", masked, attention, rng, disc_weight=50.0)
    assert len(seen) == 1 and (masked.input_ids == 4).any()
    # The trained encoder sees the samples at the masked positions and the original tokens elsewhere, no [MASK].
    assert torch.equal(seen[0][masked.masked], out.sampled)
    assert torch.equal(seen[0][~masked.masked], masked.original[~masked.masked])
    assert "gen_mlm_loss" in out.extra and out.loss > out.mlm_loss  # generator MLM loss is part of it


def test_all_tokens_mlm_copy_mechanism() -> None:
    """D -> 0 (copy gate closed): the loss is plain cross-entropy over every real token."""
    model = _micro_model("all_tokens_mlm")
    head = model.discriminator.discriminator_predictions.dense_prediction
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(30.0)  # r = 30: D = sigmoid(-30) ~ 0
    masked, attention, rng = _batch()
    state = rng.get_state()
    out = compute_loss(model, "all_tokens_mlm", masked, attention, rng, disc_weight=50.0)
    rng.set_state(state)
    gen_logits = model.generator_logits(masked.input_ids, attention, masked.masked)
    from electra_detect.training.pretraining.masking import gumbel_sample, replace_with_samples

    corrupted, _labels = replace_with_samples(masked, gumbel_sample(gen_logits, rng))
    hidden = model.discriminator.electra(input_ids=corrupted, attention_mask=attention).last_hidden_state
    plain = F.cross_entropy(model.mlm_head(hidden.reshape(-1, hidden.shape[-1])).float(), masked.original.reshape(-1))
    assert torch.allclose(out.mlm_loss, plain, atol=1e-4)
    with torch.no_grad():
        head.bias.fill_(-30.0)  # D ~ 1: unreplaced tokens are free, replaced ones cost ~30 nats
    out = compute_loss(model, "all_tokens_mlm", masked, attention, rng, disc_weight=50.0)
    replaced = out.disc_labels.float().mean()
    assert out.mlm_loss > 25 * replaced
    assert out.mlm_loss < 30 * replaced + 15 * replaced + 1e-3


def test_adversarial_generator_learns_from_reinforce_only() -> None:
    model = _micro_model("adversarial")
    masked, attention, rng = _batch()
    out = compute_loss(model, "adversarial", masked, attention, rng, disc_weight=50.0)
    out.loss.backward()
    gen_grad = model.generator.electra.encoder.layer[0].attention.self.query.weight.grad
    assert gen_grad is not None and gen_grad.abs().sum() > 0
    assert {"reinforce_loss", "mean_reward"} <= set(out.extra)
    assert torch.allclose(out.loss, torch.tensor(out.extra["reinforce_loss"]) + 50.0 * out.disc_loss, atol=1e-4)


@pytest.mark.parametrize("objective", ["bert_mlm", "all_tokens_mlm", "adversarial"])
def test_trainer_runs_objective_and_exports(objective: str, corpus_file: Path, cache_dir: Path,
                                            tmp_path: Path) -> None:
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    from electra_detect.training.pretraining.trainer import Trainer

    out = tmp_path / objective
    result = Trainer(micro_config(corpus_file, cache_dir, paper=True, max_steps=6, objective=objective), out,
                     show_progress=False).run()
    assert result.steps == 6
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert all(r["loss"] is not None and r["loss"] == r["loss"] for r in train)
    assert json.loads((out / "summary.json").read_text())["objective"] == objective
    # One source of truth: the trainer's disc_acc and the evaluation's metrics follow the registry's rtd_head.
    has_head = get(objective).rtd_head
    assert has_head == (objective != "bert_mlm")  # all_tokens_mlm's copy gate is its replaced-token head
    val = [r for r in rows if r["split"] == "val"]
    assert val and all((r["val_disc_acc"] is not None) == has_head for r in val)
    assert all((r["disc_acc"] is not None) == has_head for r in train)
    disc = ElectraForPreTraining.from_pretrained(str(out / "discriminator"))
    if objective == "adversarial":
        assert not (out / "mlm").exists()
        return
    mlm = ElectraForMaskedLM.from_pretrained(str(out / "mlm"))
    assert mlm.config.hidden_size == disc.config.hidden_size
    assert torch.equal(mlm.electra.encoder.layer[0].output.dense.weight,
                       disc.electra.encoder.layer[0].output.dense.weight)  # one encoder, two heads


def test_two_stage_freezes_generator_and_copies_encoder(corpus_file: Path, cache_dir: Path, tmp_path: Path) -> None:
    from electra_detect.training.pretraining.trainer import Trainer

    config = micro_config(corpus_file, cache_dir, paper=True, max_steps=8, mlm_first_steps=4, lr=1e-2)
    config.model.preset = "tiny"  # FFN = 4 x width, so a gen_fraction-1 generator has the discriminator's shape
    config.model.gen_fraction = 1.0
    trainer = Trainer(config, tmp_path / "two", show_progress=False)
    snapshots: dict[int, dict[str, torch.Tensor]] = {}

    def snap(t: Trainer, row: dict) -> None:
        if row["step"] in (4, 5):
            model = t._model_for_test
            snapshots[row["step"]] = {
                "gen": {k: v.clone() for k, v in model.generator.electra.encoder.state_dict().items()},
                "disc": {k: v.clone() for k, v in model.discriminator.electra.encoder.state_dict().items()}}

    original = ElectraPretrainingModel.start_second_stage

    def capture(self: ElectraPretrainingModel) -> bool:
        trainer._model_for_test = self
        copied = original(self)
        snapshots["copied"] = {k: v.clone() for k, v in self.discriminator.electra.encoder.state_dict().items()}
        snapshots["gen_at_switch"] = {k: v.clone() for k, v in self.generator.electra.encoder.state_dict().items()}
        assert copied
        return copied

    trainer.callbacks.append(lambda t, row: snap(t, row) if hasattr(t, "_model_for_test") else None)
    ElectraPretrainingModel.start_second_stage = capture
    try:
        trainer.run()
    finally:
        ElectraPretrainingModel.start_second_stage = original
    # At the switch the discriminator encoder became the MLM-trained generator's ...
    assert all(torch.equal(snapshots["copied"][k], snapshots["gen_at_switch"][k]) for k in snapshots["copied"])
    # ... then only the discriminator kept learning; the generator stayed frozen.
    final_gen = snapshots[5]["gen"]
    assert all(torch.equal(final_gen[k], snapshots["gen_at_switch"][k]) for k in final_gen)
    assert any(not torch.equal(snapshots[5]["disc"][k], snapshots["copied"][k]) for k in final_gen)
    rows = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    train = {r["step"]: r for r in rows if r["split"] == "train"}
    assert train[2]["disc_acc"] is None and train[6]["disc_acc"] is not None
    assert train[2]["loss"] == pytest.approx(train[2]["mlm_loss"])


def _cola_file(path: Path, n: int, seed: int) -> Path:
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        good = rng.random() < 0.5
        sentence = synthetic_text(1, rng.randint(0, 10_000)).split(".")[0] + "."
        if not good:  # a crude, learnable unacceptability: the verb is doubled
            words = sentence.split()
            sentence = " ".join([*words[:3], words[2], *words[3:]])
        lines.append(f"src\t{int(good)}\t\t{sentence}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cola_reader_and_finetune(micro_run: Path, tmp_path: Path) -> None:
    from electra_detect.training.finetune.cola import ColaConfig, ColaDataError, finetune_cola, read_cola

    train = read_cola(_cola_file(tmp_path / "train.tsv", 120, 0))
    dev = read_cola(_cola_file(tmp_path / "dev.tsv", 40, 1))
    assert len(train[0]) == 120 and set(train[1]) == {0, 1}
    result = finetune_cola(micro_run / "discriminator", train, dev, ColaConfig(epochs=1, batch_size=16), device="cpu")
    assert -1.0 <= result["mcc"] <= 1.0 and 0.0 <= result["accuracy"] <= 1.0
    assert result["steps"] == 8 and result["train_sentences"] == 120
    (tmp_path / "bad.tsv").write_text("only\ttwo\n")
    with pytest.raises(ColaDataError, match="bad.tsv:1"):
        read_cola(tmp_path / "bad.tsv")


def _load_ablation():
    return importlib.import_module("benchmarks.studies.ablation")


def test_ablation_end_to_end_on_micro_runs(corpus_file: Path, cache_dir: Path, tmp_path: Path) -> None:
    ablation = _load_ablation()
    data = tmp_path / "eval"
    data.mkdir()
    _cola_file(data / "cola_train.tsv", 48, 2)
    _cola_file(data / "cola_dev.tsv", 24, 3)
    pairs = [{"good": "The farmer saw a red house.", "bad": "The farmer saw saw a red house.", "uid": "dup"},
             {"good": "A teacher likes the river.", "bad": "A teacher likes river the.", "uid": "order"}]
    (data / "blimp.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    ged_rows = [{"tokens": "the farmer saw saw a house".split(), "labels": [0, 0, 0, 1, 0, 0]},
                {"tokens": "a teacher likes the river".split(), "labels": [0, 0, 0, 0, 0]}]
    (data / "jfleg_ged.json").write_text(json.dumps({"tune": ged_rows, "report": ged_rows}))
    out = tmp_path / "out"
    args = argparse.Namespace(
        eval_data=str(data), corpus=[str(corpus_file)], variants=["electra", "bert_mlm", "all_tokens_mlm"],
        seeds=[0, 1], budget_steps=6, curve_fractions=[0.5], paper_recipe=False, preset="micro", vocab_size=200,
        seq_len=32, batch_size=8, lr=2e-3, warmup_fraction=0.1, eval_batches=2, cola_epochs=1, blimp_per_set=0,
        threads=1, jobs=1, total_minutes=0.0, check_flops=False, resume=False, cache_dir=str(cache_dir),
        work_dir=str(tmp_path / "work"), keep_runs=False, out_dir=str(out))
    summary = ablation.run(args)
    assert not [r for r in summary["rows"] if "error" in r], summary["rows"]
    agg = summary["aggregate"]
    assert set(agg) == {"electra", "bert_mlm", "all_tokens_mlm"}
    assert agg["electra"]["score"] == "rtd" and agg["bert_mlm"]["score"] == "pll"
    assert agg["all_tokens_mlm"]["score"] == "one_pass"
    for entry in agg.values():
        assert entry["runs"] == 2 and 0.0 <= entry["blimp_acc"] <= 1.0 and entry["cola_mcc_std"] >= 0.0
        assert entry["steps"] >= 2
    # Equal FLOPs: BERT (no generator) gets more updates than ELECTRA, All-Tokens MLM (vocabulary at every
    # token) fewer, and every full-budget run spends the budget to within one update.
    assert agg["bert_mlm"]["steps"] > agg["electra"]["steps"] > agg["all_tokens_mlm"]["steps"]
    budget = summary["plan"]["budget_flops"]
    for row in summary["rows"]:
        per_step = summary["plan"]["flops_per_step"][row["variant"]]["step"]
        assert abs(row["train_flops"] - budget * row["fraction"]) <= per_step / 2 + 1
    assert {r["key"] for r in summary["rows"] if r["fraction"] == 0.5} == {"electra/seed0/x0.5", "bert_mlm/seed0/x0.5"}
    assert not summary["pending"]
    for name in ("result.json", "table.md", "plot.png", "compute.png"):
        assert (out / name).stat().st_size > 0
    text = (out / "table.md").read_text()
    assert "| ELECTRA | 85.0 |" in text and "| ELECTRA > BERT (MLM) | cola_mcc |" in text
    assert "Replace MLM > " not in text  # only claims between variants that ran
    # --resume keeps the finished runs and trains nothing new
    args.resume = True
    again = ablation.run(args)
    assert len(again["rows"]) == len(summary["rows"]) and not again["pending"]
    assert not list((tmp_path / "work").glob("*-seed*"))  # runs removed unless --keep-runs


def test_analytic_flops_match_torch_counter(corpus_file: Path, cache_dir: Path, tmp_path: Path) -> None:
    """The ablation's FLOPs count, less the attention scores torch's counter cannot see inside CPU sdpa,
    agrees with FlopCounterMode over real training updates."""
    ablation = _load_ablation()
    args = argparse.Namespace(corpus=[str(corpus_file)], paper_recipe=False, preset="micro", vocab_size=200,
                              seq_len=32, batch_size=8, lr=2e-3, warmup_fraction=0.1, eval_batches=2, threads=1,
                              cache_dir=str(cache_dir))
    for variant in ("electra", "bert_mlm"):
        config = ablation.build_config(args, variant, 0)
        counted = ablation.counted_flops_per_step(config, tmp_path)
        from electra_detect.training.pretraining.data import prepare_corpus, resolve_corpus

        corpus = prepare_corpus(resolve_corpus(args.corpus), cache_dir, 200, True, "blank", 32)
        vocab = len((corpus.tokenizer_dir / "vocab.txt").read_text().splitlines())
        analytic = ablation.flops_per_step(args, variant, vocab, attention=False)["step"]
        assert counted == pytest.approx(analytic, rel=0.05), variant


@pytest.mark.parametrize("paper", [True, False], ids=["electra", "modernbert"])
def test_mlm_token_log_probs_pll_matches_manual(tmp_path: Path, corpus_file: Path, cache_dir: Path,
                                                paper: bool) -> None:
    """bert_mlm PLL: one [MASK] per subword, read at that position, for both encoder families."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from electra_detect.training.pretraining.trainer import Trainer

    ablation = _load_ablation()
    run = tmp_path / "bert"
    Trainer(micro_config(corpus_file, cache_dir, paper=paper, max_steps=3, objective="bert_mlm"), run,
            show_progress=False).run()
    (offsets, log_probs), = ablation.mlm_token_log_probs(run, "bert_mlm", ["the farmer saw a house"], "cpu")
    tokenizer = AutoTokenizer.from_pretrained(str(run / "mlm"))
    model = AutoModelForMaskedLM.from_pretrained(str(run / "mlm")).eval()
    ids = tokenizer("the farmer saw a house")["input_ids"]
    masked = list(ids)
    masked[2] = tokenizer.mask_token_id
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([masked])).logits[0, 2].log_softmax(-1)[ids[2]].item()
    assert len(log_probs) == len(ids) - 2 == len(offsets)
    assert log_probs[1] == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("paper", [True, False], ids=["electra", "modernbert"])
def test_mlm_token_log_probs_one_pass_uses_copy_gate(tmp_path: Path, corpus_file: Path, cache_dir: Path,
                                                     paper: bool) -> None:
    """all_tokens_mlm, one unmasked pass: log(D + (1 - D) q) with D = sigmoid(-r) from the RTD head, for both
    encoder families (a ModernBERT run's mlm/ must not be read as an ELECTRA model)."""
    from transformers import AutoModelForMaskedLM, AutoModelForTokenClassification, AutoTokenizer, ElectraForPreTraining

    from electra_detect.training.pretraining.trainer import Trainer

    ablation = _load_ablation()
    run = tmp_path / "all"
    Trainer(micro_config(corpus_file, cache_dir, paper=paper, max_steps=3, objective="all_tokens_mlm"), run,
            show_progress=False).run()
    (_offsets, log_probs), = ablation.mlm_token_log_probs(run, "all_tokens_mlm", ["a doctor opened the river"], "cpu")
    tokenizer = AutoTokenizer.from_pretrained(str(run / "mlm"))
    ids = torch.tensor([tokenizer("a doctor opened the river")["input_ids"]])
    with torch.no_grad():
        q = AutoModelForMaskedLM.from_pretrained(str(run / "mlm")).eval()(input_ids=ids).logits[0].softmax(-1)
        head = ElectraForPreTraining if paper else AutoModelForTokenClassification
        r = head.from_pretrained(str(run / "discriminator")).eval()(input_ids=ids).logits[0].reshape(-1)
    d = torch.sigmoid(-r)
    expected = torch.log(d + (1 - d) * q[torch.arange(ids.shape[1]), ids[0]])[1:-1]
    assert log_probs == pytest.approx(expected.numpy(), abs=1e-4)
    assert (log_probs > torch.log(q[torch.arange(ids.shape[1]), ids[0]])[1:-1].numpy()).all()  # copying adds mass


def test_two_stage_resume_past_the_switch_keeps_the_trained_discriminator(
        corpus_file: Path, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume after step ``mlm_first_steps`` must not copy the generator over the stage-two discriminator."""
    from electra_detect.training.pretraining.trainer import Trainer

    config = micro_config(corpus_file, cache_dir, max_steps=6, mlm_first_steps=2, lr=1e-2)
    config.model.preset, config.model.gen_fraction = "tiny", 1.0
    out = tmp_path / "resume"
    first = Trainer(config, out, show_progress=False)
    first.callbacks.append(lambda t, row: t.request_stop("test") if row["step"] >= 4 else None)
    assert first.run().steps == 4
    calls: list[int] = []
    original = ElectraPretrainingModel.start_second_stage
    monkeypatch.setattr(ElectraPretrainingModel, "start_second_stage",
                        lambda self: calls.append(1) or original(self))
    assert Trainer(config, out, resume=True, show_progress=False).run().steps == 6
    assert calls == [], "the resume re-ran the stage switch and overwrote the trained discriminator"
