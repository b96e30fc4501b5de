"""Spark jobs of the machine-data stack.

This package root stays import-free on purpose: the offline join CLI
(``python -m spark_jobs.lsb``) must start without pulling in pyspark.
"""
