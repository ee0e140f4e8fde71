"""A worker as an operating-system process: its lifecycle under a supervisor and the
contract (files in WORKER_DIR, exit codes) between the two."""
