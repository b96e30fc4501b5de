"""A TCP relay on another loopback address: the same server reached under a name its certificate
does not carry. The stack's servers bind 127.0.0.1 only, and their certificate names 127.0.0.1,
so a client that connects to 127.0.0.2 (forwarded byte for byte) must refuse the server: the
honest wrong-host case, on the real server and the real client library."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

#: Routed to the loopback interface like 127.0.0.1, and in no certificate of the stack.
RELAY_HOST = "127.0.0.2"


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def relay(target_port: int, target_host: str = "127.0.0.1") -> Iterator[int]:
    """Listen on RELAY_HOST and forward every connection to ``target_host:target_port``;
    yields the listening port."""
    listener = socket.create_server((RELAY_HOST, 0))
    stop = threading.Event()
    connections: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((target_host, target_port), timeout=10)
            except OSError:
                client.close()
                continue
            connections.extend((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.close()
        acceptor.join(5)
