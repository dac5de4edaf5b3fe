"""A cluster spec's network tiers as the plain numbers the cost models take (once per job)."""

from __future__ import annotations

import math
from typing import Any

from scalemodel.choices import INTRA_PROTOCOLS
from scalemodel.cost.nccl import net_overhead_default
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.transport import profile


def _tier(t: Any, i: int = 1, nccl: bool = True, host_cpu: str = "", gpus_per_node: int = 1) -> Tier:
    """One tier spec (``i``-th, innermost 0) as numbers; a named ``transport`` adds its per-message cost to the
    latency and its wire efficiency to the efficiency (docs/model.md#transport). ``net_overhead`` omitted: NCCL's
    default for the cluster's host CPU (:func:`scalemodel.cost.nccl.net_overhead_default`: 1 us, 2 us on AMD x86)
    on a network tier of an NCCL cluster (``nccl``), 0 on the innermost tier, on NVLink/PCIe-class tiers (no NCCL
    net transport there) and on TPU (ICI) clusters, which do not run NCCL (docs/model.md#ring-net-overhead).
    ``nics_per_node`` given: ``gpus_per_nic = gpus_per_node / nics_per_node`` (docs/model.md#nccl-tree-caps)."""
    extra, wire, transport = 0.0, 1.0, getattr(t, "transport", None) or ""
    if transport:
        extra, wire = profile(transport, getattr(t, "mtu", None))
    reuse = getattr(t, "registration_reuse", None)
    nics = getattr(t, "nics_per_node", None)
    return Tier(name=t.name, span=t.span, bandwidth=t.bandwidth, latency=t.latency + extra,
                efficiency=t.efficiency * wire, oversubscription=t.oversubscription,
                in_network_reduction=t.in_network_reduction, topology=t.topology, protocol=t.protocol,
                full_mesh=bool(getattr(t, "full_mesh", False)), torus_dims=tuple(t.torus_dims or ()),
                transport=transport,
                registration_reuse=math.inf if reuse is None else float(reuse), transport_latency=extra,
                wire_efficiency=wire, net_overhead=_net_overhead(t, i, nccl, host_cpu),
                gpus_per_nic=1.0 if nics is None else gpus_per_node / float(nics))


def _net_overhead(t: Any, i: int, nccl: bool, host_cpu: str = "") -> float:
    given = getattr(t, "net_overhead", None)
    if given is not None:
        return float(given)
    return net_overhead_default(host_cpu) if nccl and i > 0 and str(t.protocol).lower() not in INTRA_PROTOCOLS else 0.0


def build_network(cluster: Any) -> Network:
    """A cluster spec's tiers as plain numbers for the cost models (once per job; specs/ stays below cost/)."""
    nccl = not any(str(t.protocol).lower() == "ici" for t in cluster.tiers)  # TPU pods do not run NCCL
    host_cpu = str(getattr(cluster, "host_cpu", "") or "")
    return Network(
        tiers=tuple(_tier(t, i, nccl, host_cpu, int(cluster.gpus_per_node)) for i, t in enumerate(cluster.tiers)),
        gpus_per_node=cluster.gpus_per_node,
        generation=str(getattr(cluster.accelerator, "family", "") or ""),
        nccl_tuner=str(getattr(cluster, "nccl_tuner", "") or "") if nccl else "",
        host_cpu=host_cpu,
    )
