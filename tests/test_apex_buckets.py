"""The dgxc25 rows on Apex's DistributedFusedAdam sync their gradients in the buckets their configs set.

Each NeMo 1 config of NVIDIA/dgxc-benchmarking v25.02 (@8f5cbb3) names ``optim.name: distributed_fused_adam`` and an
``optim.bucket_cap_mb``: nemotron4-340b-synth.yaml 50, llama3.1_70b.yaml and llama3.1_8b.yaml 75, llama3.1_405b.yaml
125, gpt3_175b_hydra.yaml 220; nemotron4-15b-synth.yaml names ``mcore_distributed_optim`` instead (Megatron-Core's DDP,
whose bucket NeMo takes from ``ddp_bucket_size``, not bucket_cap_mb). Apex sizes a bucket as
``1024 * 1024 * bucket_cap_mb / dtype_size`` elements of the gradient's sync dtype (NVIDIA/apex@6424da3b
apex/contrib/optimizers/distributed_fused_adam.py L720-726), i.e. bucket_cap_mb MiB of gradient whatever the dtype:
the strategy's ``bucket_size`` (bytes of gradient at the reduce's element). The values below are typed from the
configs, not read from the validator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import script_module, training_cases
from msgspec.structs import replace

from scalemodel.api import predict
from scalemodel.engine import dp_comm

MIB = 1024 * 1024
CONFIG_CAP_MB = {"nemotron4_340b": 50, "llama31_70b": 75, "llama31_8b": 75, "llama31_405b": 125,
                 "llama31_405b_7l": 125, "llama31_405b_21l": 125, "llama31_405b_42l": 125, "gpt3_175b": 220}


@pytest.mark.parametrize("cid, cap_mb", [
    ("dgxc25_h100_nemotron4_340b_bf16_128", 50), ("dgxc25_h100_nemotron4_340b_fp8_2048", 50),
    ("dgxc25_h100_llama31_70b_bf16_64", 75), ("dgxc25_h100_llama31_70b_fp8_2048", 75),
    ("dgxc25_h100_llama31_8b_bf16_128", 75), ("dgxc25_h100_llama31_405b_bf16_2304", 125),
    ("dgxc25_h100_llama31_405b_7l_fp8_32", 125), ("dgxc25_h100_gpt3_175b_bf16_128", 220),
    ("dgxc25_h100_gpt3_175b_fp8_2048", 220)])
def test_apex_rows_take_the_configs_bucket(cid: str, cap_mb: int) -> None:
    """The predicted strategy's bucket is the config's bucket_cap_mb MiB, and at the row's 2-byte bf16 gradient sync
    (optim.grad_sync_dtype bf16) it holds Apex's element count, 1024 * 1024 * cap / 2; the FP8 rows keep their FP8
    parameter gather."""
    r = script_module("validate_training").predict_new_case(training_cases()[cid])
    assert r.strategy.bucket_size == cap_mb * MIB
    assert r.training.grad_bytes_per_param == 2.0
    assert r.strategy.bucket_size / r.training.grad_bytes_per_param == 1024 * 1024 * cap_mb / 2
    assert r.strategy.fp8_param_gather == ("_fp8_" in cid)
    assert r.strategy.bucket_fragments  # Apex cuts parameters at bucket boundaries (ParameterFragment)


#: MLPerf Training v4.0 / v4.1 GPT-3 175B (data35): NVIDIA's NeMo 1 implementation passes
#: optim@model.optim=distributed_fused_adam (run_and_time.sh, USE_DIST_OPTIMIZER=True) and its
#: conf/optim/distributed_fused_adam.yaml reads ``bucket_cap_mb: ${BUCKET_CAP_MB,100}``: config_common.sh exports 200,
#: and v4.1's config_DGXH100_32x8x256x4x8_mbs2.sh exports 125 after sourcing it ("#Fix OOM")
#: (mlcommons/training_results_v4.0@6fe9543, v4.1@b87b9e3; Supermicro's v4.0 copy the same files); v3.1's
#: config_common.sh exports none.
MLPERF_CAP_MB = {"mlpt41_h100_gpt3_175b_256": 125, "mlpt41_h100_gpt3_175b_512": 200,
                 "mlpt40_h100_gpt3_175b_512": 200, "mlpt40_h100_gpt3_175b_512_smc": 200,
                 "mlpt40_h100_gpt3_175b_10752": 200, "mlpt40_h100_gpt3_175b_11616": 200,
                 # v3.1 (training_results_v3.1@d06288b, listed rows): no BUCKET_CAP_MB, the yaml's default 100
                 **{f"mlpt31_h100_gpt3_175b_{n}": 100 for n in (768, 4096, 6144, 8192, 10240, 10752, "10752_azure")},
                 # v3.0 (training_results_v3.0@63e326c4, data40): run_and_time.sh ``: "${BUCKET_CAP_MB:=100}"`` passed
                 # as model.optim.bucket_cap_mb; neither NVIDIA's nor NVIDIA+CoreWeave's configs export it
                 **{f"mlpt30_h100_gpt3_175b_{n}": 100 for n in ("512", "768", "768_cw", "1536_cw", "3584_cw")}}


def test_only_the_apex_rows() -> None:
    """Every dgxc25 row but the Nemotron-4 15B ones (mcore_distributed_optim) takes a bucket, and the MLPerf v3.0 /
    v3.1 / v4.0 / v4.1 GPT-3 rows of NVIDIA's NeMo 1 implementation (MLPERF_CAP_MB), and the NeMo Megatron launcher's
    22.08 rows (Apex's default); no other row does."""
    vt = script_module("validate_training")
    optim = vt.rows_with("optim_name")  # the rows' framework.optim_name / bucket_cap_mb (validation/README.md)
    mlperf = {i: o for i, o in optim.items() if i.startswith(("mlpt30_", "mlpt31_", "mlpt40_", "mlpt41_"))}
    assert mlperf == dict.fromkeys(MLPERF_CAP_MB, "distributed_fused_adam")
    optim = {i: o for i, o in optim.items() if i not in mlperf}
    # data39: the NeMo Megatron launcher's 22.08 rows (NeMo v1.11.0, conf/training/gpt3/*.yaml optim name at
    # 1f1e6be5) run Apex's DistributedFusedAdam at its default 100 MB bucket (apex 98661600; NeMo passes none)
    launcher = {i: o for i, o in optim.items() if i.startswith("nemolaunch22_")}
    assert len(launcher) == 11 and set(launcher.values()) == {"distributed_fused_adam"}
    caps = vt.rows_with("bucket_cap_mb")
    assert {i: caps[i] for i in launcher} == dict.fromkeys(launcher, 100)
    optim = {i: o for i, o in optim.items() if i not in launcher}
    assert len(optim) == 70 and all(i.startswith("dgxc25_h100_") for i in optim)
    apex = {i for i in optim if "_nemotron4_15b_" not in i}
    assert {i for i, o in optim.items() if o == "distributed_fused_adam"} == apex
    caps = {i: mb for i, mb in caps.items() if i not in launcher}
    assert {i: caps.pop(i) for i in MLPERF_CAP_MB} == MLPERF_CAP_MB
    assert set(caps) == apex and len(apex) == 54
    for i, mb in caps.items():
        group = i.removeprefix("dgxc25_h100_").rsplit("_", 2)[0]
        assert mb * MIB == CONFIG_CAP_MB[group] * MIB
    r = vt.predict_new_case(training_cases()["dgxc25_h100_nemotron4_15b_bf16_2048"])
    assert r.strategy.bucket_size is None and not r.strategy.bucket_fragments


def _bucket_counts(monkeypatch: pytest.MonkeyPatch, fragments: bool) -> set[float]:
    """The bucket counts the step model prices for the Llama 3.1 8B 128-GPU row, with the validator's strategy and
    its ``bucket_fragments`` set as given."""
    vt = script_module("validate_training")
    case = training_cases()["dgxc25_h100_llama31_8b_bf16_128"]
    r = vt.predict_new_case(case)
    assert r.strategy.bucket_fragments  # the validator's rule for Apex's DistributedFusedAdam
    counts: list[float] = []
    real = dp_comm.bucket_count

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(*args, **kwargs)
        counts.extend(float(x) for x in out)
        return out

    monkeypatch.setattr(dp_comm, "bucket_count", spy)
    cluster = vt.load_cluster(r.settings["cluster"], vt.cluster_overrides(case, r.settings["cluster"]))
    predict(cluster, vt.case_workload(case)[0], 128, r.training, replace(r.strategy, bucket_fragments=fragments))
    return set(counts)


def test_llama31_8b_bucket_count_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Llama 3.1 8B at tp 1 (the 128-GPU row): 75 MiB buckets of bf16 hold e = 78,643,200 / 2 = 39,321,600 elements.
    Its tensors: embedding and untied output 128,256 x 4,096 = 525,336,576 each; per layer (32) fc1 2 x 14,336 x 4,096
    = 117,440,512, fc2 58,720,256, QKV 4,096 x (4,096 + 2 x 1,024) = 25,165,824, proj 16,777,216, two norms of 4,096;
    the final norm 4,096: 8,030,261,248 elements. Apex cuts tensors at bucket boundaries, so bucket_count's payload
    bound is ceil(8,030,261,248 x 2 / 78,643,200) = 205 (NeMo 1's groups of a layer make Apex's own 31 x 6 + 19 and
    14 fp32 embedding buckets = 219; the latencies priced are coalesced_launches', below). Buckets of whole tensors
    (bucket_fragments false) would be fewer: tensors of >= e elements 2 + 32 + 32 = 66, the rest 32 x 41,951,232
    + 4,096 = 1,342,443,520 elements,
    ceil(/ e) = 35, so 101 (docs/model.md#dp-comm). DeepSpeed's 5e8-element default, which the row took before
    scale26, gave 2 + ceil(6,979,588,096 / 5e8) = 2 + 14 = 16 (under the payload's 17)."""
    assert _bucket_counts(monkeypatch, True) == {205.0}


def test_whole_tensor_buckets_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same row with bucket_fragments off: 101 buckets of whole tensors (above)."""
    assert _bucket_counts(monkeypatch, False) == {101.0}


@pytest.mark.parametrize("cid", ["dgxc25_h100_nemotron4_15b_bf16_16", "dgxc25_h100_nemotron4_15b_fp8_2048"])
def test_nemotron4_15b_runs_megatron_core_ddp(cid: str) -> None:
    """nemotron4-15b-synth.yaml (v25.02 @8f5cbb3 L179) names mcore_distributed_optim and no grad_sync_dtype: NeMo
    v2.1.0 megatron_gpt_model.py L583-600 builds Megatron-Core's DDP with grad_reduce_in_fp32 = ('fp32' == 'fp32'),
    its default buckets (ddp_bucket_size unset) and fp8_param_gather = fp8_params (configure.sh sets it with FP8):
    4-byte gradient reduction, Megatron-Core's fp32 master weights (12 bytes of state, not Apex's 10), no Apex
    bucket."""
    r = script_module("validate_training").predict_new_case(training_cases()[cid])
    assert r.strategy.megatron_ddp and r.strategy.bucket_size is None and not r.strategy.bucket_fragments
    assert r.training.grad_bytes_per_param == 4.0
    assert r.training.optimizer_bytes_per_param == 12.0
    assert r.strategy.fp8_param_gather == ("_fp8_" in cid)


def _reduce_scatter_sizes(monkeypatch: pytest.MonkeyPatch, cid: str, gpus: int, **strategy: object) -> set[float]:
    """The payloads of the ZeRO-1 gradient reduce-scatter calls the step prices for a dgxc25 row, at the
    validator's strategy with ``strategy`` replaced."""
    vt = script_module("validate_training")
    case = training_cases()[cid]
    r = vt.predict_new_case(case)
    sizes: list[float] = []
    real = dp_comm._collective

    def spy(op, size, group, algorithm=None):  # type: ignore[no-untyped-def]
        if op == "reducescatter":
            sizes.extend(float(x) for x in np.atleast_1d(size))
        return real(op, size, group, algorithm)

    monkeypatch.setattr(dp_comm, "_collective", spy)
    cluster = vt.load_cluster(r.settings["cluster"], vt.cluster_overrides(case, r.settings["cluster"]))
    predict(cluster, vt.case_workload(case)[0], gpus, r.training, replace(r.strategy, **strategy))
    return set(sizes)


#: Llama 3.1 8B's gradient payload at tp 1, pp 1 (the tensors above): 8,030,261,248 bf16 elements.
LLAMA8B_GRAD_BYTES = 8_030_261_248 * 2


@pytest.mark.parametrize("gpus", [8, 128])
def test_nemo1_coalesces_each_layers_buckets(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    """NeMo 1 hands Apex one parameter group per Transformer layer (megatron_gpt_model.py v2.1.0 L668-697,
    init_params_bucket per group, megatron_base_model.py L884-895); Apex closes the open buckets at each group and
    makes every bucket of a group wait for all its parameters (apex@6424da3b L1275-1345), so a layer's buckets fill
    together and ``_try_start_bucket_grad_sync`` reduce-scatters them in one ``_coalescing_manager`` (L1927-1946):
    one NCCL group, which NCCL prices at ceil(tasks / channels) ring latencies (nccl v2.23.4 tuning.cc L464-465,
    enqueue.cc L589). Llama 3.1 8B: 32 layers of 16,060,522,496 / 32 = 501,891,328 bytes, ceil(/ 78,643,200) = 7
    buckets a layer; 8 GPUs (one node) or 128 (16 nodes, 8 NICs of 400 Gb/s: 8 channels) -> 1 launch a layer, 32
    in all, each moving X / 32 (it was X / 205 with every bucket its own collective)."""
    sizes = _reduce_scatter_sizes(monkeypatch, f"dgxc25_h100_llama31_8b_bf16_{gpus}", gpus)
    assert sizes and {round(LLAMA8B_GRAD_BYTES / s, 6) for s in sizes} == {32.0}


def test_more_buckets_than_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same 128-GPU row with 10 MiB buckets: ceil(501,891,328 / 10,485,760) = 48 buckets a layer over 8
    channels -> ceil(48 / 8) = 6 latencies a layer, 192 in all."""
    sizes = _reduce_scatter_sizes(monkeypatch, "dgxc25_h100_llama31_8b_bf16_128", 128, bucket_size=10.0 * MIB)
    assert sizes and {round(LLAMA8B_GRAD_BYTES / s, 6) for s in sizes} == {192.0}


@pytest.mark.parametrize("extra, why", [
    (["--zero", "3"], "got zero '3'"), (["--zero", "fsdp"], "got zero 'fsdp'"), ([], "got zero '0'"),
    (["--zero", "1", "--set", "strategy.megatron_ddp=true"], "megatron_ddp true")])
def test_bucket_fragments_needs_apex_zero12(extra: list[str], why: str, cli: Any) -> None:
    """bucket_fragments prices Apex's DistributedFusedAdam as NeMo 1 sets it up, a ZeRO-1/2 optimizer (reduce-scatter
    of the gradients, all-gather of the parameters) that is its own trainer's: with ZeRO-0, ZeRO-3 / FSDP or under
    Megatron-Core's DDP it priced its coalesced launches over another framework's collectives without a word. One
    line, exit 2."""
    r = cli("predict", "--cluster", "dgx-h100", "--model", "llama3-8b", "--gpus", "64", "--set",
            "strategy.bucket_fragments=true", *extra)
    assert r.code == 2, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert "strategy.bucket_fragments: true" in lines[0] and why in lines[0], r.err


def test_bucket_fragments_takes_zero_1_and_2(cli: Any) -> None:
    import json

    for zero in ("1", "2"):
        r = cli("predict", "--cluster", "dgx-h100", "--model", "llama3-8b", "--gpus", "64", "--zero", zero, "--set",
                "strategy.bucket_fragments=true", "--json")
        assert r.code == 0, r.err
        st = json.loads(r.out)["strategy"]  # testaudit37: taken, not only not refused
        assert (st["zero"], st["bucket_fragments"]) == (zero, True)
