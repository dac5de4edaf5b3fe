"""A multi-tier network as plain numbers: what the collective cost models consume.

Tiers are ordered innermost first (NVLink/NVSwitch, PCIe, then leaf, spine, inter-pod). ``span``
is the number of GPUs reachable inside the tier (cumulative: a node's NVLink tier spans 8, the
leaf tier spans e.g. 256 GPUs, the spine the whole cluster). ``bandwidth`` is the line rate per
GPU per direction in bytes/s; ``efficiency`` the achievable fraction of it; ``oversubscription``
(>= 1) divides the bandwidth of traffic that leaves the tier below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tier:
    name: str
    span: int
    bandwidth: float
    latency: float
    efficiency: float = 1.0
    oversubscription: float = 1.0
    in_network_reduction: bool = False
    topology: str = "switch"  # switch | mesh | torus | ring
    protocol: str = ""  # nvlink | pcie | rdma | tcp ... (informational)

    @property
    def effective_bandwidth(self) -> float:
        """Achievable bytes/s per GPU per direction: line rate x efficiency / oversubscription."""
        return self.bandwidth * self.efficiency / self.oversubscription


@dataclass(frozen=True)
class Network:
    tiers: tuple[Tier, ...]
    gpus_per_node: int

    def tier_index_for_group(self, group_size: int, stride: int = 1) -> int:
        """Index of the innermost tier that holds a group of ``group_size`` ranks placed ``stride`` apart.

        A group of g ranks with stride s occupies a block of g*s consecutive GPUs (Megatron-style
        placement: TP innermost, then CP, EP, DP, PP outermost unless chosen otherwise).
        """
        extent = max(1, group_size) * max(1, stride)
        for i, tier in enumerate(self.tiers):
            if extent <= tier.span:
                return i
        return len(self.tiers) - 1
