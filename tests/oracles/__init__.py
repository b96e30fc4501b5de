"""The oracles: what each stage's output must be, recomputed from the specification alone
(nothing of the project is imported: ``tests/test_layering.py``), and, in ``test_*.py`` beside
them, the tests that hold the oracles themselves to the project and to each other."""
