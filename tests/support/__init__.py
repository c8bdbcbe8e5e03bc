"""Helper modules of the test suite (not tests): fakes of servers that cannot run here speaking
the real wire format (``fake_vllm``, ``fake_openai``), scripted policies (``migrate_script``,
``family_cases``), small models (``fakes``), shared tool specs (``strands_tools``), process and
server helpers, the verl CPU platform, and the scripts that record ``tests/data``
(``python -m tests.support.make_view_run``).

Tests import them as ``support.NAME`` (pytest puts tests/ on sys.path); the modules import each
other relatively, so a script run as ``python -m tests.support.NAME`` works too.
"""
