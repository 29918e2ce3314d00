"""Amas Code: a small terminal AI coding agent."""

__version__ = "0.2.0"
