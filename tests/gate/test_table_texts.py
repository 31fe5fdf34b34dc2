"""The CLI's table texts: the ``--baseline`` change column (a change in percentage points is
the difference of the percentages as the table shows them) and the speed column."""

from __future__ import annotations

from gpu_advisor.core.results import Performance
from gpu_advisor.render.baseline import Metric, _delta
from gpu_advisor.render.report import speed_text


def test_headroom_points_agree_with_the_rounded_percentages_shown() -> None:
    before = Metric(name="headroom", value=0.044, unit="fraction")  # shown "4 %"
    after = Metric(name="headroom", value=0.0651, unit="fraction")  # shown "7 %"
    # 0.0651 - 0.044 = 0.0211 would read "+2 points" beside "4 %" -> "7 %"
    assert _delta(before, after) == "+3 points"
    assert _delta(after, before) == "-3 points"


def test_an_encoder_only_speed_is_input_encoded_not_first_token() -> None:
    # BERT serving: no decode step (0 s), the rate is input tokens encoded per second
    encoder = Performance(
        tokens_per_second=32 * 512 / 0.25, time_to_first_token_seconds=0.25, step_time_seconds=0.0
    )
    assert speed_text(encoder) == "65,536 input tokens/s encoded; one batch 0.25 s"
    decoder = Performance(
        tokens_per_second=94.0, time_to_first_token_seconds=1.1, step_time_seconds=0.085
    )
    assert speed_text(decoder) == "94 tokens/s; first token 1.10 s"
