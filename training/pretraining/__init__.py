"""ELECTRA pre-training: config, data, masking, the generator-discriminator model, objectives, the trainer and
its run directories."""
