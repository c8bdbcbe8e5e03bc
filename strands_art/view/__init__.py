"""``strands-art view RUN_DIR``: a read-only web viewer of a run directory (docs/viewer.md).

:mod:`.reader` indexes and follows the run directory through the project's own readers,
:mod:`.payloads` shapes one rollout and one row, :mod:`.server` is the aiohttp application (the
pages under ``static/`` and the JSON API under ``/api/``), :mod:`.cli` the command.
"""
