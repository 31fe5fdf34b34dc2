"""The composition root: the only module that reads the environment (STYLE rule 5).

``uvicorn gpu_advisor.asgi:app`` (or ``granian --interface asgi gpu_advisor.asgi:app``) serves
the module-level ``app``; ``gpu-advisor serve`` runs the factory :func:`create` in each worker.
Both read the settings once, configure logging and build the application with its
dependencies.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from litestar import Litestar

from gpu_advisor.advisor import Advisor
from gpu_advisor.allocator import keep_heap
from gpu_advisor.api.app import create_app
from gpu_advisor.api.routes.catalog import CATALOG_ROUTES
from gpu_advisor.api.routes.models import MODEL_ROUTES
from gpu_advisor.api.routes.planning import PLANNING_ROUTES
from gpu_advisor.catalog.service import CatalogService
from gpu_advisor.logs import configure_logging, get_logger
from gpu_advisor.metrics import Metrics
from gpu_advisor.observer import (
    NULL_OBSERVER,
    AnswerObserver,
    CatalogObserver,
    LoggingCatalogObserver,
)
from gpu_advisor.settings import Settings, SettingsError

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from ``environ`` (the process environment by default).

    Raises:
        SettingsError: naming the invalid variable.
    """
    return Settings.from_env(os.environ if environ is None else environ)


def build_advisor(
    settings: Settings,
    observer: CatalogObserver | None = None,
    *,
    advisor_class: type[Advisor] = Advisor,
    answer_observer: AnswerObserver = NULL_OBSERVER,
) -> tuple[CatalogService, Advisor]:
    """The pricing catalog and the application service for ``settings``: the one wiring the
    HTTP app and the in-process CLI (``gpu-advisor check SPEC``) share, so both answer from
    the same sources. The caller starts and closes the catalog. ``advisor_class``: an
    :class:`Advisor` subclass to wire instead (``bench/http_offload_app.py``);
    ``answer_observer``: told of each answer-cache hit and miss (the app's metrics)."""
    catalog = CatalogService(settings.catalog_config(), observer=observer)
    return catalog, advisor_class(
        catalog,
        answer_cache_entries=settings.answer_cache_entries,
        pause_collector=settings.pause_collector,
        observer=answer_observer,
    )


def build(
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    *,
    advisor_class: type[Advisor] = Advisor,
) -> Litestar:
    """Wire the application for ``settings``: logging, metrics, services, routes
    (``advisor_class``: as :func:`build_advisor`)."""
    environ = os.environ if environ is None else environ
    configure_logging(settings.log_level, settings.log_format)
    if settings.keep_heap and not keep_heap():
        get_logger("gpu_advisor.app").info("allocator.defaults", reason="no glibc mallopt")
    metrics = Metrics(multiprocess_mode=bool(environ.get(MULTIPROC_VARIABLE)))
    catalog, advisor = build_advisor(
        settings,
        observer=LoggingCatalogObserver(metrics, get_logger("gpu_advisor.catalog")),
        advisor_class=advisor_class,
        answer_observer=metrics,
    )
    return create_app(
        settings,
        metrics=metrics,
        services=[catalog],
        route_handlers=[*CATALOG_ROUTES, *MODEL_ROUTES, *PLANNING_ROUTES],
        dependencies={"catalog": catalog, "gpus": catalog.gpus, "advisor": advisor},
    )


def create() -> Litestar:
    """Factory for ASGI servers (``--factory gpu_advisor.asgi:create``).

    Invalid settings print ``<VARIABLE>: <what to fix>`` to stderr and exit with status 2.
    """
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"gpu-advisor: invalid setting {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return build(settings)


def __getattr__(name: str) -> Litestar:
    # ``gpu_advisor.asgi:app`` builds on first access, so importing this module for
    # ``create`` (or in tests) does not read the environment or configure logging.
    if name == "app":
        return create()
    raise AttributeError(name)
