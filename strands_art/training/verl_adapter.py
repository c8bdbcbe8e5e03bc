"""Deprecated alias of :mod:`strands_art.verl.adapter` (moved in issue 26; kept for one release).

Users' verl YAML (``_target_``), ``VERL_USE_EXTERNAL_MODULES`` and scripts may still name
``strands_art.training.verl_adapter``: importing it warns and makes this name the new module.
"""

from strands_art.training._moved import alias

alias(__name__, "strands_art.verl.adapter")
