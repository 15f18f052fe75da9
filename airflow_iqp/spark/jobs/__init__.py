"""spark-submit applications: one batch's partial aggregate, and a window's final merge."""
