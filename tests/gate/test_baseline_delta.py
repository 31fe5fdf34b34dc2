"""``--baseline`` change column: a change in percentage points is the difference of the
percentages as the table shows them."""

from __future__ import annotations

from gpu_advisor.render.baseline import Metric, _delta


def test_headroom_points_agree_with_the_rounded_percentages_shown() -> None:
    before = Metric(name="headroom", value=0.044, unit="fraction")  # shown "4 %"
    after = Metric(name="headroom", value=0.0651, unit="fraction")  # shown "7 %"
    # 0.0651 - 0.044 = 0.0211 would read "+2 points" beside "4 %" -> "7 %"
    assert _delta(before, after) == "+3 points"
    assert _delta(after, before) == "-3 points"
