"""One module per engdiag command."""
