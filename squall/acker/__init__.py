"""Storm's XOR acker: the ledger and the rotating map, pure (its executor is the worker's:
squall.worker.executors.acker)."""

from squall.acker.ledger import AckLedger
from squall.acker.rotating_map import RotatingMap

ACKER_COMPONENT = "__acker"

__all__ = ["ACKER_COMPONENT", "AckLedger", "RotatingMap"]
