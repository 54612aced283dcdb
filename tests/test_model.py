"""The ELECTRA loss, generator sizing, shared embeddings, and save/load of both halves.

Most tests pin the paper's model (post-LN ELECTRA, tied embeddings); the default recipe's
ModernBERT pair with gradient-disentangled sharing has its own tests at the end."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from electra_detect.training.optim import build_optimizer, warmup_linear_decay
from electra_detect.training.pretraining.checkpoint import load_checkpoint, save_checkpoint
from electra_detect.training.pretraining.config import PAPER_MODEL, ConfigError, ModelConfig
from electra_detect.training.pretraining.masking import mask_tokens
from electra_detect.training.pretraining.model import ElectraPretrainingModel, token_table
from electra_detect.training.pretraining.objectives import compute_loss, electra_loss

SPECIALS = [0, 1, 2, 3, 4]


def micro_model(**overrides: object) -> ElectraPretrainingModel:
    torch.manual_seed(0)
    settings = {**PAPER_MODEL, **overrides}
    return ElectraPretrainingModel.from_config(ModelConfig(preset="micro", vocab_size=120, **settings), 120)


def sample_batch(rows: int = 4, length: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(5, 120, (rows, length), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 2, 3
    return ids, torch.ones_like(ids)


def test_loss_equals_the_formula_on_hand_made_logits() -> None:
    mlm_logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
    mlm_targets = torch.tensor([0, 1])
    disc_logits = torch.tensor([[1.5, -2.0, 0.0, 9.9]])
    disc_labels = torch.tensor([[1, 0, 1, 1]])
    attention = torch.tensor([[1, 1, 1, 0]])  # last position is padding: excluded

    def log_softmax(row: list[float], k: int) -> float:
        return row[k] - math.log(sum(math.exp(v) for v in row))

    mlm = -(log_softmax([2.0, 0.0, -1.0], 0) + log_softmax([0.5, 0.5, 3.0], 1)) / 2

    def bce(z: float, y: int) -> float:
        p = 1 / (1 + math.exp(-z))
        return -(y * math.log(p) + (1 - y) * math.log(1 - p))

    disc = (bce(1.5, 1) + bce(-2.0, 0) + bce(0.0, 1)) / 3
    total, got_mlm, got_disc = electra_loss(mlm_logits, mlm_targets, disc_logits, disc_labels, attention, 50.0)
    assert got_mlm.item() == pytest.approx(mlm, rel=1e-6)
    assert got_disc.item() == pytest.approx(disc, rel=1e-6)
    assert total.item() == pytest.approx(mlm + 50 * disc, rel=1e-6)


def test_generator_is_a_fraction_of_the_discriminator() -> None:
    config = ModelConfig(preset="small", **PAPER_MODEL)
    gen, disc = config.generator_config(), config.discriminator_config()
    shape = (disc.hidden_size, disc.num_hidden_layers, disc.num_attention_heads, disc.embedding_size)
    assert shape == (256, 12, 4, 128)
    assert gen.hidden_size == 64 and gen.num_hidden_layers == 12 and gen.intermediate_size == 256
    assert gen.embedding_size == disc.embedding_size
    with pytest.raises(ConfigError, match="tie_all"):
        ModelConfig(tie_all=True, gen_fraction=0.5).validate()
    with pytest.raises(ConfigError, match="shares its token table only at the discriminator's width"):
        ModelConfig(gen_fraction=0.5).validate()  # modernbert has no embedding projection


def test_embeddings_are_one_tensor_and_stay_shared_through_training() -> None:
    model = micro_model()
    assert model.shares_embeddings()
    disc_emb = model.discriminator.electra.embeddings.word_embeddings.weight
    optimizer = build_optimizer(model, 1e-3, 0.01)
    ids, attention = sample_batch()
    rng = torch.Generator().manual_seed(0)
    batch = mask_tokens(ids, attention, mask_id=4, special_ids=SPECIALS, mask_prob=0.15, generator=rng)
    before = disc_emb.detach().clone()
    compute_loss(model, "electra", batch, attention, rng, 50.0).loss.backward()
    optimizer.step()
    assert model.shares_embeddings()
    assert not torch.equal(before, disc_emb.detach())
    # Each shared parameter appears once in the optimizer.
    params = [p for group in optimizer.param_groups for p in group["params"]]
    assert len({id(p) for p in params}) == len(params)


def test_generator_logits_only_at_masked_positions_and_no_gradient_through_sampling() -> None:
    model = micro_model()
    ids, attention = sample_batch()
    rng = torch.Generator().manual_seed(1)
    batch = mask_tokens(ids, attention, mask_id=4, special_ids=SPECIALS, mask_prob=0.15, generator=rng)
    out = compute_loss(model, "electra", batch, attention, rng, 50.0)
    assert out.mlm_logits.shape == (int(batch.masked.sum()), 120)
    out.disc_loss.backward()
    # The discriminator's loss reaches the shared embeddings but nothing generator-only.
    assert model.generator.generator_predictions.dense.weight.grad is None
    assert model.generator.electra.encoder.layer[0].attention.self.query.weight.grad is None
    assert model.discriminator.discriminator_predictions.dense.weight.grad is not None


def test_tie_all_shares_the_whole_encoder() -> None:
    model = micro_model(gen_fraction=1.0, tie_all=True)
    assert model.generator.electra is model.discriminator.electra


def test_sharing_survives_checkpoint_round_trip(tmp_path: Path) -> None:
    model = micro_model()
    optimizer = build_optimizer(model, 1e-3, 0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(2, 10))
    fingerprint = {"model": "micro"}
    save_checkpoint(tmp_path, 1, model, optimizer, scheduler, {"torch.0": torch.get_rng_state()}, {"step": 1},
                    fingerprint, keep_last=2)
    restored = micro_model()
    with torch.no_grad():
        restored.discriminator.electra.embeddings.word_embeddings.weight.zero_()
    opt2 = build_optimizer(restored, 1e-3, 0.01)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, warmup_linear_decay(2, 10))
    load_checkpoint(tmp_path / "step_00000001", restored, opt2, sched2, fingerprint)
    assert restored.shares_embeddings()
    assert torch.equal(restored.generator.electra.embeddings.word_embeddings.weight,
                       model.discriminator.electra.embeddings.word_embeddings.weight)


def test_sharing_survives_hf_save_and_load(tmp_path: Path) -> None:
    model = micro_model()
    model.discriminator.save_pretrained(tmp_path / "discriminator")
    model.generator.save_pretrained(tmp_path / "generator")
    disc = ElectraForPreTraining.from_pretrained(tmp_path / "discriminator")
    gen = ElectraForMaskedLM.from_pretrained(tmp_path / "generator")
    assert torch.equal(gen.electra.embeddings.word_embeddings.weight, disc.electra.embeddings.word_embeddings.weight)
    assert torch.equal(gen.generator_lm_head.weight, gen.electra.embeddings.word_embeddings.weight)
    reloaded = ElectraPretrainingModel.from_pretrained_dirs(tmp_path / "generator", tmp_path / "discriminator")
    assert reloaded.shares_embeddings()


def test_default_recipe_is_a_pre_ln_pair_with_a_half_depth_generator_and_local_layers() -> None:
    config = ModelConfig(preset="tiny")
    disc, gen = config.discriminator_config(200), config.generator_config(200)
    assert disc.model_type == gen.model_type == "modernbert"
    assert (disc.hidden_size, disc.num_hidden_layers) == (128, 4)
    assert (gen.hidden_size, gen.num_hidden_layers, gen.num_attention_heads) == (128, 2, 2)
    assert disc.num_labels == 1 and disc.pad_token_id == 0 and disc.cls_token_id == 2 and disc.sep_token_id == 3
    assert (disc.local_attention, disc.global_attn_every_n_layers) == (32, 2)
    model = ElectraPretrainingModel.from_config(config, 200)
    assert model.sharing == "tied" and model.shares_embeddings()  # one table, as the paper; GDES by flag
    windows = [layer.attn.local_attention for layer in model.discriminator.model.layers]
    assert windows == [(-1, -1), (16, 16), (-1, -1), (16, 16)]  # global, local, global, local


def test_gdes_keeps_the_discriminator_loss_off_the_generator_table(tmp_path: Path) -> None:
    from electra_detect.engines.torch_engine import load_discriminator
    from electra_detect.training.pretraining.model import token_table

    torch.manual_seed(0)
    config = ModelConfig(preset="micro", vocab_size=120, embedding_sharing="gdes")
    model = ElectraPretrainingModel.from_config(config, 120)
    assert model.sharing == "gdes" and not model.shares_embeddings()
    assert torch.count_nonzero(token_table(model.discriminator).weight) == 0  # the residual starts at zero
    ids, attention = sample_batch()
    rng = torch.Generator().manual_seed(1)
    batch = mask_tokens(ids, attention, mask_id=4, special_ids=SPECIALS, mask_prob=0.15, generator=rng)
    out = compute_loss(model, "electra", batch, attention, rng, 50.0)
    out.disc_loss.backward(retain_graph=True)
    assert token_table(model.generator).weight.grad is None  # stop-gradient: only the residual learns
    assert token_table(model.discriminator).weight.grad.abs().sum() > 0
    out.mlm_loss.backward()
    assert token_table(model.generator).weight.grad.abs().sum() > 0
    # The exported discriminator holds E_gen + E_delta and scores exactly as inside the pair.
    with torch.no_grad():
        token_table(model.discriminator).weight.add_(0.01)
    exported = model.exportable_modules()["discriminator"]
    exported.save_pretrained(tmp_path / "discriminator")
    loaded = load_discriminator(tmp_path / "discriminator").eval()
    assert type(loaded).__name__ == "ModernBertForTokenClassification"  # a stock class, no remote code
    model.eval()
    with torch.no_grad():
        inside = model.discriminator_logits(ids, attention)
        outside = loaded(input_ids=ids, attention_mask=attention).logits[..., 0]
    assert torch.allclose(inside, outside, atol=1e-5)
    assert torch.count_nonzero(token_table(model.discriminator).weight - 0.01) == 0  # the pair itself is untouched


@pytest.mark.parametrize("sharing", ["tied", "gdes", "none"])
def test_exported_weights_load_back_exactly(tmp_path: Path, sharing: str) -> None:
    config = ModelConfig(preset="micro", vocab_size=120, embedding_sharing=sharing)
    torch.manual_seed(0)
    trained = ElectraPretrainingModel.from_config(config, 120)
    with torch.no_grad():  # GDES starts its residual at zero; give it one so the subtraction is tested
        token_table(trained.discriminator).weight.normal_()
    for name, module in trained.exportable_modules().items():
        module.save_pretrained(str(tmp_path / name))
    torch.manual_seed(1)
    fresh = ElectraPretrainingModel.from_config(config, 120)
    fresh.load_exported_weights(tmp_path)
    assert fresh.shares_embeddings() == trained.shares_embeddings()
    for name in ("generator", "discriminator"):
        for (key, a), b in zip(getattr(trained, name).state_dict().items(),
                               getattr(fresh, name).state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, msg=f"{name}.{key}")
