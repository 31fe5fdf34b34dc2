# gpu-advisor container image.
#
# Two stages (after astral-sh/uv-docker-example's multistage.Dockerfile): the builder installs
# the locked runtime dependencies (requirements.lock, every file checked against its hash,
# wheels only) into /opt/venv, then the package itself; the runtime stage copies that venv
# onto a clean slim Python with no compiler, no pip cache and no source tree.
#
# Runs as the numeric non-root user 10001 and writes nothing outside /tmp, so it runs with a
# read-only root filesystem (mount an emptyDir at /tmp on Kubernetes).
#
#   docker build -t gpu-advisor .
#   docker run --rm -p 8000:8000 --read-only --tmpfs /tmp gpu-advisor
#
# Regenerate the lock after changing dependencies in pyproject.toml:
#   uv pip compile pyproject.toml --python-version 3.11 --generate-hashes --no-header \
#     -o requirements.lock

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
# Dependencies first: this layer is rebuilt only when the lock changes.
COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r /tmp/requirements.lock
# Then the package, without touching the dependencies again.
WORKDIR /src
# README.m[d]: the readme is optional for the build (a glob that may match nothing).
COPY pyproject.toml README.m[d] ./
COPY service ./service
RUN pip install --no-cache-dir --no-deps . \
    && python -m compileall -q /opt/venv/lib


FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="gpu-advisor" \
      org.opencontainers.image.description="Which cloud GPU instance should run an AI workload, how to split it, what it costs - and why not the others." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
# Read-only root filesystem: no .pyc writes (compiled at build time), HOME and temp in /tmp.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    GPU_ADVISOR_HOST=0.0.0.0 \
    GPU_ADVISOR_PORT=8000 \
    GPU_ADVISOR_WORKERS=1 \
    GPU_ADVISOR_LOG_FORMAT=json
COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["gpu-advisor", "healthcheck"]
ENTRYPOINT ["gpu-advisor"]
CMD ["serve"]
