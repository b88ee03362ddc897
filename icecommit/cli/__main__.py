"""``python -m icecommit.cli``."""

from icecommit.cli.main import main

main()
