"""Helpers the tests import: fixtures' parts, waits, fault injection, judges that compare a
run's output with an oracle (``tests.oracles``). The processes tests start are in
``tests.drivers``."""
