"""N-best reranking with the discriminator's sentence score: readers, score fusion, tuning, WER.

One discriminator pass scores a whole hypothesis, where masked-LM pseudo-log-likelihood (Salazar et
al. 2020) needs one pass per token; this module fuses that cheap score with the recogniser's:

    total = asr_score + lm_weight * lm_score + length_weight * words

``lm_score`` is the Detector's sentence score (``sum`` of log(1 - p) by default, or ``mean``); the
PLL of our own generator can stand in for it, for comparison only. Weights are tuned on a dev set
by grid search on corpus WER (``jiwer``). Readers stream: JSONL and Kaldi text are read one line at
a time, so large files never sit in memory whole (the mlm-scoring JSON is one object and is loaded).

- ``nbest``: the n-best lists (``Utterance``, ``Hypothesis``) and their readers: mlm-scoring JSON, JSONL, Kaldi
  text, ESPnet decode folders, and the one-string form (a hypothesis per line).
- ``wer``: word errors against a reference (jiwer), per hypothesis and per word.
- ``fusion``: scores of hypotheses, their fusion with the recogniser's, the choice, weight tuning and corpus WER.
- ``run``: ``electra-detect rerank``'s pass over an n-best file, streamed to JSONL.
"""
