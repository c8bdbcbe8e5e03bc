"""Tools for the project's developers (not part of the public API)."""
