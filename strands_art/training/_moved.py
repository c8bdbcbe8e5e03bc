"""Deprecated module paths: one helper for the aliases left where a module used to be."""

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make module name ``old`` the module ``new`` (same object: classes, registrations and pickles
    are shared) and emit a DeprecationWarning naming the new path.

    Raises:
        ImportError: from importing ``new`` (e.g. its optional dependency is missing).
    """
    warnings.warn(
        f"{old} moved to {new}; the old path will be removed in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old] = importlib.import_module(new)
