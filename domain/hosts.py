"""A URL's host as a browser's URL parser reads it (the WHATWG URL Standard's host parser, for
`http` and `https` URLs): the one reading a receiver's address is judged by.

An IPv4 address has many spellings there: `2130706433`, `0x7f000001`, `017700000001`, `127.1`
and `127.0.0.1.` are all 127.0.0.1, and resolvers (inet_aton) read them the same way; a host is
percent-decoded and mapped by IDNA (UTS #46), so 127.0.0.1 in fullwidth digits is 127.0.0.1
too, which is what the HTTP client (yarl, with the same `idna` package) connects to.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import unquote

import idna

__all__ = ["Address", "parsed_host"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# The standard's forbidden domain code points: a host holding one is not a host.
_FORBIDDEN = frozenset("\x00\t\n\r #/:<>?@[\\]^|%\x7f") | frozenset(map(chr, range(0x20)))
_RADIX_DIGITS = {10: "0123456789", 16: "0123456789abcdefABCDEF", 8: "01234567"}


def parsed_host(host: str) -> str | Address:
    """`host` as it stands in a URL (an IPv6 address in brackets, no port): an address, or a
    lowercase ASCII domain; ValueError where a browser would refuse the URL."""
    if host.startswith("["):
        if not host.endswith("]") or "%" in host:  # no zone: a URL names none
            raise ValueError("not an IPv6 address")
        return ipaddress.IPv6Address(host[1:-1])
    domain = unquote(host)
    if domain.isascii():
        ascii_domain = domain.lower()
    else:
        # IDNAError is a ValueError. Only a non-ASCII host is mapped, as yarl does: IDNA 2008's
        # rules would refuse an ASCII name a browser takes (an underscore).
        ascii_domain = idna.encode(domain, uts46=True, transitional=False).decode("ascii")
    if not ascii_domain or any(character in _FORBIDDEN for character in ascii_domain):
        raise ValueError("not a host name")
    if _ends_in_a_number(ascii_domain):
        return _ipv4(ascii_domain)
    return ascii_domain


def _ends_in_a_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and all(character in _RADIX_DIGITS[10] for character in last):
        return True
    return _ipv4_number(last) is not None


def _ipv4(domain: str) -> ipaddress.IPv4Address:
    """The standard's IPv4 parser: one to four numbers, each decimal, 0x-hex or 0-octal; the
    last fills the bytes the others leave."""
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise ValueError("not an IPv4 address")
    numbers = []
    for part in parts:
        number = _ipv4_number(part)
        if number is None:
            raise ValueError("not an IPv4 address")
        numbers.append(number)
    *leading, last = numbers
    if any(number > 255 for number in leading) or last >= 256 ** (5 - len(numbers)):
        raise ValueError("not an IPv4 address")
    value = last + sum(number * 256 ** (3 - index) for index, number in enumerate(leading))
    return ipaddress.IPv4Address(value)


def _ipv4_number(part: str) -> int | None:
    if not part:
        return None
    radix = 10
    if len(part) >= 2 and part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) >= 2 and part.startswith("0"):
        part, radix = part[1:], 8
    if not part:
        return 0
    if any(character not in _RADIX_DIGITS[radix] for character in part):
        return None
    return int(part, radix)
