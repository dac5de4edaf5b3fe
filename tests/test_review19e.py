"""review19e: fixes found reviewing round 19's merges (fuzz19 and the lead's commits), each with a test that
fails without its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalemodel.specs import load_cluster


def test_a_tier_a_file_sets_by_name_carries_its_own_citation(tmp_path: Path) -> None:
    """A cluster file extending dgx-h100 with ``tiers: [{name: ib-leaf, bandwidth: 100 Gbit/s}]`` (merged into the
    base's tier by name) kept the base tier's citation '400 Gb/s ... 50 GB/s per GPU' for the 12.5 GB/s it priced,
    as ``hardware show`` printed it; --set of the same field was restated. The fields the file did not set keep
    theirs, and the tiers it did not name are untouched."""
    base = load_cluster("dgx-h100")
    path = tmp_path / "slow.yaml"
    path.write_text("kind: cluster\nname: slow\nextends: dgx-h100\n"
                    "tiers:\n  - name: ib-leaf\n    bandwidth: 100 Gbit/s\n")
    derived = load_cluster(path)
    leaf = next(t for t in derived.tiers if t.name == "ib-leaf")
    base_leaf = next(t for t in base.tiers if t.name == "ib-leaf")
    assert leaf.bandwidth == 100e9 / 8  # 100 Gbit/s = 12.5 GB/s
    assert "400 Gb/s" in base_leaf.sources["bandwidth"]  # the control: the base's citation is of 400 Gb/s
    assert leaf.sources["bandwidth"] == f"set in {path}"
    assert leaf.sources["span"] == base_leaf.sources["span"]
    assert derived.tiers[0].sources == base.tiers[0].sources  # nvlink, not named by the file
    by_set = load_cluster("dgx-h100", ["tiers.ib-leaf.bandwidth=100Gbit/s"])  # the two ways agree
    assert next(t for t in by_set.tiers if t.name == "ib-leaf").sources["bandwidth"] == \
        "set in --set tiers.ib-leaf.bandwidth"


def test_a_scenarios_inline_cluster_restates_the_tier_it_sets(tmp_path: Path) -> None:
    """The same through a scenario's ``cluster: {extends: dgx-h100, tiers: [...]}``: the citation names the
    scenario file and its field."""
    from scalemodel.specs import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text("kind: scenario\nname: s\nmodel: llama2-7b\ngpus: [16]\n"
                    "cluster:\n  extends: dgx-h100\n  tiers:\n    - name: ib-leaf\n      bandwidth: 100 Gbit/s\n"
                    "training:\n  global_batch: 512\n")
    scenario = load_scenario(path)
    leaf = next(t for t in scenario.cluster.tiers if t.name == "ib-leaf")
    assert leaf.sources["bandwidth"] == f"set in {path}: cluster"


def test_tier_bandwidth_note_only_for_network_tiers() -> None:
    """The per-GPU note (a node NIC of B is B / gpus_per_node per GPU) is for network tiers past the node. An NVL72
    rack's NVLink (span 72 over 4-GPU nodes) and a TPU pod's ICI span past the node but are NCCL's NVLink class, per
    GPU in their datasheets and no NIC: they were noted. A tier given by index ('01', as --set reads it) is noted."""
    from scalemodel.commands.options import load_cluster_with
    from scalemodel.specs import notices

    def notes(cluster: str, item: str) -> list[str]:
        with notices.collecting() as got:
            load_cluster_with(cluster, [item], "test")
        return [str(n) for n in got]

    assert notes("gb200-nvl72", "cluster.tiers.nvlink.bandwidth=800GB/s") == []
    assert notes("tpu-v5p-pod", "cluster.tiers.0.bandwidth=500GB/s") == []
    # ib-leaf, index 1, of gb200-nvl72: 100 Gbit/s = 12.5 GB/s per GPU, x 4 GPUs per node = 50 GB/s = 400 Gbit/s
    for item in ("cluster.tiers.ib-leaf.bandwidth=100Gbit/s", "cluster.tiers.01.bandwidth=100Gbit/s"):
        got = notes("gb200-nvl72", item)
        assert len(got) == 1 and "(400 Gbit/s) per node of 4 GPUs" in got[0], got


def test_scale_zero_3_over_a_megatron_ddp_launch_names_the_option(tmp_path: Path, cli: Any) -> None:
    """scale --strategy run.sh --zero 3 (a Megatron-LM launch without --use-torch-fsdp2 / --use-megatron-fsdp, so
    Megatron-Core's DDP) was refused at 'strategy.megatron_ddp', a field the reader filled, where predict, memory
    and plan name --zero (the lead's check_launch_zero ran in build_specs only); --zero 1 still runs."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 "
                      "--global-batch-size 512 --bf16\n")

    def run(*args: str) -> Any:
        return cli("scale", "-m", "llama2-7b", "-c", "dgx-h100", "--gpus", "64,128", "--strategy", str(script), *args)

    r = run("--zero", "3")
    assert r.code == 2 and r.err.startswith("error: --zero: ZeRO 3 "), r.err
    assert "megatron_ddp: true needs" not in r.err
    assert run("--zero", "1").code == 0


def test_scale_default_counts_over_max_gpus_name_gpus_not_a_file(cli: Any) -> None:
    """scale without --gpus or a scenario prices the default counts 128..2048; on a100-4nic-hdr (max_gpus 800) the
    refusal was located at 'default: gpus', the built-in scenario 'default', which -c and -m left out of use"""
    r = cli("scale", "-m", "llama2-7b", "-c", "a100-4nic-hdr")
    assert r.code == 2, r.err
    last = r.err.strip().splitlines()[-1]
    assert last.startswith("error: --gpus (not given: the default 128,256,512,1024,2048): 2048 GPUs"), last
    assert "at most 800" in last and "default: gpus" not in last


def test_a_dangling_link_read_as_a_file_is_said_as_such(tmp_path: Path) -> None:
    """fuzz19 said a dangling symbolic link as such for spec paths (loader.resolve, sweep); a file read through
    files.read_bytes (an nccl-tests log, --samples, a --strategy file) still said 'nccl-tests log not found' of a
    link ls shows. A plain missing path keeps its message."""
    import pytest

    from scalemodel.errors import InputError
    from scalemodel.specs import files

    link = tmp_path / "a.log"
    link.symlink_to(tmp_path / "gone.log")
    with pytest.raises(InputError) as got:
        files.read_text(link, limit=1 << 20, what="nccl-tests log")
    assert got.value.what == f"nccl-tests log not found: a symbolic link to {str(tmp_path / 'gone.log')!r}, " \
                             "which does not resolve to a file"
    with pytest.raises(InputError) as plain:
        files.read_text(tmp_path / "none.log", limit=1 << 20, what="nccl-tests log")
    assert plain.value.what == "nccl-tests log not found"


def test_scale_says_a_set_network_tier_bandwidth_is_per_gpu(cli: Any) -> None:
    """The lead's note (--set of a network tier's bandwidth is per GPU) was given by predict, plan and memory
    (build_specs, load_cluster_with) and not by scale, which loads its cluster itself. 10 Gbit/s per GPU on dgx-h100's
    8-GPU nodes is 80 Gbit/s per node, 1.25 GB/s per GPU and 10 GB/s per node."""
    r = cli("scale", "-m", "llama2-7b", "-c", "dgx-h100", "--gpus", "64", "--set",
            "cluster.tiers.ib-leaf.bandwidth=10Gbit/s")
    assert r.code == 0, r.err
    assert "1.25 GB/s (10 Gbit/s) per GPU is 10 GB/s (80 Gbit/s) per node of 8 GPUs" in r.err, r.err
