"""The Spark jobs of the machine-data stack: the source, the exactly-once sink, the runner and
the two jobs on it. The pure algorithms they run live in ``lsb`` (the join) and ``windowing``."""
