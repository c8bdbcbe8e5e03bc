"""The agent's repeated clean build answered from its last run, when nothing changed in between.

A trained migration policy often repeats ``mvn -q clean verify`` on a tree it has not touched
since the last one: in a recorded outer batch (issue "A MigrationBench GRPO update in minutes"),
single rollouts ran 26-27 such builds in their last turn, 326-361 s of Maven out of 541-576 s.
Each repeat would print what the last one printed: ``clean`` wipes what the last build left, the
sources are the same, and the build reads nothing else that changed (the rollout's own local
Maven repository and settings; see below). So the shell tool answers a repeat from memory when
all of these hold (:meth:`MavenMemo.lookup`):

1. the command is exactly the last shell command that ran (same text), and it is a plain
   Maven invocation whose first goal is ``clean`` and whose goals are lifecycle phases that
   write only under the tree (:data:`TREE_PHASES`: up to ``verify``; no ``install``, no
   ``plugin:goal``), and nothing else but self-contained options (:func:`memoizable`: no shell
   operators, quotes, variables, redirections, or options that take a separate value such as
   ``-f`` or ``-pl``);
2. the last run ended normally (not killed at its time limit, not an error of the tool);
3. the workspace's tree is byte for byte what that run left (:func:`~..treedigest.tree_digest`
   of the whole repository, ``target/`` included, computed by the host after the command's
   processes ended): an edit, a deleted report, a touched class file is a miss.

Any other shell command forgets the memo (it could have changed what the build reads outside
the tree, e.g. the local repository), so only back-to-back repeats are answered. The agent
sees the same text it saw last time; the rollout's tool statistics count the repeats
(``maven_memo_hits``) and the Maven seconds they did not spend (``maven_memo_saved_s``).

Limits, stated: a flaky test's retry on an unchanged tree gets the first run's result (as the
evaluation cache scores a flaky tree once); trees over :data:`MAX_TREE_BYTES` of files are not
memoized, nor trees of over :data:`MAX_TREE_ENTRIES` entries. ``STRANDS_ART_MAVEN_MEMO=off`` (or ``0``, ``no``,
``false``) runs every command; a value that is neither off nor on is refused (:func:`enabled`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.migrationbench.treedigest import tree_digest
from strands_art.validation import check_env_switch

MEMO_ENV = "STRANDS_ART_MAVEN_MEMO"
"""Environment variable: ``off`` runs every Maven command (default: on)."""
MAX_TREE_BYTES = 256 * 1024 * 1024
"""Trees with more file bytes than this are not digested (the repeat runs)."""
MAX_TREE_ENTRIES = 200_000
"""Trees with more entries than this are not digested (the repeat runs): the digest's time
grows with the count (about 10 us an entry), and empty files cost the agent nothing to make."""

_PLAIN = re.compile(r"[ \t]*mvn(?:[ \t]+[A-Za-z0-9_.:=/,+@%-]+)*[ \t]*")
"""A command line of one ``mvn`` call (the rollout's wrapper on PATH; never a script of the
repository's own, such as ``./mvnw``) and plain words: spaces and tabs between them, nothing else
(no newline, quote, escape, ``$``, ``;``, ``&``, ``|``, ``<``, ``>``, ``#``, glob or brace)."""
# options that take the next word as their value: a plain word after them is not a goal
_TAKES_VALUE = frozenset(
    "-f --file -pl --projects -s --settings -gs --global-settings -t --toolchains -gt "
    "--global-toolchains -P --activate-profiles -D --define -T --threads -rf --resume-from -l "
    "--log-file -b --builder -emp --encrypt-master-password -ep --encrypt-password".split()
)


TREE_PHASES = frozenset(
    "pre-clean clean post-clean validate initialize generate-sources process-sources "
    "generate-resources process-resources compile process-classes generate-test-sources "
    "process-test-sources generate-test-resources process-test-resources test-compile "
    "process-test-classes test prepare-package package pre-integration-test integration-test "
    "post-integration-test verify".split()
)
"""The lifecycle phases a memoizable command may name: the clean lifecycle and the default one up
to ``verify``, whose stock plugins write only under the tree. Not ``install`` or ``deploy`` (they
write the project's artifacts to the local repository, which the next build may read: a module
resolved from there fails in the first run and passes in the next), nor any ``plugin:goal``
(``dependency:purge-local-repository``, ``install:install-file`` and the like change it too)."""


def memoizable(command: str) -> bool:
    """True if ``command`` is a plain ``mvn`` call whose first goal is ``clean`` and whose goals
    are all phases of :data:`TREE_PHASES` (so ``clean install`` and ``clean dependency:tree`` run).

    Only words of letters, digits and ``_.:=/,+@%-`` separated by spaces or tabs (no shell
    syntax of any kind, no second line); options must be self-contained (``-q``, ``-B``,
    ``-DskipTests``, ``-Dx=y``, ``-T2``), never one that takes the next word as its value.
    """
    if not _PLAIN.fullmatch(command):
        return False
    words = command.split()[1:]
    if any(w in _TAKES_VALUE for w in words):
        return False
    goals = [w for w in words if not w.startswith("-")]
    return bool(goals) and goals[0] == "clean" and all(g in TREE_PHASES for g in goals)


def enabled() -> bool:
    """False when ``STRANDS_ART_MAVEN_MEMO`` is ``off`` (or ``0``, ``no``, ``false``), True when unset
    or ``on`` (``1``, ``yes``, ``true``).

    Raises:
        UsageError: any other value, naming the variable (:func:`~strands_art.validation.check_env_switch`).
    """
    return check_env_switch(MEMO_ENV, os.environ.get(MEMO_ENV))


@dataclass
class _Last:
    command: str
    digest: str
    text: str
    seconds: float


class MavenMemo:
    """The last shell command of one rollout, kept when it was a memoizable Maven build.

    Args:
        root: the repository the commands run in (the workspace's root).
        max_bytes: the digest's bound on file bytes (:data:`MAX_TREE_BYTES`).
        max_entries: the digest's bound on entries (:data:`MAX_TREE_ENTRIES`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_bytes: int = MAX_TREE_BYTES,
        max_entries: int = MAX_TREE_ENTRIES,
    ) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._last: _Last | None = None

    def _digest(self) -> str | None:
        try:
            return tree_digest(self.root, max_bytes=self.max_bytes, max_entries=self.max_entries)
        except OSError:  # too large, or unreadable: never a hit
            return None

    def lookup(self, command: str) -> tuple[str, float] | None:
        """The last run's tool text and seconds if ``command`` repeats it on the tree it left,
        else None (the command must run)."""
        last = self._last
        if last is None or command != last.command:
            return None
        digest = self._digest()
        return (last.text, last.seconds) if digest is not None and digest == last.digest else None

    def record(self, command: str, text: str, seconds: float) -> None:
        """After a shell command ran to its end (a timed-out or failed one: :meth:`forget`): keep
        it if it is memoizable, with the digest of the tree it left; forget the memo otherwise."""
        self._last = None
        if memoizable(command):
            digest = self._digest()
            if digest is not None:
                self._last = _Last(command, digest, text, seconds)

    def forget(self) -> None:
        """Drop the memo (a command ran that is not a normal memoizable build)."""
        self._last = None
