"""Helpers used only by our tests and benchmarks (the fake server users need stays in
`healthbench.testing`). Benchmarks put tests/ on sys.path through benchmarks/support_path.py."""
