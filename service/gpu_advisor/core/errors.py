"""Domain errors. They carry data (the offending field's path and a message), never HTTP status
codes; the HTTP layer maps each class to a problem+json response in one table (STYLE rule 4).
"""

from __future__ import annotations


class DomainError(Exception):
    """Base of all domain errors.

    Attributes:
        field: dotted path of the offending input (``model.config.num_attention_heads``), or
            None when the error is not about one field.
        message: what is wrong and what to fix, in one sentence.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidSpecError(DomainError):
    """The request is well-formed JSON of the right types but semantically invalid
    (a missing config key, a non-dividing head count, an impossible plan). Maps to 422."""


class UnsupportedModelError(InvalidSpecError):
    """A ``config.json`` of a family the parser does not know, naming what is missing."""


class UnknownPresetError(InvalidSpecError):
    """A preset id that is not in the table (GET /v1/models lists them)."""


class UnknownGpuError(InvalidSpecError):
    """A GPU id or alias that resolves to no known GPU (GET /v1/gpus lists them)."""


class NotFoundError(DomainError):
    """A referenced thing (an instance type of a provider) does not exist. Maps to 404."""
