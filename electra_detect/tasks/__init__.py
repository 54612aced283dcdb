"""Tasks over the Detector's scores: GED (readers, metrics, thresholds), n-best reranking, and the
masked-LM pseudo-log-likelihood baseline (``pll``)."""
