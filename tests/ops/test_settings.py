"""Settings.from_env: defaults, every variable read, every invalid value named."""

from __future__ import annotations

import pytest

from gpu_advisor.settings import VARIABLES, Settings, SettingsError

TOKEN = "s3cr3t-admin-token-0123456789"


def test_empty_environment_gives_the_embedded_defaults() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.sources == ("bundled",)
    assert settings.redis_url is None
    assert settings.admin_token is None
    assert settings.cors_allow_origins == ()
    assert settings.max_request_body_bytes == 2**20  # 1 MiB


def test_every_variable_is_read() -> None:
    environ = {
        "GPU_ADVISOR_HOST": "0.0.0.0",
        "GPU_ADVISOR_PORT": "9001",
        "GPU_ADVISOR_WORKERS": "3",
        "GPU_ADVISOR_SERVER": "uvicorn",
        "GPU_ADVISOR_LOG_LEVEL": "debug",
        "GPU_ADVISOR_LOG_FORMAT": "console",
        "REDIS_URL": "redis://:pw@redis.internal:6380/2",
        "GPU_ADVISOR_SOURCES": " bundled , skypilot,gpuhunt,table ",
        "GPU_ADVISOR_SKYPILOT_URL": "https://catalog.example/v7",
        "GPU_ADVISOR_GPUHUNT_URL": "https://gpuhunt.example/catalog.zip",
        "GPU_ADVISOR_TABLE_PATH": "/etc/gpu-advisor/offers.yaml",
        "GPU_ADVISOR_SKYPILOT_TTL_SECONDS": "600",
        "GPU_ADVISOR_GPUHUNT_TTL_SECONDS": "700",
        "GPU_ADVISOR_TABLE_TTL_SECONDS": "60",
        "GPU_ADVISOR_SOURCE_TIMEOUT_SECONDS": "2.5",
        "GPU_ADVISOR_ADMIN_TOKEN": TOKEN,
        "GPU_ADVISOR_MAX_REQUEST_BODY_BYTES": "4096",
        "GPU_ADVISOR_RATE_LIMIT_PER_MINUTE": "0",
        "GPU_ADVISOR_ANSWER_CACHE_ENTRIES": "0",
        "GPU_ADVISOR_KEEP_HEAP": "false",
        "GPU_ADVISOR_PAUSE_COLLECTOR": "false",
        "GPU_ADVISOR_CORS_ALLOW_ORIGINS": "https://a.example,http://localhost:3000",
        "GPU_ADVISOR_FORWARDED_ALLOW_IPS": "10.0.0.0/8",
        "GPU_ADVISOR_SHUTDOWN_TIMEOUT_SECONDS": "25",
    }
    # The test names every variable the settings know.
    assert set(environ) == {v.name for v in VARIABLES}
    s = Settings.from_env(environ)
    assert (s.host, s.port, s.workers, s.server) == ("0.0.0.0", 9001, 3, "uvicorn")
    assert (s.log_level, s.log_format) == ("debug", "console")
    assert s.redis_url == "redis://:pw@redis.internal:6380/2"
    assert s.sources == ("bundled", "skypilot", "gpuhunt", "table")
    assert s.skypilot_url == "https://catalog.example/v7"
    assert s.gpuhunt_url == "https://gpuhunt.example/catalog.zip"
    assert s.table_path == "/etc/gpu-advisor/offers.yaml"
    assert (s.skypilot_ttl_seconds, s.gpuhunt_ttl_seconds, s.table_ttl_seconds) == (600, 700, 60)
    assert s.source_timeout_seconds == 2.5
    assert s.admin_token == TOKEN
    assert s.max_request_body_bytes == 4096
    assert s.keep_heap is False
    assert s.pause_collector is False
    assert s.rate_limit_per_minute == 0
    assert s.answer_cache_entries == 0
    assert s.cors_allow_origins == ("https://a.example", "http://localhost:3000")
    assert s.forwarded_allow_ips == "10.0.0.0/8"
    assert s.shutdown_timeout_seconds == 25


def test_empty_values_take_the_default() -> None:
    assert Settings.from_env({"GPU_ADVISOR_PORT": "", "REDIS_URL": "  "}) == Settings()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GPU_ADVISOR_PORT", "0"),
        ("GPU_ADVISOR_PORT", "65536"),
        ("GPU_ADVISOR_PORT", "http"),
        ("GPU_ADVISOR_WORKERS", "0"),
        ("GPU_ADVISOR_WORKERS", "1.5"),
        ("GPU_ADVISOR_SERVER", "gunicorn"),
        ("GPU_ADVISOR_LOG_LEVEL", "verbose"),
        ("GPU_ADVISOR_LOG_FORMAT", "xml"),
        ("REDIS_URL", "http://redis:6379"),
        ("REDIS_URL", "redis://127.0.0.1:notaport/0"),
        ("REDIS_URL", "redis://127.0.0.1:99999/0"),
        ("REDIS_URL", "redis://127.0.0.1:6379/abc"),
        ("REDIS_URL", "redis:///0"),
        ("REDIS_URL", "redis://127.0.0.1:0/0"),
        ("REDIS_URL", "redis://:pw@127.0.0.1:6379/0?db=abc"),
        ("REDIS_URL", "unix:///run/redis.sock?db=abc"),
        ("REDIS_URL", "redis://127.0.0.1:6379/²"),
        ("GPU_ADVISOR_SOURCES", "bundled,aws"),
        ("GPU_ADVISOR_SOURCES", "bundled,bundled"),
        ("GPU_ADVISOR_SOURCES", ","),
        ("GPU_ADVISOR_SKYPILOT_URL", "ftp://catalog.example"),
        ("GPU_ADVISOR_GPUHUNT_URL", "s3://bucket/catalog"),
        ("GPU_ADVISOR_SKYPILOT_TTL_SECONDS", "59"),
        ("GPU_ADVISOR_GPUHUNT_TTL_SECONDS", "-1"),
        ("GPU_ADVISOR_TABLE_TTL_SECONDS", "a week"),
        ("GPU_ADVISOR_SOURCE_TIMEOUT_SECONDS", "0"),
        ("GPU_ADVISOR_SOURCE_TIMEOUT_SECONDS", "nan"),
        ("GPU_ADVISOR_ADMIN_TOKEN", "short"),
        ("GPU_ADVISOR_MAX_REQUEST_BODY_BYTES", "10"),
        ("GPU_ADVISOR_RATE_LIMIT_PER_MINUTE", "-5"),
        ("GPU_ADVISOR_ANSWER_CACHE_ENTRIES", "-1"),
        ("GPU_ADVISOR_CORS_ALLOW_ORIGINS", "example.com"),
        ("GPU_ADVISOR_SHUTDOWN_TIMEOUT_SECONDS", "0"),
        ("GPU_ADVISOR_HOST", "local host"),
    ],
)
def test_an_invalid_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({variable: value})
    assert info.value.variable == variable
    assert str(info.value).startswith(f"{variable}: ")


def test_table_source_needs_the_table_path() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"GPU_ADVISOR_SOURCES": "bundled,table"})
    assert info.value.variable == "GPU_ADVISOR_TABLE_PATH"
    assert "GPU_ADVISOR_SOURCES" in info.value.message


@pytest.mark.parametrize(
    "url",
    [
        "http://user:hunter2-password@redis",
        "redis://user:hunter2-password@redis:port/0",
        "redis://user:hunter2-password@redis:6379/zero",
        "redis://user:hunter2-password@redis:6379/0?db=x",
    ],
)
def test_a_redis_url_error_does_not_echo_the_password(url: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"REDIS_URL": url})
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis://r",
        "redis://r:6380",
        "redis://:pw@r:6379/",
        "rediss://r:6379/15",
        "redis://r:6379/%31",
        "unix:///s.sock",
        "unix:///s.sock?db=2",
    ],
)
def test_valid_redis_urls_are_accepted(url: str) -> None:
    assert Settings.from_env({"REDIS_URL": url}).redis_url == url


def test_secrets_are_not_echoed_in_errors_or_repr() -> None:
    settings = Settings.from_env(
        {"GPU_ADVISOR_ADMIN_TOKEN": TOKEN, "REDIS_URL": "redis://app:hunter2-password@r:6379/0"}
    )
    for text in (repr(settings), str(settings), str(settings.public_view())):
        assert TOKEN not in text
        assert "hunter2" not in text
    assert settings.public_view()["redis_url"] == "redis://app:***@r:6379/0"


def test_catalog_config_carries_sources_urls_ttls_and_redis() -> None:
    settings = Settings.from_env(
        {
            "GPU_ADVISOR_SOURCES": "skypilot,table",
            "GPU_ADVISOR_SKYPILOT_URL": "/data/skypilot",
            "GPU_ADVISOR_TABLE_PATH": "/data/offers.csv",
            "GPU_ADVISOR_SKYPILOT_TTL_SECONDS": "900",
            "REDIS_URL": "redis://r:6379/0",
            "GPU_ADVISOR_ADMIN_TOKEN": TOKEN,
        }
    )
    config = settings.catalog_config()
    assert config.sources == ("skypilot", "table")
    assert config.skypilot_url == "/data/skypilot"
    assert config.table_path == "/data/offers.csv"
    assert config.ttl_for("skypilot") == 900
    assert config.ttl_for("gpuhunt") == 6 * 3600  # GPU_ADVISOR_GPUHUNT_TTL_SECONDS default
    assert config.ttl_for("table") == 300
    assert config.redis_url == "redis://r:6379/0"
    assert config.admin_token == TOKEN
    assert config.http_read_timeout_seconds == 20.0  # GPU_ADVISOR_SOURCE_TIMEOUT_SECONDS


def test_level_format_and_server_names_ignore_case() -> None:
    settings = Settings.from_env(
        {
            "GPU_ADVISOR_LOG_LEVEL": "DEBUG",
            "GPU_ADVISOR_LOG_FORMAT": "Console",
            "GPU_ADVISOR_SERVER": "Uvicorn",
        }
    )
    assert (settings.log_level, settings.log_format, settings.server) == (
        "debug",
        "console",
        "uvicorn",
    )
