"""Follow-ups of the last session (mend17), each a test that fails without its fix."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

SWEEP_MOE = """\
kind: sweep
models: [mixtral-8x7b, gpt-1.7b]
clusters: [dgx-h100]
gpus: [64]
strategies:
  - {tp: 2, pp: 2, ep: 8}
  - {label: mine, tp: 2, pp: 2, ep: 4}
  - {tp: 2, pp: 2}
training: {global_batch: 256}
"""


def test_sweep_row_names_the_sequence_parallel_it_priced(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An unlabelled strategy's row is named by what was priced: Mixtral at tp 2 under Megatron-Core's layer with
    sequence_parallel unset is priced with SP on (job.resolve_sequence_parallel), at ep 8 and at ep 1, so its name
    ends in -sp, as the name of the same strategy written with sequence_parallel: true does; the dense model at tp 2
    is priced SP off and keeps tp2-pp2 (its ep rows are refused). A label stays as written. Before: 'tp2-pp2-ep8'
    and 'tp2-pp2' beside a sequence_parallel column of true."""
    f = tmp_path / "moe.yaml"
    f.write_text(SWEEP_MOE)
    r = cli("sweep", str(f), "--json", "--workers", "1")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    rows = {(row["model"], row["strategy"]): row for row in doc["rows"]}
    moe = rows[("mixtral-8x7b", "tp2-pp2-ep8-sp")]
    assert moe["sequence_parallel"] is True and moe["status"] != "error"
    assert rows[("mixtral-8x7b", "mine")]["sequence_parallel"] is True
    # the point's notice is labelled with the name of what was priced
    assert any(w.startswith("sweep point 0 (mixtral-8x7b, dgx-h100, 64 GPUs, tp2-pp2-ep8-sp) (and 2 other points): "
                            "strategy.sequence_parallel is unset") for w in doc["warnings"])
    assert rows[("mixtral-8x7b", "tp2-pp2-sp")]["sequence_parallel"] is True
    dense = rows[("gpt-1.7b", "tp2-pp2")]
    assert dense["status"] != "error" and dense["sequence_parallel"] is False
    assert rows[("gpt-1.7b", "tp2-pp2-ep8")]["status"] == "error"  # not priced: named as written


def test_calibrate_runs_names_flat_fields_without_rewriting_the_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A run's warning names its flat field (attention_kernel, as the runs file writes it) because the warning names
    the field through notices.field_name, not because its text is rewritten afterwards: a generic workload named
    'lab/strategy.tp-net' stays so in the same line. Before, a regex over the line turned it into 'lab/tp-net'."""
    net = tmp_path / "net.yaml"
    net.write_text(yaml.safe_dump({"kind": "generic", "name": "lab/strategy.tp-net", "params": 25557032,
                                   "flops_per_sample": 8.2e9, "activation_bytes_per_sample": 1.43e8,
                                   "input_bytes_per_sample": 602112}))
    runs = tmp_path / "runs.yaml"
    run = {"cluster": "dgx-h100", "model": str(net), "micro_batch": 32}
    runs.write_text(yaml.safe_dump([
        {**run, "gpus": 8, "global_batch": 256, "step_time": 0.2, "attention_kernel": "fa2"},
        {**run, "gpus": 16, "global_batch": 512, "step_time": 0.21}]))
    r = cli("calibrate", "runs", str(runs))
    assert r.code == 0, r.err
    assert (f"{runs}: run 1 (line 1): attention_kernel = fa2 is not priced: lab/strategy.tp-net is a generic workload "
            "(no attention core)") in r.err
    # predict of the same settings names the field as a spec file nests it
    r = cli("predict", "-c", "dgx-h100", "-m", str(net), "--gpus", "8", "--global-batch", "256",
            "--micro-batch", "32", "--set", "training.attention_kernel=fa2")
    assert r.code == 0, r.err
    assert "training.attention_kernel = fa2 is not priced: lab/strategy.tp-net is a generic workload" in r.err
