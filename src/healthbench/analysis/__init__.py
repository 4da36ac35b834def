"""Many runs, many models: tables, paired comparisons and the HTML report."""
