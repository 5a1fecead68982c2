"""Load and latency benchmarks: each part starts its servers as processes on 127.0.0.1 and prints ratios."""
