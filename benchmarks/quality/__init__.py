"""How good the product is: GED against peers, rules, learner training, paragraphs, suggestions, BLiMP, CoLA,
speech reranking."""
