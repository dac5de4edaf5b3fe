"""Hostile-input round 14c: the findings round 14 left out — framework settings the model prices but the readers
dropped (Megatron's flex-dispatcher SM counts, torchtitan's expert_tensor_parallel_degree, an empty
--recompute-modules), bounds that differed between commands, digit grouping in integers, a path with a trailing
slash, and YAML merge keys.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

MOE = ["-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "64"]
#: --sequence-parallel: Megatron-Core refuses MoE at tp > 1 without it (tests/test_moe_sp_required.py)
FLEX = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 1 --bf16 "
        "--expert-model-parallel-size 8 --overlap-moe-expert-parallel-comm --moe-token-dispatcher-type flex ")


def _launch(tmp_path, flags: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(FLEX + flags + "\n")
    return f


# --- Megatron's flex-dispatcher SM counts are strategy.ep_dispatch_sms ---------------------------------------------

@pytest.mark.parametrize("flags, sms", [
    ("--moe-deepep-num-sms 64", 64),  # deepep: the default backend
    ("--moe-flex-dispatcher-backend deepep --moe-deepep-num-sms 48", 48),
    ("--moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32", 32),
    ("--moe-flex-dispatcher-num-sms 40 --moe-deepep-num-sms 20", 40),  # the unified flag takes precedence
])
def test_flex_dispatcher_sms_are_read(cli, tmp_path, flags: str, sms: int) -> None:  # type: ignore[no-untyped-def]
    """``--moe-deepep-num-sms 64`` under the flex dispatcher was warned "not used" though the model prices the
    dispatcher's SMs (strategy.ep_dispatch_sms): the step was priced at NCCL's share."""
    f = _launch(tmp_path, flags)
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["strategy"]["ep_dispatch_sms"] == sms
    assert "num-sms" not in r.err.replace("--moe-deepep-num-sms 20 (--moe-flex-dispatcher-num-sms", "")
    # the reference: the launch without the flag, the count given as the scalemodel field
    plain = tmp_path / "plain.sh"
    plain.write_text(FLEX + flags.replace("--moe-flex-dispatcher-backend hybridep", "").split("--moe-")[0] + "\n")
    # the backend is strategy.moe_flex_backend (its bytes per token differ)
    backend = ["--set", "strategy.moe_flex_backend=hybridep"] if "hybridep" in flags.split("--moe-")[1] else []
    ref = accepted(cli, "predict", *MOE, "--strategy", str(plain), "--set", f"strategy.ep_dispatch_sms={sms}",
                   *backend)
    assert out["step_time_s"] == ref["step_time_s"]
    assert out["strategy"]["moe_flex_backend"] == ("hybridep" if backend else "deepep")


@pytest.mark.parametrize("flags, sms", [
    ("--moe-flex-dispatcher-backend hybridep --moe-deepep-num-sms 20", 20),
    ("--moe-hybridep-num-sms 24", 24),
    ("--moe-deepep-num-sms 28 --moe-hybridep-num-sms 28", 28),
])
def test_either_deprecated_flag_sizes_every_backend(cli, tmp_path, flags: str, sms: int) -> None:  # type: ignore[no-untyped-def]
    """NVIDIA/Megatron-LM d98e8a64dd TransformerConfig.__post_init__ (transformer_config.py L1792-1811) routes
    --moe-deepep-num-sms and --moe-hybridep-num-sms to moe_flex_dispatcher_num_sms whatever the backend, and both
    backends take that one count (token_dispatcher.py L1157-1158, L1287-1292): each was named "sizes the other
    backend" and not read."""
    r = cli("predict", *MOE, "--strategy", str(_launch(tmp_path, flags)), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["strategy"]["ep_dispatch_sms"] == sms
    assert "num-sms" not in r.err, r.err


def test_two_different_deprecated_counts_are_refused_at_both_flags(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Core raises ValueError("Conflicting deprecated SM-count knobs ...") on both deprecated flags with
    different counts and no --moe-flex-dispatcher-num-sms (transformer_config.py L1805-1810 @d98e8a64dd); with the
    unified flag they are overridden, not refused."""
    f = _launch(tmp_path, "--moe-deepep-num-sms 20 --moe-hybridep-num-sms 32")
    refused(cli, "predict", *MOE, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --moe-deepep-num-sms, --moe-hybridep-num-sms: two different SM counts, "
                  "--moe-deepep-num-sms 20 and --moe-hybridep-num-sms 32")
    g = _launch(tmp_path, "--moe-deepep-num-sms 20 --moe-hybridep-num-sms 32 --moe-flex-dispatcher-num-sms 24")
    r = cli("predict", *MOE, "--strategy", str(g), "--json")
    assert r.code == 0 and json.loads(r.out)["strategy"]["ep_dispatch_sms"] == 24, r.err


def test_dispatcher_sms_without_flex_are_named_not_used(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --sequence-parallel "
                 "--moe-deepep-num-sms 20\n")
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "--moe-deepep-num-sms 20 (read with --moe-token-dispatcher-type flex)" in r.err


@pytest.mark.parametrize("flags, match", [
    ("--moe-deepep-num-sms 0", "--moe-deepep-num-sms: expected at least 1 SM, got 0"),
    ("--moe-deepep-num-sms -4", "--moe-deepep-num-sms: expected a count, got '-4'"),
    ("--moe-deepep-num-sms 2.5", "--moe-deepep-num-sms: expected a count, got '2.5'"),
    ("--moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 500",
     "--moe-hybridep-num-sms: ep_dispatch_sms = 500 exceeds the 132 compute units of h100-sxm"),
    ("--moe-flex-dispatcher-num-sms 133", "--moe-flex-dispatcher-num-sms: ep_dispatch_sms = 133 exceeds the 132"),
    ("--moe-flex-dispatcher-backend bogus", "--moe-flex-dispatcher-backend: unknown flex dispatcher backend: 'bogus'"),
])
def test_bad_dispatcher_sms_are_refused_at_the_flag(cli, tmp_path, flags: str, match: str) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, flags)
    refused(cli, "predict", *MOE, "--strategy", str(f), "--json", inputs=(f,), match=f"error: --strategy: {f}: {match}")


# --- torchtitan's expert_tensor_parallel_degree is strategy.etp ------------------------------------------------------

def _titan(tmp_path, body: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text("[parallelism]\n" + body + "\n")
    return f


@pytest.mark.parametrize("etp", [1, 2])
def test_titan_expert_tensor_parallel_degree_is_read(cli, tmp_path, etp: int) -> None:  # type: ignore[no-untyped-def]
    """``expert_tensor_parallel_degree`` was warned "not used": a torchtitan ETP=1 run (experts folded over the tp
    ranks) was priced with the experts tensor-parallel over tp."""
    f = _titan(tmp_path, "expert_parallel_degree = 8\ntensor_parallel_degree = 2\n"
                         f"expert_tensor_parallel_degree = {etp}")
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "expert_tensor_parallel_degree" not in r.err
    out = json.loads(r.out)
    assert out["strategy"]["etp"] == etp
    plain = _titan(tmp_path, "expert_parallel_degree = 8\ntensor_parallel_degree = 2")
    ref = accepted(cli, "predict", *MOE, "--strategy", str(plain), "--set", f"strategy.etp={etp}")
    assert out["step_time_s"] == ref["step_time_s"]


@pytest.mark.parametrize("body, match", [
    ("expert_tensor_parallel_degree = 0", "expected at least 1, got 0"),
    ("expert_parallel_degree = 8\nexpert_tensor_parallel_degree = 0", "expected at least 1, got 0"),
    ("expert_tensor_parallel_degree = -2", "expected a count, got '-2'"),
    ("expert_tensor_parallel_degree = 'two'", "expected a count, got 'two'"),
    ("expert_parallel_degree = 8\ntensor_parallel_degree = 4\nexpert_tensor_parallel_degree = 2",
     "expected 1 or the tensor_parallel_degree 4, got 2"),
])
def test_titan_invalid_expert_tensor_parallel_degree_is_refused(cli, tmp_path, body: str, match: str) -> None:  # type: ignore[no-untyped-def]
    f = _titan(tmp_path, body)
    refused(cli, "predict", *MOE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"error: --strategy: {f}: parallelism.expert_tensor_parallel_degree: {match}")


def test_titan_without_expert_tensor_parallel_degree_runs_its_default_1(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The key absent: torchtitan's default, expert_tensor_parallel_degree = 1 (torchtitan/config/configs.py L230 at
    c4b409af^; no expert TP at all after c4b409af, parallel_dims.py L242 at b5bcd76c66), not strategy.etp's own
    default tp: a tp 2, ep 8 run was priced with its experts split over the two tp ranks."""
    f = _titan(tmp_path, "expert_parallel_degree = 8\ntensor_parallel_degree = 2")
    out = accepted(cli, "predict", *MOE, "--strategy", str(f))
    assert out["strategy"]["etp"] == 1
    explicit = _titan(tmp_path, "expert_parallel_degree = 8\ntensor_parallel_degree = 2\n"
                                "expert_tensor_parallel_degree = 1")
    assert out["step_time_s"] == accepted(cli, "predict", *MOE, "--strategy", str(explicit))["step_time_s"]
    split = accepted(cli, "predict", *MOE, "--strategy", str(f), "--set", "strategy.etp=2")
    assert split["step_time_s"] != out["step_time_s"]  # etp 1 and tp 2 price differently: the default matters
    # ep 1 (a dense run's file): nothing is set, the engine's default stays
    assert accepted(cli, "predict", *MOE, "--strategy", str(_titan(tmp_path, "tensor_parallel_degree = 2")))[
        "strategy"]["etp"] is None


def test_titan_expert_tensor_parallel_degree_without_ep_is_named_not_used(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *MOE, "--strategy", str(_titan(tmp_path, "expert_tensor_parallel_degree = 2")), "--json")
    assert r.code == 0, r.err
    assert "parallelism.expert_tensor_parallel_degree 2 (no effect when expert_parallel_degree is 1)" in r.err


# --- Megatron's --recompute-modules with no word recomputes nothing --------------------------------------------------

MEG = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64"]
MEG_LAUNCH = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16 "
              "--attention-backend unfused ")  # unfused: core_attn recompute saves the s^2 scores


@pytest.mark.parametrize("command", ["predict", "memory"])
def test_selective_with_no_recompute_module_recomputes_nothing(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    """``--recompute-granularity selective --recompute-modules`` (no word): Megatron-LM's nargs='*' gives [], which
    TransformerConfig keeps (only None becomes ["core_attn"]), and no layer recomputes anything. scalemodel warned the
    flag "not used" and priced selective's default core_attn recompute."""
    f = tmp_path / "run.sh"
    f.write_text(MEG_LAUNCH + "--recompute-granularity selective --recompute-modules --use-distributed-optimizer\n")
    r = cli(command, *MEG, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "recompute" not in r.err
    out = json.loads(r.out)
    plain = tmp_path / "plain.sh"  # no recompute flag: Megatron recomputes nothing
    plain.write_text(MEG_LAUNCH + "--use-distributed-optimizer\n")
    ref = accepted(cli, command, *MEG, "--strategy", str(plain))
    selective = tmp_path / "selective.sh"  # selective alone: core_attn
    selective.write_text(MEG_LAUNCH + "--recompute-granularity selective --use-distributed-optimizer\n")
    core_attn = accepted(cli, command, *MEG, "--strategy", str(selective))
    key = "memory" if command == "predict" else "per_gpu_bytes"
    assert out[key] == ref[key] != core_attn[key]
    if command == "predict":
        assert out["strategy"]["recompute"] == ref["strategy"]["recompute"] == "none"
        assert out["step_time_s"] == ref["step_time_s"] != core_attn["step_time_s"]


# --- one set of bounds on batch and sequence length in every command ------------------------------------------------

GPT = ["-c", "dgx-h100", "-m", "gpt-1.7b"]
ONE_JOB = [("predict", "-n", "64"), ("memory", "-n", "64"), ("sensitivity", "-n", "64")]
ALL = [*ONE_JOB, ("scale",), ("plan", "-n", "64")]


@pytest.mark.parametrize("command", ALL)
@pytest.mark.parametrize("option", ["--seq-len", "--global-batch", "--micro-batch"])
def test_batch_and_sequence_bounds_are_the_same_everywhere(cli, command: tuple[str, ...], option: str) -> None:  # type: ignore[no-untyped-def]
    """``scale --seq-len`` was capped at 1e8 (``plan --global-batch`` too) where predict, memory and sensitivity took
    up to 1e9, TrainingSpec's bound: every command now refuses 1e9 + 1 with the same message."""
    if command[0] == "plan" and option == "--micro-batch":
        pytest.skip("plan searches the micro-batch (no --micro-batch option)")
    refused(cli, *command, *GPT, option, str(10**9 + 1), "--json",
            match=f"error: {option}: {option} must be a positive integer up to 1e+09, got 1000000001; an integer from "
                  "1 to 1e+09")


@pytest.mark.parametrize("command", [("scale", "--gpus", "8,16"), ("plan", "-n", "64", "--top", "1")])
def test_scale_and_plan_take_what_predict_takes(cli, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """200,000,000 tokens per sequence (over the old 1e8 cap of scale) is inside 1e9, as predict's. On a rotary model:
    gpt-1.7b's learned position table has 2,048 rows, so it refuses any longer sequence (fuzz24, round 24)."""
    accepted(cli, *command, "-c", "dgx-h100", "-m", "llama2-7b", "--seq-len", str(2 * 10**8))


@pytest.mark.parametrize("command", ONE_JOB)
@pytest.mark.parametrize("how", [("--micro-batch", "100000000"), ("--set", "training.micro_batch=100000000")])
def test_a_derived_global_batch_over_the_cap_is_refused(cli, command: tuple[str, ...], how: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    """``predict --micro-batch 100000000`` at 64 GPUs (dp 64) was priced at a global batch of 6.4e9 sequences per
    step, which ``--global-batch 6400000000`` and ``scale`` refuse."""
    shown = "--micro-batch" if how[0] == "--micro-batch" else "--set training.micro_batch"
    refused(cli, *command, *GPT, *how, "--json",
            match=f"error: {shown}: micro-batch 100,000,000 x dp 64 = 6,400,000,000 sequences per step (the global "
                  "batch when none is given) is beyond the largest global batch (1e+09); a micro-batch of at most "
                  "15,625,000 at dp 64")


def test_a_derived_global_batch_from_a_file_names_the_file(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 100000000\n")
    refused(cli, "predict", *GPT, "-n", "64", "--strategy", str(f), "--json", inputs=(f,),
            match=f"error: --strategy: {f}: --micro-batch-size: micro-batch 100,000,000 x dp 32 = 3,200,000,000")


@pytest.mark.parametrize("command", ONE_JOB)
def test_a_derived_global_batch_at_the_cap_is_taken(cli, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    accepted(cli, *command, *GPT, "--micro-batch", str(10**9 // 64))


# --- digit grouping ("8_0") is not an integer -------------------------------------------------------------------------

@pytest.mark.parametrize("args, match", [
    (["predict", *GPT, "-n", "8_0"], "argument -n/--gpus: '8_0' is not an integer: '_' groups digits only by "
                                     "thousands, as in 1_000 (write 80)"),
    (["predict", *GPT, "-n", "64", "--micro-batch", "1_6"], "argument --micro-batch: '1_6' is not an integer"),
    (["collective", "-c", "dgx-h100", "-n", "1_6", "--size", "1MB"], "argument -n/--gpus: '1_6' is not an integer"),
    (["predict", *GPT, "-n", "64", "--straggler-cv", "0.0_5"], "argument --straggler-cv: '0.0_5' is not a number: "
                                                               "'_' groups digits only by thousands, as in 1_000 "
                                                               "(write 0.05)"),
    (["predict", *GPT, "-n", "64", "--set", "training.micro_batch=1_0"],
     "error: --set training.micro_batch: '1_0' is not an integer: '_' groups digits only by thousands, as in 1_000 "
     "(write 10); "),
    (["predict", *GPT, "-n", "64", "--set", "model.layers=2_4"], "error: --set model.layers: '2_4' is not an integer"),
    (["predict", *GPT, "-n", "64", "--set", "training.work_cv=0.1_0"], "error: --set training.work_cv: '0.1_0' is not "
                                                                       "a number"),
    (["scale", *GPT, "--gpus", "6_4,128"], "error: --gpus: cannot read GPU counts '6_4,128': '_' groups digits only "
                                           "by thousands, as in 1_024 (write 64)"),
    (["plan", *GPT, "-n", "64", "--constraint", "tp=2_0"], "error: --constraint: constraint 'tp=2_0' needs an integer "
                                                           "('_' groups digits only by thousands, as in 1_000)"),
])
def test_digit_grouping_is_refused(cli, args: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """Python's int() and float() read "8_0" as 80: ``-n 8_0`` priced 80 GPUs, ``--set training.micro_batch=1_0`` a
    micro-batch of 10, ``scale --gpus 6_4`` 64 GPUs, ``--constraint tp=2_0`` searched tp 20."""
    refused(cli, *args, "--json", match=match)


def test_digit_grouping_in_a_spec_file_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.yaml"
    f.write_text('kind: transformer\nname: m\nlayers: "2_4"\nhidden: 512\nheads: 8\nvocab: 1000\nseq_len: 256\n')
    refused(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,),
            match=f"error: {f}:3: layers: '2_4' is not an integer: '_' groups digits only by thousands, as in 1_000 "
                  "(write 24)")


# --- a trailing '/' on a file's path ----------------------------------------------------------------------------------

def _slash_cases(tmp_path):  # type: ignore[no-untyped-def]
    from test_hostile_inputs import CLUSTER, LOG, WORKLOAD
    cluster, workload, strategy, log, samples, runs, sweep = (tmp_path / n for n in (
        "c.yaml", "w.yaml", "run.sh", "nccl.log", "s.txt", "runs.yaml", "sweep.yaml"))
    cluster.write_text(CLUSTER)
    workload.write_text(WORKLOAD)
    strategy.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2\n")
    log.write_bytes(LOG.read_bytes())
    samples.write_text("1.0\n1.1\n1.2\n")
    runs.write_text("runs: []\n")
    sweep.write_text("kind: sweep\n")
    return [
        (cluster, "cluster file", ["predict", "-c", f"{cluster}/", "-m", "gpt-1.7b", "-n", "8"]),
        (workload, "workload file", ["predict", "-c", "dgx-h100", "-m", f"{workload}/", "-n", "8"]),
        (strategy, "strategy file", ["predict", *GPT, "-n", "8", "--strategy", f"{strategy}/"]),
        (log, "nccl-tests log", ["calibrate", f"{log}/", "-c", "dgx-h100"]),
        (log, "nccl-tests log", ["calibrate", "nccl-tests", f"{log}/", "-c", "dgx-h100"]),
        (runs, "runs file", ["calibrate", "runs", f"{runs}/"]),
        (samples, "samples file", ["stragglers", "-n", "8", "--samples", f"{samples}/"]),
        (cluster, "spec file", ["hardware", "validate", f"{cluster}/"]),
        (sweep, "sweep file", ["sweep", f"{sweep}/"]),
    ]


@pytest.mark.parametrize("case", range(9))
def test_a_file_path_with_a_trailing_slash_is_refused(cli, tmp_path, case: int) -> None:  # type: ignore[no-untyped-def]
    """``--strategy run.sh/`` (and a cluster, workload, log, runs, samples, spec or sweep file the same) was read as
    run.sh: pathlib drops a trailing '/', where the OS refuses it (ENOTDIR, "Not a directory")."""
    path, what, args = _slash_cases(tmp_path)[case]
    line = refused(cli, *args, "--json", inputs=(path,))
    assert f"{path}/: not a directory: the path ends with '/', but '{path}' is not a folder; the {what}'s path " \
           "without the trailing '/'" in line, line


def test_a_scenario_names_a_cluster_with_a_trailing_slash(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from test_hostile_inputs import CLUSTER
    (tmp_path / "c.yaml").write_text(CLUSTER)
    f = tmp_path / "sc.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: c.yaml/\nmodel: gpt-1.7b\ngpus: [16]\n"
                 "training: {micro_batch: 1, global_batch: 64}\nassertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(f), "--json", inputs=(f,),
            match=f"error: {f}: cluster: {tmp_path}/c.yaml/: not a directory")


def test_a_folder_with_a_trailing_slash_is_still_a_model_folder(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, '
                                        '"vocab_size": 1000, "intermediate_size": 512, '
                                        '"max_position_embeddings": 512}')
    accepted(cli, "memory", "-m", f"{folder}/", "-n", "8")


# --- YAML merge keys -------------------------------------------------------------------------------------------------

MERGE = ("YAML merge keys ('<<: *anchor') are not supported; the keys written out in the mapping (an alias *anchor "
         "may stand for a whole value); a cluster, accelerator or workload spec can start from another with extends: "
         "BASE")


@pytest.mark.parametrize("name, text, line, args", [
    ("s.yaml", "base: &b {tp: 2}\nstrategy:\n  <<: *b\n  pp: 1\n", 3, ["predict", *GPT, "-n", "64", "--strategy"]),
    ("w.yaml", "kind: transformer\nname: m\nlayers: 4\nshape: &s {hidden: 512, heads: 8}\n<<: *s\nvocab: 1000\n",
     5, ["predict", "-c", "dgx-h100", "-n", "8", "-m"]),
    ("c.yaml", "kind: cluster\nname: c\naccelerator: h100-sxm\ngpus_per_node: 8\ntiers:\n"
               "  - &t {name: nvlink, span: 8, bandwidth: 450 GB/s, latency: 2 us}\n  - {<<: *t, name: ib, span: 64}\n",
     7, ["collective", "-n", "8", "--size", "1MB", "-c"]),
])
def test_a_yaml_merge_key_is_refused_as_such(cli, tmp_path, name: str, text: str, line: int, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """``<<: *base`` was refused as "unknown key '<<'" (with a list of known keys), which does not say that YAML merge
    keys, a YAML 1.1 feature outside the 1.2 core schema read here, are the problem."""
    f = tmp_path / name
    f.write_text(text)
    line_text = refused(cli, *args, str(f), "--json", inputs=(f,))
    assert line_text.endswith(f"{f}:{line}: {MERGE}"), line_text


def test_a_merge_key_in_a_set_value_is_refused_as_such(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *GPT, "-n", "8", "--set", "strategy.sync={<<: {a: 1}}", "--json",
            match=f"error: --set strategy.sync: {MERGE}")


def test_a_quoted_merge_key_is_an_unknown_key(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text('strategy:\n  "<<": 2\n')
    refused(cli, "predict", *GPT, "-n", "8", "--strategy", str(f), "--json", inputs=(f,),
            match="strategy.<<: unknown key '<<'")
