"""The engine's worker, by concern: ``executors/`` (the threads that run tasks, emit,
ack, route), ``wire/`` (codec, frames, transports, transfer threads) and ``process/``
(a worker as an OS process under a supervisor); ``worker.py`` places one topology's
executors on one slot over them, ``plan.py`` is the plan every worker builds the same."""
