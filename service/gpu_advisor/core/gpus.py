"""GPU specifications and name resolution (DESIGN "GPU capacity", "Pricing catalog and cache").

The table itself is data (``gpu_advisor/data/gpus.csv``, dated, with a source column per row);
loading it is an adapter's job (:func:`gpu_advisor.catalog.gpu_table.load_gpu_catalog`). The
core receives a :class:`GpuCatalog` and never reads files.

Canonical ids are ``<MODEL>[-<FORM>]-<N>GB`` upper case (``H100-SXM-80GB``, ``L40S-48GB``).
Names from requests and from provider rows resolve through one function,
:func:`resolve_gpu_detailed`, in this order of evidence:

0. the whole name, compacted (upper case, separators dropped), equal to a listed id or alias
   (``H100NVL`` = ``H100 NVL``; ``RTXA4000``) names that variant;
1. tokens of the name itself: model, form (``SXM``/``PCIe``/``NVL``; ``MEGA`` and ``NVLink``
   mean SXM) and a memory size (``80GB``, ``80G``, ``80Gi``);
2. the same tokens in hints (an instance-type name such as ``gpu_8x_a100_80gb_sxm4``) - a memory
   token from a hint counts only when the model has a variant of that size, so host-RAM tokens
   such as ``4gb`` in ``..._1x2v4gb`` are ignored;
3. the per-GPU memory a source reports (``memory_mib``), matched against each variant's
   marketed and exposed size with a tolerance (clouds report 0.90-1.00 of the label:
   AWS L4 22,888 MiB of 24,576);
4. the model's default variant (``H100`` -> ``H100-SXM-80GB``; ``A100`` -> ``A100-SXM-40GB``,
   SkyPilot's convention that the bare name is the 40 GB part).

Evidence that contradicts the chosen variant (a reported 40,960 MiB on an instance named
``..._a100_80gb_...``, skypilot-catalog PR #15) is returned as a conflict so the normaliser can
record a correction; it never silently wins over an explicit name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from msgspec import Struct

FormFactor = Literal["sxm", "pcie", "nvl", "oam", "superchip", "other"]
ExposedBasis = Literal["observed", "cloud-reported", "nominal"]
ResolutionBasis = Literal["name", "hint", "memory", "default", "unknown"]

MIB = 2**20
GIB = 2**30

# A reported per-GPU size matches a variant when it lies in [LOW, HIGH] x the label in MiB.
# LOW 0.90: AWS reports L4/A10G/L40S at 0.931 of the label; ECC GDDR parts show 15/16 = 0.9375.
# HIGH 1.005: a little above the label for rounding; never the next variant up.
MEMORY_MATCH_LOW = 0.90
MEMORY_MATCH_HIGH = 1.005


class GpuSpec(Struct, frozen=True, kw_only=True):
    """One GPU model, per GPU (never per instance).

    Attributes:
        id: canonical id ``<MODEL>[-<FORM>]-<N>GB`` (``H100-SXM-80GB``).
        name: marketed name.
        vendor: ``nvidia`` | ``amd`` | ``intel``.
        architecture: ``hopper``, ``ampere``, ``ada-lovelace``, ``blackwell``, ``cdna-3``...
        form_factor: SXM / PCIe / NVL / OAM / superchip.
        memory_bytes: marketed capacity: the label N GB taken as N * 2**30 bytes (HBM and
            GDDR parts are built from power-of-two dies; labels and filters use this).
        memory_exposed_bytes: what the driver reports and a process can allocate (nvidia-smi
            total), used by fit checks; e.g. H100 80 GB -> 81,559 MiB.
        memory_exposed_basis: ``observed`` (driver total), ``cloud-reported`` (a cloud's
            per-GPU figure, e.g. AWS L4 22,888 MiB) or ``nominal`` (the label; no measurement).
        memory_bandwidth_bytes_per_s: peak HBM/GDDR bandwidth (datasheet GB/s * 10**9).
        bf16_dense_tflops / fp16_dense_tflops / fp8_dense_tflops / fp4_dense_tflops /
            int8_dense_tops / fp32_tflops / tf32_dense_tflops: dense peak rates (datasheet, sparse
            figures halved); None where the GPU has no such hardware path.
        nvlink_bytes_per_s: GPU-to-GPU link bandwidth (0 without NVLink/Infinity Fabric).
        compute_capability: CUDA compute capability (``"9.0"``), None for AMD/Intel.
        family: the resolver's model key (``H100``, ``RTXA6000``).
        variant_form: ``SXM`` | ``PCIE`` | ``NVL`` where the model exists in several forms, else "".
        default_variant: True for the variant a bare model name means.
        aliases: other names that resolve to this id (case-insensitive).
        source: keys of the sources the row was taken from.
    """

    id: str
    name: str
    vendor: str
    architecture: str
    form_factor: FormFactor
    memory_bytes: int
    memory_exposed_bytes: int
    memory_exposed_basis: ExposedBasis = "nominal"
    memory_bandwidth_bytes_per_s: int
    fp32_tflops: float | None = None
    tf32_dense_tflops: float | None = None
    bf16_dense_tflops: float | None = None
    fp16_dense_tflops: float | None = None
    fp8_dense_tflops: float | None = None
    fp4_dense_tflops: float | None = None
    int8_dense_tops: float | None = None
    nvlink_bytes_per_s: int = 0
    compute_capability: str | None = None
    family: str = ""
    variant_form: str = ""
    default_variant: bool = False
    aliases: tuple[str, ...] = ()
    source: str = ""

    @property
    def memory_gb_marketed(self) -> int:
        """The number on the label (``80`` for an 80 GB part)."""
        return self.memory_bytes // GIB


# --- name parsing ----------------------------------------------------------------------------

_NOISE = frozenset(
    {
        "NVIDIA",
        "TESLA",
        "GEFORCE",
        "AMD",
        "INSTINCT",
        "INTEL",
        "HABANA",
        "GENERATION",
        "EDITION",
        "WORKSTATION",
        "GPU",
        "HBM2",
        "HBM2E",
        "HBM3",
        "HBM3E",
        "GDDR6",
        "GDDR6X",
        "GDDR7",
        "PER",
    }
)
_FORMS = {
    "SXM": "SXM",
    "SXM2": "SXM",
    "SXM3": "SXM",
    "SXM4": "SXM",
    "SXM5": "SXM",
    "MEGA": "SXM",  # GCP a3-megagpu-8g: H100 SXM (SkyPilot "H100-MEGA")
    "NVLINK": "SXM",  # "A100_NVLINK_80GB", "n3-H100x8-NVLink": the SXM (HGX) boards
    "PCIE": "PCIE",
    "PCI": "PCIE",
    "NVL": "NVL",
}
_MEMORY_TOKEN = re.compile(r"^(\d{1,4})(?:GB|G|GI|GIB)$")
_SPLIT = re.compile(r"[^A-Z0-9]+")
_MAX_NAME_CHARS = 200


class ParsedName(Struct, frozen=True, kw_only=True):
    """Tokens read from a GPU name or hint: model key, form token, memory in GB (label)."""

    model: str
    form: str | None = None
    memory_gb: int | None = None


def parse_gpu_name(text: str) -> ParsedName:
    """Split a GPU name into model key, form and memory tokens.

    ``"NVIDIA A100-SXM4-80GB"`` -> model ``A100``, form ``SXM``, memory 80;
    ``"RTX PRO 6000 96GB"`` -> model ``RTXPRO6000``, memory 96. Vendor words, memory types and
    separators are dropped; the model key is upper case without separators.
    """
    tokens = [t for t in _SPLIT.split(text[:_MAX_NAME_CHARS].upper()) if t]
    model_parts: list[str] = []
    form: str | None = None
    memory_gb: int | None = None
    for token in tokens:
        if token in _NOISE:
            continue
        mem = _MEMORY_TOKEN.match(token)
        if mem is not None:
            memory_gb = memory_gb or int(mem.group(1))
            continue
        if token in _FORMS:
            # NVL outranks PCIE (an H100 NVL is also a PCIe card): keep the more specific one.
            new = _FORMS[token]
            if form is None or new == "NVL":
                form = new
            continue
        model_parts.append(token)
    return ParsedName(model="".join(model_parts), form=form, memory_gb=memory_gb)


def memory_matches(spec: GpuSpec, memory_mib: int) -> bool:
    """True when a reported per-GPU size (MiB) is plausibly this variant's memory.

    The window is [0.90, 1.005] x the label in MiB, or the exposed figure itself (see the
    module constants for the source of the bounds).
    """
    label_mib = spec.memory_bytes // MIB
    exposed_mib = spec.memory_exposed_bytes // MIB
    return (
        MEMORY_MATCH_LOW * label_mib <= memory_mib <= MEMORY_MATCH_HIGH * label_mib
        or memory_mib == exposed_mib
    )


# --- the catalog -----------------------------------------------------------------------------


class Resolution(Struct, frozen=True, kw_only=True):
    """The outcome of resolving one name.

    Attributes:
        spec: the resolved GPU, or None when the model is unknown.
        canonical_id: ``spec.id``, or for an unknown GPU ``<MODEL>[-<N>GB]`` built from the
            name's tokens (and the reported memory when the name has none).
        basis: which evidence chose the variant (``name``, ``hint``, ``memory``, ``default``).
        conflicts: evidence that disagreed with the choice, as reason codes
            (``memory_contradicts_name``, ``memory_matches_no_variant``).
        model: the parsed model key.
    """

    spec: GpuSpec | None
    canonical_id: str
    basis: ResolutionBasis
    conflicts: tuple[str, ...] = ()
    model: str = ""


class GpuCatalog(Struct, frozen=True, kw_only=True):
    """The GPU table as a value: specs by id, plus indexes for name resolution.

    Build it with :meth:`from_specs`; look up with :meth:`get` (canonical id, case-insensitive)
    or resolve names with :func:`resolve_gpu`.
    """

    specs: tuple[GpuSpec, ...]
    by_id: dict[str, GpuSpec]
    by_alias: dict[str, str]
    families: dict[str, tuple[str, ...]]
    family_aliases: dict[str, str]
    as_of: str = ""

    @classmethod
    def from_specs(cls, specs: Iterable[GpuSpec], *, as_of: str = "") -> GpuCatalog:
        """Index specs by id, alias and model family.

        Raises:
            ValueError: two specs share an id or an alias maps to two ids.
        """
        ordered = tuple(specs)
        by_id: dict[str, GpuSpec] = {}
        by_alias: dict[str, str] = {}
        families: dict[str, list[str]] = {}
        family_aliases: dict[str, str] = {}
        for spec in ordered:
            key = spec.id.upper()
            if key in by_id:
                raise ValueError(f"duplicate GPU id {spec.id}")
            by_id[key] = spec
            family = spec.family or parse_gpu_name(spec.id).model
            families.setdefault(family, []).append(spec.id)
            family_aliases.setdefault(family, family)
            for alias in (spec.id, *spec.aliases):
                compact = _compact(alias)
                if by_alias.get(compact, spec.id) != spec.id:
                    raise ValueError(f"alias {alias!r} maps to {by_alias[compact]} and {spec.id}")
                by_alias[compact] = spec.id
                parsed = parse_gpu_name(alias)
                # A form-less, memory-less alias ("A6000", "RTX 4090") names the whole family.
                if parsed.model and parsed.form is None and parsed.memory_gb is None:
                    family_aliases.setdefault(parsed.model, family)
        return cls(
            specs=ordered,
            by_id=by_id,
            by_alias=by_alias,
            families={k: tuple(v) for k, v in families.items()},
            family_aliases=family_aliases,
            as_of=as_of,
        )

    def get(self, gpu_id: str) -> GpuSpec | None:
        """The spec with this canonical id (case-insensitive), or None."""
        return self.by_id.get(gpu_id.upper())

    def variants(self, family: str) -> tuple[GpuSpec, ...]:
        """All variants of a model family (``H100`` -> SXM, PCIe, NVL)."""
        return tuple(self.by_id[i.upper()] for i in self.families.get(family, ()))

    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.specs)


def _compact(text: str) -> str:
    return "".join(t for t in _SPLIT.split(text[:_MAX_NAME_CHARS].upper()) if t)


_RTX_A_SERIES = re.compile(r"^A\d{4}$")


def unknown_model_key(model: str) -> str:
    """One spelling for a model the GPU table lacks.

    NVIDIA's RTX A-series workstation cards are named "RTX A4000", "RTX A5000" (NVIDIA product
    pages); clouds write them "A5000" (shadeform, paperspace, primeintellect) or "RTXA5000"
    (runpod, vast). A bare ``A`` + four digits is read as that series (data-centre A-parts
    have two or three digits: A10, A16, A30, A100, A800).
    """
    return f"RTX{model}" if _RTX_A_SERIES.match(model) else model


def _unknown_id(model: str, memory_gb: int | None) -> str:
    model = unknown_model_key(model)
    return f"{model}-{memory_gb}GB" if memory_gb else model


def resolve_gpu_detailed(
    catalog: GpuCatalog,
    name: str,
    memory_mib: int | None = None,
    hints: Iterable[str] = (),
) -> Resolution:
    """Resolve a GPU name (request or source row) to a canonical variant, with evidence.

    Args:
        catalog: the GPU table.
        name: any spelling (``"H100"``, ``"NVIDIA A100-SXM4-80GB"``, ``"RTX PRO 6000 96GB"``).
        memory_mib: per-GPU memory a source reports, MiB (None when unknown or unusable).
        hints: other strings that may carry form or memory tokens (instance-type names).

    Returns:
        A :class:`Resolution`; ``spec`` is None for a model not in the table (the caller keeps
        such offers flagged ``gpu_known=False``).
    """
    parsed = parse_gpu_name(name)
    exact = catalog.by_alias.get(_compact(name))
    family = catalog.family_aliases.get(parsed.model)
    if exact is not None:
        # 0. the whole name is a listed id or alias ("H100NVL" = "H100 NVL", "RTXA4000"):
        # it names one variant, whatever its tokens parse to.
        spec = catalog.by_id[exact.upper()]
        family = spec.family or parse_gpu_name(spec.id).model
        return _resolution(catalog, spec, family, "name", memory_mib, parsed.model)
    if family is None:
        mem_gb = parsed.memory_gb
        if mem_gb is None and memory_mib:
            mem_gb = round(memory_mib / 1024)
        return Resolution(
            spec=None,
            canonical_id=_unknown_id(parsed.model or "UNKNOWN", mem_gb),
            basis="unknown",
            model=parsed.model,
        )
    variants = catalog.variants(family)
    hint_parsed = [parse_gpu_name(h) for h in hints if h]
    candidates = variants
    used: set[ResolutionBasis] = set()

    def narrow(keep: tuple[GpuSpec, ...], why: ResolutionBasis) -> None:
        nonlocal candidates
        if keep and len(keep) < len(candidates):
            candidates = keep
            used.add(why)

    # 1-2. form: the name's token, else a hint's.
    if parsed.form is not None:
        narrow(tuple(v for v in candidates if v.variant_form == parsed.form), "name")
    else:
        for hint in hint_parsed:
            if hint.form is not None:
                narrow(tuple(v for v in candidates if v.variant_form == hint.form), "hint")
                break
    # 1-2. memory label: the name's token, else a hint's token that names a real variant.
    sizes = {v.memory_gb_marketed for v in candidates}
    if parsed.memory_gb in sizes:
        narrow(tuple(v for v in candidates if v.memory_gb_marketed == parsed.memory_gb), "name")
    else:
        for hint in hint_parsed:
            if hint.memory_gb in sizes:
                narrow(
                    tuple(v for v in candidates if v.memory_gb_marketed == hint.memory_gb), "hint"
                )
                break
    # 3. the reported per-GPU memory.
    if len(candidates) > 1 and memory_mib:
        narrow(tuple(v for v in candidates if memory_matches(v, memory_mib)), "memory")
    # 4. the family's default variant (else the first listed).
    if len(candidates) > 1:
        defaults = tuple(v for v in candidates if v.default_variant)
        candidates = (defaults[0] if defaults else candidates[0],)
        used.add("default")
    basis: ResolutionBasis = "name"
    for weaker in ("hint", "memory", "default"):
        if weaker in used:
            basis = weaker
    return _resolution(catalog, candidates[0], family, basis, memory_mib, parsed.model)


def _resolution(
    catalog: GpuCatalog,
    chosen: GpuSpec,
    family: str,
    basis: ResolutionBasis,
    memory_mib: int | None,
    model: str,
) -> Resolution:
    """The chosen variant, with the reported memory checked against it (conflicts)."""
    conflicts: list[str] = []
    if memory_mib and not memory_matches(chosen, memory_mib):
        if any(memory_matches(v, memory_mib) for v in catalog.variants(family)):
            conflicts.append("memory_contradicts_name")
        else:
            conflicts.append("memory_matches_no_variant")
    return Resolution(
        spec=chosen,
        canonical_id=chosen.id,
        basis=basis,
        conflicts=tuple(conflicts),
        model=model,
    )


def resolve_gpu(
    catalog: GpuCatalog,
    name: str,
    memory_mib: int | None = None,
    hints: Iterable[str] = (),
) -> GpuSpec | None:
    """Resolve a GPU name to its spec (case-insensitive, aliases, variants), or None.

    ``"H100"`` -> ``H100-SXM-80GB``; ``"A100"`` with ``memory_mib=81920`` -> ``A100-SXM-80GB``;
    ``"A10G"`` -> ``A10G-24GB`` (never ``A10-24GB``); ``"H100-NVL"`` -> ``H100-NVL-94GB``.
    See :func:`resolve_gpu_detailed` for the order of evidence.
    """
    return resolve_gpu_detailed(catalog, name, memory_mib, hints).spec


def matching_variants(catalog: GpuCatalog, name: str) -> tuple[GpuSpec, ...]:
    """Every variant a GPU name selects, for FILTERS (``constraints.gpu_types``,
    ``GET /v1/offers?gpu=``): a name matches each variant it is consistent with.

    * a listed id or alias that pins a form or memory size names that variant
      (``"H100-NVL"``, ``"nvidia a100-sxm4-80gb"``, ``"A100-SXM-40GB"``);
    * a family name alone names every variant (``"A100"``, ``"a100"`` -> SXM and PCIe, 40 and
      80 GB; ``"H100"`` -> SXM, PCIe, NVL; ``"L40S"`` -> its one variant);
    * a form or memory token narrows the family to the variants that have it (``"A100-80GB"``
      -> A100-SXM-80GB and A100-PCIE-80GB; ``"H100 PCIe"`` -> H100-PCIE-80GB).

    One GPU to size a workload on (``hardware.gpu``) resolves with :func:`resolve_gpu` instead,
    to the default variant.

    Returns:
        The matching specs in table order; empty for a name of no known family, or tokens no
        variant of the family has (``"A100-96GB"``).
    """
    parsed = parse_gpu_name(name)
    family = catalog.family_aliases.get(parsed.model)
    exact = catalog.by_alias.get(_compact(name))
    if exact is not None:
        spec = catalog.by_id[exact.upper()]
        spec_family = spec.family or parse_gpu_name(spec.id).model
        pins_variant = parsed.form is not None or parsed.memory_gb is not None
        if pins_variant or family != spec_family:
            return (spec,)
        family = spec_family
    if family is None:
        return ()
    variants = catalog.variants(family)
    if parsed.form is not None and any(v.variant_form for v in variants):
        variants = tuple(v for v in variants if v.variant_form == parsed.form)
    if parsed.memory_gb is not None:
        variants = tuple(v for v in variants if v.memory_gb_marketed == parsed.memory_gb)
    return variants
