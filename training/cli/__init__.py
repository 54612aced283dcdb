"""The training layer's verbs, one module each: ``pretrain``, ``corpus``, ``ged train`` (ged_train), ``rerank
train`` (rerank_train) and ``distill``; the options they share in options.py.

Each verb module is an ``add_xxx(sub)`` function registered through the ``electra_detect.verbs`` entry points
(pyproject.toml) and the plain function that runs it; only argparse at the top: the trainer, the corpus builder and
their libraries load inside the verbs.
"""
