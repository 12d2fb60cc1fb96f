"""engdiag watch: a live slow-vs-dead judge."""
