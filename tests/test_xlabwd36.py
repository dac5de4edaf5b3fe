"""xlabwd36: the backward's tensor-axis all-gathers XLA's SPMD partitioner builds for a MaxText layer
(docs/model.md#xlabwd36; scripts/measure_xla_backward_gathers.py, whose jax-free parsing half is checked here: jax is
no scalemodel dependency, so nothing here compiles).

What was measured (GSPMD on the CPU backend, the HLO right after SPMD partitioning, two scanned layers at the v5p 32B
row's widths on a 2 x 4 fsdp x tensor mesh): with jaxlib 0.4.20 and 0.4.23 (the 2023 rows' era) the backward gathers
exactly the h-wide tensors the model counts (the output gradient per reduction, the norm output again under remat),
some of them more than once (one all-gather per consuming dot: duplicates of one HLO value); from jaxlib 0.4.30 the
weight-gradient dots gather their narrower head-side operand instead (dQ, dK, dV, the attention output: 4 x 0.8 s b h
at that shape). The model is unchanged (docs/model.md#xlabwd36 says why); these tests pin the byte arithmetic and the
parser the record rests on, and the model's count against the 2023 measurement.
"""

from __future__ import annotations

import pytest
from conftest import script_module

from scalemodel.cost.transformer import shape, tp_allreduces_per_layer

m = script_module("measure_xla_backward_gathers")

#: five lines in jaxlib 0.4.23's dump format (module_*.after_spmd-partitioning), trimmed: the forward's norm-output
#: gather (jvp only), the backward's output-gradient gather for the O-projection's data gradient and again for its
#: weight gradient (one operand, two gathers), a weight's FSDP gather (the other mesh axis), and 0.4.30's dQ gather
_J, _T = "jit(<lambda>)/jit(main)/jvp(while)/body/", "jit(<lambda>)/jit(main)/transpose(jvp(while))/body/"
_DN = "/dot_general[dimension_numbers=(((2,), (2,)), ((), ())) precision=None preferred_element_type=bfloat16]"


def _line(name: str, dims: str, operand: str, groups: str, op_name: str) -> str:
    """One all-gather as jaxlib 0.4.23 dumps it (the trailing attributes as written there)."""
    return (f"  {name} = bf16[{dims}]{{2,1,0}} all-gather({operand}), channel_id=3, replica_groups={groups}, "
            f'dimensions={{2}}, use_global_device_ids=true, metadata={{op_name="{op_name}" source_line=17}}')


HLO = "\n".join((
    _line("all-gather.1", "8,2048,10240", "copy.28", "{{0,1,2,3},{4,5,6,7}}", _J + "bse,ef->bsf" + _DN),
    _line("all-gather.8", "8,2048,10240", "copy.39", "{{0,1,2,3},{4,5,6,7}}", _T + "remat/bshd,hde->bse" + _DN),
    _line("all-gather.7", "8,256,10240", "reshape.44", "{{0,4},{1,5},{2,6},{3,7}}", _T + "remat/bshd,hde->bse" + _DN),
    _line("all-gather.16", "8,2048,10240", "copy.39", "[2,4]<=[8]", _T + "remat/bshd,hde->bse" + _DN),
    _line("%all-gather.15", "8,2048,32,256", "%copy.44", "[2,4]<=[8]", _T + "checkpoint/bse,ehd->bshd/dot_general"),
))

TENSOR = (0, 1, 2, 3)  # the tensor axis's first group: the mesh (fsdp 2, tensor 4), tensor innermost


def test_replica_groups_by_hand() -> None:
    # explicit lists; the iota form: [G,S]<=[d]T(p) = arange(prod d).reshape(d).transpose(p).reshape(G, S)
    assert m.first_group("{{0,1,2,3},{4,5,6,7}}") == (0, 1, 2, 3)
    assert m.first_group("[2,4]<=[8]") == (0, 1, 2, 3)
    # arange(8).reshape(2, 4).T = [[0,4],[1,5],[2,6],[3,7]]: the fsdp axis's pairs
    assert m.first_group("[4,2]<=[2,4]T(1,0)") == (0, 4)
    # arange(24).reshape(2,3,4).transpose(2,0,1) row 0 = elements (i, j, 0): 0, 4, 8, 12, 16, 20
    assert m.first_group("[4,6]<=[2,3,4]T(2,0,1)") == (0, 4, 8, 12, 16, 20)
    with pytest.raises(ValueError, match="replica_groups"):
        m.first_group("{0,1}")


def test_backward_tensor_gathers_parsed() -> None:
    got = m.backward_gathers(HLO, TENSOR)
    # the forward's gather (no transpose) and the FSDP weight gather (group (0, 4)) are not the tensor axis' backward
    assert [(g.operand, g.dims, g.einsum) for g in got] == [
        ("copy.39", (8, 2048, 10240), "bshd,hde->bse"),
        ("copy.39", (8, 2048, 10240), "bshd,hde->bse"),
        ("copy.44", (8, 2048, 32, 256), "bse,ehd->bshd"),
    ]
    act = 8 * 2048 * 10240 * 2
    s = m.summary(got, act)
    # 3 gathers of 2 tensors: 1 duplicate (copy.39 again), 1 head-side tensor of 32 x 256 = 8192 = 0.8 x 10240 wide
    assert s == {"gathers": 3, "tensors": 2, "duplicates": 1, "other_width_tensors": 1, "other_width_x_act": 0.8}


def test_bytes_per_gather_by_hand() -> None:
    """The v5p 32B row's layer at tensor 4 (h 10240, 32 heads of 256; 8 sequences of 2048 a device): the dQ gather
    outputs b s a d = 8 x 2048 x 8192 bf16 elements = 268,435,456 bytes, of which each of the 4 devices holds a
    quarter and receives the other 3/4 = 201,326,592 bytes; the h-wide gather (the output gradient, the norm output)
    8 x 2048 x 10240 x 2 = 335,544,320 bytes, 251,658,240 received."""
    dq = m.Gather("copy.44", (8, 2048, 32, 256), 2, TENSOR, "bse,ehd->bshd")
    assert m.gather_bytes(dq) == (268_435_456, 201_326_592.0)
    act = m.Gather("copy.39", (8, 2048, 10240), 2, TENSOR, "bshd,hde->bse")
    assert m.gather_bytes(act) == (335_544_320, 251_658_240.0)
    assert m.gather_bytes(dq)[0] / m.gather_bytes(act)[0] == pytest.approx(0.8)


#: distinct h-wide tensors gathered over 'tensor' in one layer's backward under remat_policy=minimal, measured with
#: jaxlib 0.4.20 and 0.4.23 (docs/model.md#xlabwd36): parallel block: the summed output's gradient and the norm output;
#: sequential: the attention's and the MLP's output gradients and both norm outputs
MEASURED_2023 = {"parallel": 2, "sequential": 4}


@pytest.mark.parametrize("block", ["parallel", "sequential"])
def test_model_count_matches_2023_partitioner(block: str) -> None:
    """The model's backward under an XLA partitioner and a JAX dots policy: each reduction's mirror (one gather of
    the output gradient, ``tp_allreduces_per_layer``) plus the re-gathers of the norm outputs the policy does not
    keep (engine.model_parallel_comm._jax_remat_tp_recompute: as many as the layer's reductions, one per norm
    output a column-parallel input reads): 2 in a parallel block, 4 in a sequential layer, the distinct tensors the
    2023 partitioner gathers (its duplicates are the same tensors gathered again, not priced)."""
    sh = shape(layers=1, hidden=10240, heads=32, head_dim=256, ffn_hidden=32768, vocab=32768,
               parallel_block=block == "parallel", norms_per_layer=1 if block == "parallel" else 2)
    assert 2 * float(tp_allreduces_per_layer(sh)) == MEASURED_2023[block]
