"""Hostile-input round 16b: what was merged after round 16 (sequence_parallel unset, moe_rank_imbalance,
nanotron_trainer, hybrid '|' segments priced per rank, Megatron's recompute flags) and two left-overs of round 16:
nccl-tests rows with #wrong > 0 fitted without a word, and a pipeline depth that contradicts a pattern's '|'
segments refused by check under "gpus:".

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

NCCL = ROOT / "tests" / "data" / "nccl"


# --- nccl-tests rows whose results nccl-tests found wrong are said ---------------------------------------------------
# A row with #wrong 12 (nccl-tests' CheckData counted 12 wrong elements) was fitted as any other, without a word: its
# time is a measurement of a collective that returned wrong data. The older era's float "error" column (4e-07,
# rounding) is no count and stays quiet.

def _wrong_text_log(tmp_path: Path) -> Path:
    lines = (NCCL / "synthetic_current.log").read_text().splitlines()
    i = next(k for k, x in enumerate(lines) if x.split()[:1] == ["8388608"])
    toks = lines[i].split()
    toks[8] = "12"  # the out-of-place #wrong
    lines[i] = "  ".join(toks)
    f = tmp_path / "wrong.log"
    f.write_text("\n".join(lines) + "\n")
    return f, i + 1  # type: ignore[return-value]


def test_nccl_rows_with_wrong_results_are_named(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f, line = _wrong_text_log(tmp_path)
    out = accepted(cli, "calibrate", "nccl-tests", str(f), "--cluster", "dgx-a100")
    said = [w for w in out["warnings"] if "#wrong > 0" in w]
    assert len(said) == 1, out["warnings"]
    assert said[0].startswith(f"{f}: 1 row(s)") and f"line {line} (size 8388608 B, 12 wrong)" in said[0], said


def test_nccl_json_rows_with_nwrong_are_named(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads((NCCL / "synthetic_json.json").read_text())
    doc["results"][3]["in_place"]["nwrong"] = 7
    f = tmp_path / "wrong.json"
    f.write_text(json.dumps(doc))
    out = accepted(cli, "calibrate", "nccl-tests", str(f), "--cluster", "dgx-a100")
    assert any("result 4 (size 8192 B, 7 wrong)" in w for w in out["warnings"]), out["warnings"]


@pytest.mark.parametrize("name", ["synthetic_current.log", "synthetic_middle.log", "synthetic_older.log",
                                  "synthetic_json.json"])
def test_nccl_logs_without_wrong_rows_say_nothing(cli, name: str) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "calibrate", "nccl-tests", str(NCCL / name), "--cluster", "dgx-a100")
    assert not any("#wrong" in w for w in out["warnings"]), out["warnings"]


def test_nccl_json_nwrong_not_a_number_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads((NCCL / "synthetic_json.json").read_text())
    doc["results"][0]["out_of_place"]["nwrong"] = "many"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    refused(cli, "calibrate", "nccl-tests", str(f), "--cluster", "dgx-a100", inputs=(f,),
            match=f"error: {f}: result 1: out_of_place.nwrong: expected a number >= 0, got 'many'")


# --- check names the field that contradicts a pattern's '|' segments -------------------------------------------------
# A pattern of 2 segments at pp 4 was refused as "sc.yaml: gpus: the strategy is invalid at 16 GPUs: layers do not
# split ...": no GPU count mends it; the segments are the stages (pp x v of them), so pp (or the schedule's v) is wrong.

HYBRID = """kind: transformer
name: hy
layers: 8
hidden: 1024
heads: 8
kv_heads: 4
ffn_hidden: 2048
vocab: 32000
seq_len: 2048
gated_mlp: true
moe: {experts: 32, top_k: 4, ffn_hidden: 1024}
hybrid:
  pattern: "M*ME|M*ME"
  mamba: {state_dim: 16, groups: 1, head_dim: 32, heads: 16}
"""


def _segment_scenario(tmp_path: Path, strategy: str) -> Path:
    (tmp_path / "hy.yaml").write_text(HYBRID)
    f = tmp_path / "sc.yaml"
    f.write_text(f"kind: scenario\nname: seg\ncluster: dgx-h100\nmodel: {tmp_path / 'hy.yaml'}\ngpus: [16]\n"
                 f"training: {{micro_batch: 1, global_batch: 64, moe_rank_imbalance: 1}}\nstrategy: {strategy}\n"
                 "assertions: {max_step_time: 100s}\n")
    return f


@pytest.mark.parametrize("strategy, sets, where", [
    ("{pp: 4}", (), "strategy.pp: pp 4 = 4 pipeline stages, but the model's hybrid pattern has 2 '|' segments"),
    ("{pp: 2, schedule: 'interleaved:2'}", (), "strategy.schedule: pp 2 x v 2 = 4 pipeline stages"),
    ("{pp: 2}", ("--set", "strategy.pp=8"), "--set strategy.pp: pp 8 = 8 pipeline stages"),
])
def test_check_names_the_pipeline_field_a_pattern_contradicts(cli, tmp_path: Path, strategy: str, sets: tuple,  # type: ignore[no-untyped-def, type-arg]
                                                              where: str) -> None:
    f = _segment_scenario(tmp_path, strategy)
    line = refused(cli, "check", str(f), *sets, inputs=(f,), match=where)
    assert ": gpus:" not in line and "pp x v = 2: pp 2 with 1f1b (or pp 1)" in line, line


def test_check_of_a_pipeline_the_segments_give_still_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _segment_scenario(tmp_path, "{pp: 2}")
    r = cli("check", str(f))
    assert r.code == 0 and "PASS" in r.out, r.err


# --- a --strategy file's unset sequence_parallel is not a plan pin ---------------------------------------------------
# "sequence_parallel: null" (the new default, written out) in a --strategy file was refused by plan and scale --best as
# "bad value in 'sequence_parallel=None'; true | false" (scale without the file's name); predict prices it on. Unset
# is no pin (as --set strategy.sequence_parallel=null is not): plan searches SP and ranks what predict prices.

MIX = ["-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64"]


@pytest.mark.parametrize("body", ["tp: 2\nep: 8\nsequence_parallel: null\n", "tp: 2\nep: 8\ndp: null\n"])
def test_plan_takes_a_file_field_written_unset(cli, tmp_path: Path, body: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "st.yaml"
    f.write_text(body)
    out = accepted(cli, "plan", *MIX, "--strategy", str(f), "--top", "1")
    top = out["ranked"][0]["strategy"]
    assert (top["tp"], top["ep"], top["sequence_parallel"]) == (2, 8, True), top
    best = accepted(cli, "scale", "--best", *MIX[:4], "-n", "64,128", "--strategy", str(f))
    assert best["points"], best


# --- training.moe_rank_imbalance beyond what routing can reach --------------------------------------------------------
# Top-k routing sends a token's k copies to k distinct experts, so a rank of E / ep experts receives at most
# min(k, E / ep) copies of each token against a mean of k / ep: max / mean <= min(ep, E / k). Mixtral (E 8, k 2) at
# ep 8 has a bound of 4 and at ep 2 of 2; a factor of 100 priced the busiest rank's expert GEMMs at 25x the batch's
# whole routed work, and ep 1 dropped the factor, both without a word.

@pytest.mark.parametrize("ep, factor, bound, at", [("8", "100", "4", ""), ("8", "4.1", "4", ""),
                                                   ("2", "3", "2", " at ep 2")])
@pytest.mark.parametrize("command", ["predict", "memory", "sensitivity"])
def test_rank_imbalance_beyond_routing_is_refused(cli, command: str, ep: str, factor: str, bound: str,  # type: ignore[no-untyped-def]
                                                  at: str) -> None:
    refused(cli, command, *MIX, "--tp", "2", "--ep", ep, "--set", f"training.moe_rank_imbalance={factor}",
            match=f"error: --set training.moe_rank_imbalance: moe_rank_imbalance {factor} exceeds what top-k routing "
                  f"can reach{at}: ")
    line = refused(cli, command, *MIX, "--tp", "2", "--ep", ep, "--set", f"training.moe_rank_imbalance={factor}")
    assert f"min(ep, E / k) = {bound} (E 8, k 2)" in line, line


def test_rank_imbalance_beyond_routing_in_plan_and_scenario(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", *MIX, "--set", "training.moe_rank_imbalance=5", "--top", "1",
            match="--set training.moe_rank_imbalance: moe_rank_imbalance 5 exceeds")
    f = tmp_path / "sc.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: mixtral-8x7b\ngpus: [64]\n"
                 "training: {micro_batch: 1, global_batch: 256, moe_rank_imbalance: 3}\nstrategy: {tp: 2, ep: 2}\n"
                 "assertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(f), inputs=(f,), match=f"{f}: training.moe_rank_imbalance: moe_rank_imbalance 3 "
                                                       "exceeds what top-k routing can reach at ep 2")


def test_rank_imbalance_at_the_bound_reads_and_at_ep_1_is_said(cli) -> None:  # type: ignore[no-untyped-def]
    accepted(cli, "predict", *MIX, "--tp", "2", "--ep", "8", "--set", "training.moe_rank_imbalance=4")
    out = accepted(cli, "predict", *MIX, "--tp", "2", "--set", "training.moe_rank_imbalance=2")
    assert any("moe_rank_imbalance = 2 is not priced: ep is 1" in w for w in out["warnings"]), out["warnings"]


# --- two frameworks' trainers at once --------------------------------------------------------------------------------
# nanotron_trainer with megatron_ddp (a Megatron-LM launch script sets it) or with deepspeed_pipeline was priced with
# both frameworks' terms added (nanotron's accumulation pass and ZeRO-1 sync beside Megatron-Core's buckets or
# DeepSpeed's per-micro-batch accumulation); a job runs on one of them.

@pytest.mark.parametrize("body, field, other", [
    ("nanotron_trainer: true\nmegatron_ddp: true\n", "nanotron_trainer", "megatron_ddp"),
    ("nanotron_trainer: true\ndeepspeed_pipeline: true\npp: 2\n", "nanotron_trainer", "deepspeed_pipeline"),
    ("megatron_ddp: true\ndeepspeed_pipeline: true\npp: 2\n", "deepspeed_pipeline", "megatron_ddp"),
])
def test_two_trainers_are_refused(cli, tmp_path: Path, body: str, field: str, other: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "st.yaml"
    f.write_text(body)
    for command in ("predict", "plan"):
        refused(cli, command, "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f), inputs=(f,),
                match=f"error: --strategy: {f}: strategy.{field}: true with {other} true: a job runs on one "
                      "framework's trainer")


def test_a_megatron_launch_with_nanotron_set_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f),
            "--set", "strategy.nanotron_trainer=true", inputs=(f,),
            match="error: --set strategy.nanotron_trainer: true with megatron_ddp true")


@pytest.mark.parametrize("body", ["nanotron_trainer: true\nzero: 1\n", "megatron_ddp: true\n",
                                  "deepspeed_pipeline: true\npp: 2\n"])
def test_one_trainer_still_reads(cli, tmp_path: Path, body: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "st.yaml"
    f.write_text(body)
    accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f))


# --- a launch script that gives a flag twice with two values ----------------------------------------------------------
# "--tensor-model-parallel-size 2 ... --tensor-model-parallel-size 4" (a script that sets a flag and sets it again) was
# read as 4 without a word; argparse keeps the last, and the first is now said as not used.

LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 1 --bf16 "


@pytest.mark.parametrize("flags, said, key, value", [
    ("--tensor-model-parallel-size 4", "--tensor-model-parallel-size 2 (given again later as 4", "tp", 4),
    ("--micro-batch-size 2", "--micro-batch-size 1 (given again later as 2", "micro_batch", 2),
    ("--recompute-granularity full --recompute-granularity selective",
     "--recompute-granularity full (given again later as selective", "recompute", "selective"),
])
def test_a_flag_given_twice_is_said(cli, tmp_path: Path, flags: str, said: str, key: str, value: object) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(LAUNCH + flags + "\n")
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f))
    assert out["strategy"][key] == value, out["strategy"]
    assert any("megatron settings not used" in w and said in w for w in out["warnings"]), out["warnings"]


def test_a_flag_repeated_with_its_value_is_not_said(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(LAUNCH + "--tensor-model-parallel-size 2 --sequence-parallel\n")
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f))
    assert not any("given again" in w for w in out["warnings"]), out["warnings"]
