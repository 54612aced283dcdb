"""benchmarks/studies/compute_curve.py without models: compute summed over a chain of run dirs, paired bootstraps from
the per-sentence counts a point's file keeps, re-runs that skip what is measured, and the report."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from electra_detect.tasks.ged.metrics import flatten, token_metrics
from electra_detect.tasks.ged.readers import GedSentence
from electra_detect.training.pretraining.config import RunConfig

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    """A benchmark module by its own name."""
    return importlib.import_module(f"benchmarks.studies.{name}")


def _config(objective: str, init_from: str = "", tokenizer: str = "") -> RunConfig:
    config = RunConfig()
    config.model.preset, config.model.vocab_size = "micro", 200
    config.data.seq_len, config.data.tokenizer = 32, tokenizer
    config.train.batch_size, config.train.objective, config.train.init_from = 4, objective, init_from
    return config


def _run_dir(path: Path, config: RunConfig, steps: int) -> Path:
    """What pretraining() reads of a finished run: run_config.json, summary.json, discriminator/config.json."""
    (path / "discriminator").mkdir(parents=True)
    (path / "run_config.json").write_text(json.dumps(config.to_dict()))
    (path / "summary.json").write_text(json.dumps({"steps": steps, "tokens_seen": steps * 4 * 32, "minutes": 0.5}))
    (path / "discriminator" / "config.json").write_text(json.dumps({"vocab_size": 200}))
    return path


def test_compute_is_summed_over_the_chain(tmp_path: Path) -> None:
    warmstart, ablation = _load("warmstart"), _load("ablation")
    encoder = tmp_path / "encoder"  # a published encoder: a folder without run_config.json
    encoder.mkdir()
    first = _run_dir(tmp_path / "electra-500", _config("electra", str(encoder), str(encoder)), 10)
    second = _run_dir(tmp_path / "electra-1000", _config("electra", str(first), str(first / "discriminator")), 20)
    mlm = _run_dir(tmp_path / "mlm-649", _config("bert_mlm", str(encoder), str(encoder)), 13)
    per_step = {o: ablation.train_flops_per_step(_config(o).model, o, "", 200, 4 * 32, 32, 0.15)
                for o in ("electra", "bert_mlm")}

    compute = warmstart.pretraining(str(second))
    assert compute["steps"] == 30 and compute["pretrain_tokens"] == 30 * 128 and compute["minutes"] == 1.0
    assert compute["flops"] == pytest.approx(30 * per_step["electra"])
    assert [link["run"] for link in compute["chain"]] == [str(first.resolve()), str(second.resolve())]
    assert compute["start"] == str(encoder) and compute["objective"] == "electra"
    assert {k: compute["chain"][0][k] for k in ("mask_prob", "gen_layers", "corpus")} == {
        "mask_prob": 0.15, "gen_layers": 0, "corpus": []}  # the recipe a lever changes
    assert warmstart.corpus_name("/work/x/runs/corpus/sotu") == "runs/corpus/sotu"
    assert warmstart.pretraining(str(first))["flops"] == pytest.approx(10 * per_step["electra"])
    assert warmstart.pretraining(str(mlm))["flops"] == pytest.approx(13 * per_step["bert_mlm"])
    assert warmstart.pretraining("minilm")["flops"] == 0.0
    shutil.rmtree(encoder)  # a published encoder that is not here only ends the chain
    assert warmstart.pretraining(str(second))["steps"] == 30
    shutil.rmtree(first)  # a run dir that is not here: its compute cannot be counted, so no number at all
    with pytest.raises(SystemExit, match="not here"):
        warmstart.pretraining(str(second))


def _sentences(n: int, seed: int) -> list[GedSentence]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(4, 12))
        out.append(GedSentence([f"w{i}" for i in range(length)], (rng.random(length) < 0.2).astype(int).tolist()))
    return out


def _scores(sentences: list[GedSentence], skill: float, seed: int) -> list[np.ndarray]:
    """Scores that rank errors above correct tokens more often the higher ``skill`` is."""
    rng = np.random.default_rng(seed)
    return [skill * np.array(s.labels) + rng.random(len(s.labels)) for s in sentences]


def _point(name: str, objective: str | None, pflops: float, ged: dict[str, dict]) -> dict:
    compute = {"kind": "run" if objective else "encoder", "objective": objective, "flops": pflops * 1e15,
               "pflops": pflops, "steps": int(pflops * 5), "pretrain_tokens": int(pflops * 1e4), "minutes": 1.0,
               "chain": []}
    return {"name": name, "source": f"runs/curve/{name}", "compute": compute,
            "ged": {"recipe": {"sentences": 10}, "seeds": ged}}


def _ged(cc, sentences: list[GedSentence], per_seed: list[list[np.ndarray]], threshold: float = 0.5) -> dict:
    return {str(seed): {"FCE dev": {"counts": cc.sentence_counts(sentences, scores, threshold),
                                    "report_fingerprint": cc.fingerprint(sentences)}}
            for seed, scores in enumerate(per_seed)}


def test_paired_bootstrap_from_stored_counts() -> None:
    cc = _load("compute_curve")
    report = _sentences(300, 0)
    good = [_scores(report, 0.9, seed) for seed in (1, 2)]
    weak = [_scores(report, 0.2, seed) for seed in (3, 4)]
    f05 = lambda scores: token_metrics(*flatten(report, scores), 0.5)["f05"]  # noqa: E731
    a = _point("electra-500", "electra", 100.0, _ged(cc, report, good))
    b = _point("mlm-649", "bert_mlm", 100.0, _ged(cc, report, weak))
    # the counts reproduce F0.5 exactly; the difference is of seed means, its interval holds it and excludes 0
    d = cc.difference(a, b, "FCE dev")
    assert d["diff_f05"] == pytest.approx(np.mean([f05(s) for s in good]) - np.mean([f05(s) for s in weak]))
    assert 0 < d["ci95"][0] < d["diff_f05"] < d["ci95"][1] and d["resolved"] and d["seeds"] == [2, 2]
    assert cc.difference(b, a, "FCE dev")["ci95"] == pytest.approx([-d["ci95"][1], -d["ci95"][0]])
    same = cc.difference(a, a, "FCE dev")
    assert same["diff_f05"] == 0 and same["ci95"] == [0, 0] and not same["resolved"]
    # paired: two models that differ on one sentence differ by little in every resample
    near = [list(s) for s in good]
    for scores in near:
        scores[0] = np.zeros_like(scores[0])
    close = cc.difference(a, _point("near", "electra", 100.0, _ged(cc, report, near)), "FCE dev")
    assert close["ci95"][1] - close["ci95"][0] < 0.02
    # another report half (another split or --max-sentences) does not pair up
    other = _point("other", "bert_mlm", 1.0, _ged(cc, report[:-1], weak := [s[:-1] for s in weak]))
    assert "note" in cc.difference(a, other, "FCE dev") and weak
    summary = cc.f05_summary(cc.ged_counts(a, "FCE dev")[0])
    assert summary["f05"] == pytest.approx(np.mean([f05(s) for s in good])) and summary["seeds"] == 2
    assert summary["ci95"][0] < summary["f05"] < summary["ci95"][1]


def test_zero_shot_ap_difference_is_paired_over_sentences(tmp_path: Path, monkeypatch) -> None:
    from sklearn.metrics import average_precision_score

    cc = _load("compute_curve")
    sentences = _sentences(200, 5)
    good, weak = _scores(sentences, 0.6, 1), _scores(sentences, 0.2, 2)
    d = cc.ap_difference(sentences, good, weak)
    ap = lambda scores: average_precision_score(*flatten(sentences, scores))  # noqa: E731
    assert d["ap"] == pytest.approx([ap(good), ap(weak)]) and d["diff_ap"] == pytest.approx(ap(good) - ap(weak))
    assert 0 < d["ci95"][0] < d["diff_ap"] < d["ci95"][1] and d["resolved"]
    same = cc.ap_difference(sentences, good, good)
    assert same["diff_ap"] == 0 and same["ci95"] == [0, 0] and not same["resolved"]
    # paired: one sentence's scores changed moves every resample by little, far less than one model's own interval
    near = [np.zeros_like(good[0]), *good[1:]]
    close, alone = cc.ap_difference(sentences, good, near)["ci95"], cc.ap_intervals(sentences, good)["ap_all_ci95"]
    assert close[1] - close[0] < (alone[1] - alone[0]) / 2
    # the CLI scores both discriminators on each set, keeps the pair across runs and the report shows it
    scores = {"a": good, "b": weak}
    monkeypatch.setattr(cc, "eval_sets", lambda args: {"FCE dev": {"all": sentences}})
    monkeypatch.setattr(cc, "zero_shot", lambda source, split: ({}, {"all": scores[source]}))
    cc.save_point(cc.point_file(tmp_path, "p"), _point("p", "electra", 1.0, {}))
    assert cc.main(["--zero-shot-pair", "A=a", "B=b", "--out-dir", str(tmp_path)]) == 0
    pairs = json.loads((tmp_path / "zero_shot_pairs.json").read_text())
    assert pairs["A − B"]["sets"]["FCE dev"]["diff_ap"] == pytest.approx(d["diff_ap"])
    assert json.loads((tmp_path / "result.json").read_text())["zero_shot_pairs"] == pairs
    table = (tmp_path / "table.md").read_text()
    assert "## Zero-shot AP, paired" in table and f"| A − B | {ap(good):.3f} vs {ap(weak):.3f} | " in table


def test_report_pairs_each_electra_point_with_the_nearest_masked_lm(tmp_path: Path) -> None:
    cc = _load("compute_curve")
    report = _sentences(120, 5)
    points = [_point("electra-500", "electra", 100.0, _ged(cc, report, [_scores(report, 0.8, 1)])),
              _point("electra-1000", "electra", 200.0, _ged(cc, report, [_scores(report, 0.9, 2)])),
              _point("mlm-649", "bert_mlm", 101.0, _ged(cc, report, [_scores(report, 0.5, 3)])),
              _point("mlm-1298", "bert_mlm", 202.0, _ged(cc, report, [_scores(report, 0.6, 4)])),
              _point("base", None, 0.0, _ged(cc, report, [_scores(report, 0.3, 5)]))]
    points[0]["zero-shot"] = {"FCE dev": {"ap_all": 0.3, "ap_all_ci95": [0.25, 0.35], "ap_over_rate": 3.0,
                                          "ap_over_rate_ci95": [2.5, 3.5], "error_rate_all": 0.1, "f05": 0.2}}
    points[2]["zero-shot"] = {"n/a": cc.NO_HEAD}
    for point in points:
        cc.save_point(cc.point_file(tmp_path, point["name"]), point)
    text = cc.point_file(tmp_path, "base").read_text()
    assert json.loads(text) == points[-1] and '"tp": [' in text  # counts stay one line each
    assert cc.main(["--report", "--out-dir", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert [r["name"] for r in result["rows"]] == ["mlm-649", "mlm-1298", "electra-500", "electra-1000", "base"]
    assert [(v["electra"], v["masked_lm"]) for v in result["electra_vs_masked_lm"]] == [
        ("electra-500", "mlm-649"), ("electra-1000", "mlm-1298")]
    assert result["baseline"] == "electra-500" and len(result["against_baseline"]) == 4
    table = (tmp_path / "table.md").read_text()
    assert "n/a: no replaced-token head" in table and "| electra-1000 | 200.0 | mlm-1298 | 202.0 |" in table
    assert (tmp_path / "plot.png").stat().st_size > 1000


def test_rerun_skips_what_the_point_holds(tmp_path: Path) -> None:
    cc = _load("compute_curve")
    report = _sentences(40, 7)
    point = _point("electra-500", "electra", 100.0, _ged(cc, report, [_scores(report, 0.8, 1)]))
    point["corruption"] = {"corruption_auc": 0.8}
    recipe = {"sentences": 4000, "text": "prose", "mix": "realistic", "types": True, "epochs": 1,
              "neighbours_from": "models/electra-minilm/discriminator"}
    point["ged"]["recipe"] = recipe
    cc.save_point(cc.point_file(tmp_path, "electra-500"), point)
    # the run dir is gone (a new session): nothing is measured again, so nothing reads it
    args = ["--point", f"electra-500={tmp_path / 'gone'}", "--measure", "corruption,ged", "--ged-seeds", "0",
            "--out-dir", str(tmp_path), "--work-dir", str(tmp_path / "work")]
    assert cc.main(args) == 0
    assert json.loads(cc.point_file(tmp_path, "electra-500").read_text())["compute"] == point["compute"]
    with pytest.raises(SystemExit, match="another recipe"):
        cc.main([*args, "--ged-sentences", "100"])


def _chained(point: dict, *links: dict) -> dict:
    """``point`` pre-trained by ``links`` (steps, seed and any changed setting; the rest the default recipe's)."""
    defaults = {"lr": 3e-4, "batch_size": 32, "seq_len": 64, "warmup_steps": 25, "objective": "electra",
                "init_from": "minilm", "run": f"runs/curve/{point['name']}"}
    point["compute"]["chain"] = [{**defaults, **link} for link in links]
    return point


def test_report_sorts_points_into_curve_seed_repeats_and_levers(tmp_path: Path) -> None:
    cc = _load("compute_curve")
    report = _sentences(120, 9)
    ged = lambda skill, seed: _ged(cc, report, [_scores(report, skill, seed)])  # noqa: E731
    mlm = {"objective": "bert_mlm", "warmup_steps": 33}
    points = [  # electra-500 is the baseline and was measured before links recorded mask_prob and the rest
        _chained(_point("electra-500", "electra", 100.0, ged(0.8, 1)), {"steps": 500, "seed": 0, "warmup_steps": 50}),
        _chained(_point("electra-2000", "electra", 400.0, ged(0.8, 9)),
                 {"steps": 2000, "seed": 0, "warmup_steps": 200}),
        _chained(_point("electra-250", "electra", 50.0, ged(0.7, 2)), {"steps": 250, "seed": 0, "mask_prob": 0.15,
                                                                       "gen_layers": 2, "corpus": ["runs/corpus"]}),
        _chained(_point("electra-250-s1", "electra", 50.0, ged(0.6, 3)), {"steps": 250, "seed": 1}),
        _chained(_point("lever-gen3", "electra", 60.0, ged(0.9, 4)), {"steps": 250, "seed": 0, "gen_layers": 3}),
        _chained(_point("lever-prose", "electra", 50.0, ged(0.9, 5)),
                 {"steps": 250, "seed": 0, "corpus": ["runs/corpus", "a.txt", "a.txt"]}),
        _chained(_point("lever-gen3-s1", "electra", 60.0, ged(0.9, 10)), {"steps": 250, "seed": 1, "gen_layers": 3}),
        _chained(_point("lever-gen3-s2", "electra", 60.0, ged(0.9, 11)), {"steps": 250, "seed": 2, "gen_layers": 3}),
        _chained(_point("electra-gpu", "electra", 900.0, ged(0.9, 12)),
                 {"steps": 6250, "seed": 0, "batch_size": 256, "warmup_steps": 625}),
        _chained(_point("mlm-325", "bert_mlm", 50.5, ged(0.5, 6)), {"steps": 325, "seed": 0, **mlm}),
        _chained(_point("mlm-325-s1", "bert_mlm", 50.5, ged(0.5, 7)), {"steps": 325, "seed": 1, **mlm}),
        _chained(_point("mlm-649", "bert_mlm", 101.0, ged(0.5, 8)),
                 {"steps": 649, "seed": 0, **mlm, "warmup_steps": 65})]
    for point in points:
        cc.save_point(cc.point_file(tmp_path, point["name"]), point)
    assert cc.main(["--report", "--out-dir", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    role = {r["name"]: (r["role"], r.get("of"), r.get("changed")) for r in result["rows"]}
    assert role == {"electra-500": ("curve", None, None), "electra-250": ("curve", None, None),
                    "electra-2000": ("curve", None, None),
                    "electra-250-s1": ("seed", "electra-250", None),
                    "lever-gen3": ("lever", "electra-250", {"gen_layers": 3}),
                    "lever-prose": ("lever", "electra-250", {"corpus": ["runs/corpus", "a.txt", "a.txt"]}),
                    # a lever's seed repeat meets the default of its own seeds; with none measured, the curve point
                    "lever-gen3-s1": ("lever", "electra-250-s1", {"gen_layers": 3}),
                    "lever-gen3-s2": ("lever", "electra-250", {"gen_layers": 3}),
                    # no default point of its length: the baseline
                    "electra-gpu": ("lever", "electra-500", {"batch_size": 256}),
                    "mlm-325": ("curve", None, None), "mlm-325-s1": ("seed", "mlm-325", None),
                    "mlm-649": ("curve", None, None)}
    # each ELECTRA point of the default recipe meets the masked LM of its compute and seeds (none beyond 1.5x its
    # compute); levers meet none
    assert sorted((v["electra"], str(v["masked_lm"])) for v in result["electra_vs_masked_lm"]) == [
        ("electra-2000", "None"), ("electra-250", "mlm-325"), ("electra-250-s1", "mlm-325-s1"),
        ("electra-500", "mlm-649")]
    assert sorted(a["point"] for a in result["against_baseline"]) == ["electra-2000", "electra-250", "mlm-325",
                                                                       "mlm-649"]
    assert sorted((s["point"], s["of"]) for s in result["pretraining_seeds"]) == [
        ("electra-250-s1", "electra-250"), ("mlm-325-s1", "mlm-325")]
    assert sorted(lever["point"] for lever in result["levers"]) == ["electra-gpu", "lever-gen3", "lever-gen3-s1",
                                                                     "lever-gen3-s2", "lever-prose"]
    table = (tmp_path / "table.md").read_text()
    assert "## Recipe levers" in table and "corpus runs/corpus + 2× a.txt" in table
    assert "| electra-250-s1 | electra | seed of electra-250 |" in table
    # the table names the command that regenerates this folder
    assert f"python -m benchmarks.studies.compute_curve --report --out-dir {tmp_path}" in table


def test_the_plan_reproduces_every_measured_point_chain():
    """compute_curve.toml is the record of how each committed point was pre-trained: its commands, parsed by the
    real `pretrain` parser, give the steps, seeds and recipe each point's file recorded of its chain."""
    curve = _load("compute_curve")
    from electra_detect.cli import build_parser

    plan, checked = curve.load_plan(), 0
    for point in curve.load_points(BENCH / "results" / "compute_curve"):
        assert point["name"] in plan["points"], f"{point['name']} is measured but not in the plan"
        links = point["compute"].get("chain", [])
        assert [Path(link["run"]).name for link in links] == curve.chain_of(plan, point["name"])
        for recorded, name in zip(links, curve.chain_of(plan, point["name"]), strict=True):
            args = build_parser().parse_args(curve.pretrain_command(plan, name, Path("runs/curve"))[3:])
            recorded = {**curve.LINK_DEFAULTS, **recorded}
            ran = {"steps": args.max_steps, "warmup_steps": args.warmup_steps, "seed": args.seed, "lr": args.lr,
                   "batch_size": args.batch_size, "seq_len": args.seq_len, "objective": args.objective or "electra",
                   "mask_prob": args.mask_prob or 0.15, "gen_layers": args.gen_layers or 2, "corpus": args.corpus}
            assert ran == {key: recorded[key] for key in ran}, name
            checked += 1
    assert checked >= 8


def test_train_point_runs_the_missing_links_and_resumes_a_cut_one(tmp_path, monkeypatch):
    curve = _load("compute_curve")
    plan = curve.load_plan()
    ran: list[list[str]] = []
    monkeypatch.setattr(curve.subprocess, "run", lambda command, check: ran.append(command))
    assert curve.train_point(plan, "minilm", tmp_path) == "minilm" and not ran  # the encoder: nothing to train

    assert curve.train_point(plan, "electra-2000", tmp_path, threads=1) == str(tmp_path / "electra-2000")
    assert [command[command.index("--out") + 1] for command in ran] == [str(tmp_path / "electra-250"),
                                                                        str(tmp_path / "electra-2000")]
    assert ran[1][ran[1].index("--init-from") + 1] == str(tmp_path / "electra-250")
    assert ran[0][ran[0].index("--init-from") + 1] == "minilm" and "--resume" not in ran[0]

    ran.clear()
    (tmp_path / "electra-250").mkdir()
    (tmp_path / "electra-250" / "summary.json").write_text('{"steps": 250}')  # finished: skipped
    (tmp_path / "electra-2000").mkdir()
    (tmp_path / "electra-2000" / "run_config.json").write_text("{}")  # cut (its summary says so): resumed
    (tmp_path / "electra-2000" / "summary.json").write_text('{"steps": 151, "stop_reason": "SIGTERM"}')
    curve.train_point(plan, "electra-2000", tmp_path)
    assert len(ran) == 1 and ran[0][-1] == "--resume" and "--max-steps" in ran[0]
    with pytest.raises(SystemExit, match="no point"):
        curve.train_point(plan, "electra-9000", tmp_path)


@pytest.mark.parametrize(("points", "refusal"), [
    ('[points.a]\ninit = "b"\nupdates = 1\n[points.b]\ninit = "a"\nupdates = 1\n', "loops"),
    ('[points.a]\ninit = "minilm"\n', "either encoder or init and updates"),
    ('[points.a]\nencoder = "minilm"\nmeasure = ["bleu"]\n', "unknown bleu"),
])
def test_a_bad_plan_is_refused(tmp_path: Path, points: str, refusal: str):
    plan = tmp_path / "plan.toml"
    plan.write_text("args = []\n" + points)
    with pytest.raises(SystemExit, match=refusal):
        _load("compute_curve").load_plan(plan)
