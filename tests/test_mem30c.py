"""mem30c: (1) the ZeRO-3 / FSDP gathered copies of two layers hold the linears every TP rank holds whole (MLA's
q / kv down-projections, LatentMoE's projections) whole, the rest / t (before: every parameter / t); (2) torchtitan's
float8 ``filter_fqns`` entries that name whole layers become training.bf16_layers in the hint, the others are named.

Megatron-Core builds MLA's linear_q_down_proj / linear_kv_down_proj with ``parallel_mode='duplicated'``
(multi_latent_attention.py L524-527, L572-574 at NVIDIA/Megatron-LM@d98e8a64dd); torchtitan passes
``partial(module_filter_fn, filter_fqns=...)`` to torchao's converter (pytorch/torchtitan@e7c0cae
torchtitan/components/quantization/float8.py L104-111), a substring of the module's FQN (utils.py L25).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import memory
from scalemodel.engine.job import build_job
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.frameworks import read_strategy_file
from tests.test_mem30b import MLA_YAML, WHOLE

# the small MLA model of test_mem30b, one layer by hand: q_up 256 x 8 x 96 + kv_up 128 x 8 x (64 + 64) + o 8 x 64 x 1024
# = 851,968 split; q_down + kv_down 425,984 whole; latent norms 256 + 128, the layer's two norms 2 x 1024, whole on
# every TP rank since mem31 (TENorm hidden_size wide; they were / t), the gated MLP 3 x 1024 x 2048 = 6,291,456 split
SPLIT = 851_968 + 6_291_456  # 7,143,424
NORMS = 384 + 2_048


def _gathered(path: Path, tp: int) -> float:
    """Weights held at ZeRO-3 beyond the shard, in elements (2 B each): w(dp 2) - shard/2 with shard/2 = w(1) - w(2)."""
    sh = build_job(load_cluster("dgx-h100", []), load_workload(path, []), TrainingSpec()).shape
    w = [float(np.ravel(memory.memory_per_gpu(sh, micro_batch=1, seq_len=1024, dp=d, tp=tp, zero_stage=3,
                                              weight_bytes=2.0).weights)[0]) for d in (1, 2)]
    return (2.0 * w[1] - w[0]) / 2.0


@pytest.mark.parametrize(("tp", "by_hand"), [(2, 8_000_256), (4, 4_428_544)])
def test_zero3_gathered_layers_hold_mla_down_projections_whole(tmp_path: Path, tp: int, by_hand: int) -> None:
    """Two layers gathered: 2 x (7,143,424 / t + 425,984 + 2,432): t 2 8,000,256, t 4 4,428,544 elements (mem30c,
    the norms / t: 7,997,824 and 4,424,896; before: 2 x 7,571,840 / t, 7,571,840 and 3,785,920)."""
    assert 2 * (SPLIT / tp + WHOLE + NORMS) == by_hand
    path = tmp_path / "mla-small.yaml"
    path.write_text(MLA_YAML)
    assert _gathered(path, tp) == pytest.approx(by_hand, rel=1e-9)


# --- (2) torchtitan float8 filter_fqns ---------------------------------------------------------------------------

def _titan(tmp_path: Path, fqns: str) -> list[str]:
    path = tmp_path / "f8.toml"
    path.write_text(f'[model]\nconverters = ["float8"]\n[float8]\nrecipe_name = "rowwise"\nfilter_fqns = {fqns}\n'
                    '[parallelism]\ndata_parallel_shard_degree = -1\n')
    sf = read_strategy_file(path)
    assert "bf16_layers" not in sf.training  # precision is not fp8 in the file: the count goes in the hint
    return [u for u in sf.unused if u.startswith(("[float8]", "float8."))]  # the file's other settings' lines


def test_filter_fqns_whole_layers_become_bf16_layers(tmp_path: Path) -> None:
    """"layers.0." and "layers.31." (each once, a repeat not counted twice) keep two layers' linears in BF16;
    "output" is the output layer, priced in BF16 already: the hint gives training.bf16_layers=2, no other line."""
    unused = _titan(tmp_path, '["output", "layers.0.", "layers.31.", "layers.0."]')
    assert unused == ["[float8] (fp8 GEMMs on part of the layers: give --precision fp8 --set "
                      "training.fp8_recipe=rowwise --set training.bf16_layers=2 to model all of them)"]


def test_filter_fqns_not_expressible_are_named(tmp_path: Path) -> None:
    """"layers.1" (no dot: also layers 10-19, 100-199) and "attention.wq" (a part of every layer) are not whole
    layers: one line each, naming the entry; "router.gate" is priced in BF16 already; no bf16_layers in the hint."""
    unused = _titan(tmp_path, '["layers.1", "attention.wq", "router.gate"]')
    assert unused[0].endswith("training.fp8_recipe=rowwise to model all of them)")
    assert unused[1:3] == [
        "float8.filter_fqns 'layers.1' (not one whole layer \"layers.N.\": its linears priced in fp8)",
        "float8.filter_fqns 'attention.wq' (not one whole layer \"layers.N.\": its linears priced in fp8)"]
    # mem32: no entry names "output", which torchtitan then converts (tests/test_mem32.py)
    assert len(unused) == 4 and unused[3].startswith('float8.filter_fqns does not name "output"')


def test_filter_fqns_not_a_list_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[model]\nconverters = ["float8"]\n[float8]\nfilter_fqns = "output"\n')
    with pytest.raises(InputError, match="filter_fqns"):
        read_strategy_file(path)
