"""The ``gpu-advisor`` command line (typer).

``gpu-advisor serve [--host H] [--port P] [--workers N]`` starts the HTTP service;
``gpu-advisor healthcheck`` probes it (the container's HEALTHCHECK). Options
override the environment (``GPU_ADVISOR_HOST``, ``GPU_ADVISOR_PORT``, ``GPU_ADVISOR_WORKERS``;
docs/configuration.md). Invalid settings print ``invalid setting <VARIABLE>: <what to fix>``
and exit with status 2. Other commands (check, estimate, recommend) join the same ``app``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from gpu_advisor.settings import Settings, SettingsError

app = typer.Typer(
    name="gpu-advisor",
    help="Which cloud GPU instance should run this AI workload - and why not the others.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Keep typer in sub-command mode (``gpu-advisor serve``) while serve is the only one."""


# The ASGI factory every worker process runs (reads the settings from the environment).
ASGI_FACTORY = "gpu_advisor.asgi:create"


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind [GPU_ADVISOR_HOST].")] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="TCP port [GPU_ADVISOR_PORT].")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, max=64, help="Worker processes [GPU_ADVISOR_WORKERS].")
    ] = None,
) -> None:
    """Start the HTTP service (embedded defaults: bundled catalog, in-process cache)."""
    from gpu_advisor.asgi import load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        typer.echo(f"gpu-advisor: invalid setting {exc}", err=True)
        raise typer.Exit(2) from None
    overrides = {
        name: value
        for name, value in (("host", host), ("port", port), ("workers", workers))
        if value is not None
    }
    settings = msgspec.structs.replace(settings, **overrides)
    run_server(settings)


@app.command()
def healthcheck(
    timeout_seconds: Annotated[float, typer.Option(min=0.1, max=60, help="Request timeout.")] = 3.0,
) -> None:
    """Exit 0 when this container's service answers GET /healthz (the image's HEALTHCHECK)."""
    import urllib.request

    from gpu_advisor.asgi import load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        typer.echo(f"gpu-advisor: invalid setting {exc}", err=True)
        raise typer.Exit(2) from None
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    url = f"http://{host}:{settings.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
            healthy = response.status == 200
    except OSError as exc:
        typer.echo(f"unhealthy: {url}: {exc}", err=True)
        raise typer.Exit(1) from None
    if not healthy:
        raise typer.Exit(1)


def run_server(settings: Settings, factory: str = ASGI_FACTORY) -> None:
    """Run the configured ASGI server in this process until SIGTERM/SIGINT.

    Each worker builds the application with ``factory`` (an import string, by default
    :data:`ASGI_FACTORY`); on SIGTERM the server stops
    accepting connections, lets in-flight requests finish for up to
    ``settings.shutdown_timeout_seconds``, then runs the lifespan shutdown (closing Redis).
    """
    from gpu_advisor.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    match settings.server:
        case "uvicorn":
            import uvicorn

            uvicorn.run(
                factory,
                factory=True,
                host=settings.host,
                port=settings.port,
                workers=settings.workers,
                log_config=None,
                access_log=False,
                proxy_headers=False,  # the app applies X-Forwarded-For itself (any server)
                timeout_graceful_shutdown=settings.shutdown_timeout_seconds,
                server_header=False,
            )
        case "granian":
            from granian.constants import Interfaces
            from granian.log import LogLevels
            from granian.server import Server

            Server(
                factory,
                factory=True,
                address=settings.host,
                port=settings.port,
                workers=settings.workers,
                interface=Interfaces.ASGI,
                log_level=LogLevels(settings.log_level),
                # granian's own records go to the root logger configured above (same JSON).
                log_dictconfig={
                    "formatters": {},
                    "handlers": {},
                    "loggers": {"_granian": {"handlers": [], "propagate": True}},
                },
                log_access=False,
                workers_kill_timeout=settings.shutdown_timeout_seconds,
            ).serve()


def main() -> None:
    """Console-script entry point (``gpu-advisor``)."""
    app()


if __name__ == "__main__":
    main()
