"""``gpu-advisor check|estimate|recommend SPEC`` as CI runs it: a subprocess, in process and
against a live server, on passing, failing and malformed specs.

Exit status: 0 pass, 1 fail, 2 error. Off a terminal the default format is JSON and nothing
is written to stderr on success (no progress spinner).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown_it import MarkdownIt

from tests.gate.conftest import FULL_FINETUNE, QLORA, SERVING, load_example, run_cli
from tests.ops.serving import REPO

GIB = 2**30
EXAMPLES = [FULL_FINETUNE, QLORA, SERVING]


def _write(tmp_path: Path, name: str, body: dict[str, Any]) -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(body), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def _failing_spec(tmp_path: Path) -> Path:
    body = load_example(FULL_FINETUNE)
    body["target"]["nodes"] = 1  # 16 B x 70.55e9 / 8 GPUs = 131.4 GiB > 79.6 GiB per H100
    return _write(tmp_path, "fail.yaml", body)


def _json(stdout: bytes) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(stdout)
    return parsed


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_examples_pass_in_process(example: Path) -> None:
    done = run_cli(["check", str(example.relative_to(REPO))])
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""  # no spinner or log lines off a terminal
    result = _json(done.stdout)  # JSON is the default when stdout is not a terminal
    assert result["verdict"] == "pass"
    assert [c["passed"] for c in result["checks"]] == [True] * 5


def test_failing_spec_exits_1_with_the_reason(tmp_path: Path) -> None:
    done = run_cli(["check", str(_failing_spec(tmp_path))])
    assert done.returncode == 1, done.stderr.decode()
    result = _json(done.stdout)
    assert result["verdict"] == "fail"
    memory = result["checks"][0]
    assert memory["name"] == "memory"
    assert memory["passed"] is False
    assert memory["data"]["nodes_needed"] == 2  # 16 GPUs: 65.7 GiB each, 8 GPUs: 131.4 GiB
    assert result["alternative"] is not None
    table = run_cli(["check", str(_failing_spec(tmp_path)), "--format", "table"])
    assert table.returncode == 1
    lines = table.stdout.decode().splitlines()
    assert lines[0] == "gpu-advisor check: FAIL"
    assert any(line.startswith("| memory ") and "| FAIL " in line for line in lines)


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("model: {preset: x}\nworkload: {kind: training, colour: red}\n", "s.yaml", "colour"),
        ('{"model": {"preset": "meta-llama/Llama-3.1-8B"}}', "s.json", "`workload`"),
        ("model: [\n", "s.yaml", "not valid YAML"),
        ("{not json", "s.json", "not valid JSON"),
        ("- a list\n", "s.yaml", "mapping"),
        ("target: {gpu: H100}\nmodel: {preset: x}\ntarget: {gpu: L4}\n", "s.yaml", "duplicate key"),
        ('{"model": {"config": ' + "[" * 5000 + "]" * 5000 + "}}", "s.json", "nested deeper"),
    ],
)
def test_malformed_specs_exit_2(tmp_path: Path, content: str, name: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    done = run_cli(["check", str(path)])
    assert done.returncode == 2
    assert done.stdout == b""
    error = done.stderr.decode()
    assert error.startswith(f"gpu-advisor: invalid spec {path}: ")
    assert message in error


def test_field_errors_name_the_field(tmp_path: Path) -> None:
    body = load_example(FULL_FINETUNE)
    body["workload"]["sequence_length"] = 0
    done = run_cli(["check", str(_write(tmp_path, "s.yaml", body))])
    assert done.returncode == 2
    assert "workload.sequence_length: Expected `int` >= 1" in done.stderr.decode()
    body = load_example(FULL_FINETUNE)
    body["target"]["instance_type"] = "p5.48xlarg"
    done = run_cli(["check", str(_write(tmp_path, "s.yaml", body))])
    assert done.returncode == 2
    assert done.stderr.decode().startswith("gpu-advisor: target.instance_type: no instance type")


def test_missing_file_and_bad_setting_exit_2(tmp_path: Path) -> None:
    done = run_cli(["check", str(tmp_path / "absent.yaml")])
    assert done.returncode == 2
    assert "cannot read it" in done.stderr.decode()
    done = run_cli(["check", str(FULL_FINETUNE)], env={"GPU_ADVISOR_SOURCES": "nowhere"})
    assert done.returncode == 2
    assert done.stderr.decode().startswith("gpu-advisor: invalid setting GPU_ADVISOR_SOURCES")


def test_spec_from_stdin_and_yaml_floats() -> None:
    # YAML 1.1 (PyYAML) would read `tokens: 1.0e9` as a string; the spec reader uses the
    # YAML 1.2 float rule, so the example's tokens are a number.
    assert "tokens: 1.0e9" in FULL_FINETUNE.read_text(encoding="utf-8")
    done = run_cli(["check", "-"], stdin=FULL_FINETUNE.read_bytes())
    assert done.returncode == 0, done.stderr.decode()
    assert _json(done.stdout)["verdict"] == "pass"


def test_estimate_and_recommend_exit_codes(tmp_path: Path) -> None:
    fits = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {"kind": "inference", "context_length": 4096},
        "hardware": {"gpu": "H100"},
    }
    assert run_cli(["estimate", str(_write(tmp_path, "e.json", fits))]).returncode == 0
    # 70.55e9 bf16 weights = 131.4 GiB cannot fit one L4 (22.4 GiB exposed)
    too_big = {**fits, "model": {"preset": "meta-llama/Llama-3.1-70B"}, "hardware": {"gpu": "L4"}}
    done = run_cli(["estimate", str(_write(tmp_path, "e.json", too_big))])
    assert done.returncode == 1
    assert _json(done.stdout)["fits"] is False
    example = REPO / "examples" / "llama31-8b-qlora.json"
    done = run_cli(["recommend", str(example)])
    assert done.returncode == 0
    assert _json(done.stdout)["recommendations"]
    body = json.loads(example.read_text(encoding="utf-8"))
    body["constraints"] = {"max_price_per_hour_usd": 0.01}
    done = run_cli(["recommend", str(_write(tmp_path, "r.json", body))])
    assert done.returncode == 1
    assert _json(done.stdout)["recommendations"] == []


def _markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, body rows) of every table markdown-it finds (GFM table rule on)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables: list[tuple[list[str], list[list[str]]]] = []
    row: list[str] = []
    in_head = False
    for token in tokens:
        match token.type:
            case "table_open":
                tables.append(([], []))
            case "thead_open":
                in_head = True
            case "thead_close":
                in_head = False
            case "tr_open":
                row = []
            case "inline" if tables and token.level >= 4:
                row.append(token.content)
            case "tr_close":
                (tables[-1][0].extend(row) if in_head else tables[-1][1].append(row))
    return tables


def test_markdown_output_is_a_table(tmp_path: Path) -> None:
    done = run_cli(["check", str(_failing_spec(tmp_path)), "--format", "markdown"])
    assert done.returncode == 1
    text = done.stdout.decode()
    assert text.splitlines()[0] == "### ❌ gpu-advisor check: FAIL"
    tables = _markdown_tables(text)
    headers, rows = tables[0]
    assert headers == ["check", "result", "detail"]
    assert [r[0] for r in rows] == ["memory", "topology", "headroom", "budget", "deadline"]
    assert rows[0][1] == "❌ fail"
    assert rows[1][1] == "➖ n/a"
    assert "target.nodes allows 1" in rows[0][2]
    assert all(len(r) == 3 for r in rows)
    alternative = next(t for t in tables if t[0][0] == "instance")
    assert len(alternative[1]) == 1  # the cheapest passing option


def _serving_spec(tmp_path: Path, context_length: int) -> Path:
    body = {
        "model": {"preset": "meta-llama/Llama-3.1-8B"},
        "workload": {
            "kind": "inference",
            "weight_dtype": "bf16",
            "context_length": context_length,
            "concurrency": 32,
        },
        "target": {"gpu": "H100", "gpu_count": 1, "nodes": 4},
    }
    return _write(tmp_path, f"serve-{context_length}.yaml", body)


def test_baseline_reports_more_gpus_and_cost_when_the_context_doubles(tmp_path: Path) -> None:
    # KV cache: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token. 32 sequences:
    # 8,192 tokens -> 32 GiB, 16,384 tokens -> 64 GiB. With the 8.03e9 bf16 weights
    # (14.96 GiB) the doubled context needs 78.96 GiB, more than a vLLM engine reserves on one
    # H100 (0.9 x 81,559 MiB = 71.68 GiB): it takes a second GPU.
    kv_per_token = 2 * 32 * 8 * 128 * 2
    weights = 8_030_261_248 * 2
    reserve = 0.9 * 81_559 * 2**20
    assert (weights + kv_per_token * 8192 * 32) / GIB == pytest.approx(46.96, abs=0.01)
    assert weights + kv_per_token * 16384 * 32 > reserve
    base = tmp_path / "base.json"
    first = run_cli(["check", str(_serving_spec(tmp_path, 8192)), "--save-json", str(base)])
    assert first.returncode == 0, first.stderr.decode()
    assert base.read_bytes() == first.stdout
    before = _json(first.stdout)["estimate"]
    assert before["gpus"] == 1
    now = tmp_path / "now.json"
    args = ["--baseline", str(base), "--format", "markdown", "--save-json", str(now)]
    second = run_cli(["check", str(_serving_spec(tmp_path, 16384)), *args])
    assert second.returncode == 0, second.stderr.decode()
    after = _json(now.read_bytes())["estimate"]
    assert after["gpus"] == 2
    # both priced per hour (1 h of serving) at the cheapest 1 x H100 offer: twice the cost
    assert after["cost"]["total_usd"] == pytest.approx(2 * before["cost"]["total_usd"])
    changes = {
        row[0]: row[1:]
        for headers, rows in _markdown_tables(second.stdout.decode())
        if headers == ["metric", "baseline", "now", "change"]
        for row in rows
    }
    assert changes["GPU count"][:2] == ["1", "2"]
    assert changes["cost"][0] == f"${before['cost']['total_usd']:,.2f}"
    assert changes["cost"][1] == f"${after['cost']['total_usd']:,.2f}"
    assert changes["cost"][2].endswith("(+100%)")
    assert "verdict" not in changes  # still passes


def test_baseline_in_json_mode_goes_to_stderr(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    run_cli(["check", str(_serving_spec(tmp_path, 8192)), "--save-json", str(base)])
    done = run_cli(["check", str(_serving_spec(tmp_path, 16384)), "--baseline", str(base)])
    assert done.returncode == 0
    assert _json(done.stdout)["verdict"] == "pass"  # stdout stays the plain JSON result
    assert "GPU count" in done.stderr.decode()
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a result"}', encoding="utf-8")
    done = run_cli(["check", str(_serving_spec(tmp_path, 8192)), "--baseline", str(bad)])
    assert done.returncode == 2
    assert "is not a JSON result of `gpu-advisor check`" in done.stderr.decode()


def test_a_baseline_of_another_model_says_so_first(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    run_cli(["check", str(FULL_FINETUNE), "--save-json", str(base)])  # Llama-3.1-70B
    done = run_cli(["check", str(_serving_spec(tmp_path, 8192)), "--baseline", str(base)])
    changes = done.stderr.decode()
    rows = [line for line in changes.splitlines() if "meta-llama/" in line]
    assert rows, changes
    assert "meta-llama/Llama-3.1-70B" in rows[0]
    assert "meta-llama/Llama-3.1-8B" in rows[0]


# --- against a live server ---------------------------------------------------------------------


def test_remote_json_is_identical_to_in_process(server_url: str, tmp_path: Path) -> None:
    for spec, status in [*((e, 0) for e in EXAMPLES), (_failing_spec(tmp_path), 1)]:
        local = run_cli(["check", str(spec), "--format", "json"])
        remote = run_cli(["check", str(spec), "--format", "json", "--url", server_url])
        assert local.returncode == status, local.stderr.decode()
        assert remote.returncode == status, remote.stderr.decode()
        assert _json(local.stdout)["verdict"] == ("pass" if status == 0 else "fail")
        assert remote.stdout == local.stdout, spec.name
    estimate = _write(
        tmp_path,
        "estimate.json",
        {
            "model": {"preset": "meta-llama/Llama-3.1-70B"},
            "workload": {"kind": "inference", "context_length": 8192, "concurrency": 16},
            "hardware": {"gpu": "H100", "gpu_count": 8},
        },
    )
    recommend = REPO / "examples" / "llama31-8b-qlora.json"
    for command, spec in (("estimate", estimate), ("recommend", recommend)):
        local = run_cli([command, str(spec)])
        remote = run_cli([command, str(spec), "--url", server_url])
        assert local.returncode == 0, local.stderr.decode()
        assert remote.returncode == 0, remote.stderr.decode()
        assert remote.stdout == local.stdout, command


def test_remote_errors_exit_2(server_url: str, tmp_path: Path) -> None:
    body = load_example(FULL_FINETUNE)
    body["target"]["instance_type"] = "p5.48xlarg"
    spec = _write(tmp_path, "s.yaml", body)
    done = run_cli(["check", str(spec), "--url", server_url])
    assert done.returncode == 2
    error = done.stderr.decode()
    assert error.startswith("gpu-advisor: target.instance_type: no instance type")
    assert "(HTTP 404 from " in error
    local = run_cli(["check", str(spec)]).stderr.decode()
    assert error.startswith(local.strip())  # the same message, plus where it came from
    done = run_cli(["check", str(FULL_FINETUNE), "--url", "http://127.0.0.1:9"])
    assert done.returncode == 2
    assert "service unreachable at http://127.0.0.1:9" in done.stderr.decode()
