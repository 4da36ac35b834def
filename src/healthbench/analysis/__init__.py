"""Many runs, many models: multi-run tables, paired comparisons (the report builds on these)."""
