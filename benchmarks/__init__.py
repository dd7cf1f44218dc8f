"""Benchmarks: performance claims live here, never in tests."""
