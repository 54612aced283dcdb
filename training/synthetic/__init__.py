"""Synthetic errors: the families, the realistic typed mix and the word lists they draw on."""
