"""Fine-tunes of a pre-trained discriminator: GED, the list-wise reranker, CoLA."""
