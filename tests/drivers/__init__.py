"""Processes the tests start with ``python -m tests.drivers.<name>``: a real Spark job with a
fault hook, a minimal pass-through job, a probe of the Spark cluster."""
