"""The bench's own exception (its fakes of library exceptions live beside the fakes):

ValueError
└── MarkerError              a figures marker in the docs with no renderer, or without its pair
"""

from __future__ import annotations

__all__ = ["MarkerError"]


class MarkerError(ValueError):
    """A marker this module has no renderer for, or one without its pair."""
