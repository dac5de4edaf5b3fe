"""NVFP4 parameters (strategy fp4_param_gather; Megatron-LM --fp4-param-gather, Megatron-Bridge fp4_param_gather):
the transformer layers' linear weights are Transformer Engine NVFP4Tensors. What Megatron-Core and TE do with them
(NVIDIA/Megatron-LM@d1410e15e1, the 26.06 container's; the same at 2d1fa8d372, 26.04's; NVIDIA/TransformerEngine
v2.16 4220403e8 and 71bbefb):

* the distributed optimizer's parameter all-gather moves the packed row-wise E2M1 data only, 1/2 byte an element
  (param_and_grad_buffer.py ``_compute_nvfp4_packed_layout``: "NVFP4 tensors use half the numel in the packed param
  buffer"); every rank computes the scales from all-reduced 16 x 16 tile amaxes;
* once per step the optimizer quantizes its fp32 master shard (TE ``quantize_master_weights``: ``.to(bf16)`` read 4
  write 2, the partial amax read 2, the 2D partial cast read 2 write 1/2: 10.5 bytes, replacing the 16-bit copy's
  read 4 write 2 = dp_comm.WEIGHT_COPY_BYTES);
* after the gather TE makes the column-wise copy from the row-wise one (``_nvfp4_2d_multi_tensor_transpose``:
  read 1/2 + 1/16, write 1/2 + 1/16 a weight element), and the forward casts no weight;
* the replica holds both copies and their E4M3 scales, 2 (1/2 + 1/16) = 1.125 bytes, instead of 2.

Every value below is counted by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_hostile_inputs import accepted, refused

from scalemodel.cost import compute, memory, transformer
from scalemodel.engine import dp_comm, layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, TransformerWorkload, load_cluster
from tests.test_distopt import TINY, _grid
from tests.test_megatron_ddp import LINEAR_PER_LAYER, P, _read, _sync

#: Llama 3 70B (arXiv 2407.21783 Table 3; the mb2604 GB300 / GB200 NVFP4 rows' model)
LLAMA3_70B = TransformerWorkload(name="llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                                 vocab=128256, seq_len=8192, gated_mlp=True, biases=False, tied_embeddings=False,
                                 dropout=False)
#: its linear weights per layer: QKV 8192 x (8192 + 2 x 8 x 128) + O 8192 x 8192 + gated MLP 3 x 8192 x 28672
LLAMA3_70B_LINEAR = 8192 * 10240 + 8192 * 8192 + 3 * 8192 * 28672


def _fp4_job(cluster: str = "dgx-b200", workload: Any = TINY) -> Any:
    return build_job(load_cluster(cluster), workload, TrainingSpec(precision="fp4", grad_bytes_per_param=4.0))


def test_param_bytes_by_hand() -> None:
    # gathered: the packed row-wise data; held: row-wise + column-wise data, one E4M3 byte per 16 elements each
    assert compute.param_gather_bytes("nvfp4") == (0.5, 0.5 + 1 / 16 + 0.5 + 1 / 16) == (0.5, 1.125)
    assert compute.param_gather_bytes("delayed") == (1.0, 1.0)
    assert compute.fp8_param_quantize_bytes("nvfp4") == 4 + 2 + 2 + 2 + 0.5 == 10.5


def test_fp4_param_gather_bytes_by_hand(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """TINY, dp 8, ZeRO 1: 4 layers x 16,777,216 linear weights = 67,108,864 elements gathered at 1/2 byte, the
    other 99,886,080 - 67,108,864 = 32,777,216 (embedding, norms) at 2: AG = 33,554,432 + 65,554,432 = 99,108,864
    bytes (16-bit: 2 P = 199,772,160); the gradients' reduce-scatter is unchanged (P x 4)."""
    assert 4 * LINEAR_PER_LAYER == 67_108_864
    job = _fp4_job()
    for on, ag in ((True, 99_108_864), (False, 2 * P)):
        calls, out = _sync(job, _grid(job, zero="1", fp4_param_gather=on), monkeypatch)
        rs_ag = [("reducescatter", pytest.approx(P * 4.0, rel=1e-12), 8), ("allgather", pytest.approx(ag), 8)]
        assert calls == rs_ag and float(out["param_gather"][0]) == pytest.approx(7 / 8 * ag, rel=1e-12)


def test_llama3_70b_gather_bytes_per_gpu_at_dp16(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The mb2604 GB300 row's layout, TP 1, PP 4, DP 16: a stage of 20 layers holds 20 x 855,638,016 =
    17,112,760,320 linear weight elements. NVFP4 parameters gather them at 1/2 byte instead of 2: the stage's
    all-gather shrinks by 1.5 x 17,112,760,320 = 25,669,140,480 bytes, and each GPU sends 15/16 of it less:
    24,064,819,200 bytes (24.1 GB) a step."""
    assert LLAMA3_70B_LINEAR == 855_638_016
    job = _fp4_job("gb300-nvl72", LLAMA3_70B)
    comp = {"layers_per_stage": np.asarray([20.0]), "forward_free": np.zeros(1), "backward_free": np.zeros(1)}
    sent = {}
    for on in (True, False):
        st = StrategySpec(dp=16, pp=4, zero="1", fp4_param_gather=on)
        g = grid_from_strategy(st, TrainingSpec(global_batch=256, precision="fp4"), 64, job)
        calls, out = _sync(job, g, monkeypatch, comp)
        assert {(op, p) for op, _, p in calls} == {("reducescatter", 16), ("allgather", 16)}
        sent[on] = float(out["param_gather"][0])  # every bucket's all-gather, at the bytes one rank sends
    assert 1.5 * 20 * LLAMA3_70B_LINEAR * 15 / 16 == 24_064_819_200
    assert sent[False] - sent[True] == pytest.approx(24_064_819_200, rel=1e-12)


def test_fp4_param_gather_memory_by_hand() -> None:
    """ZeRO 1: the replicated 16-bit weights (2 P bytes) hold each of the 67,108,864 NVFP4 elements at 1.125 bytes,
    0.875 less: 58,720,256 bytes; the gradients and the optimizer states do not change."""
    shape = _fp4_job().shape
    kw = dict(micro_batch=1, seq_len=2048, dp=8, zero_stage=1, weight_bytes=2.0, grad_bytes=2.0)
    base = memory.memory_per_gpu(shape, **kw)  # type: ignore[arg-type]
    fp4 = memory.memory_per_gpu(shape, fp8_params=True, fp8_param_bytes=1.125, **kw)  # type: ignore[arg-type]
    assert float(base.weights - fp4.weights) == pytest.approx(0.875 * 4 * LINEAR_PER_LAYER) == 58_720_256
    assert float(fp4.gradients) == pytest.approx(float(base.gradients))
    assert float(fp4.optimizer) == pytest.approx(float(base.optimizer))


def _toy() -> Any:  # tests/test_fp8_casts.py's toy layer: 768 linear weight elements
    return transformer.shape(layers=2, hidden=8, heads=2, vocab=64, kv_heads=2, ffn_hidden=32, gated_mlp=False)


def test_layer_weight_casts_become_the_column_wise_copy() -> None:
    """The toy layer's 768 weight elements: an NVFP4 weight cast reads 2 (amax) + 2 and writes both copies,
    768 x (4 + 2 x 0.5625) = 3936 bytes; as NVFP4 parameters only the column-wise copy is made from the gathered
    row-wise one, 768 x 2 x 0.5625 = 864, on any accelerator; the activations' casts do not change."""
    kw = dict(micro_batch=1, seq_len=16, recipe="nvfp4")
    off = compute.fp8_quantize_bytes(_toy(), **kw)
    for tc in (True, False):
        on = compute.fp8_quantize_bytes(_toy(), transpose_copy=tc, fp8_params=True, **kw)
        assert float(on[2]) == pytest.approx(864.0)
        assert (float(on[0]), float(on[1])) == (float(off[0]), float(off[1]))
    assert float(off[2]) == pytest.approx(3936.0)


def test_step_prices_the_shard_quantization_and_drops_the_weight_casts() -> None:
    """TINY on one DGX B200 node, dp 8, ZeRO 1, one micro-batch a step: the forward loses W (5.125 - 1.125) = 4 W
    bytes a layer (the cast, less the column-wise copy that stays), at the NVFP4 cast kernels' measured rate (the
    factor every nvfp4 cast byte takes, docs/model.md#cast-kernel-rate); the optimizer step adds its shard,
    4 layers x W / 8 = 8,388,608 elements, x (10.5 - 6) bytes at the HBM rate."""
    job = _fp4_job()
    bw = job.memory_bandwidth * job.memory_efficiency
    factor = compute.cast_kernel_time_factor(job.accelerator_family, "nvfp4", job.accelerator)
    on, off = _grid(job, zero="1", fp4_param_gather=True), _grid(job, zero="1")
    f_on, b_on = layer_compute.fp8_cast_per_layer(job, on, 0.0)
    f_off, b_off = layer_compute.fp8_cast_per_layer(job, off, 0.0)
    assert float((f_off - f_on).ravel()[0]) == pytest.approx(LINEAR_PER_LAYER * 4.0 / bw * factor, rel=1e-12)
    assert float((b_off - b_on).ravel()[0]) == 0.0
    extra = dp_comm._optimizer_time(job, on) - dp_comm._optimizer_time(job, off)
    assert float(np.ravel(extra)[0]) == pytest.approx(8_388_608 * 4.5 / bw, rel=1e-12)


def test_fp4_param_gather_needs_fp4_and_the_distributed_optimizer() -> None:
    for precision in ("bf16", "fp8"):
        job = build_job(load_cluster("dgx-b200"), TINY, TrainingSpec(precision=precision))
        with pytest.raises(InputError, match="fp4_param_gather .*precision is") as err:
            _grid(job, zero="1", fp4_param_gather=True)
        assert err.value.allowed is not None and "--precision fp4" in err.value.allowed
    for zero in ("0", "3", "fsdp", "hsdp"):
        with pytest.raises(Exception, match="fp4_param_gather"):
            StrategySpec(zero=zero, fp4_param_gather=True)._check()
    StrategySpec(zero="2", fp4_param_gather=True)._check()
    # fp8_param_gather stays fp8-only: an fp4 run refuses it as before
    with pytest.raises(InputError, match="fp8_param_gather"):
        _grid(_fp4_job(), zero="1", fp8_param_gather=True)


def test_flag_is_inert_where_it_holds_nothing(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A grid that carries fp4_param_gather in a run it does not apply to (a planner grid: bf16 here) gathers and
    holds 16-bit weights as before."""
    job = build_job(load_cluster("dgx-b200"), TINY, TrainingSpec(precision="bf16", grad_bytes_per_param=4.0))
    g = _grid(job, zero="1")
    g.fp4_param_gather[...] = True
    assert not np.any(layer_compute.fp8_params_held(job, g))
    calls, _ = _sync(job, g, monkeypatch)
    assert calls[1] == ("allgather", pytest.approx(2.0 * P, rel=1e-12), 8)


def test_importer_reads_fp4_param_gather(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, "--use-distributed-optimizer --bf16 --fp4-format e2m1 --fp4-param-gather")
    assert sf.strategy["fp4_param_gather"] is True and not any("fp4-param-gather" in u for u in sf.unused)


@pytest.mark.parametrize(("args", "match"), [
    (("--zero", "1", "--precision", "bf16"), "fp4_param_gather holds the linear layers' weights as NVFP4 parameters, "
     "but precision is bf16; --precision fp4, or fp4_param_gather false"),
    (("--zero", "3", "--precision", "fp4"), "needs the distributed optimizer's parameter all-gather (zero 1 or 2)"),
])
def test_cli_refuses_fp4_param_gather_in_one_line(cli, args: tuple[str, ...], match: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "gb200-nvl72", "-m", "llama3-70b", "-n", "64", "--tp", "2", "--pp", "4", *args,
            "--set", "strategy.fp4_param_gather=true", "--json", match=match)


def test_cli_prices_fp4_param_gather(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", "-c", "gb200-nvl72", "-m", "llama3-70b", "-n", "64", "--tp", "2", "--pp", "4",
                   "--zero", "1", "--precision", "fp4", "--set", "strategy.fp4_param_gather=true")
    assert out["strategy"]["fp4_param_gather"] is True
