"""The migration agent: a Strands ``Agent`` (:mod:`.agent`) with a sandboxed ``shell`` and a
confined ``file_editor`` (:mod:`.tools`, :mod:`.commands`, :mod:`.editor`), and the Maven set-up
its shell sees (:mod:`.toolenv`).

Imports ``tasks/``, ``maven/`` and the package's own modules; never ``evaluate/`` (the agent
knows nothing of how it is scored), ``generate/`` or ``run/``.
"""
