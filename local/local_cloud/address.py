"""The local cloud's address: whether it can be served, and the error when it cannot."""

from __future__ import annotations

import socket


class PortInUse(RuntimeError):
    """The local cloud's address cannot be bound (another program listens there)."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        self.port = port
        super().__init__(
            f"port {port} on {host} is in use ({reason}): stop the program listening there, "
            "or choose another port with --port"
        )


def port_taken(host: str, port: int) -> PortInUse | None:
    """Why `host:port` cannot be served (None: it can). Bound as the server binds it
    (SO_REUSEADDR: a port left in TIME_WAIT by a cloud just stopped is free)."""
    if port == 0:
        return None
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return PortInUse(host, port, error.strerror or str(error))
    return None
