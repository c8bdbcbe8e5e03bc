"""Row capture: extend a row when a turn's prompt continues it exactly, otherwise fork.

Given a recorded turn (prompt IDs sent to the backend, sampled IDs, logprobs), the capture finds
the row whose tokens so far are a prefix of the turn's prompt. The prompt's remaining tokens are
appended as context (loss mask 0) and the sampled tokens as output (loss mask 1, with their
logprobs). If no row is a prefix, a new row starts with the whole prompt as context: a *fork*.

This keeps the two capture invariants by construction (docs/architecture.md, "Invariants"):
every sampled token is in exactly one row with mask 1 and its logprob, and every context token
before it equals what the backend received for that generation.
"""

from __future__ import annotations

from strands_art.trajectory import Row, Turn


class RowCapture:
    """The rows of one rollout.

    Args:
        rollout_id / group_id: copied onto every row.
    """

    def __init__(self, rollout_id: str, group_id: str | None = None) -> None:
        self.rollout_id = rollout_id
        self.group_id = group_id
        self.rows: list[Row] = []
        self._last_row: int | None = None

    def find_parent(self, prompt_ids: list[int]) -> int | None:
        """Index of the row that ``prompt_ids`` extends (latest-used first), or None.

        O(rows × prefix length) list comparisons, done in C.
        """
        order = list(range(len(self.rows) - 1, -1, -1))
        if self._last_row is not None:
            order.remove(self._last_row)
            order.insert(0, self._last_row)
        for i in order:
            ids = self.rows[i].input_ids
            if len(ids) <= len(prompt_ids) and prompt_ids[: len(ids)] == ids:
                return i
        return None

    @property
    def last_row(self) -> Row | None:
        return None if self._last_row is None else self.rows[self._last_row]

    def add(self, turn: Turn, parent: int | None) -> int:
        """Append ``turn`` to row ``parent`` (from :meth:`find_parent`) or fork a new row.

        Returns the index of the row now holding the turn and sets ``turn.row``.
        """
        if parent is None:
            row = Row(
                input_ids=[], loss_mask=[], logprobs=[], rollout_id=self.rollout_id, group_id=self.group_id
            )
            self.rows.append(row)
            parent = len(self.rows) - 1
        row = self.rows[parent]
        row.append_context(turn.prompt_ids[len(row.input_ids) :])
        row.append_output(turn.index, turn.output_ids, turn.logprobs)
        if turn.policy_version is not None:  # which policy sampled these tokens (the trainer reads it)
            row.metadata.setdefault("policy_versions", {})[str(turn.index)] = turn.policy_version
        turn.row = parent
        self._last_row = parent
        return parent
