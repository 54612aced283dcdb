"""ELECTRA pre-training: data, masking, generator/discriminator model, trainer."""
