"""Typed, bounded reads from an untrusted Hugging Face ``config.json`` object.

Every value the parsers use goes through :class:`ConfigReader`, so a missing key, a value of the
wrong type or an absurd size becomes an :class:`~gpu_advisor.core.errors.InvalidSpecError` that
names the key's dotted path (``model.config.num_attention_heads``) and says what to fix. Nothing
else (``KeyError``, ``TypeError``, ``ZeroDivisionError``) may leave a parser.

The size bounds (``MAX_LAYERS`` ...) live in :mod:`gpu_advisor.core.limits`, shared with the
request schema, and are re-exported here for the parsers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpu_advisor.core.errors import InvalidSpecError
from gpu_advisor.core.limits import (
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_TOTAL_PARAMETERS,
    MAX_VOCAB,
    MAX_WINDOW,
)

__all__ = [
    "MAX_EXPERTS",
    "MAX_HEADS",
    "MAX_HEAD_DIM",
    "MAX_HIDDEN",
    "MAX_INTERMEDIATE",
    "MAX_LAYERS",
    "MAX_POSITIONS",
    "MAX_TOTAL_PARAMETERS",
    "MAX_VOCAB",
    "MAX_WINDOW",
    "ConfigReader",
    "show_value",
]

_MISSING: Final = object()


def show_value(value: object) -> str:
    """A short rendering of an offending value for an error message; containers are described,
    not printed, so a huge or deeply nested value costs nothing."""
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} items"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


class ConfigReader:
    """Reads keys of one JSON object (a config or a nested ``text_config``) with a path prefix.

    Args:
        config: the decoded JSON object.
        field: dotted path of ``config`` in the request (``model.config``); error paths are
            ``{field}.{key}``.
    """

    def __init__(self, config: Mapping[str, Any], field: str) -> None:
        self._config = config
        self.field = field

    def path(self, key: str) -> str:
        """Dotted path of ``key`` in the request."""
        return f"{self.field}.{key}"

    def has(self, key: str) -> bool:
        """True when ``key`` is present and not JSON null."""
        return self._config.get(key) is not None

    def _lookup(self, key: str, aliases: tuple[str, ...]) -> tuple[str, object]:
        for name in (key, *aliases):
            value = self._config.get(name)
            if value is not None:
                return name, value
        return key, _MISSING

    def _missing(self, key: str, aliases: tuple[str, ...], what: str) -> InvalidSpecError:
        also = f" (or {', '.join(aliases)})" if aliases else ""
        return InvalidSpecError(
            f"{self.path(key)}{also} is missing; set it to {what}.", field=self.path(key)
        )

    def integer(
        self,
        key: str,
        *,
        what: str,
        aliases: tuple[str, ...] = (),
        default: int | None = None,
        minimum: int = 1,
        maximum: int,
    ) -> int:
        """A required integer in ``[minimum, maximum]`` (``default`` when absent, if given).

        Integral floats (``4096.0``) are accepted; booleans, strings and fractions are not.

        Raises:
            InvalidSpecError: missing without default, wrong type, or out of range.
        """
        name, value = self._lookup(key, aliases)
        if value is _MISSING:
            if default is None:
                raise self._missing(key, aliases, what)
            return default
        return self._check_int(name, value, what=what, minimum=minimum, maximum=maximum)

    def opt_integer(
        self, key: str, *, what: str, aliases: tuple[str, ...] = (), minimum: int = 1, maximum: int
    ) -> int | None:
        """An optional integer (None when absent or null); checked like :meth:`integer`."""
        name, value = self._lookup(key, aliases)
        if value is _MISSING:
            return None
        return self._check_int(name, value, what=what, minimum=minimum, maximum=maximum)

    def _check_int(self, name: str, value: object, *, what: str, minimum: int, maximum: int) -> int:
        number: int
        if isinstance(value, bool):
            raise InvalidSpecError(
                f"{self.path(name)} must be an integer ({what}), got {show_value(value)}.",
                field=self.path(name),
            )
        if isinstance(value, int):
            number = value
        elif isinstance(value, float) and value.is_integer():
            if not -1e18 < value < 1e18:
                raise InvalidSpecError(
                    f"{self.path(name)} must be between {minimum:,} and {maximum:,}, "
                    f"got {show_value(value)}.",
                    field=self.path(name),
                )
            number = int(value)
        else:
            raise InvalidSpecError(
                f"{self.path(name)} must be an integer ({what}), got {show_value(value)}.",
                field=self.path(name),
            )
        if not minimum <= number <= maximum:
            raise InvalidSpecError(
                f"{self.path(name)} must be between {minimum:,} and {maximum:,} ({what}), "
                f"got {number:,}.",
                field=self.path(name),
            )
        return number

    def flag(self, key: str, *, default: bool, aliases: tuple[str, ...] = ()) -> bool:
        """A boolean flag (``default`` when absent or null).

        Raises:
            InvalidSpecError: present but not a JSON boolean.
        """
        name, value = self._lookup(key, aliases)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise InvalidSpecError(
                f"{self.path(name)} must be true or false, got {show_value(value)}.",
                field=self.path(name),
            )
        return value

    def opt_string(self, key: str, *, aliases: tuple[str, ...] = ()) -> str | None:
        """A string, or None when absent or null.

        Raises:
            InvalidSpecError: present but not a string.
        """
        name, value = self._lookup(key, aliases)
        if value is _MISSING:
            return None
        if not isinstance(value, str):
            raise InvalidSpecError(
                f"{self.path(name)} must be a string, got {show_value(value)}.",
                field=self.path(name),
            )
        return value

    def opt_list(self, key: str, *, max_length: int) -> list[object] | None:
        """A JSON array of at most ``max_length`` items, or None when absent or null.

        Raises:
            InvalidSpecError: present but not an array, or too long.
        """
        value = self._config.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InvalidSpecError(
                f"{self.path(key)} must be a list, got {show_value(value)}.", field=self.path(key)
            )
        if len(value) > max_length:
            raise InvalidSpecError(
                f"{self.path(key)} has {len(value):,} entries; at most {max_length:,} are allowed.",
                field=self.path(key),
            )
        return value

    def opt_object(self, key: str) -> ConfigReader | None:
        """A nested JSON object (``text_config``) as a reader, or None when absent or null.

        Raises:
            InvalidSpecError: present but not an object.
        """
        value = self._config.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidSpecError(
                f"{self.path(key)} must be an object, got {show_value(value)}.",
                field=self.path(key),
            )
        return ConfigReader(value, self.path(key))

    def raw(self, key: str) -> object:
        """The untyped value (None when absent); callers must check its type."""
        return self._config.get(key)
