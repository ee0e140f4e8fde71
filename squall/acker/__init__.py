"""Storm's XOR acker: the ledger (pure), the rotating map, the executor."""

from squall.acker.ledger import AckLedger
from squall.acker.rotating_map import RotatingMap

ACKER_COMPONENT = "__acker"

__all__ = ["ACKER_COMPONENT", "AckLedger", "RotatingMap"]
