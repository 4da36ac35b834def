"""Ways to execute a run's work: the local async engine (healthbench.runner.engine) and Ray (ray.py)."""
