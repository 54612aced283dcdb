"""What several benchmarks share: peer systems, n-gram baselines, the GED evaluation halves, servers, text."""
