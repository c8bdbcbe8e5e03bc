"""Deprecated alias of :mod:`strands_art.verl.adapter` (moved in issue 26; kept for one release).

Users' verl YAML (``_target_``), ``VERL_USE_EXTERNAL_MODULES`` and scripts may still name
``strands_art.training.verl_adapter``: importing it emits a DeprecationWarning and makes this name the
same module object as the new one (classes, verl registrations and pickles are shared).
"""

import importlib
import sys
import warnings

warnings.warn(
    "strands_art.training.verl_adapter moved to strands_art.verl.adapter; the old path will be removed in the next release",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = importlib.import_module("strands_art.verl.adapter")
