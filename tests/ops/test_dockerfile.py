"""The Dockerfile: hadolint-clean, two stages from the lock, non-root, read-only friendly."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.ops.serving import DOCKERFILE, REPO, image_command, image_env, runtime_stage

HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


def test_hadolint_passes_at_the_strictest_threshold() -> None:
    result = subprocess.run(
        [HADOLINT, "--failure-threshold", "style", "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_fail_on_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\nCMD python app.py\n")
    result = subprocess.run(
        [HADOLINT, "--no-color", str(bad)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # the linter really ran: 'latest' tag flagged


def test_two_stages_dependencies_from_the_lock_before_the_package() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert len(re.findall(r"^FROM ", text, re.M)) == 2
    lock_install = text.index("--require-hashes")
    package_copy = text.index("COPY service")
    assert text.index("COPY requirements.lock") < lock_install < package_copy


def test_runtime_stage_is_non_root_read_only_friendly_and_labelled() -> None:
    stage = runtime_stage()
    users = [line.split()[1] for line in stage if line.startswith("USER ")]
    assert users
    assert re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1])  # numeric uid:gid, not 0
    assert not any(re.search(r"apt-get|gcc|build-essential|pip install", line) for line in stage)
    env = image_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/tmp"
    assert env["TMPDIR"] == "/tmp"
    assert env["GPU_ADVISOR_HOST"] == "0.0.0.0"
    assert "GPU_ADVISOR_WORKERS" in env  # the worker count comes from the environment
    assert any(line.startswith("HEALTHCHECK ") for line in stage)
    labels = " ".join(line for line in stage if line.startswith("LABEL "))
    for key in ("title", "description", "version", "revision", "created", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels
    assert image_command() == ["gpu-advisor", "serve"]


def test_lock_pins_every_runtime_dependency_at_the_pyproject_version_with_hashes() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lock = (REPO / "requirements.lock").read_text(encoding="utf-8")
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", lock, re.M))
    normalise = {name.lower().replace("_", "-"): version for name, version in pinned.items()}
    for requirement in project["dependencies"]:
        name, version = requirement.split("==")
        assert normalise.get(name.lower()) == version, requirement
    entries = re.split(r"^(?=[A-Za-z0-9])", lock, flags=re.M)
    assert all("--hash=sha256:" in entry for entry in entries if "==" in entry)


def test_dockerignore_only_lets_the_build_inputs_in() -> None:
    lines = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert lines[lines.index("*") + 1 :][:4] == [
        "!requirements.lock",
        "!pyproject.toml",
        "!README.md",
        "!service/",
    ]
