"""Count the tensor-axis all-gathers XLA's SPMD partitioner puts in a MaxText layer's backward (docs/model.md#xlabwd36).

Needs ``jax[cpu]`` (not a scalemodel dependency: install it in a scratch environment, e.g. ``python -m venv /tmp/j &&
/tmp/j/bin/pip install jax==0.4.23 jaxlib==0.4.23 'numpy<2'``, and run this file with that interpreter). The parsing
half (:func:`backward_gathers`, :func:`gather_bytes`, :func:`first_group`) needs no jax and is what
tests/test_xlabwd36.py checks.

The layer is MaxText's DecoderLayer at the v5p rows' commit (AI-Hypercomputer/maxtext@76bd53b0f MaxText/layers/
models.py L235-290; attentions.py's query / key / value / out DenseGenerals; a relu ``wi`` / ``wo`` MLP), sequential or
parallel, with MaxText's logical rules (base.yml L74-86 at 76bd53b0f: activation_batch -> fsdp, activation_embed /
activation_heads / activation_mlp -> 'tensor', embed -> fsdp, heads / mlp -> 'tensor') on 8 host devices as a
2 x 4 (fsdp, tensor) mesh, two layers under ``jax.lax.scan`` (base.yml ``scan_layers: True``) and ``jax.checkpoint``
with the rows' policies (models.py: ``minimal`` = ``checkpoint_dots_with_no_batch_dims``, ``full`` = None;
``prevent_cse`` off under scan, as ``nn.remat(..., prevent_cse=not cfg.scan_layers)``); the weights' gradients
constrained to the weights' shardings (the optimizer state's). For each case it compiles the gradient with GSPMD and
reads the HLO right after SPMD partitioning (``--xla_dump_hlo_pass_re=spmd-partitioning``, before any backend pass),
printing for the backward loop body (ops whose op_name carries ``transpose(``) the tensor group's all-gathers:
``gathers`` (every all-gather), ``tensors`` (distinct operands: the same HLO value gathered again by another dot is a
duplicate, which only a collective CSE removes: HloCSE leaves channel collectives alone), and the head-side gathers
(operands narrower than the h-wide activation: the Q / K / V gradients, the attention output) in units of s b h.

    /tmp/j/bin/python scripts/measure_xla_backward_gathers.py      (a minute or two per case on 2 cores)

What it printed with jax / jaxlib 0.4.20, 0.4.23, 0.4.30 and 0.4.37 is in docs/model.md#xlabwd36; with 0.4.26, 0.4.28
and 0.4.29 (the boundary training.jax_release prices) in docs/model.md#xlaver36.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from math import prod

#: (name, block, remat, (B, S, E, H, KV, D, F)): the v5p 32B row's widths (a d = 0.8 h), a GQA layer whose query width
#: equals h (the v6e 405B row's ratios: a d = h, kv d = h / 16 here h / 4), one whose heads are wider than h (the v5p
#: 128B / 1024B and v5e 128B rows: a d = 1.6 h; here 1.5 h)
CASES = (
    ("32b", "parallel", "minimal", (16, 2048, 10240, 32, 32, 256, 32768)),
    ("32b", "parallel", "full", (16, 2048, 10240, 32, 32, 256, 32768)),
    ("32b", "sequential", "minimal", (16, 2048, 10240, 32, 32, 256, 32768)),
    ("32b", "sequential", "full", (16, 2048, 10240, 32, 32, 256, 32768)),
    ("gqa-tie", "sequential", "minimal", (16, 1024, 4096, 32, 8, 128, 14336)),
    ("wide", "parallel", "minimal", (16, 1024, 4096, 48, 48, 128, 16384)),
)

_ELEM_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f8e4m3fn": 1, "f8e5m2": 1, "s8": 1}
_LINE = re.compile(r"^\s*(?:ROOT )?%?(?P<name>[\w.\-]+) = (?P<dtype>[a-z0-9]+)\[(?P<dims>[\d,]*)\]\S* "
                   r"all-gather\(%?(?P<operand>[\w.\-]+)\)(?P<rest>.*)$")


@dataclass(frozen=True)
class Gather:
    """One all-gather of the backward: its operand (HLO name), output dims and element bytes, replica group (the
    first), gathered dimension, and the einsum of the dot it feeds (from the op_name metadata)."""

    operand: str
    dims: tuple[int, ...]
    elem_bytes: int
    group: tuple[int, ...]
    einsum: str


def first_group(replica_groups: str) -> tuple[int, ...]:
    """The first replica group of an HLO ``replica_groups`` attribute: explicit ``{{0,1},{2,3}}`` or the iota form
    ``[G,S]<=[d0,d1,...]T(p0,p1,...)`` (xla/hlo/ir/tile_assignment.h IotaTileAssignment: the iota over prod(d)
    devices reshaped to d, transposed by p, reshaped to G groups of S)."""
    s = replica_groups.strip()
    if s.startswith("{{"):
        return tuple(int(v) for v in s[2:s.index("}")].split(",") if v)
    m = re.match(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", s)
    if not m:
        raise ValueError(f"replica_groups {replica_groups!r}: neither the explicit nor the iota form")
    size = int(m.group(2))
    dims = [int(v) for v in m.group(3).split(",")]
    perm = [int(v) for v in m.group(4).split(",")] if m.group(4) else list(range(len(dims)))
    strides = [prod(dims[i + 1:]) for i in range(len(dims))]
    out = []
    for k in range(size):  # the k-th element in the transposed order: its index in each permuted dimension
        idx, rem = [0] * len(dims), k
        for axis in reversed(perm):
            idx[axis], rem = rem % dims[axis], rem // dims[axis]
        out.append(sum(i * st for i, st in zip(idx, strides, strict=True)))
    return tuple(out)


def backward_gathers(hlo_text: str, group: tuple[int, ...]) -> list[Gather]:
    """The all-gathers over ``group`` (a replica group, e.g. the tensor axis's first) whose op_name says they serve the
    backward (JAX names the transposed program ``transpose(jvp(...))``)."""
    out = []
    for line in hlo_text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        rg = re.search(r"replica_groups=(\{\{[\d,{}]*\}\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)", m.group("rest"))
        op = re.search(r'op_name="([^"]*)"', m.group("rest"))
        if not rg or not op or "transpose(" not in op.group(1) or first_group(rg.group(1)) != group:
            continue
        es = re.search(r"/([a-z]+(?:,[a-z]+)*->[a-z]+)/dot_general", op.group(1))
        dims = tuple(int(d) for d in m.group("dims").split(",") if d)
        out.append(Gather(m.group("operand"), dims, _ELEM_BYTES[m.group("dtype")], group,
                          es.group(1) if es else ""))
    return out


def gather_bytes(g: Gather) -> tuple[int, float]:
    """(bytes of the gathered output, bytes each device receives: (n - 1) / n of it over a group of n)."""
    total = prod(g.dims) * g.elem_bytes
    n = len(g.group)
    return total, total * (n - 1) / n


def summary(gathers: list[Gather], activation_bytes: int) -> dict[str, float]:
    """Counts of :func:`backward_gathers`' output: every gather, distinct operands, duplicates, and the head-side
    (narrower or wider than the s b h activation) gathers' total in units of the activation."""
    by_operand: dict[str, list[Gather]] = {}
    for g in gathers:
        by_operand.setdefault(g.operand, []).append(g)
    other = [gs[0] for gs in by_operand.values() if gather_bytes(gs[0])[0] != activation_bytes]
    return {"gathers": len(gathers), "tensors": len(by_operand), "duplicates": len(gathers) - len(by_operand),
            "other_width_tensors": len(other),
            "other_width_x_act": sum(gather_bytes(g)[0] for g in other) / activation_bytes}


def _one(block: str, remat: str, widths: tuple[int, ...]) -> None:
    """Compile one case (in its own process: XLA_FLAGS is read once per process)."""
    import jax  # noqa: PLC0415 (jax is not a scalemodel dependency: imported only where measured)
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from jax.sharding import Mesh, NamedSharding  # noqa: PLC0415
    from jax.sharding import PartitionSpec as P  # noqa: PLC0415

    B, S, E, H, KV, D, F = widths
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("fsdp", "tensor"))
    act, heads = P("fsdp", None, "tensor"), P("fsdp", None, "tensor", None)

    def c(x, spec):  # type: ignore[no-untyped-def]
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    def norm(x):  # type: ignore[no-untyped-def]
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)

    def layer(x, w):  # type: ignore[no-untyped-def]
        x = c(x, act)
        lnx = c(norm(x), act)
        q, k, v = (c(jnp.einsum("bse,ehd->bshd", lnx, w[n]), heads) for n in "qkv")
        k, v = jnp.repeat(k, H // KV, axis=2), jnp.repeat(v, H // KV, axis=2)
        a = jax.nn.softmax(jnp.einsum("bshd,bthd->bhst", q, k), -1)
        o = c(jnp.einsum("bhst,bthd->bshd", a, v), heads)
        att = c(jnp.einsum("bshd,hde->bse", o, w["o"]), act)
        if block == "parallel":
            mlp_in = lnx
        else:
            x = c(x + att, act)
            mlp_in = c(norm(x), act)
        h = jax.nn.relu(c(jnp.einsum("bse,ef->bsf", mlp_in, w["wi"]), P("fsdp", None, "tensor")))
        mlp = c(jnp.einsum("bsf,fe->bse", h, w["wo"]), act)
        return c(x + mlp + att if block == "parallel" else x + mlp, act)

    policy = {"full": None, "minimal": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims}[remat]
    f = jax.checkpoint(layer, policy=policy, prevent_cse=False)
    specs = {"q": P(None, "fsdp", "tensor", None), "k": P(None, "fsdp", "tensor", None),
             "v": P(None, "fsdp", "tensor", None), "o": P(None, "tensor", None, "fsdp"),
             "wi": P(None, "fsdp", "tensor"), "wo": P(None, "tensor", "fsdp")}
    shapes = {"q": (2, E, H, D), "k": (2, E, KV, D), "v": (2, E, KV, D), "o": (2, H, D, E), "wi": (2, E, F),
              "wo": (2, F, E)}
    w = {n: jax.ShapeDtypeStruct(shapes[n], jnp.bfloat16, sharding=NamedSharding(mesh, specs[n])) for n in shapes}
    x = jax.ShapeDtypeStruct((B, S, E), jnp.bfloat16, sharding=NamedSharding(mesh, act))

    def loss(w, x):  # type: ignore[no-untyped-def]
        y, _ = jax.lax.scan(lambda x, wl: (f(x, wl), None), x, w)
        return jnp.sum(y.astype(jnp.float32) ** 2)

    shardings = ({n: w[n].sharding for n in w}, x.sharding)
    jax.jit(jax.grad(loss, argnums=(0, 1)), out_shardings=shardings).lower(w, x).compile()


def main() -> None:
    import jax  # noqa: PLC0415

    print(f"jax {jax.__version__}; per layer, backward loop body, tensor group (devices 0-3 of the 2 x 4 mesh)")
    print(f"{'case':8s} {'block':10s} {'remat':7s} {'gathers':>7s} {'tensors':>7s} {'dups':>5s} {'head-side':>9s}"
          f" {'x s b h':>8s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, block, remat, widths in CASES:
            dump = os.path.join(tmp, f"{name}_{block}_{remat}")
            env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8 "
                       f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=spmd-partitioning")
            subprocess.run([sys.executable, __file__, "--one", block, remat, ",".join(map(str, widths))], env=env,
                           check=True)
            text = open(sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))[0]).read()
            B, S, E = widths[:3]
            s = summary(backward_gathers(text, (0, 1, 2, 3)), B // 2 * S * E * 2)
            print(f"{name:8s} {block:10s} {remat:7s} {s['gathers']:7d} {s['tensors']:7d} {s['duplicates']:5d} "
                  f"{s['other_width_tensors']:9d} {s['other_width_x_act']:8.2f}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        _one(sys.argv[2], sys.argv[3], tuple(int(v) for v in sys.argv[4].split(",")))
    else:
        main()
