"""Renderers: models → rich output for people, JSON documents for machines."""
