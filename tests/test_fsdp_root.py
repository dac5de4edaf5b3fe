"""PyTorch FSDP's root unit (the embedding, output layer and final norm, outside every block's unit): its bytes
counted by hand for a small model, and its gather and reduce-scatter composed by hand into the step's ZeRO-3
traffic (one gather before the first block, one reduce-scatter after the backward, both exposed). The collective
seconds come from the collective model (scalemodel.cost.collectives.group_time, tested on its own); what is checked
here is which bytes cross the wire, how often, and which of them compute hides."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from grid_helpers import grid8, one

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import dp_comm, layer_compute, stage_memory, step
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.specs import TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h 1024, 8 heads (d 128), 2 kv heads, gated MLP f 4096, untied 32,000-token embedding, RMSNorm
TINY = TransformerWorkload(name="tiny-llama", layers=4, hidden=1024, heads=8, kv_heads=2, ffn_hidden=4096,
                           vocab=32_000, seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=False,
                           dropout=False)
BLOCK = 2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 4096 + 2 * 1024  # 15,206,400: linear weights + 2 norms
ROOT = 2 * 32_000 * 1024 + 1024  # 65,537,024: tok_embeddings + output + final norm
TIED_ROOT = 32_000 * 1024 + 1024  # one V x h matrix (MPT's wte) + final norm


@pytest.fixture(scope="module")
def job():  # type: ignore[no-untyped-def]
    return build_job(load_cluster("dgx-h100"), TINY, TrainingSpec(grad_bytes_per_param=4))


def test_root_parameters_by_hand(job) -> None:  # type: ignore[no-untyped-def]
    assert job.params == 4 * BLOCK + ROOT
    assert one(layer_compute.fsdp_root_params(job, grid8(job, zero="fsdp", fsdp_per_param=True))) == ROOT
    assert one(layer_compute.fsdp_root_params(job, grid8(job, zero="hsdp", shard_group=4, fsdp_per_param=True))) == ROOT
    assert one(layer_compute.fsdp_root_params(job, grid8(job, zero="fsdp", fsdp_flat_param=True))) == ROOT
    tied = build_job(load_cluster("dgx-h100"), msgspec.structs.replace(TINY, tied_embeddings=True),
                     TrainingSpec())
    assert one(layer_compute.fsdp_root_params(tied, grid8(tied, zero="fsdp", fsdp_flat_param=True))) == TIED_ROOT
    # not a PyTorch FSDP framework's wrapping (no flag), DeepSpeed ZeRO-3, or pp > 1: no root unit priced
    assert one(layer_compute.fsdp_root_params(job, grid8(job, zero="fsdp"))) == 0.0
    g3 = grid_from_arrays(tp=1, pp=1, dp=8, micro_batch=2, global_batch=16, gpus=8, zero=3, fsdp_flat_param=True)
    assert one(layer_compute.fsdp_root_params(job, g3)) == 0.0
    gpp = grid_from_arrays(tp=1, pp=2, dp=4, micro_batch=2, global_batch=16, gpus=8, zero=4, fsdp_per_param=True)
    assert one(layer_compute.fsdp_root_params(job, gpp)) == 0.0
    # vocab-parallel under tp: the GPU holds 1/tp of it
    gtp = grid_from_arrays(tp=2, pp=1, dp=4, micro_batch=2, global_batch=16, gpus=8, zero=4, fsdp_per_param=True)
    assert one(layer_compute.fsdp_root_params(job, gtp)) == ROOT / 2


@pytest.mark.parametrize("reshard", [True, False])
@pytest.mark.parametrize("window", [0.0, 1.0])  # no compute at all, and a second per unit (hides every block)
def test_root_traffic_and_exposure_by_hand(job, reshard: bool, window: float) -> None:  # type: ignore[no-untyped-def]
    g = grid8(job, zero="fsdp", fsdp_per_param=True, fsdp_reshard_after_forward=reshard)
    data = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout).data
    group = data.sharding.dense
    comp = {"layers_per_stage": np.asarray([4.0]), "forward_free": np.asarray([4 * window]),
            "backward_free": np.asarray([4 * window])}
    dense = np.asarray([float(job.params)])
    root = layer_compute.fsdp_root_params(job, g)
    out = dp_comm._sharded_parameter_traffic(job, g, comp, np.asarray([1.0]), data, dense, np.zeros(1),
                                          np.asarray([4.0]), np.asarray([25e6]), root=root)
    ag = float(coll.group_time("allgather", 2.0 * BLOCK, group))  # one block, 16-bit
    rs = float(coll.group_time("reducescatter", 4.0 * BLOCK, group))  # its fp32 gradient
    ag_r = float(coll.group_time("allgather", 2.0 * ROOT, group))
    rs_r = float(coll.group_time("reducescatter", 4.0 * ROOT, group))
    gathers = 7 if reshard else 4  # 2L - 1 block gathers (the last block stays gathered), L without resharding
    assert one(out["total"]) == pytest.approx(ag_r + gathers * ag + 4 * rs + rs_r)
    if window > 0:  # every block's traffic hides under its neighbour's second; the root's and the ends' do not
        assert one(out["exposed"]) == pytest.approx(ag_r + ag + rs + rs_r)
    else:  # nothing to hide under: everything is exposed, never more than the traffic
        assert one(out["exposed"]) == pytest.approx(one(out["total"]))
    # without the root unit the same bytes are priced as L equal units (the formula before this mechanism)
    flat = dp_comm._sharded_parameter_traffic(job, g, comp, np.asarray([1.0]), data, dense, np.zeros(1),
                                           np.asarray([4.0]), np.asarray([25e6]))
    unit_ag = float(coll.group_time("allgather", 2.0 * job.params / 4, group))
    unit_rs = float(coll.group_time("reducescatter", 4.0 * job.params / 4, group))
    assert one(flat["total"]) == pytest.approx(gathers * unit_ag + 4 * unit_rs)


def test_floor_counts_the_root_gather_and_stays_below(job) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.engine.step import evaluate
    g = grid8(job, zero="fsdp", fsdp_per_param=True)
    off = grid8(job, zero="fsdp")
    data = parallel_groups(job.network, tp=1, cp=1, dp=8, ep=1, pp=1, etp=1, layout=g.layout).data
    ag_r = float(coll.group_time("allgather", 2.0 * ROOT, data.sharding.dense))
    ag = float(coll.group_time("allgather", 2.0 * BLOCK, data.sharding.dense))
    floor_on, floor_off = one(step.dp_exposed_floor(job, g)), one(step.dp_exposed_floor(job, off))
    assert floor_on >= ag_r + ag - 1e-12  # the root's gather and the first block's: nothing under them
    assert floor_off < floor_on
    res = evaluate(job, g)
    assert floor_on <= one(res.breakdown["dp_comm"]) + 1e-12


def test_floor_below_evaluate_across_a_grid() -> None:
    """dp_exposed_floor (the planner's bound) stays below evaluate's exposed DP time with the root unit, for FSDP,
    HSDP and hierarchical sync, with and without overlap, FSDP1 and FSDP2 wrapping."""
    from msgspec.structs import replace

    from scalemodel.engine.step import dp_exposed_floor, evaluate
    big = build_job(load_cluster("dgx-h100"), msgspec.structs.replace(TINY, layers=8),
                    TrainingSpec(grad_bytes_per_param=4))
    dp = np.array([8, 16, 32]).reshape(3, 1, 1)
    zero = np.array([4, 5]).reshape(1, 2, 1)
    mb = np.array([1, 4]).reshape(1, 1, 2)
    for flags in ({"fsdp_per_param": True}, {"fsdp_flat_param": True}):
        g = grid_from_arrays(gpus=dp, dp=dp, tp=1, pp=1, micro_batch=mb, global_batch=256, zero=zero, shard_group=4,
                             **flags)
        for overlap in (True, False):
            gg = replace(g, overlap=np.asarray(overlap))
            for sync in ("bsp", "hier:2"):
                res = evaluate(big, gg, sync=sync)
                floor = np.broadcast_to(dp_exposed_floor(big, gg, sync), res.step_time.shape)
                assert np.all(floor <= np.asarray(res.breakdown["dp_comm"]) * (1 + 1e-12)), (flags, overlap, sync)
                assert np.all(floor > 0)


@pytest.mark.parametrize("reshard", [True, False])
def test_root_unit_held_gathered_in_memory(job, reshard: bool) -> None:  # type: ignore[no-untyped-def]
    """The root unit is not resharded after the forward: its 16-bit parameters (2 bytes each) are held on top of
    the two gathered blocks; when every unit stays gathered they were already counted (the whole stage). FSDP2
    (fsdp_per_param) holds no 16-bit shard beside its fp32 one, the master of the default 12 optimizer bytes (mem35,
    docs/model.md#fsdp2-shard-dtype): 2 bytes of the 1/8 shard less than the unflagged wrapping."""
    m = np.asarray([1.0])
    on = stage_memory.memory_parts(job, grid8(job, zero="fsdp", fsdp_per_param=True,
                                              fsdp_reshard_after_forward=reshard), m)
    off = stage_memory.memory_parts(job, grid8(job, zero="fsdp", fsdp_reshard_after_forward=reshard), m)
    extra = 2.0 * ROOT if reshard else 0.0
    assert one(on["weights"] - off["weights"]) == pytest.approx(extra - 2.0 * job.params / 8)
    if not reshard:  # the stage's every parameter gathered, 2 bytes each; the unflagged wrapping's 1/8 shard too
        assert one(on["weights"]) == pytest.approx(2.0 * job.params)
        assert one(off["weights"]) == pytest.approx(2.0 * job.params + 2.0 * job.params / 8)
