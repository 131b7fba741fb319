"""What the tests (small runs) and the benchmarks (heavy runs) both drive: fault and scripted servers, fault and
attack campaigns, hostile inputs, scripted pools, the tau2 cross-check. Neither product code nor a test package:
tests/ and benchmarks/ import it from the repository root, and it imports neither."""
