"""Compare ASGI servers (uvicorn, granian) serving this app's ``GET /healthz``.

Each server is started exactly as production starts it (``gpu-advisor serve`` with
``GPU_ADVISOR_SERVER`` set), with the same worker count, on a free loopback port; ``wrk``
(Debian package ``wrk``) loads it for a fixed time after a warm-up, and the script prints
requests/s and the p99 latency of each run, then the median over the repetitions.

Usage (from the repository root)::

    python bench/asgi_servers.py --workers 1 --connections 64 --duration 15 --repeat 3

Only loopback traffic; every run is bounded by ``--duration``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("uvicorn", "granian")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


def parse_wrk(output: str) -> tuple[float, float]:
    """(requests per second, p99 latency in ms) from ``wrk --latency`` output."""
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()  # type: ignore[union-attr]
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    return rps, float(value) * scale


def run_once(server: str, args: argparse.Namespace) -> tuple[float, float]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "service"),
        "GPU_ADVISOR_SERVER": server,
        "GPU_ADVISOR_PORT": str(port),
        "GPU_ADVISOR_WORKERS": str(args.workers),
        "GPU_ADVISOR_LOG_LEVEL": "warning",
        "GPU_ADVISOR_RATE_LIMIT_PER_MINUTE": "0",
    }
    cli = [sys.executable, "-m", "gpu_advisor.cli", "serve"]
    proc = subprocess.Popen(cli, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        wait_until_up(url)
        wrk = ["wrk", f"-t{args.threads}", f"-c{args.connections}", "--latency"]
        subprocess.run([*wrk, "-d3s", url], check=True, capture_output=True, timeout=30)
        out = subprocess.run(
            [*wrk, f"-d{args.duration}s", url],
            check=True,
            capture_output=True,
            text=True,
            timeout=args.duration + 30,
        ).stdout
        return parse_wrk(out)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--duration", type=int, default=15, help="seconds per measured run")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk not found: apt-get install -y wrk")
    print(
        f"GET /healthz, workers={args.workers}, wrk -t{args.threads} -c{args.connections} "
        f"-d{args.duration}s, {os.cpu_count()} CPUs"
    )
    results: dict[str, list[tuple[float, float]]] = {s: [] for s in SERVERS}
    for _ in range(args.repeat):
        for server in SERVERS:  # interleaved, so drift in the machine hits both alike
            rps, p99 = run_once(server, args)
            results[server].append((rps, p99))
            print(f"  {server:8s} {rps:10.0f} req/s   p99 {p99:8.2f} ms")
    print("median:")
    for server, runs in results.items():
        rps = statistics.median(r for r, _ in runs)
        p99 = statistics.median(p for _, p in runs)
        print(f"  {server:8s} {rps:10.0f} req/s   p99 {p99:8.2f} ms")


if __name__ == "__main__":
    main()
