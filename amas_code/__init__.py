"""Amas Code: a small terminal AI coding agent."""

__version__ = "0.1.0"
