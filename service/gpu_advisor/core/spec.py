"""Workload, plan and constraint specifications: the inputs of the domain core.

These msgspec Structs are both the core's input values and the HTTP request schema
(DESIGN "API"): constraints declared with ``Annotated[..., Meta(...)]`` are enforced when a
request is decoded and reach the OpenAPI document unchanged. Unknown fields are rejected.

Defaults are what a practitioner would assume and are documented on each field:

* training: bf16 mixed precision with fp32 master weights and bf16 gradients, AdamW with fp32
  moments (2 + 4 + 2 + 8 = 16 bytes/parameter, ZeRO paper section 3.1), FlashAttention on,
  no gradient checkpointing, sharding chosen by the planner;
* inference: bf16 weights (or the checkpoint's shipped quantisation), KV cache in the weight
  dtype when that is 16-bit (else bf16), a vLLM-style engine at ``gpu_memory_utilization`` 0.9.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta, Struct

from gpu_advisor.core.limits import (
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_TOTAL_PARAMETERS,
    MAX_VOCAB,
)

# --- shared vocabularies -------------------------------------------------------------------

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "mxfp4", "q4_k_m", "q8_0"]
"""Weight dtypes. int4 = GPTQ/AWQ-style 4-bit with group size 128; nf4 = bitsandbytes NF4 with
double quantisation; q4_k_m / q8_0 = GGUF block formats (sized as bits per weight)."""

KvDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
Precision = Literal["fp32", "bf16-mixed", "fp16-mixed", "bf16"]
GradientDtype = Literal["bf16", "fp16", "fp32"]
Optimizer = Literal["adamw", "adamw-8bit", "sgd", "adafactor", "lion"]
Checkpointing = Literal["none", "selective", "full"]
Sharding = Literal["none", "zero1", "zero2", "zero3", "fsdp"]
Method = Literal["full", "lora", "qlora"]
Engine = Literal["vllm", "generic"]
SpotPolicy = Literal["allow", "forbid", "only"]
Objective = Literal["total_cost", "time_to_result", "price_per_hour", "cost_per_million_tokens"]

PositiveInt = Annotated[int, Meta(ge=1)]
# Bounds keep every request answerable in well under a second and reject absurd sizes with a
# 422 naming the field rather than letting arithmetic run away (issue 3, "Bad configs").
SequenceLength = Annotated[int, Meta(ge=1, le=10_485_760, description="Tokens per sequence.")]
Fraction = Annotated[float, Meta(ge=0.0, le=1.0)]

# Money, hours and token counts are bounded too: generous (far above any real job) but finite,
# so that no accepted value overflows float64 in the planner's arithmetic (a budget of 1e308
# divided by a cost coefficient below 1 is inf; 1e-300 tokens made a 1e302 USD per-million
# price). Each bound is in its field's description.
MAX_TRAINING_TOKENS: Final = 1e16
"""~250x the largest published pre-training runs (Llama 4, Qwen3: ~36-40e12 tokens)."""
MIN_MFU: Final = 0.01
"""Real runs reach 0.2-0.6 model-FLOPs utilisation (PaLM 0.46, Llama 3 0.38-0.43); below 1%
nothing practical runs, and a tiny MFU only inflates the time to result without bound."""
MAX_PRICE_PER_HOUR_USD: Final = 1e7
"""100x a 1,024-node job on the dearest 8-GPU instances (~$100/hour each: ~$1e5/hour)."""
MAX_BUDGET_USD: Final = 1e12
"""USD 1 trillion, above any compute budget ever announced."""
MAX_HOURS: Final = 1e6
"""About 114 years (10^6 / 8,766 hours per year)."""

POSITIVE_IN_SCHEMA: Final = {"extra": {"exclusiveMinimum": 0}}
"""``Meta(extra_json_schema=...)`` for an optional field that must be > 0: Litestar 2.25 copies
an optional field's bounds into the OpenAPI schema only when truthy
(``_apply_kwarg_definition_metadata``), so ``gt=0`` alone never shows there; its msgspec
plugin copies ``extra_json_schema["extra"]`` as it is. The ``gt=0`` next to it is what the
server enforces."""

PricePerHourUsd = Annotated[
    float,
    Meta(
        gt=0,
        extra_json_schema=POSITIVE_IN_SCHEMA,
        le=MAX_PRICE_PER_HOUR_USD,
        description=(
            "Most the whole deployment may cost per hour (instance price x nodes), USD; at most "
            "1e7 (100x a 1,024-node job on the dearest instances)."
        ),
    ),
]
BudgetUsd = Annotated[
    float,
    Meta(
        gt=0,
        extra_json_schema=POSITIVE_IN_SCHEMA,
        le=MAX_BUDGET_USD,
        description=(
            "Most the whole run may cost, USD (training needs `tokens`); at most 1e12, above "
            "any compute budget ever announced."
        ),
    ),
]
DeadlineHours = Annotated[
    float,
    Meta(
        gt=0,
        extra_json_schema=POSITIVE_IN_SCHEMA,
        le=MAX_HOURS,
        description=(
            "Training only: hours the run may take (needs `tokens`); at most 1e6 (~114 years)."
        ),
    ),
]


class _Request(Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Base for request bodies: unknown fields are a 400/422, never silently ignored."""


# --- model -----------------------------------------------------------------------------------


MODEL_SHAPE_FIELDS: Final = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)
"""The :class:`ModelSpec` fields that refine a bare parameter count into an architecture."""


class ModelSpec(_Request, frozen=True):
    """Which model: exactly one of ``preset``, ``config`` or ``parameters``.

    ``parameters`` alone gives a generic dense decoder (marked approximate); the optional
    architecture numbers refine it. ``config`` is a Hugging Face ``config.json`` object.
    """

    preset: (
        Annotated[
            str, Meta(min_length=1, max_length=200, description="Preset id, see GET /v1/models.")
        ]
        | None
    ) = None
    config: Annotated[
        dict[str, Any] | None, Meta(description="A Hugging Face config.json object, posted inline.")
    ] = None
    parameters: (
        Annotated[
            float,
            Meta(
                ge=1,
                le=MAX_TOTAL_PARAMETERS,
                description=(
                    "Total parameter count (generic dense), rounded to an integer: 1 to 1e14 "
                    "(the same limit as a posted config's total)."
                ),
            ),
        ]
        | None
    ) = None
    # The architecture numbers share their bounds with the config reader (core/limits.py):
    # the schema states exactly what the server enforces.
    num_layers: Annotated[int, Meta(ge=1, le=MAX_LAYERS)] | None = None
    hidden_size: Annotated[int, Meta(ge=1, le=MAX_HIDDEN)] | None = None
    num_attention_heads: Annotated[int, Meta(ge=1, le=MAX_HEADS)] | None = None
    num_kv_heads: Annotated[int, Meta(ge=1, le=MAX_HEADS)] | None = None
    head_dim: Annotated[int, Meta(ge=1, le=MAX_HEAD_DIM)] | None = None
    intermediate_size: Annotated[int, Meta(ge=1, le=MAX_INTERMEDIATE)] | None = None
    vocab_size: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_VOCAB,
                description=(
                    "Vocabulary rows: at most 10,000,000 (the largest real tokenizers have "
                    "~262k entries; the same limit applies to a posted config)."
                ),
            ),
        ]
        | None
    ) = None


# --- workloads (tagged union on ``kind``) ---------------------------------------------------


class TrainingWorkload(_Request, frozen=True, tag="training", tag_field="kind"):
    """Pre-training or fine-tuning. Memory terms follow DESIGN "Training model states"."""

    method: Method = "full"
    precision: Precision = "bf16-mixed"
    master_weights_fp32: Annotated[
        bool, Meta(description="Keep an fp32 master copy of the weights (mixed precision).")
    ] = True
    gradient_dtype: Annotated[
        GradientDtype | None,
        Meta(description="Gradient dtype; default: the compute dtype (bf16/fp16), fp32 for fp32."),
    ] = None
    fp32_gradient_copy: Annotated[
        bool,
        Meta(
            description=(
                "Also keep an fp32 copy of the 16-bit gradients for the optimizer step, as "
                "DeepSpeed ZeRO-1/2 does (2 + 4 bytes of gradients per parameter)."
            )
        ),
    ] = False
    optimizer: Optimizer = "adamw"
    sequence_length: SequenceLength = 2048
    target_sequence_length: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=10_485_760,
                description=(
                    "Encoder-decoder models (T5): target tokens per sequence the decoder runs "
                    "on; default: sequence_length."
                ),
            ),
        ]
        | None
    ) = None
    micro_batch_size: Annotated[int, Meta(ge=1, le=65_536)] = 1
    global_batch_size: Annotated[int, Meta(ge=1, le=100_000_000)] | None = None
    gradient_checkpointing: Checkpointing = "none"
    flash_attention: bool = True
    sharding: Annotated[
        Sharding | None, Meta(description="ZeRO stage / FSDP; default: chosen by the planner.")
    ] = None
    cpu_offload_optimizer: bool = False
    lora_rank: Annotated[int, Meta(ge=1, le=65_536)] = 16
    lora_alpha: (
        Annotated[
            float,
            Meta(
                gt=0,
                le=1e6,
                description="LoRA scale numerator (at most 1e6).",
                extra_json_schema=POSITIVE_IN_SCHEMA,
            ),
        ]
        | None
    ) = None
    lora_dropout: Annotated[
        float,
        Meta(
            ge=0,
            lt=1,
            description=(
                "Dropout on the adapters' input (PEFT lora_dropout, default 0.0); above 0 each "
                "adapter keeps its own dropped-out copy of the input for backward."
            ),
        ),
    ] = 0.0
    lora_targets: Annotated[
        list[Annotated[str, Meta(min_length=1, max_length=100)]],
        Meta(max_length=64, description='Module names, or ["all-linear"] (the default).'),
    ] = msgspec.field(default_factory=lambda: ["all-linear"])
    tokens: (
        Annotated[
            float,
            Meta(
                ge=1,
                le=MAX_TRAINING_TOKENS,
                description=(
                    "Training tokens to process in total: at least one optimizer step "
                    "(sequence_length x global_batch_size, or x micro_batch_size without a "
                    "global batch), at most 1e16 (~250x the largest published pre-training "
                    "runs, ~4e13 tokens)."
                ),
            ),
        ]
        | None
    ) = None
    mfu: (
        Annotated[
            float,
            Meta(
                ge=MIN_MFU,
                le=1,
                description=(
                    "Model-FLOPs utilisation override, 0.01-1 (real runs reach 0.2-0.6; "
                    "below 1% nothing practical runs)."
                ),
            ),
        ]
        | None
    ) = None


class InferenceWorkload(_Request, frozen=True, tag="inference", tag_field="kind"):
    """Serving. KV cache and engine reservation follow DESIGN "Inference"."""

    weight_dtype: Annotated[
        Dtype | None,
        Meta(description="Weight dtype; default: the checkpoint's shipped format, else bf16."),
    ] = None
    kv_cache_dtype: Annotated[
        KvDtype | None, Meta(description="KV cache dtype; default bf16 (fp32 for fp32 weights).")
    ] = None
    context_length: Annotated[
        int,
        Meta(
            ge=1,
            le=10_485_760,
            description=(
                "Tokens per sequence, prompt + output (vLLM max_model_len); at most the "
                "model's max_position_embeddings."
            ),
        ),
    ] = 4096
    concurrency: Annotated[
        int,
        Meta(
            ge=1,
            le=1_000_000,
            description=(
                "Concurrent sequences the whole deployment serves. Its replicas "
                "(data_parallel) share them: each holds ceil(concurrency / replicas), and "
                "each GPU's KV cache is sized for its replica's share."
            ),
        ),
    ] = 1
    engine: Engine = "vllm"
    gpu_memory_utilization: Annotated[float, Meta(gt=0, le=1)] = 0.9
    max_num_batched_tokens: Annotated[int, Meta(ge=1, le=10_485_760)] | None = None
    max_num_seqs: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=1_048_576,
                description=(
                    "vLLM --max-num-seqs: sequences one replica runs at once (default 1024 on "
                    "GPUs of at least 70 GiB, else 256). A deployment runs its concurrency "
                    "on at least ceil(concurrency / max_num_seqs) replicas."
                ),
            ),
        ]
        | None
    ) = None
    cuda_graphs: bool = True
    prompt_tokens: (
        Annotated[int, Meta(ge=1, le=10_485_760, description="Prompt tokens per request.")] | None
    ) = None
    output_tokens: Annotated[int, Meta(ge=1, le=10_485_760)] = 256
    target_tokens_per_second: (
        Annotated[
            float,
            Meta(
                gt=0,
                le=1e12,
                description="Aggregate output tokens/s to sustain.",
                extra_json_schema=POSITIVE_IN_SCHEMA,
            ),
        ]
        | None
    ) = None
    serving_hours: Annotated[
        float, Meta(gt=0, le=87_600, description="How long the deployment runs (for total cost).")
    ] = 1.0


Workload = TrainingWorkload | InferenceWorkload


# --- plan, hardware, constraints ------------------------------------------------------------


class PlanSpec(_Request, frozen=True):
    """A parallel plan. Products must equal the GPUs used: TP x PP x DP = GPUs."""

    tensor_parallel: Annotated[int, Meta(ge=1, le=1024)] = 1
    pipeline_parallel: Annotated[int, Meta(ge=1, le=1024)] = 1
    data_parallel: Annotated[int, Meta(ge=1, le=100_000)] = 1
    expert_parallel: Annotated[int, Meta(ge=1, le=1024)] = 1
    sharding: Sharding = "none"
    sequence_parallel: Annotated[
        bool, Meta(description="Megatron sequence parallelism with TP (activations / TP).")
    ] = True


class HardwareSpec(_Request, frozen=True):
    gpu: Annotated[str, Meta(min_length=1, max_length=100, description="GPU id or alias.")]
    gpu_count: Annotated[
        int,
        Meta(
            ge=1,
            le=100_000,
            description=(
                "GPUs per node: at most 16 (HGX-2 / DGX-2 class; 8 on HGX/DGX boards), 72 for "
                "GB200 NVL72; use nodes for more."
            ),
        ),
    ] = 1
    nodes: Annotated[int, Meta(ge=1, le=10_000)] = 1


class Constraints(_Request, frozen=True):
    providers: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=64)]],
            Meta(
                min_length=1,
                description=(
                    "Providers to allow (case-insensitive; omit the field for all). Each must "
                    "be a provider of the provider table or of an offer in the catalog."
                ),
            ),
        ]
        | None
    ) = None
    regions: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=64)]],
            Meta(
                min_length=1,
                description=(
                    "Regions to allow (case-insensitive; omit the field for all). Each must be "
                    "the region of an offer in the catalog."
                ),
            ),
        ]
        | None
    ) = None
    gpu_types: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=100)]],
            Meta(
                min_length=1,
                description=(
                    "GPU ids or aliases to allow (omit the field for all). A family name "
                    "allows every variant (A100: SXM and PCIe, 40 and 80 GB); a form or size "
                    "narrows it (A100-80GB, H100-NVL)."
                ),
            ),
        ]
        | None
    ) = None
    spot: SpotPolicy = "forbid"
    max_price_per_hour_usd: PricePerHourUsd | None = None
    budget_usd: BudgetUsd | None = None
    deadline_hours: DeadlineHours | None = None
    max_gpus: Annotated[int, Meta(ge=1, le=100_000)] | None = None
    max_nodes: Annotated[int, Meta(ge=1, le=1024)] = 16
    min_headroom_fraction: Annotated[float, Meta(ge=0, lt=1)] = 0.0


# --- request bodies ----------------------------------------------------------------------


class RecommendationRequest(_Request, frozen=True):
    model: ModelSpec
    workload: Workload
    constraints: Constraints = msgspec.field(default_factory=Constraints)
    objective: Objective = "total_cost"
    top_k: Annotated[int, Meta(ge=1, le=100)] = 5


class EstimateRequest(_Request, frozen=True):
    model: ModelSpec
    workload: Workload
    hardware: HardwareSpec | None = None
    plan: PlanSpec | None = None


class CheckTarget(_Request, frozen=True):
    """Where the workload must run: exactly one form.

    * ``{provider, instance_type}``: that instance type in any region of that provider;
    * ``{instance_types: [...]}``: any of those instance types on any provider (``provider``
      may narrow it to one provider);
    * ``{gpu, gpu_count, nodes}``: ``gpu_count`` GPUs per node on ``nodes`` nodes of a
      reference instance (the GPU's own NVLink, InfiniBand between nodes), priced as the
      cheapest catalog offer with that GPU and count.

    ``nodes`` is the most nodes (instances) the job may use, in every form (default 1).
    """

    provider: (
        Annotated[
            str,
            Meta(min_length=1, max_length=64, description="Provider id (aws, gcp, lambda...)."),
        ]
        | None
    ) = None
    instance_type: (
        Annotated[
            str,
            Meta(min_length=1, max_length=200, description="Instance type of that provider."),
        ]
        | None
    ) = None
    gpu: (
        Annotated[str, Meta(min_length=1, max_length=100, description="GPU id or alias.")] | None
    ) = None
    gpu_count: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=100_000,
                description=(
                    "GPUs per node with `gpu` (default 1): at most 16, 72 for GB200 NVL72."
                ),
            ),
        ]
        | None
    ) = None
    nodes: (
        Annotated[
            int,
            Meta(ge=1, le=1024, description="Most nodes (instances) the job may use; default 1."),
        ]
        | None
    ) = None
    instance_types: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=200)]],
            Meta(
                min_length=1,
                max_length=100,
                description="Allowed instance types, on any provider (or on `provider`).",
            ),
        ]
        | None
    ) = None


class CheckRequest(_Request, frozen=True):
    """``POST /v1/check`` (and ``gpu-advisor check SPEC``): does the workload fit the target,
    with enough headroom, within budget and deadline? On-demand prices."""

    model: ModelSpec
    workload: Workload
    target: CheckTarget
    budget_usd: BudgetUsd | None = None
    deadline_hours: DeadlineHours | None = None
    min_headroom_fraction: Annotated[
        float, Meta(ge=0, lt=1, description="Share of each GPU's memory to keep free.")
    ] = 0.0
