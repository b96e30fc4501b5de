"""The benchmarks' shared parts, which are not scripts themselves: timing, process-group
sampling, events files, feeds and readers of private topics, Spark job runs, the pairs' own
wait, the peer's venv, the micro-batch profile's parsing, profilers and report, the DB
connector benchmark's probes of a loader and its naive baseline, and the end-to-end
benchmark's steady-state measurement and tables. Kept apart so that benchmarks/ lists only what
docs/performance.md runs, and no script imports another."""
