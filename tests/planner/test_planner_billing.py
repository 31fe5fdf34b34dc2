"""Billing rules change the ranking where they should; spot loses when interruptions cost more
than the discount; budget, deadline and max price reject with their codes.

The job: a toy model with exactly 1e9 matmul parameters trained on one H100 at MFU 0.5.
FLOPs per token (flops.py conventions, FlashAttention causal halving):
    6 * 1e9                                    dense forward + backward
  + 3 * 2 * (4096 + 4096) * 32 * 2048 / 2      attention: 3 passes x 2 (d_qk + d_v) x L x s/2
  = 6e9 + 1,610,612,736 = 7,610,612,736
Throughput: 989.5e12 * 0.5 / 7,610,612,736 tokens/s.
"""

from __future__ import annotations

import math

import pytest

from gpu_advisor.core.planner import recommend
from gpu_advisor.core.spec import TrainingWorkload

from .fixtures import GPUS, make_arch, make_offer, make_request, providers, toy_estimate

EMBEDDING = 32_000 * 4096  # vocab x hidden, the gathered (non-matmul) input embedding
ARCH = make_arch(10**9 + EMBEDDING, layers=32, hidden=4096, heads=32, head_dim=128)
FLOPS_PER_TOKEN = 6 * 10**9 + 3 * 2 * (4096 + 4096) * 32 * 2048 // 2
TOKENS_PER_SECOND = 989.5e12 * 0.5 / FLOPS_PER_TOKEN


def job(minutes: float) -> TrainingWorkload:
    return TrainingWorkload(tokens=minutes * 60 * TOKENS_PER_SECOND, sequence_length=2048, mfu=0.5)


def offers_by_billing() -> list:
    return [
        make_offer(gpu_count=1, price=10.0, increment=3600, provider="hourly", instance_type="h"),
        make_offer(gpu_count=1, price=11.0, increment=1, provider="persecond", instance_type="s"),
    ]


def test_sixty_one_minutes_on_hourly_billing_loses_to_per_second() -> None:
    result = recommend(
        ARCH, make_request(job(61)), offers_by_billing(), GPUS, providers(), toy_estimate
    )
    first, second = result.recommendations
    assert first.offer.provider == "persecond"
    assert first.cost.total_usd == pytest.approx(61 / 60 * 11.0, abs=11.0 / 3600)  # $11.18
    assert second.offer.provider == "hourly"
    assert second.cost.billed_hours == 2.0
    assert second.cost.total_usd == pytest.approx(2 * 10.0)  # 61 min rounds up to 2 h
    assert first.performance.time_to_result_hours == pytest.approx(61 / 60)
    assert "billed per second" in first.summary
    assert "$20.00 in total: 2 h billed hourly at $10.00/h" in second.summary


def test_fifty_nine_minutes_on_hourly_billing_wins() -> None:
    result = recommend(
        ARCH, make_request(job(59)), offers_by_billing(), GPUS, providers(), toy_estimate
    )
    first, second = result.recommendations
    assert first.offer.provider == "hourly"
    assert first.cost.total_usd == pytest.approx(10.0)  # one hour
    assert second.cost.total_usd == pytest.approx(59 / 60 * 11.0, abs=11.0 / 3600)  # $10.82


def test_minimum_charge_applies() -> None:
    offer = make_offer(gpu_count=1, price=12.0, minimum=3600)
    result = recommend(ARCH, make_request(job(10)), [offer], GPUS, providers(), toy_estimate)
    assert result.recommendations[0].cost.total_usd == pytest.approx(12.0)


def _spot_factor(rate_per_hour: float) -> float:
    """Young (1974) interval and the first-order expected duration factor, by hand.

    Checkpoint: toy weights 2 B + AdamW 12 B per parameter = 14 * (1e9 + 131,072,000) B,
    written at 1,000 MiB/s; restart 600 s.
    """
    checkpoint_bytes = 14 * (10**9 + EMBEDDING)
    write_s = checkpoint_bytes / (1000 * 2**20)
    rate_per_s = rate_per_hour / 3600
    interval = math.sqrt(2 * write_s / rate_per_s)
    return 1 + write_s / interval + rate_per_s * (interval / 2 + 600)


@pytest.mark.parametrize(("rate", "spot_first"), [(1.0, False), (0.05, True)])
def test_spot_ranks_below_on_demand_when_interruptions_cost_more_than_the_discount(
    rate: float, spot_first: bool
) -> None:
    # 10-hour job, spot at 90 % of the $10 on-demand price, per-second billing.
    # rate 1.0/h:  factor ~1.258 -> spot 0.9 * 1.258 = 1.13x the on-demand cost: spot second.
    # rate 0.05/h: factor ~1.029 -> spot 0.9 * 1.029 = 0.93x: spot first.
    factor = _spot_factor(rate)
    assert (0.9 * factor < 1.0) is spot_first
    offer = make_offer(gpu_count=1, price=10.0, spot=9.0)
    result = recommend(
        ARCH,
        make_request(job(600), spot="allow"),
        [offer],
        GPUS,
        providers(acme=rate),
        toy_estimate,
    )
    first, second = result.recommendations
    assert first.spot is spot_first
    spot = first if first.spot else second
    on_demand = second if first.spot else first
    assert on_demand.cost.total_usd == pytest.approx(10 * 10.0, rel=1e-6)
    # billed per second: up to one second ($9 / 3600) of rounding
    assert spot.cost.total_usd == pytest.approx(10 * factor * 9.0, abs=9.0 / 3600)
    assert spot.cost.expected_interruptions == pytest.approx(rate * 10 * factor, rel=1e-6)
    assert any(r.code == "spot_risk" for r in spot.rationale)


def test_spot_only_without_spot_price_is_rejected_and_suggests_on_demand() -> None:
    offer = make_offer(gpu_count=1, price=10.0)
    result = recommend(
        ARCH, make_request(job(60), spot="only"), [offer], GPUS, providers(), toy_estimate
    )
    assert result.recommendations == []
    assert [g.code for g in result.rejected] == ["spot_unavailable"]
    assert [s.code for s in result.suggestions] == ["allow_on_demand"]


def test_budget_rejects_with_over_budget_and_suggests_the_least_budget() -> None:
    # 61 minutes at $11/h per second = $11.18 > $5 budget.
    offer = make_offer(gpu_count=1, price=11.0, provider="persecond", instance_type="s")
    result = recommend(
        ARCH, make_request(job(61), budget_usd=5.0), [offer], GPUS, providers(), toy_estimate
    )
    assert result.recommendations == []
    [group] = result.rejected
    assert group.code == "over_budget"
    assert group.text == "costs at least $11.18 on 1 × H100-SXM-80GB; budget_usd is $5.00"
    [suggestion] = result.suggestions
    assert suggestion.code == "raise_budget"
    assert suggestion.text == "raise budget_usd to at least $11.18 (persecond s us-east-1)"


def test_deadline_rejects_with_past_deadline() -> None:
    offer = make_offer(gpu_count=1, price=11.0)
    result = recommend(
        ARCH, make_request(job(61), deadline_hours=0.5), [offer], GPUS, providers(), toy_estimate
    )
    [group] = result.rejected
    assert group.code == "past_deadline"
    # 61 / 60 = 1.0167 h
    assert group.text == "takes at least 1.02 h on 1 × H100-SXM-80GB; deadline_hours is 0.5"
    assert [s.code for s in result.suggestions] == ["extend_deadline"]


def test_max_price_rejects_per_deployment_hour() -> None:
    offer = make_offer(gpu_count=1, price=11.0)
    result = recommend(
        ARCH,
        make_request(job(61), max_price_per_hour_usd=10.0),
        [offer],
        GPUS,
        providers(),
        toy_estimate,
    )
    [group] = result.rejected
    assert group.code == "over_max_price"
    assert group.text == (
        "costs at least $11.00/h on 1 × H100-SXM-80GB; max_price_per_hour_usd is $10.00"
    )


def test_provider_and_region_filters_reject_and_suggest() -> None:
    kept = make_offer(gpu_count=1, provider="a", region="eu-1", price=50.0)
    other_provider = make_offer(gpu_count=1, provider="b", region="eu-1", price=5.0)
    other_region = make_offer(gpu_count=1, provider="a", region="us-1", price=4.0)
    result = recommend(
        ARCH,
        make_request(job(60), providers=["a"], regions=["eu-1"], budget_usd=20.0),
        [kept, other_provider, other_region],
        GPUS,
        providers(),
        toy_estimate,
    )
    assert result.recommendations == []
    assert sorted(g.code for g in result.rejected) == [
        "over_budget",
        "provider_excluded",
        "region_excluded",
    ]
    texts = {s.code: s.text for s in result.suggestions}
    assert texts["include_provider"] == "add provider b (b h100-sxm-80gb-x1 eu-1)"
    assert texts["include_region"] == "add region us-1 (a h100-sxm-80gb-x1 us-1)"
    assert texts["raise_budget"] == "raise budget_usd to at least $50.00 (a h100-sxm-80gb-x1 eu-1)"


def test_when_no_single_limit_suffices_the_suggestion_names_all_of_them() -> None:
    # 61 minutes at $11/h: $11.18 and 1.0167 h. Budget $5 AND deadline 0.5 h: raising either
    # alone is not enough.
    offer = make_offer(gpu_count=1, price=11.0, provider="p", instance_type="s")
    result = recommend(
        ARCH,
        make_request(job(61), budget_usd=5.0, deadline_hours=0.5),
        [offer],
        GPUS,
        providers(),
        toy_estimate,
    )
    [group] = result.rejected
    assert group.code == "past_deadline"  # checked before the budget
    [suggestion] = result.suggestions
    assert suggestion.code == "relax_limits"
    assert suggestion.text == (
        "raise budget_usd to at least $11.18 and deadline_hours to at least 1.02 together "
        "(p s us-east-1)"
    )


def test_raising_one_limit_is_suggested_only_when_it_suffices() -> None:
    # Two offers: a fast dear one (fails the budget) and a slow cheap one (fails the deadline).
    fast = make_offer(gpu_count=1, price=30.0, provider="fast", instance_type="f")
    slow = make_offer("A100-SXM-80GB", 1, price=2.0, provider="slow", instance_type="s")
    # on the H100 (989.5 TFLOPS) the job takes 61 min: $30.50; on the A100 (312 TFLOPS, same
    # MFU) it takes 61 x 989.5 / 312 = 193.5 min (3.22 h): $6.45.
    result = recommend(
        ARCH,
        make_request(job(61), budget_usd=10.0, deadline_hours=2.0),
        [fast, slow],
        GPUS,
        providers(),
        toy_estimate,
    )
    texts = {s.code: s.text for s in result.suggestions}
    assert texts["raise_budget"] == "raise budget_usd to at least $30.50 (fast f us-east-1)"
    assert texts["extend_deadline"] == "raise deadline_hours to at least 3.22 (slow s us-east-1)"


def test_summary_is_a_field_and_rationale_lists_the_reasons() -> None:
    offer = make_offer(gpu_count=1, price=11.0, provider="persecond", instance_type="s")
    [rec] = recommend(
        ARCH, make_request(job(61)), [offer], GPUS, providers(), toy_estimate
    ).recommendations
    assert "summary" not in [r.code for r in rec.rationale]
    assert rec.rationale[0].code == "plan"
    assert rec.summary == "; ".join(r.text for r in rec.rationale)


def test_region_names_with_commas_are_listed_unambiguously() -> None:
    # vast.ai's regions read "Texas, US, NA": joined with ", " two of them would read as six.
    offers = [
        make_offer(gpu_count=1, provider="a", region=region, price=4.0)
        for region in ("Texas, US, NA", "Quebec, CA, NA")
    ]
    result = recommend(
        ARCH,
        make_request(job(60), regions=["California, US, NA"]),
        offers,
        GPUS,
        providers(),
        toy_estimate,
    )
    [group] = result.rejected
    assert group.code == "region_excluded"
    assert sorted(group.data["region"].split("; ")) == ["Quebec, CA, NA", "Texas, US, NA"]
