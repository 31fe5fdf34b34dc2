"""Size limits on model architecture numbers, shared by the request schema and the config
reader so that the OpenAPI document and the server enforce the same bounds.

``ModelSpec`` (``core/spec.py``) declares them as ``Meta(le=...)`` and the config reader
(``core/models/reader.py``) checks a posted ``config.json`` against them; one definition keeps
the two from drifting (a schema that allowed a 10^8-row vocabulary the server then rejected).

The bounds are far above every published model (the largest configs in
``shared/data/hf-configs`` have 126 layers, hidden 16,384, 256 experts and a 262,208-row
vocabulary) and keep all later arithmetic small and fast (issue 3, "Bad configs").
"""

from __future__ import annotations

from typing import Final

MAX_LAYERS: Final = 10_000
MAX_HIDDEN: Final = 1_000_000
MAX_HEADS: Final = 10_000
MAX_HEAD_DIM: Final = 100_000
MAX_INTERMEDIATE: Final = 10_000_000
MAX_VOCAB: Final = 10_000_000
"""Vocabulary rows; the largest real tokenizers have ~262k entries (issue 3: > 10**7 is absurd)."""
MAX_EXPERTS: Final = 100_000
MAX_POSITIONS: Final = 100_000_000
MAX_WINDOW: Final = 2**31
MAX_TOTAL_PARAMETERS: Final = 10**14
"""Above this a config is rejected as absurd (issue 3: "10^15 parameters")."""
