"""Measure what XLA's SPMD partitioner and JAX's remat make of MaxText's parallel block (docs/model.md#xlapar35).

Needs ``jax[cpu]`` (not a scalemodel dependency: install it in a scratch environment). One layer of MaxText's
DecoderLayer (AI-Hypercomputer/maxtext@76bd53b0f MaxText/layers/models.py L235-290: one pre-norm ``lnx`` for
attention and MLP, ``mlp_lnx + attention_lnx`` summed; separate query / key / value / out DenseGenerals and a relu
``wi`` / ``wo`` MLP), sequential or parallel, with MaxText's logical sharding (base.yml L74-86: activation_embed,
heads and mlp over 'tensor'; embed over 'fsdp') on 8 host devices as a 2 x 4 (fsdp, tensor) mesh, at the v5p 32B
row's widths (h 10240, 32 heads of 256, mlp 32768, 16 x 2048 tokens). For each remat policy (none; full =
``jax.checkpoint(policy=None)``; dots = ``checkpoint_dots_with_no_batch_dims``) it compiles the gradient and reads
the HLO right after SPMD partitioning (before any backend collective pass), printing

* the tensor group's activation collectives, in units of the s b h activation (``x1.0``; ``x0.8`` the a d = 8192
  wide head gathers), and
* the dots JAX rematerialized (their op_name carries ``rematted_computation``).

    python scripts/measure_xla_parallel_block.py            (about a minute on 2 cores; compiles only)

What it printed with jax 0.10.2 / jaxlib 0.10.2 (CPU) is in docs/model.md#xlapar35.
"""

from __future__ import annotations

import collections
import glob
import math
import os
import re
import subprocess
import sys
import tempfile

B, S, E, H, D, F = 16, 2048, 10240, 32, 256, 32768  # global batch over fsdp 2: 8 sequences a device


def _one(parallel: bool, remat: str, dump: str) -> None:
    """Compile one configuration (run in its own process: XLA_FLAGS is read once)."""
    import jax  # noqa: PLC0415 (jax is not a scalemodel dependency: imported only where measured)
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from jax.sharding import Mesh, NamedSharding  # noqa: PLC0415
    from jax.sharding import PartitionSpec as P  # noqa: PLC0415

    jax.config.update("jax_use_shardy_partitioner", False)  # GSPMD, the partitioner of MaxText's 2023 runs
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("fsdp", "tensor"))
    act = P("fsdp", None, "tensor")

    def c(x, spec):  # type: ignore[no-untyped-def]
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    def norm(x):  # type: ignore[no-untyped-def]
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)

    def layer(x, w):  # type: ignore[no-untyped-def]
        x = c(x, act)
        lnx = c(norm(x), act)
        q, k, v = (c(jnp.einsum("bse,ehd->bshd", lnx, w[n]), P("fsdp", None, "tensor", None)) for n in "qkv")
        a = jax.nn.softmax(jnp.einsum("bshd,bthd->bhst", q, k), -1)
        o = c(jnp.einsum("bhst,bthd->bshd", a, v), P("fsdp", None, "tensor", None))
        att = c(jnp.einsum("bshd,hde->bse", o, w["o"]), act)
        if parallel:
            mlp_in = lnx
        else:
            x = c(x + att, act)
            mlp_in = c(norm(x), act)
        h = jax.nn.relu(c(jnp.einsum("bse,ef->bsf", mlp_in, w["wi"]), P("fsdp", None, "tensor")))
        mlp = c(jnp.einsum("bsf,fe->bse", h, w["wo"]), act)
        return c(x + mlp + att if parallel else x + mlp, act)

    policy = {"full": None, "dots": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims}
    f = layer if remat == "none" else jax.checkpoint(layer, policy=policy[remat])
    specs = {"q": P("fsdp", "tensor", None), "k": P("fsdp", "tensor", None), "v": P("fsdp", "tensor", None),
             "o": P("tensor", None, "fsdp"), "wi": P("fsdp", "tensor"), "wo": P("tensor", "fsdp")}
    shapes = {"q": (E, H, D), "k": (E, H, D), "v": (E, H, D), "o": (H, D, E), "wi": (E, F), "wo": (F, E)}
    w = {n: jax.ShapeDtypeStruct(shapes[n], jnp.bfloat16, sharding=NamedSharding(mesh, specs[n])) for n in shapes}
    x = jax.ShapeDtypeStruct((B, S, E), jnp.bfloat16, sharding=NamedSharding(mesh, act))
    jax.jit(jax.grad(lambda w, x: jnp.sum(f(x, w).astype(jnp.float32) ** 2), argnums=(0, 1))).lower(w, x).compile()


def _read(dump: str) -> tuple[dict[str, int], dict[str, int]]:
    text = open(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt"))[0]).read()
    coll: collections.Counter[str] = collections.Counter()
    dots: collections.Counter[str] = collections.Counter()
    b_local = B // 2
    for line in text.splitlines():
        m = re.match(r"\s*%\S+ = bf16\[([\d,]+)\]\S* (all-gather|all-reduce|reduce-scatter|all-to-all)\(", line)
        if m and ("[2,4]<=[8]" in line or "{'axis_2'}" in line):  # the tensor axis
            dims = [int(d) for d in m.group(1).split(",")]
            if dims[:2] == [b_local, S]:
                coll[f"{m.group(2)} x{math.prod(dims) / (b_local * S * E):.1f}"] += 1
        d = re.search(r"= \S+ dot\(.*op_name=\"[^\"]*rematted_computation/([^\"/]+)/dot_general", line)
        if d:
            dots[d.group(1)] += 1
    return dict(sorted(coll.items())), dict(sorted(dots.items()))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        _one(sys.argv[2] == "parallel", sys.argv[3], "")
        sys.exit(0)
    with tempfile.TemporaryDirectory() as tmp:
        for block in ("parallel", "sequential"):
            for remat in ("none", "full", "dots"):
                dump = os.path.join(tmp, f"{block}_{remat}")
                env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8 "
                           f"--xla_dump_to={dump} --xla_dump_hlo_pass_re=spmd.*")
                subprocess.run([sys.executable, __file__, "--one", block, remat], env=env, check=True)
                coll, dots = _read(dump)
                print(f"{block:10s} remat {remat:4s}  tensor-group collectives {coll}  rematerialized dots {dots}")
