"""A free TCP port, for rendezvous endpoints (stdlib only: imported by the host and in stacks)."""

import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
