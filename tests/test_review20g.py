"""Review of ux20b's compression notes (predict): the group they count is the one dp_comm reduces over."""

from __future__ import annotations

import json
from typing import Any

SMALL = ("-m", "gpt-1.7b", "-c", "pcie-25gbe")


def _predict(cli: Any, *args: str) -> dict[str, Any]:
    r = cli("predict", *SMALL, *args, "--json")
    assert r.code == 0, r.err
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def test_topk_note_over_dp_x_cp(cli: Any) -> None:
    """16 GPUs as DP 8 x CP 2: the gradients are reduced over the 8 replicas with their 2 cp ranks, 16 GPUs
    (Megatron-Core's dp-cp group; dp_comm's DataParallelGroups.sharding), so the top-k all-gather is priced over 16
    ranks. By hand, bf16 values + int32 indices, c = (2 + 4)/2 = 3, n = 16, density 0.1:
    (n-1) rho c = 15 x 0.1 x 3 = 4.5 gradients received, ring 2(n-1)/n = 30/16 = 1.875, break-even 2/(n c) = 2/48 =
    0.0417. The note counted dp 8 alone: 7 x 0.1 x 3 = 2.1, 14/8 = 1.75, break-even 2/24 = 0.0833."""
    cp2 = _predict(cli, "-n", "16", "--cp", "2", "--compression", "topk:0.1")
    assert cp2["strategy"]["dp"] == 8 and cp2["strategy"]["cp"] == 2
    note = next(n for n in cp2["notes"] if n.startswith("compression topk:0.1 is slower than none"))
    assert "= 4.5 x the gradient" in note and "2(dp-1)/dp = 1.88 x" in note and "below density 0.0417" in note
    assert "dp x cp = 16" in note


def test_cast_note_where_only_cp_ranks_reduce(cli: Any) -> None:
    """DP 1 x CP 2: the two cp ranks still all-reduce their partial gradients (dp_comm prices a dp_comm term), so
    an fp16 cast of bf16 gradients is priced, as none, and the note is owed; it was gated on dp > 1 alone."""
    none = _predict(cli, "-n", "2", "--cp", "2")
    fp16 = _predict(cli, "-n", "2", "--cp", "2", "--compression", "fp16")
    assert none["strategy"]["dp"] == 1 and none["breakdown_s"]["dp_comm"] > 0
    assert fp16["step_time_s"] == none["step_time_s"]
    assert any("compression fp16 changes nothing here" in n for n in fp16["notes"])


def test_no_topk_all_gather_note_under_a_parameter_server(cli: Any) -> None:
    """ps:2 with top-k is refused (step.py R.PS_INCOMPATIBLE) and priced as the dense push/pull plus top-k's codec
    (dp_comm's _ps_exchange on n q bytes, q = g for top-k): there is no all-gather, so a note explaining one
    ('its all-gather sends more bytes ...') described a collective that was not priced."""
    doc = _predict(cli, "-n", "16", "--compression", "topk:0.1", "--dp-comm", "ps:2")
    assert doc["feasible"] is False
    assert not any("slower than none" in n for n in doc["notes"])


def test_unknown_protocol_error_lists_the_labels_by_class(cli: Any, tmp_path: Any) -> None:
    """choices.PROTOCOL_LABELS is 'the labels as the tier spec's description and its error list them' (lead commit
    471a22f6), but the error listed them alphabetically without their classes ('c2c, dcn, efa, ...'), a second
    listing that says nothing of how a label is priced; it now gives the description's words."""
    f = tmp_path / "c.yaml"
    f.write_text("kind: cluster\nname: proto\naccelerator: h100-sxm\ngpus_per_node: 8\nmax_gpus: 64\ntiers:\n"
                 "  - {name: nvlink, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8, protocol: nvlnik}\n"
                 "  - {name: ib, span: 64, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.9, protocol: rdma}\n")
    r = cli("predict", "-c", str(f), "-m", "gpt-1.7b", "-n", "64")
    line = " ".join(r.err.split())
    assert r.code == 2 and "protocol 'nvlnik' is not a link" in line
    assert "c2c (NCCL's NVLink class), pcie, pci (its PCI class), rdma," in line
    assert "dcn (a network link) (any case), or leave it out" in line
