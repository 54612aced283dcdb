"""n-best reranking on a real recogniser's lists (pocketsphinx), and the tools that made them."""
