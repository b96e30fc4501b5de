"""Transitional, to be deleted: the three names ``benchmarks/`` still imports from here.

The servers moved to :mod:`stacktools.stack.servers` (one module each). ``benchmarks/`` is being
reorganised on another branch, so its three imports move there when that lands; then this module
goes. Nothing else may import it.
"""

from __future__ import annotations

from stacktools.stack.servers import DEFAULT_GROUPS
from stacktools.stack.servers.spark import scaled_out_spark_env, spark_master_url

__all__ = ["DEFAULT_GROUPS", "scaled_out_spark_env", "spark_master_url"]
