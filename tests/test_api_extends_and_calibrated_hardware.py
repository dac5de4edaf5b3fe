"""A dict given to the Python API derives a spec by the route files take (its citations restated), a
cluster derived from a calibrated overlay with other hardware keeps no calibrated band, and `check --set` of a
network tier's bandwidth says it is per GPU as `predict --set` does; each with a test that fails without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT

from scalemodel import api
from scalemodel.specs import load_cluster

SLOW_LEAF = {"extends": "dgx-h100", "tiers": [{"name": "ib-leaf", "bandwidth": "100 Gbit/s"}]}


def test_an_api_dict_restates_the_citation_of_what_it_sets(tmp_path: Path) -> None:
    """A dict with ``extends:`` given to the Python API kept the base tier's citation '400 Gb/s ... 50 GB/s per GPU'
    for the 12.5 GB/s it priced, where the same fields in a file (or a --set) are restated to name who set them."""
    base_leaf = next(t for t in load_cluster("dgx-h100").tiers if t.name == "ib-leaf")
    assert "400 Gb/s" in base_leaf.sources["bandwidth"]  # the control: the base's citation is of 400 Gb/s
    got = api.cluster_spec(SLOW_LEAF)
    leaf = next(t for t in got.tiers if t.name == "ib-leaf")
    assert leaf.bandwidth == 100e9 / 8
    assert leaf.sources["bandwidth"] == "set in the Python API's cluster argument"
    assert leaf.sources["span"] == base_leaf.sources["span"]  # what the dict did not set keeps its citation
    path = tmp_path / "slow.yaml"  # the file route gives the same citations but for the name of who set it
    path.write_text("extends: dgx-h100\ntiers:\n  - name: ib-leaf\n    bandwidth: 100 Gbit/s\n")
    by_file = next(t for t in load_cluster(path).tiers if t.name == "ib-leaf")
    assert by_file.sources == {k: v.replace("the Python API's cluster argument", str(path))
                               for k, v in leaf.sources.items()}
    wl = api.workload_spec({"extends": "llama2-7b", "seq_len": 8192})
    assert wl.sources["seq_len"] == "set in the Python API's model argument"


def test_an_api_dict_extending_a_spec_of_another_kind_is_refused_as_a_file_is(tmp_path: Path) -> None:
    model = tmp_path / "m.yaml"
    model.write_text("kind: transformer\nname: m\nlayers: 2\nhidden: 64\nheads: 2\nvocab: 100\nseq_len: 64\n")
    with pytest.raises(api.InputError, match="is a transformer spec, this mapping a cluster spec"):
        api.cluster_spec({"extends": str(model), "kind": "cluster"})


def test_check_says_a_set_network_tier_bandwidth_is_per_gpu_as_predict_does(cli) -> None:  # type: ignore[no-untyped-def]
    """`check SCENARIO --set cluster.tiers.ib-leaf.bandwidth=...` priced the value per GPU without the note that
    predict's --set of the same tier prints (commands.common.build_specs): 25 Gbit/s per GPU is a 200 Gbit/s node NIC
    on dgx-h100's 8-GPU nodes. A tier inside the node is not noted, by either command."""
    scenario = str(ROOT / "examples/capacity/gpt3-175b-dgx-h100.yaml")
    item = "tiers.ib-leaf.bandwidth=25Gbit/s"
    predicted = cli("predict", "-c", "dgx-h100", "-m", "gpt3-175b", "-n", "128", "--tp", "8", "--pp", "16",
                     "--global-batch", "256", "--micro-batch", "1", "--set", f"cluster.{item}")
    checked = cli("check", scenario, "--set", f"cluster.{item}", "--json")
    assert checked.code in (0, 1)
    note = ("--set cluster.tiers.ib-leaf.bandwidth: a tier's bandwidth is per GPU: 3.125 GB/s (25 Gbit/s) per GPU is "
            "25 GB/s (200 Gbit/s) per node of 8 GPUs; a node NIC of B is B / 8 per GPU")
    assert note in predicted.err and note in checked.err
    inside = cli("check", scenario, "--set", "cluster.tiers.nvlink.bandwidth=400GB/s", "--json")
    assert "a tier's bandwidth is per GPU" not in inside.err
    whole = cli("check", scenario, "--set", "cluster=dgx-a100", "--json")  # a whole cluster by name: no field, no note
    assert whole.code in (0, 1) and json.loads(whole.out)["inputs"]["cluster"] == "dgx-a100", whole.err


def _calibrated_overlay(tmp_path: Path) -> Path:
    """An overlay of dgx-a100 with a calibration block as `calibrate runs` writes it (4 runs, leave-one-out), the
    hardware the runs ran on recorded."""
    rows = [{"run": f"r{i}", "gpus": 8 * 2**i, "parallelism": "TP/PP/DP", "model": "dense", "precision": "16-bit",
             "in_sample": 0.001 * i, "leave_one_out": 0.002 * i} for i in range(4)]
    block = {"version": 2, "runs": 4, "factors": 2, "method": "leave-one-out", "reason": "", "residuals": rows,
             "hardware": load_cluster("dgx-a100").hardware()}
    out = tmp_path / "overlay.yaml"
    out.write_text(yaml.safe_dump({"kind": "cluster", "extends": "dgx-a100", "name": "mine-calibrated",
                                   "calibration": block}, sort_keys=False))
    return out


@pytest.mark.parametrize(("change", "said"), [
    ({"tiers": [{"name": "ib-leaf", "bandwidth": "100 Gbit/s"}]}, "tier ib-leaf 25 GB/s -> 12.5 GB/s per GPU"),
    ({"accelerator": "a100-sxm-40g"}, "accelerator a100-sxm-80g -> a100-sxm-40g"),
])
def test_a_cluster_extending_a_calibrated_overlay_with_other_hardware_takes_the_published_band(
        tmp_path: Path, change: dict[str, Any], said: str) -> None:
    """A cluster that extends a calibrated overlay inherits its calibration block; with another accelerator or a tier
    of another line rate it still took the band from the overlay's runs, errors of a fit to other hardware. It now
    takes the published runs' band (interval.source 'published') and the basis says what changed."""
    overlay = _calibrated_overlay(tmp_path)
    run = {"model": "gpt-1.7b", "gpus": 32, "global_batch": 64, "micro_batch": 1}
    same = api.predict(str(overlay), **run).interval
    assert same["source"] == "calibrated-leave-one-out"  # the control: the overlay itself takes its runs' band
    derived = tmp_path / "derived.yaml"
    derived.write_text(yaml.safe_dump({"extends": "overlay.yaml", "name": "other", **change}, sort_keys=False))
    cl = load_cluster(derived)
    assert cl.calibration is not None  # inherited
    band = api.predict(str(derived), **run).interval
    assert band["source"] == "published" and band["calibration"]["cluster"] == "other"
    assert f"is not the hardware its calibration runs ran on ({said})" in band["basis"]


def test_a_set_of_a_tier_line_rate_on_a_calibrated_overlay_takes_the_published_band(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    overlay = _calibrated_overlay(tmp_path)
    args = ("predict", "-c", str(overlay), "-m", "gpt-1.7b", "-n", "32", "--global-batch", "64", "--json")
    assert json.loads(cli(*args).out)["interval"]["source"] == "calibrated-leave-one-out"
    band = json.loads(cli(*args, "--set", "cluster.tiers.ib-leaf.bandwidth=100Gbit/s").out)["interval"]
    assert band["source"] == "published" and "tier ib-leaf 25 GB/s -> 12.5 GB/s per GPU" in band["basis"]
    # an efficiency is what the fit sets, not the hardware: the band stays the calibration's
    band = json.loads(cli(*args, "--set", "cluster.tiers.ib-leaf.efficiency=0.5").out)["interval"]
    assert band["source"] == "calibrated-leave-one-out"


@pytest.mark.parametrize(("item", "said"), [
    ("cluster.accelerator.peak_flops.bf16=600TFLOP/s", "accelerator bf16 peak 312 TFLOP/s -> 600 TFLOP/s"),
    ("cluster.accelerator.memory_bandwidth=1TB/s", "accelerator memory bandwidth 2.039 TB/s -> 1 TB/s"),
])
def test_a_set_of_an_accelerator_peak_on_a_calibrated_overlay_takes_the_published_band(
        tmp_path: Path, cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    """The calibration's hardware named the accelerator only: a --set (or a derived spec) of its peak FLOP/s or its
    memory bandwidth keeps the name, so the band of a fit to 312 TFLOP/s stayed on a 600 TFLOP/s chip. The recorded
    hardware now holds the peaks and memory bandwidth the fitted factors scale (engine/calibrate_runs.scaled_job
    multiplies efficiencies, fractions of these)."""
    overlay = _calibrated_overlay(tmp_path)
    args = ("predict", "-c", str(overlay), "-m", "gpt-1.7b", "-n", "32", "--global-batch", "64", "--json")
    assert json.loads(cli(*args).out)["interval"]["source"] == "calibrated-leave-one-out"
    band = json.loads(cli(*args, "--set", item).out)["interval"]
    assert band["source"] == "published" and said in band["basis"], band["basis"]


def test_an_overlay_whose_hardware_has_no_peaks_is_still_read_and_checked_by_name(tmp_path: Path) -> None:
    """An overlay written before the peaks were recorded (hardware with accelerator, gpus_per_node and tiers only)
    still loads, keeps its band on its own hardware, and is checked on what it records."""
    overlay = _calibrated_overlay(tmp_path)
    doc = yaml.safe_load(overlay.read_text())
    for key in ("peak_flops", "memory_bandwidth"):
        doc["calibration"]["hardware"].pop(key, None)
    overlay.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = {"model": "gpt-1.7b", "gpus": 32, "global_batch": 64, "micro_batch": 1}
    assert api.predict(str(overlay), **run).interval["source"] == "calibrated-leave-one-out"


def test_a_mapping_without_kind_extending_a_spec_of_another_kind_is_refused(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """A mapping rarely states ``kind:`` (the argument or the scenario's key says it is a cluster): `{extends:
    model.yaml}` given as the API's cluster, or as a scenario's inline cluster, merged the model's fields and was
    refused as "cluster.layers: unknown key 'layers'", the message the kind check exists to replace."""
    model = tmp_path / "m.yaml"
    model.write_text("kind: transformer\nname: m\nlayers: 2\nhidden: 64\nheads: 2\nvocab: 100\nseq_len: 64\n")
    with pytest.raises(api.InputError, match="is a transformer spec, this mapping a cluster spec"):
        api.cluster_spec({"extends": str(model)})
    cluster = ROOT / "hardware/clusters/dgx-a100.yaml"  # a cluster file, by path (a name is a workload's)
    with pytest.raises(api.InputError, match="is a cluster spec, this mapping a transformer or generic spec"):
        api.workload_spec({"extends": str(cluster)})
    assert api.workload_spec({"extends": str(model), "layers": 4}).layers == 4  # the control: a workload base
    scenario = tmp_path / "s.yaml"
    scenario.write_text((ROOT / "examples/capacity/gpt3-175b-dgx-h100.yaml").read_text().replace(
        "\ncluster: dgx-h100\n", "\ncluster: {extends: m.yaml}\n"))
    got = cli("check", str(scenario))
    assert got.code == 2 and "'m.yaml' is a transformer spec, this mapping a cluster spec" in got.err, got.err
