"""`scalemodel check`: verdicts against values computed independently with the engine's predict,
exit codes 0/1/2, JSON shape, the example capacity files, and the committed JSON schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from scalemodel.commands.common import build_specs
from scalemodel.engine.predict import predict

EXAMPLES = ROOT / "examples" / "capacity"

BASE = """kind: scenario
name: t
cluster: dgx-h100
model: gpt-1.7b
gpus: {gpus}
mode: {mode}
training: {{micro_batch: 1{training}}}
assertions:
{assertions}
"""


def write(tmp: Path, *, gpus: str = "[16]", mode: str = "weak", training: str = "", assertions: str,
          name: str = "cap.yaml") -> str:
    p = tmp / name
    p.write_text(BASE.format(gpus=gpus, mode=mode, training=training, assertions=assertions))
    return str(p)


def predicted(gpus: int, global_batch: int, **training: Any) -> Any:
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="gpt-1.7b", sets=[],
                                 training={"micro_batch": 1, "global_batch": global_batch, **training}, strategy={})
    return predict(cl, wl, gpus, tr, st)


def test_max_step_time_just_above_and_below_the_prediction(cli: Any, tmp_path: Path) -> None:
    step = predicted(16, 16).step_time_s  # weak default: global batch = dp x micro = 16
    ok = cli("check", write(tmp_path, assertions=f"  max_step_time: {step * 1.001!r}"))
    assert ok.code == 0, ok.out + ok.err
    assert "PASS" in ok.out
    bad = cli("check", write(tmp_path, assertions=f"  max_step_time: {step * 0.999!r}"))
    assert bad.code == 1 and "FAIL" in bad.out
    doc = json.loads(cli("check", write(tmp_path, assertions=f"  max_step_time: {step * 0.999!r}"), "--json").out)
    assert doc["command"] == "check" and doc["passed"] is False
    (a,) = doc["assertions"]
    assert set(a) >= {"name", "limit", "value", "passed", "at_gpus", "unit"}
    assert a["name"] == "max_step_time" and a["at_gpus"] == 16 and a["unit"] == "s"
    assert a["value"] == pytest.approx(step, rel=1e-12)


def test_scaling_efficiency_against_two_predictions(cli: Any, tmp_path: Path) -> None:
    # Weak scaling from 16 to 64 GPUs: global batch 16 -> 64 (one sequence per replica), and the
    # efficiency is per-GPU throughput at 64 relative to 16.
    x16 = predicted(16, 16).throughput["tokens_per_s"]
    x64 = predicted(64, 64).throughput["tokens_per_s"]
    eff = (x64 / 64) / (x16 / 16)
    assert 0.5 < eff < 1.0
    for limit, code in ((eff * 0.999, 0), (eff * 1.001, 1)):
        res = cli("check", write(tmp_path, gpus="[16, 32, 64]", assertions=f"  min_scaling_efficiency: {limit!r}\n"
                                                                         "  at: 64"), "--json")
        assert res.code == code, res.err
        doc = json.loads(res.out)
        (a,) = doc["assertions"]
        assert a["value"] == pytest.approx(eff, rel=1e-9) and a["at_gpus"] == 64
    # strong scaling keeps the global batch of the first point (16 sequences) at 64 GPUs -> infeasible
    # split (16 < dp 64): a bad-input error, not a verdict
    res = cli("check", write(tmp_path, gpus="[16, 64]", mode="strong",
                             assertions="  min_scaling_efficiency: 0.5"))
    assert res.code == 2 and "global batch" in res.err


def test_single_size_assertions_use_the_largest_count(cli: Any, tmp_path: Path) -> None:
    p = predicted(64, 64)
    mfu = p.flops["mfu"]
    tokens = p.throughput["tokens_per_s"]
    text = (f"  min_mfu: {mfu * 0.999!r}\n  min_tokens_per_s: {tokens * 1.001!r}\n  must_fit_memory: true")
    res = cli("check", write(tmp_path, gpus="[16, 64]", assertions=text), "--json")
    assert res.code == 1
    got = {a["name"]: a for a in json.loads(res.out)["assertions"]}
    assert got["min_mfu"]["passed"] and got["min_mfu"]["at_gpus"] == 64
    assert got["min_mfu"]["value"] == pytest.approx(mfu, rel=1e-12)
    assert not got["min_tokens_per_s"]["passed"]
    assert got["must_fit_memory"]["passed"] == p.memory["fits"]
    assert got["must_fit_memory"]["value"] == pytest.approx(p.memory["per_gpu_bytes"])
    human = cli("check", write(tmp_path, gpus="[16, 64]", assertions=text))
    assert "largest GPU count (64)" in human.out


def test_cost_and_time_to_train_by_hand(cli: Any, tmp_path: Path) -> None:
    p = predicted(16, 16)
    tokens_per_s = p.throughput["tokens_per_s"]
    seconds = 1e9 / tokens_per_s  # 1B tokens, BSP (statistical efficiency 1)
    cost = seconds * 16 * 2.0 / 3600  # 2 USD per GPU-hour
    text = f"  max_cost_usd: {cost * 1.001!r}\n  max_time_to_train: {seconds * 0.999!r}"
    res = cli("check", write(tmp_path, training=", train_tokens: 1B", assertions=text),
              "--set", "cluster.price_per_gpu_hour=2 USD/h", "--json")
    assert res.code == 1, res.err
    got = {a["name"]: a for a in json.loads(res.out)["assertions"]}
    assert got["max_cost_usd"]["value"] == pytest.approx(cost, rel=1e-9) and got["max_cost_usd"]["passed"]
    assert got["max_time_to_train"]["value"] == pytest.approx(seconds, rel=1e-9)
    assert not got["max_time_to_train"]["passed"]


def test_the_suggested_price_is_per_hour(cli: Any, tmp_path: Path) -> None:
    """The --set price that the missing-price error and `check --help` suggest is 2.5 USD per GPU-hour. A bare
    2.5 is the SI base unit, USD per second (3600x the cost): a user copying the suggestion must not get that."""
    seconds = 1e9 / predicted(16, 16).throughput["tokens_per_s"]  # 1B tokens, BSP
    cost = seconds * 16 * 2.5 / 3600
    path = write(tmp_path, training=", train_tokens: 1B", assertions="  max_cost_usd: 5e6")
    err = cli("check", path)
    assert err.code == 2 and "--set cluster.price_per_gpu_hour=" in err.err
    help_text = " ".join(cli("check", "--help").out.split())
    for text in (err.err, help_text):
        value = text.split("cluster.price_per_gpu_hour=")[1].split()[0].rstrip(",")
        doc = json.loads(cli("check", path, "--set", f"cluster.price_per_gpu_hour={value}", "--json").out)
        assert doc["assertions"][0]["value"] == pytest.approx(cost, rel=1e-9), value


@pytest.mark.parametrize(("text", "training", "gpus", "needle"), [
    ("  max_cost_usd: 5e6", ", train_tokens: 1B", "[16]", "max_cost_usd"),  # no price
    ("  max_cost_usd: 5e6", "", "[16]", "train_tokens"),
    ("  max_time_to_train: 10 days", "", "[16]", "max_time_to_train"),
    ("  min_scaling_efficiency: 0.7", "", "[16]", "two GPU counts"),
    ("  min_scaling_efficiency: 0.7\n  at: 48", "", "[16, 64]", "at"),
    ("  at: 64", "", "[16, 64]", "at"),
    ("  max_step_tme: 2s", "", "[16]", "max_step_time"),  # unknown key, with a suggestion
    ("  max_step_time: fast", "", "[16]", "max_step_time"),
    ("  {}", "", "[16]", "no assertions"),
])
def test_bad_input_exits_2(cli: Any, tmp_path: Path, text: str, training: str, gpus: str, needle: str) -> None:
    res = cli("check", write(tmp_path, gpus=gpus, training=training, assertions=text))
    assert res.code == 2, res.out
    assert res.err.startswith("error:") and needle in res.err
    assert "Traceback" not in res.err


def test_missing_file_bad_yaml_and_no_assertion_block(cli: Any, tmp_path: Path) -> None:
    assert cli("check", str(tmp_path / "nope.yaml")).code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: scenario\ncluster: [dgx-h100\n")
    res = cli("check", str(bad))
    assert res.code == 2 and "YAML" in res.err
    none = tmp_path / "none.yaml"
    none.write_text("kind: scenario\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: 8\n")
    res = cli("check", str(none))
    assert res.code == 2 and "no assertions" in res.err
    other = tmp_path / "cluster.yaml"
    other.write_text("kind: cluster\nname: x\n")
    assert cli("check", str(other)).code == 2


def test_set_overrides_flip_the_verdict(cli: Any, tmp_path: Path) -> None:
    path = write(tmp_path, assertions="  max_step_time: 1 us")
    assert cli("check", path).code == 1
    assert cli("check", path, "--set", "assertions.max_step_time=1000s").code == 0


def test_example_capacity_files(cli: Any) -> None:
    ok = cli("check", str(EXAMPLES / "gpt3-175b-dgx-h100.yaml"))
    assert ok.code == 0, ok.out + ok.err
    bad = cli("check", str(EXAMPLES / "llama2-7b-25gbe.yaml"), "--json")
    assert bad.code == 1, bad.err
    doc = json.loads(bad.out)
    assert doc["passed"] is False and any(not a["passed"] for a in doc["assertions"])
    for f in EXAMPLES.glob("*.yaml"):
        assert f.read_text().startswith("# yaml-language-server: $schema=../../schemas/scenario.schema.json")


@pytest.mark.parametrize("kind", ["cluster", "accelerator", "workload", "scenario"])
def test_committed_schemas_are_current(cli: Any, kind: str) -> None:
    res = cli("schema", kind)
    assert res.code == 0
    committed = (ROOT / "schemas" / f"{kind}.schema.json").read_text()
    assert json.loads(committed) == json.loads(res.out), (
        f"schemas/{kind}.schema.json is stale: run `scalemodel schema {kind} > schemas/{kind}.schema.json`")


def test_passing_example_validates_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json.loads((ROOT / "schemas" / "scenario.schema.json").read_text())
    doc = yaml.safe_load((EXAMPLES / "gpt3-175b-dgx-h100.yaml").read_text())
    jsonschema.validate(doc, schema)


def test_weak_time_to_train_is_train_tokens_over_throughput_unless_the_critical_batch_is_given(
        cli: Any, tmp_path: Path) -> None:
    """A weak scenario 16 -> 64 GPUs with 1B tokens: max_time_to_train is 1B / tokens/s at 64 GPUs (what predict's
    time to train says), not the time to target under the documented default critical batch, which counted
    train_tokens at the first point's batch and asked (1 + 64/B)/(1 + 16/B) times as many at the last. Given
    training.critical_batch (B = 32 sequences here), it is the time to target by hand: E0 = 1e9 / 2048 sequences at
    b0 = 16, S_min = E0 / (B + b0), S(64) = S_min (1 + B/64), times the step at 64 GPUs."""
    p64 = predicted(64, 64)
    seconds = 1e9 / p64.throughput["tokens_per_s"]
    path = write(tmp_path, gpus="[16, 64]", training=", train_tokens: 1B",
                 assertions=f"  max_time_to_train: {seconds * 1.001!r}")
    doc = json.loads(cli("check", path, "--json").out)
    (a,) = doc["assertions"]
    assert a["value"] == pytest.approx(seconds, rel=1e-9) and a["passed"]
    step = predicted(64, 64, critical_batch=32).step_time_s
    s_min = (1e9 / 2048) / (32 + 16)
    target = s_min * (1 + 32 / 64) * step
    path = write(tmp_path, gpus="[16, 64]", training=", train_tokens: 1B, critical_batch: 32",
                 assertions=f"  max_time_to_train: {target * 0.999!r}")
    res = cli("check", path, "--json")
    assert res.code == 1, res.err
    (a,) = json.loads(res.out)["assertions"]
    assert a["value"] == pytest.approx(target, rel=1e-9) and not a["passed"]


def test_must_fit_memory_holds_at_every_count(cli: Any, tmp_path: Path) -> None:
    """Llama 3 70B at TP 8, ZeRO-1, full recompute, strong 16 -> 64 H100s at B 64: at 16 GPUs (dp 2) the states
    take 70.55e9 / 8 x (2 + 2 + 12 / 2) bytes = 88 GB alone, past 80 GB; at 64 (dp 8) they fit. must_fit_memory was
    checked at 64 only and passed (exit 0), while the note without it said "add must_fit_memory: true to fail on
    it". It now fails, reporting the 16-GPU point."""
    assert 70.55e9 / 8 * (2 + 2 + 12 / 2) > 80e9
    text = ("kind: scenario\nname: m\ncluster: dgx-h100\nmodel: llama3-70b\ngpus: [16, 64]\nmode: strong\n"
            "training: {global_batch: 64, micro_batch: 1}\n"
            "strategy: {tp: 8, zero: '1', sequence_parallel: true, recompute: full}\n")
    p = tmp_path / "m.yaml"
    p.write_text(text + "assertions:\n  max_step_time: 1h\n")
    assert "add must_fit_memory: true to fail on it" in " ".join(cli("check", str(p)).out.split())
    p.write_text(text + "assertions:\n  must_fit_memory: true\n")
    res = cli("check", str(p), "--json")
    assert res.code == 1, res.out + res.err
    (a,) = json.loads(res.out)["assertions"]
    assert a["at_gpus"] == 16 and not a["passed"] and a["value"] > 80e9


def test_no_note_on_a_default_critical_batch_check_does_not_use(cli: Any, tmp_path: Path) -> None:
    """check's time to train is train_tokens / tokens/s unless the scenario gives training.critical_batch (the test
    above), and it prints no statistical efficiency, so the documented default critical batch moves none of its
    numbers: its note ('critical batch N sequences: the documented default ...', which scale prints beside the
    statistical efficiency it does use) was noise on every weak or strong check of a language model."""
    path = write(tmp_path, gpus="[16, 64]", training=", train_tokens: 1B",
                 assertions="  max_time_to_train: 1e9")
    doc = json.loads(cli("check", path, "--json").out)
    assert not any("critical batch" in n for n in doc["notes"]), doc["notes"]
    assert "critical batch" not in cli("check", path).out
    # scale prints it: its stat. eff. column rests on that default
    scale = cli("scale", "--scenario", path, "--json")
    assert any("the documented default" in n for n in json.loads(scale.out)["notes"])
