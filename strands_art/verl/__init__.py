"""The verl front (verl 0.9.1): rollouts on verl's servers through the gateway, rows into verl's trainer.

A front beside :mod:`strands_art.model` (Strands) and :mod:`strands_art.serve` (HTTP), above the
gateway (docs/architecture.md):

- :mod:`.backend`: ``VerlServerBackend``, a sampling backend over verl's rollout servers
  (``server_manager``), and the sampling-parameter conversions.
- :mod:`.agent_loop`: ``StrandsAgentLoop`` (verl's ``strands_agent`` agent loop) and the
  MigrationBench episode; each captured row becomes one ``AgentLoopOutput``.
- :mod:`.adapter`: rows -> verl ``DataProto`` / ``TensorDict`` with the mini-batch count
  (step-stable batching); ``split_point`` is where a row's prompt ends.
- :mod:`.trainer`: the ``strands_sync`` trainer mode (``StepStablePPOTrainer``).

Every submodule needs the ``verl`` extra (``pip install 'strands-art[verl]'``) and raises
ImportError with that hint without it; this package itself imports nothing.
"""
