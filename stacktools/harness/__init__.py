"""What runs the pipeline's services for the demo, the tests and the benchmarks: the one list of
the services (:mod:`.services`), where the stages meet (:mod:`.wiring`), each service as a
process group of its own (:mod:`.processes`), the whole pipeline started and supervised
(:mod:`.pipeline`), and what they are measured by (:mod:`.scrape`, :mod:`.cpu`).

It runs on a stack the launcher (:mod:`stacktools.stack`) started, and provisions its runs'
topics and databases with the launcher's modules; the launcher never imports it.
"""
