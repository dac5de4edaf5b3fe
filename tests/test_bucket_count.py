"""Gradient buckets never split a parameter tensor: a stage has at most as many buckets as tensors.

Megatron-Core's ParamAndGradBuffer walks the parameters in reverse order and closes the open bucket once it holds
bucket_size elements (megatron/core/distributed/param_and_grad_buffer.py, NVIDIA/Megatron-LM@baf94af3c6 =
core_r0.8.0); PyTorch DDP's compute_bucket_assignment_by_size does the same by bytes. The tests below write out the
tensors of tests/test_distopt.py's TINY model by hand in Megatron-Core's registration order, run that greedy fill
step by step, and compare the count with the one the step model prices (read off the collective sizes it sends)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import transformer
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster
from tests.test_distopt import TINY, _comp, _grid, _groups, _ring_priced

H, F, V = 1024, 4096, 32_000


def tiny_tensors() -> list[tuple[str, int]]:
    """TINY's parameter tensors (4 layers, h 1024, MHA, gated MLP f 4096, RMSNorm, no biases, tied embedding) in
    Megatron-Core GPTModel's registration order: the word embedding, then per layer the input norm, the fused QKV,
    the output projection, the pre-MLP norm, fc1 (gate and up fused: 2f x h), fc2; then the final norm. Tied: no
    separate output layer."""
    out = [("embedding.word_embeddings.weight", V * H)]
    for i in range(4):
        out += [(f"layers.{i}.input_layernorm.weight", H), (f"layers.{i}.linear_qkv.weight", 3 * H * H),
                (f"layers.{i}.linear_proj.weight", H * H), (f"layers.{i}.pre_mlp_layernorm.weight", H),
                (f"layers.{i}.linear_fc1.weight", 2 * F * H), (f"layers.{i}.linear_fc2.weight", H * F)]
    return out + [("final_layernorm.weight", H)]


def greedy_buckets(sizes: list[int], bucket: float) -> list[int]:
    """Megatron-Core's fill: parameters in reverse order, the open bucket closed once it holds >= bucket elements,
    the remainder one last bucket. Returns each bucket's elements."""
    buckets, open_ = [], 0
    for n in reversed(sizes):
        open_ += n
        if open_ >= bucket:
            buckets.append(open_)
            open_ = 0
    if open_:
        buckets.append(open_)
    return buckets


def test_tiny_tensor_list_is_the_model() -> None:
    """The hand list holds all of TINY's 99,886,080 parameters in 4 x 6 + 2 = 26 tensors, the count the cost layer
    gives from the shape."""
    tensors = tiny_tensors()
    assert sum(n for _, n in tensors) == 99_886_080
    assert len(tensors) == 26
    sh = transformer.shape(layers=4, hidden=H, heads=8, vocab=V, ffn_hidden=F, gated_mlp=True, biases=False,
                           tied_embeddings=True)
    assert float(transformer.param_count(sh)) == 99_886_080
    layer, outside = transformer.layer_param_tensors(sh), transformer.non_layer_param_tensors(sh)
    assert float(transformer.tensor_count(layer)) == 6.0
    assert float(transformer.tensor_count(outside)) == 2.0
    # the same tensors by size: 4 layers x (2 norms of h, QKV 3h^2, proj h^2, fc1 2fh, fc2 fh) + embedding + norm
    by_size = sorted((float(t.elements), float(t.n)) for t in layer if float(t.n) > 0)
    assert by_size == [(H, 2.0), (H * H, 1.0), (3 * H * H, 1.0), (F * H, 1.0), (2 * F * H, 1.0)]
    assert sorted(float(t.elements) for t in outside if float(t.n) > 0) == [H, V * H]


def test_tensor_counts_by_hand_for_other_layouts() -> None:
    """GPT-2 style (biases, LayerNorm, learned positions, untied): per layer QKV w b, proj w b, 2 norms x (w, b), fc1
    w b, fc2 w b = 12; outside: word embedding, position table, output layer, final norm w b = 5.
    An MLA MoE layer (DeepSeek-V3 style: q_lora, shared expert, no biases): q_down, q_up, kv_down, kv_up, proj, the q
    and kv latent norms, 2 norms, the router, shared fc1 fc2 = 12; a routed expert fc1 fc2 = 2."""
    count = transformer.tensor_count
    gpt2 = transformer.shape(layers=2, hidden=64, heads=4, vocab=100, biases=True, tied_embeddings=False,
                             position_embeddings=128)
    assert float(count(transformer.layer_param_tensors(gpt2))) == 12.0
    assert float(count(transformer.non_layer_param_tensors(gpt2))) == 5.0
    assert float(count(transformer.expert_param_tensors(gpt2))) == 4.0  # with biases, were it an MoE
    mla = transformer.shape(layers=3, hidden=64, heads=4, vocab=100, gated_mlp=True, moe_experts=8, moe_top_k=2,
                            moe_ffn_hidden=32, moe_shared_experts=1, head_dim=24, v_head_dim=16, q_lora_rank=32,
                            kv_lora_rank=16, qk_rope_head_dim=8)
    assert float(mla.moe_layers) == 3.0
    assert float(count(transformer.layer_param_tensors(mla))) == 12.0
    assert float(count(transformer.expert_param_tensors(mla))) == 2.0


@pytest.mark.parametrize("kw", [
    dict(layers=2, hidden=64, heads=4, vocab=100, biases=True, tied_embeddings=False, position_embeddings=128),
    dict(layers=4, hidden=64, heads=8, kv_heads=2, vocab=100, gated_mlp=True, ffn_hidden=176),
    dict(layers=4, hidden=64, heads=4, vocab=100, gated_mlp=True, moe_experts=8, moe_top_k=2, moe_ffn_hidden=32,
         moe_shared_experts=1, moe_first_dense=1, head_dim=24, v_head_dim=16, q_lora_rank=32, kv_lora_rank=16,
         qk_rope_head_dim=8, mtp_layers=1),
])
def test_tensor_elements_add_up_to_the_parameter_count(kw: dict) -> None:  # type: ignore[type-arg]
    """The tensor lists hold every parameter the cost layer counts: layers x the layer's tensors + the routed experts'
    tensors + the ones outside the layers = training_param_count (MTP modules included)."""
    sh = transformer.shape(**kw)
    total = sum(float(t.n * t.elements) for t in transformer.layer_param_tensors(sh)) * float(sh.layers)
    total += float(sh.moe_layers * sh.moe_experts) * sum(float(t.n * t.elements)
                                                         for t in transformer.expert_param_tensors(sh))
    total += float(sh.mtp_moe_layers * sh.moe_experts) * sum(float(t.n * t.elements)
                                                             for t in transformer.expert_param_tensors(sh))
    total += sum(float(t.n * t.elements) for t in transformer.non_layer_param_tensors(sh))
    assert total == pytest.approx(float(transformer.training_param_count(sh)), rel=1e-12)


@pytest.mark.parametrize("elements", [256, 1e3, 1e6, 3e6, 4.2e6, 8e6, 1.2e7, 1.7e7, 2.5e7, 4e7, 6e7, 1e8, 2e8])
def test_priced_bucket_count_against_the_greedy_fill(monkeypatch, elements: float) -> None:  # type: ignore[no-untyped-def]
    """dp 8, Megatron DDP at ZeRO 0 with fp32 gradients and --ddp-bucket-size ``elements``: the step model prices
    n_b all-reduces of P x 4 / n_b bytes. The greedy fill's count k lies in [big, big + floor(small / B) + 1] (big:
    tensors of >= B elements, small: the elements of the others), and so does n_b; below the smallest tensor (1024
    elements) both are N = 26, at or above P both are 1. In between n_b counts the small tensors' buckets as if none
    joined a big tensor's (k 8, n_b 13 at 4.2e6). Before, 256 elements priced 99,886,080 / 256 = 390,180
    all-reduces, 4.2e6 priced 24."""
    sizes = [n for _, n in tiny_tensors()]
    total, n_tensors = sum(sizes), len(sizes)
    k = len(greedy_buckets(sizes, elements))
    job = build_job(load_cluster("dgx-h100"), TINY, TrainingSpec(grad_bytes_per_param=4.0))
    g = _grid(job, zero="0", megatron_ddp=True, bucket_size=elements * 4.0)
    calls = _ring_priced(monkeypatch)
    out = dp_comm._dp_comm(job, g, _comp(), np.asarray([1.0]), _groups(job, g).data)
    (op, size, p), = calls
    assert (op, p) == ("allreduce", 8)
    n_b = total * 4.0 / size
    assert n_b == pytest.approx(round(n_b), abs=1e-6)
    n_b = round(n_b)
    # the last-reduced bucket: the greedy fill's ends with the word embedding, the first parameter; the priced share
    # is max(1 / n_b, V h / P), which the fill's last bucket reaches or exceeds, and equals below the smallest tensor
    # (the embedding alone) and at one bucket
    last = greedy_buckets(sizes, elements)[-1] / total
    priced_last = float(out["last_bucket"][0])
    assert priced_last == pytest.approx(max(1.0 / n_b, V * H / total), rel=1e-12)
    assert last >= V * H / total
    if elements < min(sizes) or elements >= total:
        assert priced_last == pytest.approx(last, rel=1e-12)
    big = sum(1 for n in sizes if n >= elements)
    small = sum(n for n in sizes if n < elements)
    low, high = max(big, 1), big + small // elements + 1
    assert low <= k <= high
    assert low <= n_b <= high
    if elements < min(sizes):
        assert k == n_b == n_tensors == 26
    if elements >= total:
        assert k == n_b == 1


def test_megatron_default_bucket_fill_on_tiny() -> None:
    """At Megatron's default 4e7 elements (dp 8) the fill closes inside layer 1: the final norm, layers 3 and 2
    (16,779,264 each), layer 1's fc2 (4,194,304) and fc1 (8,388,608) make 46,142,464 >= 4e7; the rest of layer 1,
    layer 0 and the embedding (32,768,000) make the last bucket, 53,743,616: 2 buckets, where ceil(P / 4e7) = 3 is
    priced (within the bound above: no tensor reaches 4e7, so n_b = ceil(P / 4e7), as before tensors were counted);
    the last-reduced bucket is the embedding's and the largest."""
    sizes = [n for _, n in tiny_tensors()]
    first = 1024 + 2 * 16_779_264 + 4 * H * H + 8 * H * H
    assert first == 46_142_464
    assert greedy_buckets(sizes, 4e7) == [first, 99_886_080 - first]
    # no tensor of TINY reaches 4e7 elements (the embedding has 32,768,000): big = 0, ceil(P / 4e7) = 3
    sizes_by_kind = [(np.asarray([1.0]), np.asarray([float(n)])) for n in sizes]
    assert float(dp_comm.bucket_count(99_886_080, 4e7, 1.0, sizes_by_kind)[0]) == 3.0


def test_bucket_count_formula() -> None:
    """big + ceil(small / e), at least 1 and at most ceil(X / S); without a tensor list the ceiling alone.
    Tensors of 10 x 5 and 3 x 1 elements (53), 1 byte an element: a bucket of 4 -> 10 big + ceil(3 / 4) = 11;
    of 2 -> 10 + 2 = 12; of 6 -> 0 + ceil(53 / 6) = 9; of 100 -> 1; of 1 -> 13, one a tensor."""
    kinds = [(np.asarray([10.0]), np.asarray([5.0])), (np.asarray([3.0]), np.asarray([1.0]))]
    got = [float(dp_comm.bucket_count(53.0, b, 1.0, kinds)[0]) for b in (4.0, 2.0, 6.0, 100.0, 1.0)]
    assert got == [11.0, 12.0, 9.0, 1.0, 13.0]
    assert float(dp_comm.bucket_count(53.0, 4.0)[0]) == 14.0
    # 2 bytes an element on the wire: a bucket of 8 bytes holds 4 elements, as the first case
    assert float(dp_comm.bucket_count(106.0, 8.0, 2.0, kinds)[0]) == 11.0


# --- each pipeline rank's buckets hold its own tensors -------------------------------------------------------------

def _untied_rank_tensors(rank: int) -> list[int]:
    """TINY untied at pp 2 (2 layers a rank), each rank's tensors in Megatron-Core's registration order: rank 0 the
    word embedding (pre_process) and layers 0-1; rank 1 layers 2-3, the final norm and the output layer
    (post_process; gpt_model.py GPTModel.__init__, NVIDIA/Megatron-LM@d98e8a64dd)."""
    layer = [H, 3 * H * H, H * H, H, 2 * F * H, H * F]
    return [V * H] + layer * 2 if rank == 0 else layer * 2 + [H, V * H]


@pytest.mark.parametrize(("rank", "elements", "want"), [
    (0, 256, 13),  # below every tensor: one bucket a tensor, the embedding + 2 x 6 (all 15 stage tensors before)
    (1, 256, 14),  # 2 x 6 + the final norm + the output layer (15 before: the embedding counted here too)
    # 1e7 elements: big = the V h tables (32,768,000), small = 2 layers x 16,779,264 (+ 1024 on rank 1)
    (0, 1e7, 1 + 4),  # 1 + ceil(33,558,528 / 1e7); before 2 + ceil(33,559,552 / 1e7) = 6 (embedding and output)
    (1, 1e7, 1 + 4),  # 1 + ceil(33,559,552 / 1e7); the payload's ceiling ceil(66,327,552 / 1e7) = 7 is above it
])
def test_each_pipeline_rank_buckets_its_own_tensors(monkeypatch, rank: int, elements: float,  # type: ignore[no-untyped-def]
                                                    want: int) -> None:
    """dp 8, pp 2, Megatron DDP at ZeRO 0, fp32 gradients, --ddp-bucket-size ``elements``: the priced rank's
    all-reduces are its own buffer's buckets, the embedding on rank 0, the final norm and output layer on rank 1 (the
    tensors outside the layers were counted on every stage). The count is read off the collective sizes and checked
    against the hand count above and the greedy fill's bounds on the rank's tensors."""
    from scalemodel.engine.job import grid_from_strategy
    from scalemodel.specs import StrategySpec
    untied = TINY.model_copy(update={"tied_embeddings": False})
    job = build_job(load_cluster("dgx-h100"), untied, TrainingSpec(grad_bytes_per_param=4.0))
    st = StrategySpec(dp=8, pp=2, zero="0", megatron_ddp=True, bucket_size=elements * 4.0)
    g = grid_from_strategy(st, TrainingSpec(global_batch=16, precision=job.precision), 16, job)
    sizes = _untied_rank_tensors(rank)
    calls = _ring_priced(monkeypatch)
    comp = dict(_comp(), layers_per_stage=np.asarray([2.0]), pipeline_rank=np.asarray([float(rank)]))
    dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), _groups(job, g).data)
    (op, size, p), = calls
    assert (op, p) == ("allreduce", 8)
    n_b = sum(sizes) * 4.0 / size  # the payload is the rank's own parameters
    assert n_b == pytest.approx(want, rel=1e-9)
    k = len(greedy_buckets(sizes, elements))
    big = sum(1 for n in sizes if n >= elements)
    high = big + sum(n for n in sizes if n < elements) // elements + 1
    assert max(big, 1) <= k <= high and max(big, 1) <= want <= high
