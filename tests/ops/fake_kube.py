"""A minimal in-memory Kubernetes API server, enough for Helm's install action to render a chart.

helm-sdkpy exposes no ``helm template``; its ``Install`` renders the chart with the Helm library
and then talks to a cluster (discovery, existence checks, creates). This server answers those
calls on 127.0.0.1 (discovery documents for the kinds the chart uses, 404 for reads, 201 for
creates), so the returned release holds the manifest exactly as Helm rendered it.
Used only by the chart tests; loopback only, stopped by the test.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (group, version) -> [(plural, kind, namespaced)]
RESOURCES: dict[tuple[str, str], list[tuple[str, str, bool]]] = {
    ("", "v1"): [
        ("configmaps", "ConfigMap", True),
        ("secrets", "Secret", True),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("pods", "Pod", True),
        ("namespaces", "Namespace", False),
    ],
    ("apps", "v1"): [("deployments", "Deployment", True)],
    ("autoscaling", "v2"): [("horizontalpodautoscalers", "HorizontalPodAutoscaler", True)],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    ("networking.k8s.io", "v1"): [("ingresses", "Ingress", True)],
    ("monitoring.coreos.com", "v1"): [("servicemonitors", "ServiceMonitor", True)],
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resource_list(group: str, version: str) -> dict[str, Any]:
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": plural,
                "singularName": kind.lower(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": VERBS,
            }
            for plural, kind, namespaced in RESOURCES[(group, version)]
        ],
    }


def _group_list() -> dict[str, Any]:
    groups = []
    for group, version in RESOURCES:
        if not group:
            continue
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _not_found(name: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f'"{name}" not found',
        "reason": "NotFound",
        "details": {"name": name},
        "code": 404,
    }


_GROUP_VERSION = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)$")


class _Handler(BaseHTTPRequestHandler):
    server_version = "fake-kube"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/version":
            self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"})
        elif path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
        elif path == "/apis":
            self._send(200, _group_list())
        elif path == "/api/v1":
            self._send(200, _resource_list("", "v1"))
        elif (m := _GROUP_VERSION.match(path)) and (m["group"], m["version"]) in RESOURCES:
            self._send(200, _resource_list(m["group"], m["version"]))
        else:
            self._send(404, _not_found(path.rsplit("/", 1)[-1]))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        body.setdefault("metadata", {}).setdefault("uid", "00000000-0000-0000-0000-000000000000")
        body["metadata"].setdefault("resourceVersion", "1")
        self.server.created.append(body)  # type: ignore[attr-defined]
        self._send(201, body)

    def do_PUT(self) -> None:
        self.do_POST()

    def do_PATCH(self) -> None:
        self.do_POST()

    def do_DELETE(self) -> None:
        self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})


class FakeKube:
    """``with FakeKube() as kube: kube.kubeconfig`` -> a kubeconfig YAML pointing at it."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.created = []  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def kubeconfig(self) -> str:
        return (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster:\n    server: {self.url}\n"
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
            "    namespace: default\n"
            "users:\n- name: fake\n  user:\n    token: fake\n"
        )

    def __enter__(self) -> FakeKube:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
