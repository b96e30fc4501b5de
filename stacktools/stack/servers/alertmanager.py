"""The launcher's Alertmanager: its routing and webhook receiver (compose's too)."""

from __future__ import annotations

import json

from stacktools.stack.servers.base import Component, http_get
from stacktools.stack.servers.site import ConfigFiles, Site
from streamkit.paths import find_program

#: How Alertmanager batches notifications: the first of a group after ``group_wait``, changes
#: to it (a new alert, a resolved one) at most every ``group_interval``. docs/operations.md
#: states the delays these give; the live alert test holds the stack to them.
ALERT_ROUTE_TIMING = {"group_wait": "10s", "group_interval": "30s", "repeat_interval": "4h"}


#: The labels that make an overload alert itself (alert_forwarder.alerts.labels).
OVERLOAD_GROUP = ("alertname", "thing", "component", "rating", "overload_since")


def alert_route(receiver: str) -> dict[str, object]:
    """Alertmanager's routing: every alert grouped by alert and service, each component's
    overload alert its own group (notified once firing, once resolved)."""
    return {
        "receiver": receiver,
        "group_by": ["alertname", "service"],
        **ALERT_ROUTE_TIMING,
        "routes": [
            {"matchers": ['alertname="ComponentOverload"'], "group_by": list(OVERLOAD_GROUP)}
        ],
    }


class Alertmanager(Component):
    """Alertmanager (Debian) receiving Prometheus's alerts and sending every one, firing and
    resolved, to ALERT_WEBHOOK_URL; without one the alerts only show in its API and page. A
    single instance: its cluster (gossip) listener is off."""

    name = "alertmanager"

    @property
    def ports(self) -> list[int]:
        return [self.settings.alertmanager_port]

    def missing_install(self) -> str | None:
        return (
            None
            if find_program("prometheus-alertmanager")
            else "prometheus-alertmanager not found: run scripts/setup.sh (Debian package)"
        )

    def prepare(self) -> None:
        super().prepare()
        # the webhook URL may carry a token: the configuration is the owner's only
        self.write_config()

    def config_files(self, site: Site) -> ConfigFiles:
        """``alertmanager.yml``: :func:`alert_route` to ALERT_WEBHOOK_URL's receiver."""
        url = self.settings.alert_webhook_url
        receiver: dict[str, object] = {"name": "webhook" if url else "none"}
        if url:
            receiver["webhook_configs"] = [{"url": url, "send_resolved": True}]
        config = {"route": alert_route(str(receiver["name"])), "receivers": [receiver]}
        return {"alertmanager.yml": json.dumps(config, indent=2).encode()}

    def command(self) -> list[str]:
        return [
            str(find_program("prometheus-alertmanager")),
            f"--config.file={self.conf_dir / 'alertmanager.yml'}",
            f"--storage.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.settings.alertmanager_port}",
            "--cluster.listen-address=",  # one instance: no gossip port
        ]

    def healthy(self) -> bool:
        return http_get(f"http://127.0.0.1:{self.settings.alertmanager_port}/-/ready")[0] == 200
