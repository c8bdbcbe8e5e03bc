"""Tasks made offline: ``strands-art make-tasks``. The generated kinds (:mod:`.generate`: Java 8
projects from :mod:`.gen_project` and its parts ``gen_*``, each with its reference migration)
and real MigrationBench records turned into tasks (:mod:`.realtasks`, proposing a task's
``offline/`` environment with :mod:`.offline_propose`).

Imports ``tasks/``, ``maven/``, ``evaluate/`` (each task is checked with real builds:
untouched < 1.0, reference 1.0) and the package's own modules; never ``agent/`` or ``run/``.
"""
