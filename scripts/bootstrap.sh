#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv.
#   scripts/bootstrap.sh          runtime dependencies only (enough to serve)
#   scripts/bootstrap.sh dev      + test/lint tools, the measured-truth harness (PyTorch CPU,
#                                 transformers) and the Helm library used by the chart tests
# Re-running is cheap: a stamp file records what was installed for which pyproject.toml.
# Runs at the same time (`make serve &` then `make test`) take turns: an exclusive flock(1) on
# .venv.lock, so one never sees the other's half-made .venv ("No module named pip").
set -euo pipefail
cd "$(dirname "$0")/.."
want="${1:-runtime}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
if command -v flock >/dev/null 2>&1; then
  exec 9>.venv.lock
  flock 9  # released when this script exits (the descriptor closes)
fi
stamp=".venv/.bootstrap-$want-$(sha256sum pyproject.toml | cut -c1-16)"
if [ -f "$stamp" ]; then
  exit 0
fi
# A .venv left without pip (an interrupted run) is rebuilt rather than used.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  "$python" -m venv --clear .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
if [ "$want" = "dev" ]; then
  # torch first and pinned: 2.13.0 is the CPU build this machine carries; an unpinned torch
  # would pull a multi-GB CUDA build.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev,harness]"
  # helm-sdkpy declares Python >= 3.12 but works on 3.11 (DESIGN "Running it").
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --ignore-requires-python \
    "helm-sdkpy==0.1.32"
else
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
fi
touch "$stamp"
