"""DietCode benchmark: one tuning run for a dynamic-shape GEMM against static per-shape, padded and bucketed
kernels and the vendor libraries, latency over every T of the range (``python -m benchmarks.dietcode``)."""
