"""The overload alerts of the operation statistics, from their Kafka topic to Alertmanager.

The single pass writes each alert a component's cycles fire or resolve to the overloads topic,
exactly once, in the transaction of its cycle (docs/operation-statistics.md). This service
reads that topic, which compaction keeps at each component's latest state, and holds the
stack's Alertmanager to it through its API: a firing alert is posted again and again while it
fires, a resolved one is posted resolved. Alertmanager knows an alert by its labels, so posting
it again, after a crash or a restart, never notifies twice.
"""
