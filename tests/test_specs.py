"""Spec loading: validation errors name the file, line and field; overrides; extends; HF configs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from scalemodel.engine.job import build_network
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, load_workload, split_overrides

ACC = """kind: accelerator
name: test-gpu
peak_flops: {bf16: 312 TFLOP/s, fp32: 19.5 TFLOP/s}
memory: 80 GB
memory_bandwidth: 2.039 TB/s
tdp: 400 W
"""

CLUSTER = """kind: cluster
name: test-cluster
accelerator: {acc}
gpus_per_node: 8
tiers:
  - name: nvlink
    span: 8
    bandwidth: 300 GB/s
    latency: 2 us
    efficiency: 0.8
  - name: ib
    span: 1024
    bandwidth: 200 Gbit/s
    latency: 5 us
    efficiency: 0.9
    oversubscription: 2
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "acc.yaml").write_text(ACC)
    (tmp_path / "cluster.yaml").write_text(CLUSTER.format(acc=tmp_path / "acc.yaml"))
    return tmp_path


def write(tmp: Path, text: str, name: str = "bad.yaml") -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def error_of(ref: Path | str, overrides: list[str] | None = None) -> str:
    with pytest.raises(InputError) as info:
        load_cluster(ref, overrides or [])
    return info.value.message()


def test_valid_cluster_in_si_units(files: Path) -> None:
    c = load_cluster(files / "cluster.yaml")
    assert c.tiers[1].bandwidth == 25e9  # 200 Gbit/s = 25 GB/s
    assert c.tiers[0].latency == 2e-6
    assert c.accelerator.peak("bf16") == 312e12
    net = build_network(c)
    assert net.tiers[1].effective_bandwidth == pytest.approx(25e9 * 0.9 / 2)


def test_unknown_key_names_file_line_field_and_suggests(files: Path) -> None:
    p = write(files, CLUSTER.format(acc=files / "acc.yaml").replace("    latency: 5 us", "    latncy: 5 us"))
    msg = error_of(p)
    assert str(p) in msg and "tiers[1]" in msg
    assert ":14:" in msg  # the line of the misspelt key in the YAML
    assert "latncy" in msg and "latency" in msg


def test_missing_required_field(files: Path) -> None:
    p = write(files, CLUSTER.format(acc=files / "acc.yaml").replace("gpus_per_node: 8\n", ""))
    msg = error_of(p)
    assert "gpus_per_node" in msg and "missing" in msg


def test_wrong_type(files: Path) -> None:
    p = write(files, CLUSTER.format(acc=files / "acc.yaml").replace("span: 8\n", "span: eight\n"))
    msg = error_of(p)
    assert "tiers[0].span" in msg and "eight" in msg


@pytest.mark.parametrize(("old", "new", "field"), [
    ("bandwidth: 300 GB/s", "bandwidth: 0 GB/s", "tiers[0].bandwidth"),
    ("bandwidth: 300 GB/s", "bandwidth: -5 GB/s", "tiers[0].bandwidth"),
    ("latency: 2 us", "latency: 0 us", "tiers[0].latency"),
    ("latency: 2 us", "latency: -1 us", "tiers[0].latency"),
    ("efficiency: 0.8", "efficiency: 1.2", "tiers[0].efficiency"),
    ("efficiency: 0.8", "efficiency: 0", "tiers[0].efficiency"),
    ("oversubscription: 2", "oversubscription: 0.5", "tiers[1].oversubscription"),
    ("bandwidth: 300 GB/s", "bandwidth: 300 GB", "tiers[0].bandwidth"),
])
def test_bad_numbers(files: Path, old: str, new: str, field: str) -> None:
    p = write(files, CLUSTER.format(acc=files / "acc.yaml").replace(old, new, 1))
    assert field in error_of(p)


def test_zero_memory_in_accelerator(files: Path) -> None:
    write(files, ACC.replace("memory: 80 GB", "memory: 0 GB"), "acc0.yaml")
    p = write(files, CLUSTER.format(acc=files / "acc0.yaml"))
    assert "memory" in error_of(p)


def test_spans_must_grow(files: Path) -> None:
    p = write(files, CLUSTER.format(acc=files / "acc.yaml").replace("span: 1024", "span: 8"))
    msg = error_of(p)
    assert "tiers" in msg and "grow" in msg


def test_span_must_divide(files: Path) -> None:
    p = write(files, CLUSTER.format(acc=files / "acc.yaml").replace("span: 1024", "span: 1020"))
    assert "multiple" in error_of(p)


def test_missing_file() -> None:
    msg = error_of("/no/such/cluster.yaml")
    assert "file not found" in msg and "/no/such/cluster.yaml" in msg


def test_malformed_yaml_gives_line(files: Path) -> None:
    p = write(files, "kind: cluster\nname: [unclosed\ngpus_per_node: 8\n")
    msg = error_of(p)
    assert "malformed YAML" in msg and str(p) in msg


def test_alias_bomb_rejected_fast(files: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    p = write(files, "\n".join(lines) + "\n")
    start = time.perf_counter()
    msg = error_of(p)
    assert time.perf_counter() - start < 2.0
    assert "alias" in msg


def test_unknown_builtin_suggests_nearest() -> None:
    msg = error_of("dgx-h10")
    assert "unknown built-in cluster" in msg and "did you mean dgx-h100" in msg


def test_not_a_mapping(files: Path) -> None:
    assert "mapping" in error_of(write(files, "- 1\n- 2\n"))


def test_overrides_by_name_and_index(files: Path) -> None:
    c = load_cluster(files / "cluster.yaml", ["tiers.ib.bandwidth=400Gbps", "tiers.0.latency=1us",
                                              "accelerator.memory=40GB"])
    assert c.tiers[1].bandwidth == 50e9
    assert c.tiers[0].latency == 1e-6
    assert c.accelerator.memory == 40e9


def test_override_errors(files: Path) -> None:
    assert "no item" in error_of(files / "cluster.yaml", ["tiers.spine.bandwidth=1"])
    assert "'='" in error_of(files / "cluster.yaml", ["tiers.ib.bandwidth"])
    assert "unknown key" in error_of(files / "cluster.yaml", ["gpus_per_nod=4"])


def test_split_overrides_routes_roots() -> None:
    routed = split_overrides(["cluster.tiers.ib.bandwidth=1", "accelerator.memory=1", "model.layers=2"])
    assert routed["cluster"] == ["tiers.ib.bandwidth=1", "accelerator.memory=1"]
    assert routed["model"] == ["layers=2"]
    with pytest.raises(InputError):
        split_overrides(["layers=2"])


def test_extends_merges_tiers_by_name(files: Path) -> None:
    p = write(files, "extends: cluster.yaml\nname: faster\ntiers:\n  - name: ib\n    bandwidth: 400 Gbit/s\n",
              "derived.yaml")
    c = load_cluster(p)
    assert c.name == "faster"
    assert [t.name for t in c.tiers] == ["nvlink", "ib"]
    assert c.tiers[1].bandwidth == 50e9 and c.tiers[1].latency == 5e-6


def test_extends_cycle_is_an_error(files: Path) -> None:
    write(files, "extends: two.yaml\nname: one\n", "one.yaml")
    write(files, "extends: one.yaml\nname: two\n", "two.yaml")
    assert "cycle" in error_of(files / "one.yaml")


def test_hf_config_json_loads_as_transformer(tmp_path: Path) -> None:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
           "tie_word_embeddings": False, "hidden_act": "silu", "rope_theta": 500000.0,
           "quantization_config": {"bits": 4}}
    d = tmp_path / "llama3-8b"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    w = load_workload(d / "config.json")
    assert w.kind == "transformer" and w.name == "llama3-8b"
    assert (w.layers, w.hidden, w.heads, w.kv_heads, w.ffn_hidden, w.vocab) == (32, 4096, 32, 8, 14336, 128256)
    assert w.gated_mlp is True


def test_hf_moe_config(tmp_path: Path) -> None:
    cfg = {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
           "max_position_embeddings": 32768, "num_local_experts": 8, "num_experts_per_tok": 2}
    p = tmp_path / "mixtral.json"
    p.write_text(json.dumps(cfg))
    w = load_workload(p)
    assert w.kind == "transformer" and w.moe is not None and (w.moe.experts, w.moe.top_k) == (8, 2)
