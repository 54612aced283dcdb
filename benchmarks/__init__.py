"""Benchmarks as a package: run each as ``python -m benchmarks.<kind>.<name>`` from the repository root."""
