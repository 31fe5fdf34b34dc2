# The two commands of the README:
#   make serve   start the service with its embedded defaults (bundled catalog, in-process cache)
#   make test    run the whole test suite (lint, types, tests incl. the slow harness)
.PHONY: serve test lint openapi accuracy bench

serve:
	scripts/bootstrap.sh runtime
	.venv/bin/gpu-advisor serve

test:
	scripts/bootstrap.sh dev
	.venv/bin/ruff check service tests bench scripts
	.venv/bin/ruff format --check service tests bench scripts
	REDIS_URL="$${REDIS_URL:-$$(scripts/ensure-redis.sh)}" .venv/bin/python -m pytest

lint:
	.venv/bin/ruff check service tests bench scripts
	.venv/bin/mypy

openapi:
	.venv/bin/python scripts/export_openapi.py

accuracy:
	.venv/bin/python bench/accuracy_report.py
