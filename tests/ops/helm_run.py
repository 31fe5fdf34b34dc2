"""Run one helm-sdkpy action in a process of its own (the Go runtime reads HELM_DRIVER and the
Helm home directories from the environment it starts with) and print its JSON result.

    python helm_run.py lint CHART_DIR
    python helm_run.py install KUBECONFIG_FILE CHART_DIR VALUES_JSON
"""

from __future__ import annotations

import asyncio
import json
import sys

import helm_sdkpy


def main(argv: list[str]) -> None:
    match argv:
        case ["lint", chart]:
            config = helm_sdkpy.Configuration(namespace="default")
            result = asyncio.run(helm_sdkpy.Lint(config).run(chart))
        case ["install", kubeconfig, chart, values]:
            config = helm_sdkpy.Configuration(namespace="default", kubeconfig=kubeconfig)
            result = asyncio.run(
                helm_sdkpy.Install(config).run(
                    "gpu-advisor", chart, values=json.loads(values) or None, wait=False, timeout=60
                )
            )
        case _:
            raise SystemExit(__doc__)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
