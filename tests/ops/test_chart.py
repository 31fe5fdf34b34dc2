"""The Helm chart: lints and renders with the Helm library (helm-sdkpy) for the default values
and for ci/all-on-values.yaml; every rendered manifest validates against the Kubernetes
schemas (kubernetes-validate, strict); the security settings are in the rendered output."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.ops.fake_kube import FakeKube
from tests.ops.serving import REPO, runtime_stage

CHART = REPO / "helm" / "gpu-advisor"
ALL_ON = yaml.safe_load((CHART / "ci" / "all-on-values.yaml").read_text(encoding="utf-8"))
HELM_RUN = Path(__file__).with_name("helm_run.py")
# Oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest schemas known.
K8S_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version() + ".0")
# Kinds from CRDs, which the Kubernetes schemas do not hold; checked by hand below.
CRD_KINDS = {"ServiceMonitor"}
IMAGE_UID = 10001


def helm(*args: str, home: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "HOME": str(home),
        "HELM_DRIVER": "memory",
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run(
        [sys.executable, str(HELM_RUN), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def render(values: dict[str, Any], home: Path) -> tuple[list[dict[str, Any]], str]:
    """Rendered manifests (hooks included) and NOTES.txt, as Helm's install action makes them."""
    with FakeKube() as kube:
        kubeconfig = home / "kubeconfig"
        kubeconfig.write_text(kube.kubeconfig, encoding="utf-8")
        release = helm("install", str(kubeconfig), str(CHART), json.dumps(values), home=home)
    texts = [release["manifest"], *(hook["manifest"] for hook in release.get("hooks") or [])]
    docs = [doc for text in texts for doc in yaml.safe_load_all(text) if doc]
    return docs, release["info"].get("notes", "")


@pytest.fixture(scope="module")
def default_render(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    return render({}, tmp_path_factory.mktemp("helm-default"))


@pytest.fixture(scope="module")
def all_on_render(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    return render(ALL_ON, tmp_path_factory.mktemp("helm-all-on"))


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs).get(kind, [])
    assert len(found) == 1, (kind, [d["kind"] for d in docs])
    return found[0]


@pytest.mark.parametrize("values_name", ["default", "all-on"])
def test_chart_lints(values_name: str, tmp_path: Path) -> None:
    chart = tmp_path / "gpu-advisor"
    shutil.copytree(CHART, chart)
    if values_name == "all-on":
        # Helm's lint action takes the chart's own values.yaml: lay the all-on file over it.
        defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
        merged = deep_merge(defaults, ALL_ON)
        (chart / "values.yaml").write_text(yaml.safe_dump(merged), encoding="utf-8")
    result = helm("lint", str(chart), home=tmp_path)
    assert result["TotalChartsLinted"] == 1
    assert not result["Errors"]
    # Severity 1 is INFO (e.g. "icon is recommended"); 2 WARNING and 4 ERROR must not occur.
    assert [m for m in result["Messages"] if m["Severity"] > 1] == []


def test_lint_does_fail_on_a_broken_template(tmp_path: Path) -> None:
    chart = tmp_path / "gpu-advisor"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "broken.yaml").write_text("kind: {{ .Values.nope.deeper }}\n")
    result = helm("lint", str(chart), home=tmp_path)
    assert result["Errors"]


@pytest.mark.parametrize("which", ["default_render", "all_on_render"])
@pytest.mark.parametrize("k8s_version", K8S_VERSIONS)
def test_every_rendered_manifest_validates(
    which: str, k8s_version: str, request: pytest.FixtureRequest
) -> None:
    docs, _ = request.getfixturevalue(which)
    assert docs
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(doc, k8s_version, strict=True)


def test_default_values_render_the_expected_objects(default_render: Any) -> None:
    docs, notes = default_render
    kinds = sorted(doc["kind"] for doc in docs)
    assert kinds == sorted(
        [
            "ConfigMap",
            "Deployment",
            "HorizontalPodAutoscaler",
            "PodDisruptionBudget",
            "Pod",  # the helm test hook
            "Service",
            "ServiceAccount",
        ]
    )
    assert "curl" in notes
    assert "/v1/recommendations" in notes
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == one(docs, "Deployment")["metadata"]["name"]
    config = one(docs, "ConfigMap")["data"]
    assert config["GPU_ADVISOR_HOST"] == "0.0.0.0"
    assert config["GPU_ADVISOR_SOURCES"] == "bundled"
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "env" not in container  # no Redis, no admin token: nothing secret to reference


def image_uid_gid() -> tuple[int, int]:
    user = next(line.split()[1] for line in runtime_stage() if line.startswith("USER "))
    uid, gid = user.split(":")
    return int(uid), int(gid)


@pytest.mark.parametrize("which", ["default_render", "all_on_render"])
def test_security_settings_are_rendered(which: str, request: pytest.FixtureRequest) -> None:
    docs, _ = request.getfixturevalue(which)
    uid, gid = image_uid_gid()
    assert (uid, gid) == (IMAGE_UID, IMAGE_UID)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid  # the image's user
    assert pod["securityContext"]["runAsGroup"] == gid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == uid
    assert security["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]  # the only writable path
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["limits"]["memory"]
    assert pod["topologySpreadConstraints"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config = one(docs, "ConfigMap")["data"]
    assert str(ports["http"]) == config["GPU_ADVISOR_PORT"]
    shutdown_seconds = int(config["GPU_ADVISOR_SHUTDOWN_TIMEOUT_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] > shutdown_seconds
    # The test hook pod runs locked down as well.
    hook = one(docs, "Pod")["spec"]
    assert hook["securityContext"]["runAsNonRoot"] is True
    assert hook["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_all_on_values_render_every_optional_object(all_on_render: Any) -> None:
    docs, notes = all_on_render
    kinds = by_kind(docs)
    for kind in ("Ingress", "ServiceMonitor", "Secret", "HorizontalPodAutoscaler"):
        assert kind in kinds, kind
    ingress = one(docs, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"][0]["secretName"] == "gpu-advisor-tls"
    assert "https://gpu-advisor.example.com" in notes
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "15s", "scrapeTimeout": "5s"}
    ]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = one(docs, "Service")
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    hpa = one(docs, "HorizontalPodAutoscaler")["spec"]
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu", "memory"]
    assert one(docs, "PodDisruptionBudget")["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": service["spec"]["selector"]},
    }
    # The admin token goes to the chart's Secret; Redis comes from the existing Secret.
    secret = one(docs, "Secret")
    assert set(secret["data"]) == {"GPU_ADVISOR_ADMIN_TOKEN"}
    token = base64.b64decode(secret["data"]["GPU_ADVISOR_ADMIN_TOKEN"]).decode()
    assert token == ALL_ON["adminToken"]["value"]
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["REDIS_URL"] == {"name": "platform-redis", "key": "url"}
    assert env["GPU_ADVISOR_ADMIN_TOKEN"] == {
        "name": secret["metadata"]["name"],
        "key": "GPU_ADVISOR_ADMIN_TOKEN",
    }
    config = one(docs, "ConfigMap")["data"]
    assert config["GPU_ADVISOR_SOURCES"] == "bundled,skypilot,gpuhunt,table"
    assert config["GPU_ADVISOR_TABLE_PATH"] == "/etc/gpu-advisor/offers.yaml"
    # No secret value leaks into the ConfigMap or the pod template.
    rendered = yaml.safe_dump_all([d for d in docs if d["kind"] != "Secret"])
    assert ALL_ON["adminToken"]["value"] not in rendered


def test_redis_url_as_a_value_goes_to_the_secret(tmp_path: Path) -> None:
    url = "redis://:p4ss@redis-master.data.svc.cluster.local:6379/0"
    docs, notes = render({"redis": {"url": url}}, tmp_path)
    secret = one(docs, "Secret")
    assert base64.b64decode(secret["data"]["REDIS_URL"]).decode() == url
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [
        {
            "name": "REDIS_URL",
            "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "REDIS_URL"}},
        }
    ]
    assert "p4ss" not in yaml.safe_dump(one(docs, "ConfigMap"))
    assert "in-process" not in notes


def test_schema_rejects_a_bad_value(tmp_path: Path) -> None:
    with FakeKube() as kube:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(kube.kubeconfig, encoding="utf-8")
        env = {**os.environ, "HOME": str(tmp_path), "HELM_DRIVER": "memory"}
        values = json.dumps({"config": {"logFormat": "xml", "sources": "bundled,aws"}})
        result = subprocess.run(
            [sys.executable, str(HELM_RUN), "install", str(kubeconfig), str(CHART), values],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode != 0
    assert re.search(r"logFormat|sources", result.stderr), result.stderr[-2000:]


def test_validation_is_strict_enough_to_fail(default_render: Any) -> None:
    docs, _ = default_render
    deployment = json.loads(json.dumps(one(docs, "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFs"] = True  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)
