"""``python -m engdiag``."""

from engdiag.cli import main

main()
