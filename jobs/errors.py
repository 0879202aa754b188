"""The jobs' own exception, where a run is refused before it starts:

CheckpointRefused(Exception)  the checkpoint cannot be read, or belongs to another run
                              (another table, layout or setting): the command exits 1
"""

from __future__ import annotations

__all__ = ["CheckpointRefused"]


class CheckpointRefused(Exception):
    """The checkpoint cannot be read, or belongs to another run."""
