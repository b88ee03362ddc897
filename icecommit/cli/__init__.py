"""The icecommit command line."""

from icecommit.cli.main import cli, main

__all__ = ["cli", "main"]
