"""Running rollouts: ``strands-art migrate`` (:mod:`.runner`, its flags :mod:`.runner_args`, the
run directory :mod:`.rundir` with its :mod:`.reaper`, Ray :mod:`.ray_runner`, live
:mod:`.progress` and the end :mod:`.report`), one rollout (:mod:`.rollout`: policy, agent in a
fresh workspace, guarded evaluation, the audit of :mod:`.edits`), the trainers' episodes
(:mod:`.episodes`) and ``strands-art train --env migrationbench`` (:mod:`.train_env`).

The top part: imports ``agent/``, ``evaluate/``, ``maven/``, ``tasks/`` and the package's own
modules; never ``generate/`` (tasks are made before a run, not by it).
"""
