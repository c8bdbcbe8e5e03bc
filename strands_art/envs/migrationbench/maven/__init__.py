"""Maven run non-interactively in the sandbox, offline by default: the build with its process-group
timeout (:mod:`.maven`), its output read in bounded memory (:mod:`.mavenlog`), and the
throw-away local repository and ``settings.xml`` seeded from Debian's (:mod:`.offline_repo`).

Used by the evaluator's scoring builds and by the agent's ``mvn``. Imports ``tasks/`` (a task's
declared ``offline/`` is seeded into every build) and the package's own modules; never
``evaluate/``, ``agent/``, ``generate/`` or ``run/``.
"""
