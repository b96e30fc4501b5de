"""The bootstrap run's files and configuration, without a server (the run itself, raced by a
stranger, is proven on the real influxd in test_influx_tls.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from stacktools.stack.influx_bootstrap import MAX_SOCKET_PATH, bootstrap_files
from stacktools.stack.servers.influxdb import InfluxDB
from stacktools.stack.settings import Settings


def test_the_files_are_private_and_removed_afterwards(tmp_path: Path) -> None:
    with bootstrap_files(tmp_path) as files:
        files.config.write_text("")
        assert files.directory == tmp_path / "bootstrap"
        assert files.directory.stat().st_mode & 0o777 == 0o700
        assert files.key.stat().st_mode & 0o777 == 0o600
        assert b"BEGIN CERTIFICATE" in files.certificate.read_bytes()
        assert files.socket.parent == files.directory
    assert not files.directory.exists() and not files.config.exists()


def test_a_path_too_long_for_a_socket_gets_a_private_temporary_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * MAX_SOCKET_PATH)
    with bootstrap_files(deep) as files:
        assert len(str(files.socket)) <= MAX_SOCKET_PATH
        assert files.config.parent == deep  # on influxd's command line: the run dir's process
        assert files.directory.parent == Path(tempfile.gettempdir())
        assert files.directory.stat().st_mode & 0o777 == 0o700
    assert not files.directory.exists()


def test_the_bootstrap_configuration_keeps_tcp_clients_out(tmp_path: Path) -> None:
    for tls in ("true", "false"):
        settings = Settings.from_sources(
            environ={"STACK_RUN_DIR": str(tmp_path), "INFLUX_PORT": "18086", "TLS": tls}
        )
        influx = InfluxDB(settings)
        with bootstrap_files(tmp_path) as files:
            config = influx.config(influx.site, files)
        assert '  bind-address = "127.0.0.1:0"' in config  # HTTP: ephemeral, not 18086
        assert 'bind-address = "127.0.0.1:0"\n[meta]' in config  # RPC: ephemeral, not 18088
        assert "  https-enabled = true" in config
        assert f'  https-certificate = "{files.certificate}"' in config
        assert 'min-version = "tls1.3"\n  max-version = "tls1.2"' in config  # no version left
        assert f'  bind-socket = "{files.socket}"' in config
        assert "  flux-enabled = false" in config
        final = influx.config(influx.site)
        assert '  bind-address = "127.0.0.1:18086"' in final and "unix-socket" not in final
        assert ("https-enabled = true" in final) == (tls == "true")
