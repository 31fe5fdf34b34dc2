"""USD amounts as answers show them: float noise (``2.6999999999999997``) rounded away.

The planner works on exact floats (ranking, budgets, Pareto fronts compare them); an answer
is rounded once, after it is complete, by :func:`round_money` -- the
:class:`~gpu_advisor.advisor.Advisor` applies it to every answer it returns, so the HTTP API
and the in-process CLI show the same numbers. Which precision a value gets follows its name
(units are in the identifiers, STYLE rule 3):

* a rate -- a name ending in ``_usd`` with ``per_`` in it (``price_per_hour_usd``,
  ``price_per_gpu_hour_usd``, ``per_million_tokens_usd``, ``spot_price_per_hour_usd``) -- to
  :data:`RATE_DECIMALS` (1e-4 USD: providers list hourly prices to 4 decimals, e.g. AWS
  $0.5260/h, and a per-million-token price can be a fraction of a cent);
* any other amount ending in ``_usd`` (``total_usd``, ``checkpoint_storage_usd``,
  ``budget_usd``) to :data:`AMOUNT_DECIMALS` (cents);
* a bare ``usd`` key in a reason's ``data`` (its meaning depends on the reason) as a rate.

Values in ``Reason.data``/``Check.data`` dicts follow the same rule by key; sentences
(``text``, ``detail``) were rendered from the exact values and already show cents.
"""

from __future__ import annotations

import math
from typing import Any, Final, TypeVar

import msgspec

T = TypeVar("T")

AMOUNT_DECIMALS: Final = 2
RATE_DECIMALS: Final = 4


def decimals_for(name: str) -> int | None:
    """How many decimals a USD value named ``name`` keeps; None when it is not USD."""
    if name == "usd":
        return RATE_DECIMALS
    if not name.endswith("_usd"):
        return None
    return RATE_DECIMALS if "per_" in name else AMOUNT_DECIMALS


def _rounded(name: str, value: float) -> float:
    places = decimals_for(name)
    if places is None or not math.isfinite(value):
        return value
    return round(value, places)


def round_money(value: T) -> T:
    """``value`` with every USD float rounded by its name (see the module docstring).

    Structs (frozen) are rebuilt only where something changed; lists and dicts likewise.
    Non-USD numbers (bytes, hours, fractions, token rates) are left exact.
    """
    result: Any = _walk(value)
    return result  # type: ignore[no-any-return]


def _walk(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        changes: dict[str, Any] = {}
        for name in value.__struct_fields__:
            item = getattr(value, name)
            new = _item(name, item)
            if new is not item:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, list):
        items = [_walk(item) for item in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        entries = {key: _item(str(key), item) for key, item in value.items()}
        changed = any(entries[key] is not item for key, item in value.items())
        return entries if changed else value
    return value


def _item(name: str, item: Any) -> Any:
    if isinstance(item, float):
        new = _rounded(name, item)
        return item if new == item else new
    if isinstance(item, msgspec.Struct | list | dict):
        return _walk(item)
    return item
