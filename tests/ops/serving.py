"""Start the service as a subprocess, exactly as the container image starts it."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVICE = REPO / "service"
DOCKERFILE = REPO / "Dockerfile"
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def runtime_stage() -> list[str]:
    """The Dockerfile's last stage as logical lines (continuations joined, comments dropped)."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    lines = [line.strip() for line in text.replace("\\\n", " ").splitlines() if line.strip()]
    last_from = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    return lines[last_from:]


def image_env() -> dict[str, str]:
    """The runtime stage's ENV, with the venv's bin directory standing in for /opt/venv/bin."""
    env: dict[str, str] = {}
    for line in runtime_stage():
        if line.upper().startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                value = value.replace("/opt/venv/bin", str(VENV_BIN))
                env[key] = re.sub(r"\$\{?PATH\}?", os.environ.get("PATH", ""), value)
    return env


def image_command() -> list[str]:
    """ENTRYPOINT + CMD of the runtime stage (exec form, JSON arrays)."""
    parts: dict[str, list[str]] = {}
    for line in runtime_stage():
        keyword, _, rest = line.partition(" ")
        if keyword.upper() in ("ENTRYPOINT", "CMD"):
            parts[keyword.upper()] = json.loads(rest)
    return parts["ENTRYPOINT"] + parts.get("CMD", [])


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The test process's environment less any GPU_ADVISOR_* / REDIS_URL, plus ``extra``, with
    this checkout's ``service/`` first on the import path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GPU_ADVISOR_") and k not in ("REDIS_URL", "PYTHONPATH")
    }
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(SERVICE)
    env.update(extra)
    return env


def get(url: str, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def post_json(url: str, body: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """POST a JSON body; (status, response body) also for 4xx/5xx."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_for(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"server exited with {proc.returncode}:\n{out}")
        try:
            if get(url, timeout=1.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout_s} s")


def start(
    command: Sequence[str], env: Mapping[str, str], cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(command), env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> str:
    """SIGTERM, wait, return everything the process printed."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out.decode(errors="replace")
