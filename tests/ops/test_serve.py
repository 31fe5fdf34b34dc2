"""`gpu-advisor serve` as a real process: settings from the environment, the image's start-up
on a read-only filesystem, graceful shutdown."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path

import pytest

from tests.ops.serving import (
    REPO,
    base_env,
    free_port,
    get,
    image_command,
    image_env,
    post_json,
    start,
    stop,
    wait_for,
)

GPU_ADVISOR = ["gpu-advisor"]
EXAMPLES = REPO / "examples"


def test_port_comes_from_the_environment() -> None:
    port = free_port()
    proc = start([*GPU_ADVISOR, "serve"], base_env({"GPU_ADVISOR_PORT": str(port)}))
    try:
        wait_for(f"http://127.0.0.1:{port}/healthz", proc)
        status, headers, body = get(f"http://127.0.0.1:{port}/healthz")
        assert (status, body) == (200, b'{"status":"ok"}')
        assert headers["x-content-type-options"] == "nosniff"
    finally:
        out = stop(proc)
    assert f":{port}" in out  # the server says where it listens


def test_port_option_overrides_the_environment() -> None:
    env_port, option_port = free_port(), free_port()
    proc = start(
        [*GPU_ADVISOR, "serve", "--port", str(option_port)],
        base_env({"GPU_ADVISOR_PORT": str(env_port), "GPU_ADVISOR_SERVER": "uvicorn"}),
    )
    try:
        wait_for(f"http://127.0.0.1:{option_port}/healthz", proc)
        with pytest.raises(urllib.error.URLError, match="Connection refused"):
            get(f"http://127.0.0.1:{env_port}/healthz", timeout=1.0)
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("GPU_ADVISOR_PORT", "eighty"), ("GPU_ADVISOR_SOURCES", "bundled,nope"), ("REDIS_URL", "x")],
)
def test_invalid_setting_stops_start_up_with_status_2(variable: str, value: str) -> None:
    result = subprocess.run(
        [*GPU_ADVISOR, "serve"],
        env=base_env({variable: value}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert f"invalid setting {variable}: " in result.stderr


# Inside a private mount namespace: every mount read-only, then a fresh tmpfs on the scratch
# directory that TMPDIR names, and the canaries prove it before the server starts. The scratch
# directory stands in for the image's /tmp: mounting over /tmp itself would hide a checkout (and
# its .venv) that lies under /tmp, as CI's clean clones may. So the test is stricter than the
# image: the service may write only where TMPDIR points.
READ_ONLY_ROOT = r"""
set -eu
mount --make-rprivate /
for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null || true
done
mount -t tmpfs -o size=64m,mode=1777 tmpfs "$TMPDIR"
for d in "$PWD" "$HOME" /etc / /tmp; do
  if touch "$d/.rw-canary" 2>/dev/null; then echo "$d is writable" >&2; exit 97; fi
done
touch "$TMPDIR/.rw-canary"
exec "$@"
"""


def read_only_wrapper(workdir: Path, home: Path) -> tuple[list[str], Path, Path]:
    """Command prefix that runs a command with everything but $TMPDIR unwritable."""
    workdir.mkdir(mode=0o555)
    home.mkdir(mode=0o555)
    if os.geteuid() == 0:
        # root ignores file modes: make the file system itself read-only.
        assert shutil.which("unshare"), "util-linux unshare is needed to test as root"
        return ["unshare", "--mount", "sh", "-c", READ_ONLY_ROOT, "sh"], workdir, home
    return [], workdir, home


def test_service_started_as_the_image_starts_it_on_a_read_only_filesystem(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.mktemp("ro")
    prefix, workdir, home = read_only_wrapper(base / "app", base / "home")
    env = image_env()
    port = free_port()
    env["GPU_ADVISOR_PORT"] = str(port)  # only the port differs from the image (a free one)
    env["HOME"] = str(home)  # stricter than the image's /tmp: nothing may write to HOME
    scratch = base / "tmp"
    scratch.mkdir()
    env["TMPDIR"] = str(scratch)  # the only writable place (see READ_ONLY_ROOT)
    command = image_command()
    assert command == ["gpu-advisor", "serve"]
    proc = start([*prefix, *command], base_env(env), cwd=workdir)
    try:
        wait_for(f"http://127.0.0.1:{port}/healthz", proc)
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert get(f"http://127.0.0.1:{port}/readyz")[0] == 200
        # The main job, on the bundled catalog: Mixtral-8x7B in bf16 (46.7e9 x 2 B = 93.4 GB)
        # needs more than one 80 GB GPU.
        status, body = post_json(
            f"http://127.0.0.1:{port}/v1/recommendations",
            (EXAMPLES / "mixtral-8x7b-serving.json").read_bytes(),
        )
        assert status == 200, body
        answer = json.loads(body)
        assert answer["recommendations"]
        assert all(r["gpus"] >= 2 for r in answer["recommendations"])
        assert b"gpu_advisor_http_requests_total" in get(f"http://127.0.0.1:{port}/metrics")[2]
        # The image's HEALTHCHECK command, with the image's environment.
        check = subprocess.run(
            ["gpu-advisor", "healthcheck"],
            env=base_env(env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert check.returncode == 0, check.stderr
    finally:
        out = stop(proc)
    assert "is writable" not in out
    assert "Traceback" not in out
    # JSON logs, as the image's GPU_ADVISOR_LOG_FORMAT says: every line is a JSON object
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert "started" in [line["event"] for line in lines]
    assert os.listdir(workdir) == []


def test_healthcheck_fails_when_nothing_listens() -> None:
    result = subprocess.run(
        ["gpu-advisor", "healthcheck", "--timeout-seconds", "1"],
        env=base_env({"GPU_ADVISOR_PORT": str(free_port())}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "unhealthy" in result.stderr


@pytest.mark.parametrize("server", ["granian", "uvicorn"])
def test_sigterm_lets_in_flight_requests_finish_then_closes_services(
    server: str, tmp_path: Path
) -> None:
    port = free_port()
    marker = tmp_path / "marker"
    env = base_env(
        {
            "GPU_ADVISOR_PORT": str(port),
            "GPU_ADVISOR_SERVER": server,
            "GPU_ADVISOR_SHUTDOWN_TIMEOUT_SECONDS": "10",
            "SLOW_SECONDS": "2",
            "MARKER_FILE": str(marker),
            "PYTHONPATH": f"{REPO / 'service'}{os.pathsep}{REPO}",
        }
    )
    script = (
        "import os; from gpu_advisor.cli import run_server; "
        "from gpu_advisor.settings import Settings; "
        "run_server(Settings.from_env(os.environ), factory='tests.ops.slow_app:create')"
    )
    proc = start([sys.executable, "-c", script], env)
    result: dict[str, object] = {}

    def slow_request() -> None:
        result["response"] = get(f"http://127.0.0.1:{port}/test/slow", timeout=30)

    try:
        wait_for(f"http://127.0.0.1:{port}/healthz", proc)
        assert marker.read_text(encoding="utf-8") == "started"
        client = threading.Thread(target=slow_request)
        client.start()
        time.sleep(0.5)  # the request is in flight (it takes 2 s)
        proc.terminate()
        client.join(timeout=30)
        proc.wait(timeout=30)
    finally:
        out = stop(proc)
    status, _, body = result["response"]  # type: ignore[misc]
    assert (status, body) == (200, b'{"status":"finished"}'), out
    # granian exits 0; uvicorn re-raises the SIGTERM it handled once it has shut down cleanly.
    assert proc.returncode in (0, -signal.SIGTERM), out
    assert marker.read_text(encoding="utf-8") == "closed"  # lifespan closed the service


TABLE_CSV = (
    "provider,instance_type,region,gpu,gpu_count,price_per_hour_usd,vcpus,ram_gib\n"
    "onprem,dgx-h100,eu-home-1,H100,8,20.0,224,2048\n"
    "onprem,l4-box,eu-home-1,L4,1,0.5,16,64\n"
)


def catalog_sources(port: int) -> dict[str, dict[str, object]]:
    status, _, body = get(f"http://127.0.0.1:{port}/v1/catalog")
    assert status == 200
    return {s["name"]: s for s in json.loads(body)["sources"]}


def test_sources_and_ttl_come_from_the_environment(tmp_path: Path) -> None:
    table = tmp_path / "offers.csv"
    table.write_text(TABLE_CSV, encoding="utf-8")
    port = free_port()
    env = {
        "GPU_ADVISOR_PORT": str(port),
        "GPU_ADVISOR_SOURCES": "bundled,table",
        "GPU_ADVISOR_TABLE_PATH": str(table),
        "GPU_ADVISOR_TABLE_TTL_SECONDS": "120",
    }
    proc = start([*GPU_ADVISOR, "serve"], base_env(env))
    try:
        wait_for(f"http://127.0.0.1:{port}/readyz", proc)
        deadline = time.monotonic() + 20  # the table is read in the background after start
        while (
            time.monotonic() < deadline
            and catalog_sources(port).get("table", {}).get("offers") != 2
        ):
            time.sleep(0.2)
        sources = catalog_sources(port)
        assert list(sources) == ["bundled", "table"]
        assert sources["table"]["offers"] == 2  # the two rows of TABLE_CSV
        assert sources["table"]["ttl_seconds"] == 120  # GPU_ADVISOR_TABLE_TTL_SECONDS
        offers = json.loads(get(f"http://127.0.0.1:{port}/v1/offers?provider=onprem")[2])
        assert sorted(o["instance_type"] for o in offers["offers"]) == ["dgx-h100", "l4-box"]
        metrics = get(f"http://127.0.0.1:{port}/metrics")[2].decode()
        assert 'gpu_advisor_catalog_offers{source="table"} 2.0' in metrics
        assert 'gpu_advisor_catalog_age_seconds{source="table"}' in metrics
    finally:
        stop(proc)


def test_default_sources_are_the_bundled_snapshot_only() -> None:
    port = free_port()
    proc = start([*GPU_ADVISOR, "serve"], base_env({"GPU_ADVISOR_PORT": str(port)}))
    try:
        wait_for(f"http://127.0.0.1:{port}/readyz", proc)
        sources = catalog_sources(port)
        assert list(sources) == ["bundled"]
        assert sources["bundled"]["ttl_seconds"] == 86_400  # the catalog's default for bundled
        ready = json.loads(get(f"http://127.0.0.1:{port}/readyz")[2])
        assert ready["cache"] == {
            "backend": "memory",  # no REDIS_URL: the in-process cache
            "degraded": False,
            "last_error": None,
            "last_error_at": None,
            "catalog_version": ready["cache"]["catalog_version"],
        }
    finally:
        stop(proc)
