"""The tools above the services, one package per product:

- :mod:`stacktools.compose`: the stack in containers (compose's ``.env``, the credential rule,
  a container engine where Docker is missing);
- :mod:`stacktools.stack`: the launcher: one module per server, their shared HTTP/TLS helpers,
  and what provisions them (users and rights, topics, certificates, the InfluxDB client);
- :mod:`stacktools.harness`: what runs the services for the demo, the tests and the benchmarks;
- :mod:`stacktools.verify`: is a run's output exactly what its input implies;
- :mod:`stacktools.dashboards`: the Grafana dashboards' checks and the pipeline graph;
- :mod:`stacktools.demo`: the one-command demo;
- :mod:`stacktools.config_reference`: docs/configuration.md rendered from the settings.

Each package imports only those on floors below its own (tests/test_layering.py). Services
never import this package; it imports them (their settings) and runs them as processes."""
