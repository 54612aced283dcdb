"""Grammatical error detection on whitespace tokens, one job a module.

Labels live on the original whitespace tokens of each sentence; the Detector's subword scores are
mapped onto them by character offsets (a token's score = max over the subwords it contains, the
same choice as the *word score* of the glossary). F0.5 over tokens is the standard GED metric.

- ``readers``: labelled data (M2, token TSV, BEA-2019 JSON, parallel text) as ``GedSentence`` lists.
- ``error_types``: ERRANT-style operation and main type of an edit (FCE codes mapped onto them).
- ``nlp``: the one spaCy loader (sentence splitter, ERRANT, POS tagger).
- ``alignment``: Detector scores onto whitespace tokens.
- ``metrics``: token precision, recall, F0.5, threshold tuning, per-type recall.
- ``pos_thresholds``: one threshold per universal POS tag, adopted when cross-validation says so.
- ``evaluation``: ``ged eval``'s report, from the pieces above.
- ``check``: ``GedChecker``, the check every front runs (flags, typing, suggestions, the quiet rule in ``quiet``),
  with ``options``, ``dictionary``, ``flags``, ``rule_table``, ``errant_typing`` (ERRANT on a word and its
  replacement), ``suggestions`` (with ``word_candidates`` and ``suggestion_ranking``). A tag model's tags are read
  in ``electra_detect.edit_tags``.
"""
