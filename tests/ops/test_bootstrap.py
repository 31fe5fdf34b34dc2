"""scripts/bootstrap.sh: concurrent runs take turns on one .venv, and a second run with the
same pyproject.toml does nothing (QA finding 13: `make serve &` then `make test` on a fresh
clone failed with "No module named pip").

The script runs in a copy of the repository layout with a fake interpreter (``PYTHON``) whose
``-m venv`` is slow and whose pip only records what it was asked to install, so the race is
wide and nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_VENV_PYTHON = """#!/usr/bin/env bash
# The venv's python: pip calls are logged; "pip --version" answers once pip is "installed".
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ "$1 $2" = "-m pip" ]; then
  if [ "$3" = "--version" ]; then
    [ -f "$root/.venv/pip-ready" ]
    exit $?
  fi
  echo "pip ${*:3}" >> "$root/calls.log"
  sleep 0.1
  exit 0
fi
exit 1
"""

FAKE_BASE_PYTHON = """#!/usr/bin/env bash
# The base interpreter: "-m venv [--clear] .venv" makes the venv slowly, pip last (as ensurepip).
root="$(pwd)"
if [ "$1 $2" = "-m venv" ]; then
  echo "venv" >> "$root/calls.log"
  mkdir -p .venv/bin
  cp "$root/fake-venv-python" .venv/bin/python
  chmod +x .venv/bin/python
  sleep 0.5
  touch .venv/pip-ready
  exit 0
fi
exit 1
"""


def _layout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "bootstrap.sh", repo / "scripts" / "bootstrap.sh")
    shutil.copy2(ROOT / "pyproject.toml", repo / "pyproject.toml")
    for name, text in (("fake-venv-python", FAKE_VENV_PYTHON), ("python-fake", FAKE_BASE_PYTHON)):
        path = repo / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return repo


def _start(repo: Path, want: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHON": str(repo / "python-fake")}
    return subprocess.Popen(
        ["bash", str(repo / "scripts" / "bootstrap.sh"), want],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _calls(repo: Path) -> list[str]:
    log = repo / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_concurrent_runs_take_turns_and_build_the_venv_once(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    runs = [_start(repo, "runtime"), _start(repo, "runtime")]
    for run in runs:
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err.decode()
    # One venv, one pip upgrade, one install: the second run waited, then found the stamp.
    assert _calls(repo) == [
        "venv",
        "pip install --quiet --disable-pip-version-check --upgrade pip",
        "pip install --quiet --disable-pip-version-check -e .",
    ]


def test_second_run_does_nothing_and_dev_adds_its_own_stamp(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    for want in ("runtime", "runtime", "dev", "dev"):
        run = _start(repo, want)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err.decode()
    calls = _calls(repo)
    assert calls.count("venv") == 1
    assert calls.count("pip install --quiet --disable-pip-version-check -e .") == 1
    assert calls.count("pip install --quiet --disable-pip-version-check -e .[dev,harness]") == 1
    stamps = sorted(p.name.rsplit("-", 1)[0] for p in (repo / ".venv").glob(".bootstrap-*"))
    assert stamps == [".bootstrap-dev", ".bootstrap-runtime"]


def test_a_venv_without_pip_is_rebuilt(tmp_path: Path) -> None:
    repo = _layout(tmp_path)
    (repo / ".venv" / "bin").mkdir(parents=True)  # an interrupted run: python, no pip
    shutil.copy2(repo / "fake-venv-python", repo / ".venv" / "bin" / "python")
    run = _start(repo, "runtime")
    _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err.decode()
    assert _calls(repo)[0] == "venv"
