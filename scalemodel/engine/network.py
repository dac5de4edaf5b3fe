"""A cluster spec's network tiers as the plain numbers the cost models take (once per job)."""

from __future__ import annotations

from typing import Any

from scalemodel.cost.network import Network, Tier


def build_network(cluster: Any) -> Network:
    """A cluster spec's tiers as plain numbers for the cost models (once per job; specs/ stays below cost/)."""
    return Network(
        tiers=tuple(
            Tier(name=t.name, span=t.span, bandwidth=t.bandwidth, latency=t.latency, efficiency=t.efficiency,
                 oversubscription=t.oversubscription, in_network_reduction=t.in_network_reduction,
                 topology=t.topology, protocol=t.protocol,
                 torus_dims=tuple(t.torus_dims or ()))
            for t in cluster.tiers),
        gpus_per_node=cluster.gpus_per_node,
        generation=str(getattr(cluster.accelerator, "family", "") or ""),
    )
