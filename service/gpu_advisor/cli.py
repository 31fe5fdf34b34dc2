"""The ``gpu-advisor`` command line (typer).

``gpu-advisor serve [--host H] [--port P] [--workers N]`` starts the HTTP service;
``gpu-advisor healthcheck`` probes it (the container's HEALTHCHECK). Options
override the environment (``GPU_ADVISOR_HOST``, ``GPU_ADVISOR_PORT``, ``GPU_ADVISOR_WORKERS``;
docs/configuration.md). Invalid settings print ``invalid setting <VARIABLE>: <what to fix>``
and exit with status 2.

``gpu-advisor check|estimate|recommend SPEC`` answers one request -- SPEC is the endpoint's
request body as a JSON or YAML file, or ``-`` for stdin -- in this process (the embedded
service, configured by the same environment) or against ``--url`` of a running service.
Exit status: 0 pass, 1 fail, 2 error (:mod:`gpu_advisor.client.commands`); docs/ci.md.
"""

from __future__ import annotations

import contextlib
import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from gpu_advisor.client.commands import COMMANDS, Command, CommandName, passed
from gpu_advisor.settings import Settings, SettingsError

if TYPE_CHECKING:
    from gpu_advisor.render.report import Response

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


class OutputFormat(enum.StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


SpecArgument = Annotated[
    str,
    typer.Argument(
        help="The request body as a JSON or YAML file (the endpoint's schema), or - for stdin.",
        show_default=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="A running gpu-advisor (http://host:port). Default: answer in this process.",
    ),
]
FormatOption = Annotated[
    OutputFormat | None,
    typer.Option(
        "--format",
        "-f",
        help="table (default on a terminal), json (default otherwise) or markdown.",
        case_sensitive=False,
    ),
]
BaselineOption = Annotated[
    Path | None,
    typer.Option(
        "--baseline",
        help="An earlier --format json result of the same command: report what changed.",
        dir_okay=False,
    ),
]
SaveOption = Annotated[
    Path | None,
    typer.Option(
        "--save-json",
        help="Also write the JSON result to this file (the next run's --baseline).",
        dir_okay=False,
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0.1, max=600, help="Seconds to wait for --url.")
]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"gpu-advisor: {message}", err=True)
    return typer.Exit(2)


def _answer(command: Command, spec: str, url: str | None, timeout_seconds: float) -> Response:
    """Read SPEC and answer it (progress on stderr only when stderr is a terminal)."""
    from rich.console import Console

    from gpu_advisor.client.runners import read_spec, run_in_process, run_remote

    stdin = sys.stdin.buffer.read() if spec == "-" else None
    request = read_spec(spec, command, stdin)
    console = Console(stderr=True)
    status = (
        console.status(command.progress + "...")
        if console.is_terminal
        else contextlib.nullcontext()
    )
    with status:
        if url is None:
            return run_in_process(request)
        return run_remote(command, request, url, timeout_seconds)


def run_command(
    name: CommandName,
    spec: str,
    *,
    url: str | None,
    output: OutputFormat | None,
    baseline: Path | None,
    save_json: Path | None,
    timeout_seconds: float,
) -> None:
    """Answer SPEC, print it in ``output`` format, compare with ``baseline``, exit 0/1/2."""
    from rich.console import Console

    from gpu_advisor.client.runners import ClientError, encode_json, read_baseline
    from gpu_advisor.decoding import SpecError
    from gpu_advisor.render.baseline import changes_table, compare
    from gpu_advisor.render.markdown import render_markdown, table_markdown
    from gpu_advisor.render.report import Report, report_for
    from gpu_advisor.render.text import print_report, render_text

    command = COMMANDS[name]
    try:
        before = read_baseline(str(baseline), command) if baseline is not None else None
        response = _answer(command, spec, url, timeout_seconds)
    except SpecError as exc:
        raise _fail(f"invalid spec {spec}: {exc}") from None
    except ClientError as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # a bug must not read as "fail" (exit 1)
        raise _fail(f"internal error: {type(exc).__name__}: {exc}") from None
    answer = response
    data = encode_json(answer)
    if save_json is not None:
        try:
            save_json.write_bytes(data)
        except OSError as exc:
            raise _fail(f"cannot write {save_json}: {exc.strerror or exc}") from None
    report: Report = report_for(answer)
    changes = changes_table(compare(before, answer)) if before is not None else None
    stdout = Console(markup=False, emoji=False, highlight=False)
    chosen = output or (OutputFormat.table if stdout.is_terminal else OutputFormat.json)
    match chosen:
        case OutputFormat.json:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            if changes is not None:
                typer.echo(
                    render_text(
                        msgspec.structs.replace(report, tables=[changes], lines=[], notes=[])
                    ),
                    err=True,
                    nl=False,
                )
        case OutputFormat.markdown:
            text = render_markdown(report)
            if changes is not None:
                text += "\n" + table_markdown(changes) + "\n"
            sys.stdout.write(text)
        case OutputFormat.table:
            if changes is not None:
                report = msgspec.structs.replace(report, tables=[*report.tables, changes])
            if stdout.is_terminal:
                print_report(report, stdout)
            else:
                sys.stdout.write(render_text(report))
    raise typer.Exit(0 if passed(answer) else 1)


@app.command()
def check(
    spec: SpecArgument,
    url: UrlOption = None,
    output: FormatOption = None,
    baseline: BaselineOption = None,
    save_json: SaveOption = None,
    timeout_seconds: TimeoutOption = 60.0,
) -> None:
    """Gate a workload on its target (POST /v1/check): exit 0 pass, 1 fail, 2 error."""
    run_command(
        "check",
        spec,
        url=url,
        output=output,
        baseline=baseline,
        save_json=save_json,
        timeout_seconds=timeout_seconds,
    )


@app.command()
def estimate(
    spec: SpecArgument,
    url: UrlOption = None,
    output: FormatOption = None,
    baseline: BaselineOption = None,
    save_json: SaveOption = None,
    timeout_seconds: TimeoutOption = 60.0,
) -> None:
    """Memory and speed per GPU (POST /v1/estimate): exit 0 when it fits the hardware (or
    some GPU type without hardware), 1 when not, 2 on error."""
    run_command(
        "estimate",
        spec,
        url=url,
        output=output,
        baseline=baseline,
        save_json=save_json,
        timeout_seconds=timeout_seconds,
    )


@app.command()
def recommend(
    spec: SpecArgument,
    url: UrlOption = None,
    output: FormatOption = None,
    baseline: BaselineOption = None,
    save_json: SaveOption = None,
    timeout_seconds: TimeoutOption = 60.0,
) -> None:
    """Rank the catalog's instances (POST /v1/recommendations): exit 0 when at least one
    fits, 1 when none does, 2 on error."""
    run_command(
        "recommend",
        spec,
        url=url,
        output=output,
        baseline=baseline,
        save_json=save_json,
        timeout_seconds=timeout_seconds,
    )


def main() -> None:
    """Console-script entry point (``gpu-advisor``)."""
    app()


if __name__ == "__main__":
    main()
