"""The model layer's exceptions; ``appliance.errors`` re-exports them for the agent core.

They subclass ``common.errors.ApplianceError``, so every edge that catches that still catches them.
"""

from __future__ import annotations

from common.errors import ApplianceError


class ModelFileError(ApplianceError):
    """The model file is missing, is not a GGUF, or does not match its checksum."""
