"""electra-detect: ELECTRA replaced-token detection as a disfluency signal."""

__version__ = "0.1.0"
