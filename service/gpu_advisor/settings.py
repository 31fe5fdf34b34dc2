"""The service's settings: one typed, frozen object read once from the environment.

Only the composition root (:mod:`gpu_advisor.asgi`) and the CLI call :meth:`Settings.from_env`;
every other module receives the object (STYLE rule 5). Every variable is prefixed
``GPU_ADVISOR_`` except ``REDIS_URL``; ``docs/configuration.md`` lists them all with their
defaults (a test keeps the two in step with :data:`VARIABLES`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal
from urllib.parse import unquote, urlsplit

import msgspec
from msgspec import Meta
from redis.connection import parse_url

from gpu_advisor.catalog.config import DEFAULT_TTLS, CatalogConfig

Source = Literal["bundled", "skypilot", "gpuhunt", "table"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["json", "console"]
Server = Literal["uvicorn", "granian"]

SOURCES: Final[tuple[str, ...]] = ("bundled", "skypilot", "gpuhunt", "table")
PREFIX: Final = "GPU_ADVISOR_"

# Names whose case carries nothing (LOG_LEVEL=DEBUG is the common spelling).
_CASE_INSENSITIVE: Final = frozenset({"log_level", "log_format", "server"})
_REDIS_SCHEMES: Final = frozenset({"redis", "rediss", "unix"})
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?$")
_SECRET_MASK: Final = "***"
_SECRET_FIELDS: Final = frozenset({"admin_token", "redis_url"})


class SettingsError(Exception):
    """An environment variable holds a value the service cannot start with.

    Attributes:
        variable: the environment variable's name (``GPU_ADVISOR_PORT``).
        message: what is wrong and what to set instead.
    """

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(f"{variable}: {message}")
        self.variable = variable
        self.message = message


def _check_redis_url(url: str) -> None:
    """What redis-py would reject at the first connection -- or silently change: database 0
    for a database path that is not a number, port 6379 for port 0 -- as a settings error at
    start. redis-py's own parser (``redis.connection.parse_url``, which ``from_url`` uses)
    reads the URL; the checks it leaves out come after. Messages never quote the URL (it may
    hold a password).

    Raises:
        SettingsError: naming REDIS_URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in _REDIS_SCHEMES:
        raise SettingsError(
            "REDIS_URL", "must start with redis://, rediss:// or unix:// (or be unset)"
        )
    try:
        parse_url(url)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    except ValueError:
        raise SettingsError(
            "REDIS_URL",
            "is not a URL redis-py can read: check the port (1-65535) and the query string "
            "(db=<number>, ...)",
        ) from None
    if parts.scheme == "unix":
        return
    if not parts.hostname:
        raise SettingsError("REDIS_URL", "must name a host (redis://host:6379/0)")
    if parts.port == 0:
        raise SettingsError("REDIS_URL", "port must be a number from 1 to 65535")
    database = unquote(parts.path.strip("/"))
    if database and not (database.isascii() and database.isdigit()):
        raise SettingsError(
            "REDIS_URL", "database (the path) must be a number, as in redis://host:6379/0"
        )


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Everything the process is configured with. Defaults are the embedded mode: bundled
    catalog, in-process cache, JSON logs, no admin token (refresh disabled), CORS off.

    Units are in the names: seconds, bytes, requests per minute.
    """

    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=1, le=65535)] = 8000
    workers: Annotated[int, Meta(ge=1, le=64)] = 1
    server: Server = "granian"
    log_level: LogLevel = "info"
    log_format: LogFormat = "json"
    redis_url: str | None = None
    sources: tuple[Source, ...] = ("bundled",)
    skypilot_url: str | None = None
    gpuhunt_url: str | None = None
    table_path: str | None = None
    skypilot_ttl_seconds: Annotated[int, Meta(ge=60, le=7 * 86_400)] = 21_600
    gpuhunt_ttl_seconds: Annotated[int, Meta(ge=60, le=7 * 86_400)] = 21_600
    table_ttl_seconds: Annotated[int, Meta(ge=60, le=7 * 86_400)] = 300
    source_timeout_seconds: Annotated[float, Meta(gt=0, le=300)] = 20.0
    admin_token: str | None = None
    max_request_body_bytes: Annotated[int, Meta(ge=1024, le=100 * 2**20)] = 2**20
    rate_limit_per_minute: Annotated[int, Meta(ge=0, le=1_000_000)] = 600
    answer_cache_entries: Annotated[int, Meta(ge=0, le=100_000)] = 256
    keep_heap: bool = True
    pause_collector: bool = True
    cors_allow_origins: tuple[str, ...] = ()
    forwarded_allow_ips: str = "127.0.0.1"
    shutdown_timeout_seconds: Annotated[int, Meta(ge=1, le=600)] = 20

    def __repr__(self) -> str:
        """Never print the admin token or a Redis password (logs, tracebacks, REPL)."""
        fields = ", ".join(f"{k}={v!r}" for k, v in self.public_view().items())
        return f"Settings({fields})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read the settings from an environment mapping (``os.environ`` in the composition root).

        Empty or unset variables take their default.

        Raises:
            SettingsError: naming the first variable whose value is invalid.
        """
        raw: dict[str, Any] = {}
        for variable in VARIABLES:
            value = environ.get(variable.name, "").strip()
            if variable.field in _CASE_INSENSITIVE:
                value = value.lower()
            if value:
                raw[variable.field] = _split(value) if variable.is_list else value
        try:
            settings = msgspec.convert(raw, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise _as_settings_error(str(exc), raw) from None
        settings.validate()
        return settings

    def validate(self) -> None:
        """Checks that one field's type cannot express.

        Raises:
            SettingsError: naming the variable to fix.
        """
        if self.redis_url is not None:
            _check_redis_url(self.redis_url)
        if len(set(self.sources)) != len(self.sources):
            raise SettingsError(_env("sources"), "lists a source more than once")
        if not self.sources:
            raise SettingsError(_env("sources"), f"must name at least one of {', '.join(SOURCES)}")
        if "table" in self.sources and not self.table_path:
            raise SettingsError(
                _env("table_path"),
                f"must be set to a CSV or YAML file when {_env('sources')} includes 'table'",
            )
        for field in ("skypilot_url", "gpuhunt_url"):
            url = getattr(self, field)
            if url is not None and urlsplit(url).scheme not in ("http", "https", "file", ""):
                raise SettingsError(_env(field), "must be an http(s) URL or a directory path")
        if self.admin_token is not None and (
            len(self.admin_token) < 16 or not self.admin_token.isprintable()
        ):
            raise SettingsError(
                _env("admin_token"),
                "must be at least 16 printable characters (e.g. `openssl rand -hex 32`)",
            )
        for origin in self.cors_allow_origins:
            if origin != "*" and not _ORIGIN.match(origin):
                raise SettingsError(
                    _env("cors_allow_origins"),
                    f"{origin!r} is not an origin; use '*' or scheme://host[:port], "
                    "comma-separated",
                )
        if not self.host or any(ch.isspace() for ch in self.host):
            raise SettingsError(_env("host"), "must be an interface address such as 0.0.0.0")

    def public_view(self) -> dict[str, Any]:
        """The settings as a dict safe to log: the admin token masked (``"***"`` when set,
        None when unset) and any Redis password masked."""
        view = msgspec.structs.asdict(self)
        if self.admin_token is not None:
            view["admin_token"] = _SECRET_MASK
        if self.redis_url is not None:
            view["redis_url"] = mask_url_password(self.redis_url)
        return view

    def catalog_config(self) -> CatalogConfig:
        """The pricing catalog's configuration: sources, their URLs and TTLs, Redis, the admin
        token and the outbound timeout (the other CatalogConfig fields keep their defaults)."""
        return CatalogConfig(
            sources=self.sources,
            skypilot_url=self.skypilot_url,
            gpuhunt_url=self.gpuhunt_url,
            table_path=self.table_path,
            ttl_seconds={
                **DEFAULT_TTLS,
                "skypilot": float(self.skypilot_ttl_seconds),
                "gpuhunt": float(self.gpuhunt_ttl_seconds),
                "table": float(self.table_ttl_seconds),
            },
            http_connect_timeout_seconds=min(5.0, self.source_timeout_seconds),
            http_read_timeout_seconds=self.source_timeout_seconds,
            redis_url=self.redis_url,
            admin_token=self.admin_token,
        )


class Variable(msgspec.Struct, frozen=True, kw_only=True):
    """One environment variable: its name, the Settings field it fills, and its meaning."""

    name: str
    field: str
    meaning: str
    is_list: bool = False


def _var(field: str, meaning: str, *, name: str | None = None, is_list: bool = False) -> Variable:
    return Variable(
        name=name or PREFIX + field.upper(), field=field, meaning=meaning, is_list=is_list
    )


VARIABLES: Final[tuple[Variable, ...]] = (
    _var("host", "Interface the HTTP server binds (the container image sets 0.0.0.0)."),
    _var("port", "TCP port the HTTP server listens on (1-65535)."),
    _var("workers", "Server worker processes (1-64); on Kubernetes prefer 1 and more pods."),
    _var("server", "ASGI server that `gpu-advisor serve` runs: uvicorn or granian."),
    _var("log_level", "Minimum log level: debug, info, warning, error or critical."),
    _var("log_format", "json (one JSON object per line) or console (coloured, for a terminal)."),
    _var(
        "redis_url",
        "Shared catalog cache (redis://, rediss:// or unix://). Unset: in-process cache.",
        name="REDIS_URL",
    ),
    _var(
        "sources",
        "Pricing sources, comma-separated, from: bundled, skypilot, gpuhunt, table.",
        is_list=True,
    ),
    _var("skypilot_url", "SkyPilot catalog v7: base URL or directory holding <cloud>/vms.csv."),
    _var("gpuhunt_url", "dstack gpuhunt catalog URL. Unset: the source's own default."),
    _var("table_path", "Your own offers table (CSV or YAML); required when sources has table."),
    _var("skypilot_ttl_seconds", "Seconds a cached SkyPilot catalog stays fresh (60-604800)."),
    _var("gpuhunt_ttl_seconds", "Seconds a cached gpuhunt catalog stays fresh (60-604800)."),
    _var("table_ttl_seconds", "Seconds before the table file is read again (60-604800)."),
    _var("source_timeout_seconds", "Timeout of one outbound fetch of a pricing source (0-300]."),
    _var(
        "admin_token",
        "Bearer token for POST /v1/catalog/refresh (16+ characters). Unset: refresh disabled.",
    ),
    _var("max_request_body_bytes", "Largest accepted request body in bytes (1024-104857600)."),
    _var("rate_limit_per_minute", "Requests per client address per minute; 0 switches it off."),
    _var(
        "answer_cache_entries",
        "Answers kept per process for repeated requests (same body, same catalog); 0: off.",
    ),
    _var(
        "keep_heap",
        "Keep freed C heap between requests (glibc mallopt; true/false): fewer page faults.",
    ),
    _var(
        "pause_collector",
        "Pause Python's cyclic garbage collector during each planning call (true/false).",
    ),
    _var(
        "cors_allow_origins",
        "Origins allowed by CORS, comma-separated ('*' for any). Unset: CORS off.",
        is_list=True,
    ),
    _var(
        "forwarded_allow_ips",
        "Proxies whose X-Forwarded-For is trusted for the client address ('*' for any).",
    ),
    _var("shutdown_timeout_seconds", "Seconds in-flight requests get to finish on SIGTERM."),
)

_BY_FIELD: Final = {v.field: v for v in VARIABLES}
_FIELD_IN_MESSAGE = re.compile(r"\s*-\s*at `\$\.(?P<field>[a-z_]+)(?:\[\d+\])?`$")


def default_text(variable: Variable) -> str:
    """The variable's default as docs/configuration.md writes it (``(unset)`` for none)."""
    value = getattr(Settings(), variable.field)
    if value is None or value == ():
        return "(unset)"
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _env(field: str) -> str:
    return _BY_FIELD[field].name


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _as_settings_error(message: str, raw: Mapping[str, Any]) -> SettingsError:
    """msgspec's ``Expected `int` >= 1 - at `$.port``` -> the variable, the value, the meaning."""
    match = _FIELD_IN_MESSAGE.search(message)
    if match is None or match.group("field") not in _BY_FIELD:
        return SettingsError(PREFIX + "*", message)
    variable = _BY_FIELD[match.group("field")]
    detail = message[: match.start()].replace(", got `str`", "")
    value = raw.get(variable.field)
    shown = "" if variable.field in _SECRET_FIELDS or value is None else f"{value!r}: "
    return SettingsError(variable.name, f"{shown}{detail}. {variable.meaning}")


def mask_url_password(url: str) -> str:
    """``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", f":{_SECRET_MASK}@", 1)
    return parts._replace(netloc=netloc).geturl()
