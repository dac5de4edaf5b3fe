"""Hostile-input round 18: the surface added last session (strategy.stage_layers, Megatron-LM's
--pipeline-model-parallel-layout and the bash-style launch reader, cluster net_overhead and nccl_tuner) fed values
the frameworks refuse or read otherwise.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]  # 32 decoder layers
LAUNCH = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
          "--micro-batch-size 1 --bf16 ")


def _launch(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "run.sh"
    f.write_text(text)
    return f


# --- the launch reader's variables: an expansion that doubles ----------------------------------------------------
# Each string variable holding flags is expanded where a word names it (review17f); 40 assignments that each double
# the one before made 2^40 words and a MemoryError traceback.

def test_variables_that_double_are_refused_not_expanded(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = 'A0="--x --x --x --x --x --x --x --x"\n' + "".join(f'A{i + 1}="$A{i} $A{i}"\n' for i in range(40))
    f = _launch(tmp_path, text + LAUNCH + "$A40\n")
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match="the shell variables expand to more than 4,194,304 characters (at $A")


def test_variables_that_hold_a_launch_still_expand(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, 'PAR="--pipeline-model-parallel-size 2"\nALL="$PAR $PAR"\n'
                          "torchrun pretrain_gpt.py --micro-batch-size 1 $ALL\n")
    assert accepted(cli, "predict", *DENSE, "--strategy", str(f))["strategy"]["pp"] == 2


# --- --pipeline-model-parallel-layout: what Megatron-LM asserts, and how it reads a count -------------------------
# NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/pipeline_parallel_layer_layout.py validate_layer_layout:
# flatten_layout[0] must be the embedding and [-1] the loss (lines 96-101: "Et*8|...|t*8Lm" was priced, the MTP
# layer after the loss); the layout's m count must equal mtp_num_layers, none without --mtp-num-layers (lines
# 107-111: "...t*8mL" was priced for a launch without MTP, the m dropped without a word). parse_str_to_list reads
# N with int() (lines 295-303): "t*00000008" is 8 layers, and was refused as unrolling to more than a million.

@pytest.mark.parametrize("layout, flags, what", [
    ("Et*8|t*8|t*8|t*8Lm", "", "the layout's first layer is 'E' and its last 'm'"),
    ("tEt*7|t*8|t*8|t*8L", "", "the layout's first layer is 't' and its last 'L'"),
    ("Et*8|t*8|t*8|t*8mL", "", "the layout holds 1 MTP layers (m) but --mtp-num-layers is not given"),
    ("Et*8|t*8|t*8|t*8mL", "--mtp-num-layers 2 ", "the layout holds 1 MTP layers (m) but --mtp-num-layers is 2"),
    ("Et*8|t*8|t*8|t*8L", "--mtp-num-layers 1 ", "the layout holds 0 MTP layers (m) but --mtp-num-layers is 1"),
])
def test_layout_megatron_refuses_is_refused(cli, tmp_path: Path, layout: str, flags: str, what: str) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, LAUNCH + flags + f"--pipeline-model-parallel-layout '{layout}'\n")
    line = refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,))
    assert line.startswith(f"error: --strategy: {f}: --pipeline-model-parallel-layout: ") and what in line, line


def test_layout_mtp_layers_matching_the_launch_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, LAUNCH + "--mtp-num-layers 1 --pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8mL'\n")
    assert accepted(cli, "predict", *DENSE, "--strategy", str(f))["strategy"]["stage_layers"] == [8, 8, 8, 8]


def test_layout_repeat_count_with_leading_zeros_is_its_number(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, LAUNCH + "--pipeline-model-parallel-layout 'Et*00000002|t*10|t*10|t*10L'\n")
    assert accepted(cli, "predict", *DENSE, "--strategy", str(f))["strategy"]["stage_layers"] == [2, 10, 10, 10]


@pytest.mark.parametrize("assign, word", [("LAYOUT='Et*8|t*8|t*8|t*8L'\n", "$LAYOUT"),
                                          ('LAY="Et*2|t*10|t*10|t*10L"\n', '"$LAY"')])
def test_layout_in_a_shell_variable_is_said_not_expanded(cli, tmp_path: Path, assign: str, word: str) -> None:  # type: ignore[no-untyped-def]
    """A count in a variable is said "not a number: a shell variable is not expanded" and the run priced without it;
    a layout in one was refused as "unknown layer letter '$'", a message about letters the user never wrote."""
    f = _launch(tmp_path, assign + LAUNCH + f"--pipeline-model-parallel-layout {word}\n")
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert out["strategy"]["stage_layers"] is None
    assert any(u.startswith("--pipeline-model-parallel-layout $LAY") and "a shell variable is not expanded" in u
               for u in out["inputs"]["strategy_file"]["unused"]), out["inputs"]["strategy_file"]["unused"]


# --- an interleaved split whose virtual stage 0 holds no layer ----------------------------------------------------
# Megatron's layout allows an empty stage ("E|...", "(|t*8)*4"). The interleaved bound waited, on each rank, for the
# chunks of virtual stage 0 before it only: a split whose virtual stage 0 was empty ([0,0,0,0,8,8,8,8] at pp 4, V 2:
# the 1F1B pipeline of [8,8,8,8] behind an empty lap) was priced with a bubble of 9 ms against 1F1B's 543 ms, a step
# faster than any schedule of those stages can run.

def test_interleaved_rank_wait_time_by_hand() -> None:
    from scalemodel.cost import pipeline

    # T = max_r (m W_r + wait_r): m = 4, W = (3, 5, 2), waits (10, 0, 4) -> max(22, 20, 12)
    assert float(pipeline.interleaved_rank_wait_time(4.0, [3.0, 5.0, 2.0], [10.0, 0.0, 4.0])) == 22.0


def test_an_empty_first_lap_does_not_hide_the_bubble(cli) -> None:  # type: ignore[no-untyped-def]
    """Every micro-batch still crosses the four 8-layer stages in turn, one rank after the other: the bubble is at
    least 1F1B's over the same stages (the interleaved bound of a rank is 1F1B's path A through it plus the empty
    lap's send/recvs)."""
    base = [*DENSE, "--pp", "4", "--set", "training.global_batch=128"]
    lap = accepted(cli, "predict", *base, "--schedule", "interleaved:2", "--set",
                   "strategy.stage_layers=[0,0,0,0,8,8,8,8]")
    plain = accepted(cli, "predict", *base, "--set", "strategy.stage_layers=[8,8,8,8]")
    assert lap["breakdown_s"]["compute"] == pytest.approx(plain["breakdown_s"]["compute"], rel=1e-12)
    assert lap["breakdown_s"]["bubble"] >= plain["breakdown_s"]["bubble"], (lap["breakdown_s"], plain["breakdown_s"])


# --- cluster net_overhead on the innermost tier; the aws-ofi-p5 tuner off a p5 instance --------------------------
# tiers[0].net_overhead was accepted and never read (cost.algorithms._ring_hops reads it on the crossed outer tiers:
# NCCL adds it where a ring leaves its node, tuning.cc). nccl_tuner aws-ofi-p5 was priced on an A100 or an MI300X
# cluster (their step time moved by the p5 regions) and dropped without a word on a TPU pod; aws-ofi-nccl v1.16.3
# src/tuner/nccl_ofi_tuner.cpp (lines 100-107) picks the p5/p5e regions only on p5.48xlarge / p5e.48xlarge.

CLUSTER = """kind: cluster
name: r18
accelerator: {acc}
gpus_per_node: {gpn}
{extra}tiers:
  - {{name: nvlink, span: {gpn}, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8{inner}}}
  - {{name: ib, span: {span}, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.9}}
"""


def _cluster(tmp_path: Path, acc: str = "h100-sxm", gpn: int = 8, extra: str = "", inner: str = "") -> Path:
    f = tmp_path / "c.yaml"
    f.write_text(CLUSTER.format(acc=acc, gpn=gpn, extra=extra, inner=inner, span=gpn * 8))
    return f


def test_net_overhead_on_the_innermost_tier_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _cluster(tmp_path, inner=", net_overhead: 1 ms")
    refused(cli, "predict", "-c", str(f), "-m", "llama3-8b", "-n", "64", inputs=(f,),
            match="tiers[0] ('nvlink') net_overhead 0.001 s: the innermost tier's ring steps never leave a node")
    refused(cli, "collective", "-c", "aws-p5", "-n", "64", "--set", "cluster.tiers.nvlink.net_overhead=1us",
            match="error: --set cluster.tiers.nvlink.net_overhead: tiers: tiers[0] ('nvlink') net_overhead 1e-06 s")


def test_net_overhead_on_a_network_tier_still_prices(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["collective", "-c", "aws-p5", "-n", "64", "--size", "32MiB", "--algo", "ring"]
    slow = accepted(cli, *base, "--set", "cluster.tiers.efa.net_overhead=1ms")
    fast = accepted(cli, *base)
    t = [r["rows"][0]["algorithms"][0]["time_s"] for r in (slow, fast)]
    assert t[0] > t[1], t


@pytest.mark.parametrize("cluster", ["dgx-a100", "mi300x-8", "tpu-v4-pod"])
def test_the_p5_tuner_off_a_p5_instance_is_refused(cli, cluster: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", cluster, "-m", "llama3-8b", "-n", "64", "--set", "cluster.nccl_tuner=aws-ofi-p5",
            match="error: --set cluster.nccl_tuner: 'aws-ofi-p5' on ")


@pytest.mark.parametrize("gpn", [4, 3])
def test_the_p5_tuner_needs_eight_gpus_a_node(cli, tmp_path: Path, gpn: int) -> None:  # type: ignore[no-untyped-def]
    f = _cluster(tmp_path, gpn=gpn, extra="nccl_tuner: aws-ofi-p5\n")
    refused(cli, "predict", "-c", str(f), "-m", "llama3-8b", "-n", str(gpn * 8), inputs=(f,),
            match=f"nccl_tuner: 'aws-ofi-p5' on {gpn} h100-sxm accelerators a node (hopper)")


@pytest.mark.parametrize("cluster", ["aws-p5", "dgx-h100", "hgx-h200"])
def test_the_p5_tuner_on_eight_hopper_gpus_still_runs(cli, cluster: str) -> None:  # type: ignore[no-untyped-def]
    assert accepted(cli, "predict", "-c", cluster, "-m", "llama3-8b", "-n", "64", "--set",
                    "cluster.nccl_tuner=aws-ofi-p5")["step_time_s"] > 0


# --- torchtitan: a pipeline schedule torch does not know; the memory_budget mode ----------------------------------
# torchtitan hands parallelism.pipeline_parallel_schedule to torch's get_schedule_class (torchtitan/distributed/
# pipeline_parallel.py L300 at b5bcd76c6), whose case-insensitive lookup raises on any other name: 'bogus' was
# said "not used" and 1F1B priced. activation_checkpoint.mode 'memory_budget' (torchtitan since b27638732) was
# refused as an "unknown" mode.

TITAN18 = ("[training]\nlocal_batch_size = 1\nseq_len = 4096\n[activation_checkpoint]\nmode = '{mode}'\n"
           "[parallelism]\ndata_parallel_shard_degree = -1\npipeline_parallel_degree = 4\n{extra}")


def _titan(tmp_path: Path, mode: str = "none", extra: str = "") -> Path:
    f = tmp_path / "job.toml"
    f.write_text(TITAN18.format(mode=mode, extra=extra))
    return f


@pytest.mark.parametrize("name", ["bogus", "1F1B2", "Interleaved"])
def test_torchtitan_unknown_schedule_is_refused(cli, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    f = _titan(tmp_path, extra=f"pipeline_parallel_schedule = '{name}'\n")
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match=f"{f}: parallelism.pipeline_parallel_schedule: unknown pipeline schedule '{name}'")


@pytest.mark.parametrize("name", ["DualPipeV", "loopedbfs"])
def test_torchtitan_schedule_torch_knows_but_unpriced_is_said(cli, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    f = _titan(tmp_path, extra=f"pipeline_parallel_schedule = '{name}'\n")
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert f"parallelism.pipeline_parallel_schedule {name}" in out["inputs"]["strategy_file"]["unused"]


def test_torchtitan_memory_budget_mode_is_named_as_unpriced(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _titan(tmp_path, mode="memory_budget")
    line = refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,))
    assert "activation_checkpoint.mode: mode 'memory_budget'" in line and "is not priced" in line, line


# --- DeepSpeed reduce_bucket_size out of range was "expected a positive number, got '1e+30'" ----------------------

@pytest.mark.parametrize("value, said", [("1e30", "1e+30 elements is outside 1 .. 1e13"),
                                         ('"5e8"', "expected a positive JSON number, got '5e8'")])
def test_deepspeed_bucket_out_of_range_says_so(cli, tmp_path: Path, value: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1, "reduce_bucket_size": '
                 + value + "}}")
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match=f"{f}: zero_optimization.reduce_bucket_size: {said}")


# --- a layout in a launch at pipeline size 1 -----------------------------------------------------------------------
# Without --pipeline-model-parallel-size (Megatron's default 1) a 4-stage layout was refused as "stage_layers (4
# counts) with pp 1", words the launch never wrote; with --pp 4 on the command line as "4 counts for pp 4 x 4 virtual
# stages" (the stages read as virtual stages of 1 rank). A one-stage layout, which Megatron runs (V = 1, no
# pipeline: arguments.py L941-951 at d98e8a64dd), was refused the same way.

BARE = "torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --micro-batch-size 1 --bf16 "


@pytest.mark.parametrize("pp", [[], ["--pp", "4"]])
def test_layout_of_stages_without_a_pipeline_size_says_so(cli, tmp_path: Path, pp: list[str]) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, BARE + "--pipeline-model-parallel-layout 'Et*8|t*8|t*8|t*8L'\n")
    refused(cli, "predict", *DENSE, *pp, "--strategy", str(f), inputs=(f,),
            match="--pipeline-model-parallel-layout: 4 stages for pipeline size 1 (no --pipeline-model-parallel-size: "
                  "Megatron's default 1)")


def test_layout_of_one_stage_runs_without_a_pipeline(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, BARE + "--pipeline-model-parallel-layout 'Et*32L'\n")
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert out["strategy"]["pp"] == 1 and out["strategy"]["stage_layers"] is None


def test_layout_of_one_stage_counts_the_launchs_layers(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, BARE + "--num-layers 32 --pipeline-model-parallel-layout 'Et*31L'\n")
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match="the layout holds 31 decoder layers (t) but --num-layers is 32 (Megatron asserts them equal)")


# --- a nanotron config as --strategy ---------------------------------------------------------------------------------
# Read as a strategy YAML: its optimizer section refused as "training.optimizer: unknown optimizer {'zero_stage': 1}",
# or, without one, every key "not used" and the default strategy priced.

NANOTRON = ("general:\n  project: x\nparallelism:\n  dp: 8\n  pp: 4\n  tp: 2\n  pp_engine: 1f1b\n{opt}"
            "tokens:\n  micro_batch_size: 1\n  sequence_length: 4096\n")


@pytest.mark.parametrize("opt", ["optimizer:\n  zero_stage: 1\n", ""])
def test_a_nanotron_config_is_named_as_such(cli, tmp_path: Path, opt: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "nanotron.yaml"
    f.write_text(NANOTRON.format(opt=opt))
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match=f"{f}: parallelism: a nanotron config (parallelism: dp / pp / tp) is not one of the strategy formats")


# --- plan with a split of fewer than two counts -----------------------------------------------------------------
# predict refuses it (no pipeline to split); plan searched 6.45 million candidates and found none feasible, every one
# "layers_not_divisible".

@pytest.mark.parametrize("split", ["[32]", "[]"])
def test_plan_refuses_a_split_of_fewer_than_two_stages(cli, split: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "plan", *DENSE, "--set", f"strategy.stage_layers={split}")
    assert line.startswith("error: --set strategy.stage_layers: ") and "a pipeline at least 2 stages" in line, line


# --- an unquoted layout: bash pipes at its first '|' -----------------------------------------------------------------
# "--pipeline-model-parallel-layout Et*8|t*8|t*8|t*8L" was refused as "1 stages for pipeline size 4" (bash passes the
# launch "Et*8" and pipes it into a command "t*8"), a count the file does not show.

@pytest.mark.parametrize("flag", ["--pipeline-model-parallel-layout Et*2|t*10|t*10|t*10L",
                                  "--pipeline-model-parallel-layout=Et*2|t*10|t*10|t*10L"])
def test_unquoted_layout_is_named_a_pipe(cli, tmp_path: Path, flag: str) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, LAUNCH + flag + "\n")
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match="--pipeline-model-parallel-layout: an unquoted '|' in the layout: bash reads it as a pipe")


def test_quoted_layout_piped_into_tee_still_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, LAUNCH + "--pipeline-model-parallel-layout 'Et*2|t*10|t*10|t*10L' | tee log.txt\n")
    assert accepted(cli, "predict", *DENSE, "--strategy", str(f))["strategy"]["stage_layers"] == [2, 10, 10, 10]
