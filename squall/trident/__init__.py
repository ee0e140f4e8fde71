"""Trident: Storm's high-level API of streams of batches, on Squall's transactional core.

The API is pinned in the project's trident.md (Storm's names in snake_case); what each name
is lives in the module its entry below names.
"""

from typing import TYPE_CHECKING

from squall.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    pass
