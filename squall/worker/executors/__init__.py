"""Executors: the threads that run a topology's tasks (spouts, bolts, the acker),
what components call to emit and ack, and routing by grouping."""
