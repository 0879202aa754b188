"""The command line's own exception, which `loc-payments schema` reports as one line and exit 2:

Exception
└── BadInput                 a file, revision or manifest the command cannot read
"""

from __future__ import annotations

__all__ = ["BadInput"]


class BadInput(Exception):
    """A file that is not SDL, a revision that does not exist, a manifest that does not parse."""
