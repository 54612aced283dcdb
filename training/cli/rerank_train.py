"""``electra-detect rerank train`` (``rerank-train`` on the parser): learn a reranker on n-best lists.

The training is training/finetune/rerank_train.py's; only argparse at the top: torch and the list readers load
inside the verb.
"""

from __future__ import annotations

import argparse
import json

from electra_detect.cli import DEFAULT_MODEL, subverb
from electra_detect.cli.options import add_nbest_format_arg
from electra_detect.training.cli.options import add_checkpoint_every_arg, add_no_progress_arg, positive_int


def add_rerank_train(sub: argparse._SubParsersAction) -> None:
    """``rerank train`` (spelled ``rerank-train`` on the parser): the list-wise reranker of the training layer."""
    t = subverb(sub, "rerank", "train", run_rerank_train,
                help="learn a reranker on a recogniser's own n-best lists (also spelled `rerank train`)",
                description="Fine-tune a discriminator and the weights of its pooled token features (sum, mean and "
                            "minimum of log(1 - p), expected and counted wrong tokens, length) beside the recogniser's "
                            "score, list-wise: the expected word error rate over each list (MWER) plus a token loss on "
                            "the hypotheses' aligned words. Writes a reranker directory that `rerank --model` and "
                            "the server use as it is (docs/rerank.md).")
    t.add_argument("lists", nargs="+", help="n-best files with references (every format `rerank` reads)")
    t.add_argument("--model", default=DEFAULT_MODEL, help="run dir or discriminator dir to start from")
    t.add_argument("--out", required=True, help="the reranker directory to write")
    add_nbest_format_arg(t)
    t.add_argument("--dev", help="n-best file with references: its WER before and after is reported (not tuned on)")
    t.add_argument("--refit-on", metavar="LISTS",
                   help="n-best file with references from your test conditions (e.g. your dev set): after training, "
                        "the feature weights are fitted again on it (the encoder stays as trained)")
    t.add_argument("--loss", choices=["mwer", "softmax"], default="mwer",
                   help="list loss: expected WER (mwer, default) or cross-entropy of each list's best hypotheses")
    t.add_argument("--linear-only", action="store_true",
                   help="learn the feature weights only, on the start model's frozen features")
    t.add_argument("--token-weight", type=float, default=1.0, help="weight of the token loss beside the list loss")
    t.add_argument("--max-lists", type=positive_int, default=None, help="train on this many lists (seeded choice)")
    t.add_argument("--epochs", type=positive_int, default=2)
    t.add_argument("--lists-per-batch", type=positive_int, default=4)
    t.add_argument("--lr", type=float, default=5e-5, help="the encoder's peak learning rate")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    add_checkpoint_every_arg(t)
    add_no_progress_arg(t)


def run_rerank_train(args: argparse.Namespace) -> int:
    import torch

    from electra_detect.errors import RerankError
    from electra_detect.tasks.rerank.nbest import read_nbest
    from electra_detect.training.finetune.rerank_train import RerankTrainConfig, train_reranker

    if args.threads:
        torch.set_num_threads(args.threads)
    train = [utt for path in args.lists for utt in read_nbest(path, args.fmt)]
    if not any(utt.ref for utt in train):
        raise RerankError("the training lists hold no references ('ref'): nothing to learn from")
    dev = list(read_nbest(args.dev, args.fmt)) if args.dev else None
    config = RerankTrainConfig(epochs=args.epochs, lists_per_batch=args.lists_per_batch, lr=args.lr,
                               token_weight=args.token_weight, loss=args.loss, linear_only=args.linear_only,
                               max_lists=args.max_lists or 0, seed=args.seed, checkpoint_every=args.checkpoint_every)
    refit = list(read_nbest(args.refit_on, args.fmt)) if args.refit_on else None
    if refit is not None and not any(utt.ref for utt in refit):
        raise RerankError(f"{args.refit_on} holds no references ('ref'): the weights cannot be fitted on it")
    summary = train_reranker(args.model, args.out, train, dev, config, show_progress=not args.no_progress,
                             refit=refit)
    print(json.dumps(summary))
    return 0
