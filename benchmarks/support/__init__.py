"""The benchmarks' shared parts, which are not scripts themselves: timing, process-group
sampling, the raw feed, Spark job runs, the peer's venv and the micro-batch profile's parsing.
Kept apart so that benchmarks/ lists only what docs/performance.md runs."""
