"""The stack in containers: docker compose's ``.env`` (:mod:`.env`), the rule every generated
or given credential follows, shared with the local launcher (:mod:`.credentials`), and a
Docker-compatible engine on machines without Docker (:mod:`.engine`).

Standard library and the core's standard-library modules only, package included:
``python3 -m stacktools.compose.env`` runs before the project is installed.
"""
