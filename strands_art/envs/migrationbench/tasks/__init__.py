"""What a task is: its directory (``task.json``, ``repo/``, optional ``offline/``), checked when
loaded; the record fields computed from ``repo/`` (the test methods read by tree-sitter as javac
sees the sources); the declared offline Maven environment; bundled tasks and published
MigrationBench records.

Imports only the package's own modules (:mod:`..config`, :mod:`..workspace`,
:mod:`..controlseq`), never another part: every part reads tasks.
"""
