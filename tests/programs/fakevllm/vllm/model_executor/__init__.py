"""Stand-in for the vLLM module of the same path: functions named and placed like vLLM's, for stack tests."""
