"""``POST /v1/recommendations`` against the full catalog, in process and over HTTP, next to the
same app's minimal JSON endpoint (``GET /healthz``), in one run (issue 5).

    python bench/bench_http.py [--offers 50000] [--seed 7] [--duration 10] [--connections 8]

The catalog is every source configured from the vendored data -- ``bundled``, ``skypilot``
(``tests/fixtures/shared/data/skypilot-catalog-v7``) -- plus a synthetic ``table`` source of
``--offers`` rows drawn, seeded, from the bundled snapshot (``bench_recommend.py``'s
generator, each row in its own region so none collapses into another): about 55,000 offers.

1. In process: the service's own :class:`~gpu_advisor.advisor.Advisor` over that catalog, its
   answer cache off, answers the five requests of ``bench_recommend.py`` in turn (JSON body
   decoded, response encoded, as the HTTP handler does): median time per request and
   requests per second.
2. Over HTTP: ``gpu-advisor serve`` (granian, one worker, the production settings otherwise,
   but the per-client rate limit off: the load comes from one address) as a subprocess with
   the same catalog; ``wrk`` (Debian package ``wrk``) loads ``GET
   /healthz`` and then ``POST /v1/recommendations`` (a Lua script rotates the five bodies)
   with ``--connections`` connections for ``--duration`` seconds each, after a warm-up.
   Prints requests per second, the p50/p99 latency and the ratio recommendations : healthz.
   Twice: with the answer cache off (``GPU_ADVISOR_ANSWER_CACHE_ENTRIES=0``: every request is
   planned) and on (the default: the five bodies repeat, so after the first round every
   request is answered from memory -- the case of CI pipelines re-checking a committed spec).
3. The same with the planner offloaded to a worker thread (``bench/http_offload_app.py``),
   and, for both servers, a mixed run: the recommendations load plus one connection polling
   ``/healthz`` -- how long a liveness probe waits while planner work holds the event loop.

Only loopback traffic; every run is bounded by ``--duration``.
"""

from __future__ import annotations

import asyncio
import csv
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec
import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "service"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_recommend import bundled_offers, cases  # noqa: E402
from gpu_advisor.advisor import Advisor  # noqa: E402
from gpu_advisor.allocator import keep_heap  # noqa: E402
from gpu_advisor.catalog.service import CatalogService  # noqa: E402
from gpu_advisor.core.offers import Offer  # noqa: E402
from gpu_advisor.core.spec import RecommendationRequest  # noqa: E402
from gpu_advisor.settings import Settings  # noqa: E402

SKYPILOT_DIR = ROOT / "tests" / "fixtures" / "shared" / "data" / "skypilot-catalog-v7"
TABLE_COLUMNS = (
    "provider",
    "instance_type",
    "region",
    "zone",
    "gpu",
    "gpu_count",
    "price_per_hour_usd",
    "spot_price_per_hour_usd",
    "vcpus",
    "ram_gib",
    "interconnect",
    "network_fabric",
    "network_gbit_per_s",
    "billing_increment_seconds",
    "billing_minimum_seconds",
)


def synthetic_rows(n: int, seed: int) -> list[Offer]:
    """``n`` offers copied from the bundled snapshot (GPU, count, interconnect, network,
    billing) at a jittered price, each in its own numbered region."""
    import random

    rng = random.Random(seed)
    real = bundled_offers()
    rows: list[Offer] = []
    for i in range(n):
        base = rng.choice(real)
        factor = rng.uniform(0.85, 1.25)
        spot = base.spot_price_per_hour_usd
        rows.append(
            msgspec.structs.replace(
                base,
                region=f"{base.region}-s{i:05d}",
                zone=None,
                price_per_hour_usd=round(base.price_per_hour_usd * factor, 4),
                spot_price_per_hour_usd=round(spot * factor, 4) if spot else None,
            )
        )
    return rows


def write_table(path: Path, offers: list[Offer]) -> None:
    """The offers as an operator table (the ``table`` source's CSV columns)."""
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(TABLE_COLUMNS)
        for o in offers:
            network = o.network
            out.writerow(
                [
                    o.provider,
                    o.instance_type,
                    o.region,
                    o.zone or "",
                    o.gpu,
                    o.gpu_count,
                    o.price_per_hour_usd,
                    o.spot_price_per_hour_usd or "",
                    o.vcpus,
                    o.ram_bytes / 2**30,
                    o.interconnect,
                    network.fabric if network else "",
                    network.gbit_per_s if network else "",
                    o.billing_increment_seconds,
                    o.billing_minimum_seconds,
                ]
            )


def bodies() -> list[bytes]:
    """The five requests of ``bench_recommend.py`` as JSON bodies."""
    return [msgspec.json.encode(request) for _, request in cases()]


# --- in process --------------------------------------------------------------------------------


@dataclass
class InProcess:
    offers: int
    groups: int
    median_ms: list[float]
    requests_per_second: float


async def in_process(
    env: dict[str, str], payloads: list[bytes], duration: float, *, answer_cache_entries: int = 0
) -> InProcess:
    """The service's Advisor over the configured catalog: decode, answer, encode (every request
    planned: the answer cache is off unless ``answer_cache_entries`` says otherwise)."""
    catalog = CatalogService(Settings.from_env(env).catalog_config())
    await catalog.start()
    try:
        await catalog.refresh()
        advisor = Advisor(catalog, answer_cache_entries=answer_cache_entries)
        decoder = msgspec.json.Decoder(RecommendationRequest)
        encoder = msgspec.json.Encoder()

        async def answer(body: bytes) -> None:
            encoder.encode(await advisor.recommend(decoder.decode(body)))

        await answer(payloads[0])  # builds the planner index (once per catalog version)
        times: list[list[float]] = [[] for _ in payloads]
        done = 0
        start = time.perf_counter()
        while time.perf_counter() - start < duration:
            for i, body in enumerate(payloads):
                t0 = time.perf_counter()
                await answer(body)
                times[i].append(time.perf_counter() - t0)
                done += 1
        elapsed = time.perf_counter() - start
        snapshot, index = await advisor._planner_index()
        return InProcess(
            offers=len(snapshot.offers),
            groups=len(index.groups),
            median_ms=[statistics.median(t) * 1e3 for t in times],
            requests_per_second=done / elapsed,
        )
    finally:
        await catalog.close()


# --- over HTTP ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(env: dict[str, str], factory: str | None) -> tuple[subprocess.Popen[bytes], str]:
    """``gpu-advisor serve`` (or ``run_server`` with another app factory) on a free port;
    returns once the catalog holds every configured source's offers."""
    port = free_port()
    server_env = {**os.environ, **env, "GPU_ADVISOR_PORT": str(port)}
    server_env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "service"), str(ROOT / "bench")])
    if factory is None:
        command = [str(Path(sys.executable).with_name("gpu-advisor")), "serve"]
    else:
        command = [
            sys.executable,
            "-c",
            "import os; from gpu_advisor.cli import run_server; "
            "from gpu_advisor.settings import Settings; "
            f"run_server(Settings.from_env(os.environ), factory={factory!r})",
        ]
    process = subprocess.Popen(
        command, env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode}")
        try:
            sources = httpx.get(f"{base}/v1/catalog", timeout=2).json()["sources"]
            if all(s["offers"] > 0 for s in sources):
                return process, base
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(0.5)
    process.terminate()
    raise RuntimeError("the server's catalog did not load within 120 s")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Load:
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    errors: str
    """wrk's error lines (non-2xx responses, socket errors); empty when none."""


def lua_script(directory: Path, payloads: list[bytes]) -> Path:
    """A wrk script that POSTs the bodies in turn. The requests are formatted once, in
    ``init`` (as wrk's own ``scripts/pipeline.lua`` does): formatting one per request in
    ``request()`` costs the load generator CPU that, on a small machine, the server lacks."""
    quoted = ",\n".join(f"[==[{body.decode()}]==]" for body in payloads)
    path = directory / "recommendations.lua"
    path.write_text(
        f"local bodies = {{\n{quoted}\n}}\n"
        "local requests = {}\n"
        "local i = 0\n"
        "init = function(args)\n"
        "  for k, body in ipairs(bodies) do\n"
        '    requests[k] = wrk.format("POST", "/v1/recommendations", '
        '{["Content-Type"] = "application/json"}, body)\n'
        "  end\n"
        "end\n"
        "request = function()\n"
        "  i = i % #requests + 1\n"
        "  return requests[i]\n"
        "end\n"
    )
    return path


def wrk_command(url: str, connections: int, duration: float, script: Path | None) -> list[str]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "--latency"]
    if script is not None:
        command += ["-s", str(script)]
    return [*command, url]


def parse_wrk(output: str) -> Load:
    def millis(label: str) -> float:
        found = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.M)
        if found is None:
            return float("nan")
        return float(found.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[found.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", output)
    problems = [
        line.strip()
        for line in output.splitlines()
        if line.strip().startswith(("Non-2xx", "Socket errors"))
    ]
    return Load(
        requests_per_second=float(rps.group(1)) if rps else float("nan"),
        p50_ms=millis("50"),
        p99_ms=millis("99"),
        errors="; ".join(problems),
    )


def run_wrk(url: str, connections: int, duration: float, script: Path | None = None) -> Load:
    done = subprocess.run(
        wrk_command(url, connections, duration, script),
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 60,
    )
    return parse_wrk(done.stdout)


def run_mixed(base: str, connections: int, duration: float, script: Path) -> tuple[Load, Load]:
    """The recommendations load and one connection on /healthz at the same time."""
    heavy = subprocess.Popen(
        wrk_command(f"{base}/v1/recommendations", connections, duration, script),
        stdout=subprocess.PIPE,
        text=True,
    )
    light = subprocess.run(
        wrk_command(f"{base}/healthz", 1, duration, None),
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 60,
    )
    out, _ = heavy.communicate(timeout=duration + 60)
    return parse_wrk(out), parse_wrk(light.stdout)


@dataclass
class Served:
    healthz: Load
    recommendations: Load
    mixed_recommendations: Load
    mixed_healthz: Load


def over_http(
    env: dict[str, str],
    factory: str | None,
    script: Path,
    connections: int,
    duration: float,
    warmup: float,
) -> Served:
    process, base = start_server(env, factory)
    try:
        run_wrk(f"{base}/v1/recommendations", connections, warmup, script)  # index, caches
        run_wrk(f"{base}/healthz", connections, warmup)
        healthz = run_wrk(f"{base}/healthz", connections, duration)
        recommendations = run_wrk(f"{base}/v1/recommendations", connections, duration, script)
        mixed = run_mixed(base, connections, duration, script)
        return Served(healthz, recommendations, *mixed)
    finally:
        stop_server(process)


def show(name: str, load: Load) -> str:
    errors = f" ({load.errors})" if load.errors else ""
    return (
        f"  {name:<44} {load.requests_per_second:9,.1f} req/s   "
        f"p50 {load.p50_ms:8.2f} ms   p99 {load.p99_ms:8.2f} ms{errors}"
    )


def main(
    offers: int = 50_000,
    seed: int = 7,
    duration: float = 10.0,
    warmup: float = 3.0,
    connections: int = 8,
) -> None:
    """Run the in-process and HTTP measurements (see the module docstring)."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    payloads = bodies()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        table = directory / "synthetic.csv"
        write_table(table, synthetic_rows(offers, seed))
        env = {
            "GPU_ADVISOR_SOURCES": "bundled,skypilot,table",
            "GPU_ADVISOR_SKYPILOT_URL": str(SKYPILOT_DIR),
            "GPU_ADVISOR_TABLE_PATH": str(table),
            "GPU_ADVISOR_WORKERS": "1",
            # one load generator is one client address: the per-client limit (600 a minute
            # by default) would answer 429 after the first 600 requests
            "GPU_ADVISOR_RATE_LIMIT_PER_MINUTE": "0",
        }
        # the process keeps its C heap between requests, as the served app does by default
        # (GPU_ADVISOR_KEEP_HEAP)
        keep_heap()
        local = asyncio.run(in_process(env, payloads, duration))
        print(
            f"catalog: bundled + skypilot + {offers:,} synthetic table rows (seed {seed}) = "
            f"{local.offers:,} offers, {local.groups} planning groups"
        )
        print("in process (Advisor: decode, plan, encode), median per request:")
        for (name, _), median in zip(cases(), local.median_ms, strict=True):
            print(f"  {median:7.2f} ms  {name}")
        print(f"  {local.requests_per_second:,.1f} requests/s in turn (one core)")
        script = lua_script(directory, payloads)
        cache_off = {"GPU_ADVISOR_ANSWER_CACHE_ENTRIES": "0"}
        for label, factory, extra, planned in (
            ("gpu-advisor serve, answer cache off (every request planned)", None, cache_off, True),
            ("gpu-advisor serve, answer cache on (the five bodies repeat)", None, {}, False),
            ("planner offloaded to a thread, no answer cache", "http_offload_app:create", {}, True),
        ):
            served = over_http({**env, **extra}, factory, script, connections, duration, warmup)
            ratio = served.recommendations.requests_per_second / (
                served.healthz.requests_per_second
            )
            print(f"over HTTP, {label}, granian 1 worker, {connections} connections:")
            print(show("GET /healthz", served.healthz))
            print(show("POST /v1/recommendations", served.recommendations))
            line = f"  ratio recommendations : healthz = {ratio:.4f}"
            if planned:  # (answers from the cache are not planned: no in-process counterpart)
                share = served.recommendations.requests_per_second / local.requests_per_second
                line += f"; recommendations over HTTP = {share:.0%} of in process"
            print(line)
            print(show("mixed: POST /v1/recommendations", served.mixed_recommendations))
            print(show("mixed: GET /healthz (1 connection)", served.mixed_healthz))


if __name__ == "__main__":
    typer.run(main)
