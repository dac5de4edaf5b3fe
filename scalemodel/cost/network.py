"""A multi-tier network as plain numbers: what the collective cost models consume.

Tiers are ordered innermost first (NVLink/NVSwitch, PCIe, then leaf, spine, inter-pod). ``span``
is the number of GPUs reachable inside the tier (cumulative: a node's NVLink tier spans 8, the
leaf tier spans e.g. 256 GPUs, the spine the whole cluster). ``bandwidth`` is the line rate per
GPU per direction in bytes/s; ``efficiency`` the achievable fraction of it; ``oversubscription``
(>= 1) divides the bandwidth of traffic that leaves the tier below. Which tiers a group of GPUs
spans is :mod:`scalemodel.cost.placement`'s job; :func:`scalemodel.engine.job.build_network` builds one
from a cluster spec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Tier:
    """One tier of the network (module docstring): its span, line rate, latency and how traffic crosses it."""

    name: str
    span: int
    bandwidth: float
    latency: float
    efficiency: float = 1.0
    oversubscription: float = 1.0
    in_network_reduction: bool = False
    topology: str = "switch"  # switch | mesh | torus | ring | rail (docs/model.md#torus, #rail)
    protocol: str = ""  # nvlink | pcie | rdma | tcp ... (informational)
    # the tier (innermost only) is a full mesh of direct links, span - 1 of them per GPU: a group reaches the links
    # between its members only (Placement.bw, Placement.pair_bw; docs/model.md#full-mesh)
    full_mesh: bool = False
    torus_dims: tuple[int, ...] = ()  # extents of a torus tier's dimensions (topology "torus"), docs/model.md#torus
    # transport profile (docs/model.md#transport): "" (latency and efficiency are end-to-end), tcp, roce or ib;
    # when set, latency and efficiency above already include its per-message cost and header overhead
    transport: str = ""
    registration_reuse: float = math.inf  # collectives per RDMA memory registration (inf: registered once)
    transport_latency: float = 0.0  # the profile's per-message cost included in latency (s)
    wire_efficiency: float = 1.0  # the profile's header efficiency included in efficiency
    # NCCL's per-step network post overhead (s, LL/LL128 figure; x3 with Simple): no step of a flat ring that
    # crosses this tier is shorter (docs/model.md#ring-net-overhead); 0: none. build_network gives network
    # tiers NCCL's default for the cluster's host_cpu (scalemodel.cost.nccl.net_overhead_default: 1 us, 2 us on
    # AMD x86) unless the cluster states one
    net_overhead: float = 0.0
    # GPUs of a node behind one NIC of this tier (a network tier; 0.5: two NICs a GPU), as NCCL's topology search sees
    # them: gpus_per_node / the cluster's nics_per_node, 1 when it states none (nccl.nccl_graph_channels_inter,
    # docs/model.md#nccl-tree-caps)
    gpus_per_nic: float = 1.0

    @property
    def effective_bandwidth(self) -> float:
        """Achievable bytes/s per GPU per direction: line rate x efficiency / oversubscription."""
        return self.bandwidth * self.efficiency / self.oversubscription


@dataclass(frozen=True)
class Network:
    """The tiers, innermost first, and what NCCL keys its tables on (generation, tuner, host CPU)."""

    tiers: tuple[Tier, ...]
    gpus_per_node: int
    generation: str = ""  # the accelerator's family (hopper, blackwell, ...): NCCL keys some tables on it
    nccl_tuner: str = ""  # tuner plugin steering all-reduce: '' or 'aws-ofi-p5' (nccl.tuner_plugin_choice)
    # the nodes' host CPU as NCCL classifies it (intel, amd, arm, power, other; '' unknown): NCCL's llMaxBw row across
    # nodes is the host's (nccl.ll_max_busbw, docs/model.md#nccl-ll-cap)
    host_cpu: str = ""
