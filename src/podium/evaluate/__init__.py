"""Evaluation: systems under test (baselines and runtime orchestrators), the resumable runner, metrics and the
HTML report."""
