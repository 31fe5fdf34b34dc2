"""Units. Bytes are ``int`` in the core; conversion to text happens only in rendering.

GiB = 2**30 bytes, GB = 10**9 bytes (DESIGN "Units").
"""

from __future__ import annotations

KIB = 2**10
MIB = 2**20
GIB = 2**30
GB = 10**9
TB = 10**12


def gib(n_bytes: int | float) -> float:
    """Bytes to GiB (2**30)."""
    return n_bytes / GIB


def format_gib(n_bytes: int | float, digits: int = 1) -> str:
    """``"61.2 GiB"``: the one way byte counts are written in sentences."""
    return f"{n_bytes / GIB:.{digits}f} GiB"
