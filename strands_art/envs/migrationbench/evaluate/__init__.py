"""The reward: MigrationBench's minimal-migration check from evidence the agent cannot write.

:mod:`.evaluator` gathers the evidence (a measured build copy, the compile and test builds under
JDK 17, class-file versions, test reports, the original's test methods) and :mod:`.verdict`
scores it; both take an :class:`.evaltask.EvalTask`. Around them: the build copy and policy
(:mod:`.buildcopy`, :mod:`.buildpolicy`), build outputs (:mod:`.buildoutputs`), test selection
(:mod:`.testselection`), the original from git objects (:mod:`.gitorigin`), host failures
(:mod:`.hostcheck`), an evaluation that never raises (:mod:`.evalguard`), one evaluation per
distinct tree (:mod:`.evalcache`), and a task's untouched/reference check (:mod:`.verify`).

Imports ``tasks/``, ``maven/`` and the package's own modules; never ``agent/`` (what the agent
runs cannot reach the reward's code), ``generate/`` or ``run/``.
"""
