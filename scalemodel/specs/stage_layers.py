"""How the frameworks place decoder layers on pipeline stages, as ``strategy.stage_layers`` takes them.

* Megatron-LM's ``--pipeline-model-parallel-layout`` (:func:`megatron_layout_stages`, unrolled as its
  ``parse_str_to_list`` does and bounded by :data:`MAX_LAYOUT_CHARS`), read by :mod:`scalemodel.specs.megatron_args`;
* nanotron's cost-balanced split (:func:`nanotron_stage_layers`), which scripts/validate_training.py applies to the
  nanotron rows (nanotron has no strategy-file reader: a nanotron config given as ``--strategy`` is refused by
  :mod:`scalemodel.specs.frameworks`).
"""

from __future__ import annotations

import re

from scalemodel.errors import InputError


def nanotron_stage_layers(layers: int, hidden: int, heads: int, ffn: int, vocab: int, pp: int) -> list[int]:
    """Decoder layers on each of nanotron's ``pp`` pipeline ranks of a Llama model, as its cost-balanced split places
    them (huggingface/nanotron@c2528430):

    - src/nanotron/models/llama.py ``LlamaModel.get_block_compute_costs`` (lines 913-925): a decoder layer costs
      ``4 a d h + 3 f h`` (a heads, d = h // a, f the MLP width), the lm_head (a TensorParallelColumnLinear) ``V h``,
      every other pipeline block (token embedding, final norm, fp32 cast, loss) 0;
    - src/nanotron/models/base.py ``build_model`` (lines 216-233): walking the PipelineBlocks in order (embedding,
      the L decoder layers, final norm, lm_head, cast, loss), each goes to the current rank, which moves on once the
      cumulative cost passes ``total (r + 1) / pp`` (``cumulative_cost > thresholds[target_pp_rank_idx]``, a strict
      test: a block that reaches the threshold exactly leaves the rank open).

    The lm_head weighs as V h / (4 h^2 + 3 f h) layers, so rank 0 takes more than L / pp (1.34B at pp 2: 11 and 5)."""
    d = hidden // heads
    layer = 4 * heads * d * hidden + 3 * ffn * hidden
    costs = [0] + [layer] * layers + [0, vocab * hidden, 0, 0]  # embedding, decoders, norm, lm_head, cast, loss
    cumulative, total = [], 0
    for c in costs:
        total += c
        cumulative.append(total)
    thresholds = [total * ((r + 1) / pp) for r in range(pp)]  # float thresholds against integer sums, as numpy's
    out, rank = [0] * pp, 0
    for i, cum in enumerate(cumulative):
        if 1 <= i <= layers:
            out[rank] += 1
        if cum > thresholds[rank]:
            rank += 1
    return out


#: The longest --pipeline-model-parallel-layout read once unrolled ((...)*N, x*N): bounded, so that "(t)*999999999"
#: is refused in one line, not built
MAX_LAYOUT_CHARS = 1_000_000


def _layout_text(layout: str, where: str = "--pipeline-model-parallel-layout") -> str:
    """Megatron-LM's layout string unrolled as ``parse_str_to_list`` unrolls it (pipeline_parallel_layer_layout.py
    lines 283-321 at d98e8a64dd): commas dropped, ``(...)*N`` then ``x*N`` repeated; bounded by
    :data:`MAX_LAYOUT_CHARS`."""
    text = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        size = 0

        def unroll(mt: re.Match[str]) -> str:
            nonlocal size
            digits = mt.group(2).lstrip("0") or "0"  # Python's int(), as Megatron reads N: "t*00000008" is 8 layers
            n = int(digits) if len(digits) <= 7 else MAX_LAYOUT_CHARS + 1
            size += len(mt.group(1)) * n
            if size > MAX_LAYOUT_CHARS:
                raise InputError(f"{layout[:60]!r} unrolls to more than {MAX_LAYOUT_CHARS} letters", where=where,
                                 allowed="a layout of the model's layers (E, t, m, L letters, | between stages)")
            return mt.group(1) * n

        text = re.sub(pattern, unroll, text)
    bad = sorted({c for c in text if c not in "ELtm|"})
    if bad:
        raise InputError(f"unknown layer letter {bad[0]!r} in {layout[:60]!r}", where=where,
                         allowed="E (embedding), t (decoder layer), m (MTP layer), L (loss), | between stages, "
                                 "(...)*N and x*N repeats, commas")
    return text


def megatron_layout_stages(layout: str, pp: int, where: str = "--pipeline-model-parallel-layout"
                           ) -> tuple[list[int], int]:
    """(decoder layers of each virtual stage, virtual stages per rank) of Megatron-LM's pipeline layout string, read
    as NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/pipeline_parallel_layer_layout.py reads it:
    ``parse_str_to_list`` (lines 283-321: commas dropped, ``(...)*N`` then ``x*N`` unrolled, stages split at ``|``,
    letters E embedding, L loss, t decoder layer, m MTP layer) and ``__init__`` (stages divisible by pp, V = stages /
    pp, virtual stage c of rank r at c pp + r). ``validate_layer_layout`` (lines 86-149) asserts E first and L last
    (refused here as there) and the t and m counts the launch's --num-layers and --mtp-num-layers
    (:func:`~scalemodel.specs.megatron_args._pipeline_layout`);
    the model prices the embedding on rank 0's first chunk and the output layer, loss and MTP modules on rank p - 1's
    last (stage_memory._segment_memory, as with first/last_stage_layers), so E must be in stage 0, L and any m in the
    last stage: a layout that puts them elsewhere (an empty first stage, a standalone MTP stage on another rank) is
    refused, not priced where it is not."""
    text = _layout_text(layout, where)
    stages = text.split("|")
    if pp < 1 or len(stages) % pp:
        raise InputError(f"{len(stages)} stages for pipeline size {pp} (Megatron asserts the layout's stages "
                         "divisible by it)", where=where, allowed=f"a multiple of {pp} stages separated by |")
    if text.count("E") != 1 or text.count("L") != 1:
        raise InputError(f"{text.count('E')} E and {text.count('L')} L in {layout[:60]!r}", where=where,
                         allowed="one E (embedding) and one L (loss), as Megatron asserts")
    flat = text.replace("|", "")
    if not flat.startswith("E") or not flat.endswith("L"):
        # validate_layer_layout (lines 95-100): "The first layer must be embedding" / "The last layer must be loss",
        # of the layers in layer-id order (the string's order): 'tE|...' or '...|tLt' would not start a job
        raise InputError(f"the layout's first layer is {flat[:1]!r} and its last {flat[-1:]!r}: {layout[:60]!r} "
                         "(Megatron asserts the embedding first and the loss last)", where=where,
                         allowed="E as the first letter and L as the last, the decoder (t) and MTP (m) layers "
                                 "between them")
    if "E" not in stages[0] or "L" not in stages[-1] or any("m" in st for st in stages[:-1]):
        raise InputError("the embedding (E) outside the first stage, or the loss (L) or an MTP layer (m) outside the "
                         f"last: {layout[:60]!r}", where=where,
                         allowed="E in the first stage, L and any m in the last (the stages the model prices the "
                                 "embedding, the output layer and the MTP modules on)")
    if "t" in text[text.index("m"):] if "m" in text else False:
        raise InputError(f"a decoder layer after an MTP layer in {layout[:60]!r} (Megatron asserts the decoder "
                         "layers before the MTP layers)", where=where, allowed="every t before the first m")
    return [st.count("t") for st in stages], len(stages) // pp
