"""Client side of a cell: a stdlib-only script shipped to the host and run next to the server."""

from importlib import resources


def client_source() -> bytes:
    """The client script's source, sent on stdin to `python3 -` on the host (no install there)."""
    return resources.files(__package__).joinpath("client.py").read_bytes()
