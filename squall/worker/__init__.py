"""The engine's worker, by concern, each part standing on those before it
(tests/test_layers.py holds the order): ``plan.py`` (the plan every worker builds
the same), ``backpressure.py`` and ``gc_tuning.py``; ``wire/`` (codec, frames,
transports, transfer threads); ``executors/`` (the threads that run tasks, emit, ack,
route); ``worker.py``, which places one topology's executors on one slot over them;
and ``process/``, a worker as an OS process under a supervisor.
"""
