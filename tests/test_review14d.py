"""Review of this session's last merges (fuzzfix, fuzz14b, the planner's exchange gate): input an expert writes
that was refused, and messages that named the wrong thing. Each case is one finding; the contract is
test_hostile_inputs.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

GPT = ["-c", "dgx-h100", "-m", "gpt-1.7b"]


# --- digits grouped by thousands ('1_024', YAML 1.1's and TOML's int) are the number, not a typo ---------------------

def test_thousands_grouping_in_a_strategy_file_is_the_number(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``global_batch: 1_024`` (PyYAML, which frameworks' YAML configs are written for, reads 1024) was refused as
    "digit grouping is not read" since the '8_0' fix; before it, and now, it is 1024. The reference is the same file
    with the digits written plainly."""
    grouped, plain = tmp_path / "g.yaml", tmp_path / "p.yaml"
    grouped.write_text("training:\n  global_batch: 1_024\n  seq_len: 2_048\nstrategy:\n  tp: 8\n")
    plain.write_text("training:\n  global_batch: 1024\n  seq_len: 2048\nstrategy:\n  tp: 8\n")
    got = accepted(cli, "predict", *GPT, "-n", "64", "--strategy", str(grouped))
    want = accepted(cli, "predict", *GPT, "-n", "64", "--strategy", str(plain))
    assert got["step_time_s"] == want["step_time_s"]
    assert got["inputs"]["training"]["global_batch"] == 1024 and got["inputs"]["seq_len"] == 2048


@pytest.mark.parametrize("grouped, plain", [
    (["-n", "1_024"], ["-n", "1024"]),
    (["-n", "64", "--set", "training.global_batch=2_048"], ["-n", "64", "--set", "training.global_batch=2048"]),
    (["-n", "64", "--global-batch", "4_096"], ["-n", "64", "--global-batch", "4096"]),
])
def test_thousands_grouping_on_the_command_line_is_the_number(cli, grouped, plain) -> None:  # type: ignore[no-untyped-def]
    assert accepted(cli, "predict", *GPT, *grouped)["step_time_s"] == accepted(cli, "predict", *GPT, *plain)[
        "step_time_s"]


def test_thousands_grouping_in_scale_and_plan(cli) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "scale", *GPT, "--gpus", "1_024,2_048")
    want = accepted(cli, "scale", *GPT, "--gpus", "1024,2048")
    assert [p["gpus"] for p in got["points"]] == [1024, 2048]
    assert [p["step_time_s"] for p in got["points"]] == [p["step_time_s"] for p in want["points"]]
    got = accepted(cli, "plan", *GPT, "-n", "64", "--top", "1", "--constraint", "dp<=1_024")
    want = accepted(cli, "plan", *GPT, "-n", "64", "--top", "1", "--constraint", "dp<=1024")
    assert got["ranked"][0]["step_time_s"] == want["ranked"][0]["step_time_s"]


@pytest.mark.parametrize("text", ["1_00", "10_24", "1__000", "1_000_", "_1000", "1000_000"])
def test_other_grouping_stays_refused(cli, text: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *GPT, "-n", text, "--json", match="'_' groups digits only by thousands")


# --- Megatron's flex-dispatcher SM flags: the unified flag overrides every per-backend one ------------------------

def test_unified_sm_flag_overrides_the_other_backends_flag_too(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--moe-flex-dispatcher-num-sms exists only in the Megatron-Core that deprecates both per-backend flags and routes
    either to it (TransformerConfig.__post_init__ @d98e8a64dd: "an explicit moe_flex_dispatcher_num_sms takes
    precedence"), whatever the backend: --moe-hybridep-num-sms under deepep is overridden by it there, not "the
    hybridep backend's" count. It was named as the other backend's."""
    from test_hostile_inputs_round14c import MOE, _launch
    f = _launch(tmp_path, "--moe-flex-dispatcher-num-sms 40 --moe-hybridep-num-sms 24 --moe-deepep-num-sms 20")
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "--moe-hybridep-num-sms 24 (--moe-flex-dispatcher-num-sms takes precedence)" in r.err
    assert "--moe-deepep-num-sms 20 (--moe-flex-dispatcher-num-sms takes precedence)" in r.err
    assert "sizes the hybridep backend" not in r.err
    assert json.loads(r.out)["strategy"]["ep_dispatch_sms"] == 40
    # without the unified flag the deprecated one is routed to it for any backend (d98e8a64dd, not 002255075c's
    # per-backend reading): the hybridep count sizes the deepep dispatcher
    g = _launch(tmp_path, "--moe-hybridep-num-sms 24")
    r = cli("predict", *MOE, "--strategy", str(g), "--json")
    assert r.code == 0 and json.loads(r.out)["strategy"]["ep_dispatch_sms"] == 24, r.err


# --- the planner's gate on the CP exchange and the MoE dispatch ------------------------------------------------------

def test_allow_all_opens_every_allow_name_and_a_constraint_opens_its_axis() -> None:
    """``--allow all`` searches what every other name opens (the exchanges and the dispatch included: the same
    configurations as naming them all); ``--constraint cp_comm_type!=all_gather`` opens the exchange axis without
    --allow, all_gather left out."""
    from grid_helpers import TINY_MOE

    from scalemodel.engine import planner
    from scalemodel.engine.job import build_job
    from scalemodel.specs import TrainingSpec, load_cluster
    from scalemodel.specs.constraints import normalize_constraints

    names = [n for n in planner.ALLOW if n != "all"]
    assert set(planner.ALLOW["all"]) == {k for n in names for k in planner.ALLOW[n]}
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, TrainingSpec(global_batch=32, seq_len=8192))
    c = normalize_constraints({"micro_batch": 1})
    every = planner.configurations(job, 16, 32, c, frozenset(planner.ALLOW["all"]))
    # offload35: --allow offload opens the states' host offload column too (the cluster gives host_bandwidth);
    # etp39: --allow expert-tp the MoE model's etp column
    named = planner.configurations(job, 16, 32, c, frozenset(k for n in ("cp-exchanges", "moe-dispatch", "offload",
                                                                         "expert-tp") for k in planner.ALLOW[n]))
    assert all(np.array_equal(every[k], named[k]) for k in named) and every.keys() == named.keys()
    assert {0, 1, 2} <= set(every["cp_comm_type"][every["cp"] > 1].tolist())  # p2p, all_gather, a2a
    cons = planner.configurations(job, 16, 32, normalize_constraints({"micro_batch": 1,
                                                                     "cp_comm_type": ("!=", "all_gather")}))
    kinds = set(cons["cp_comm_type"][cons["cp"] > 1].tolist())
    assert 1 not in kinds and {0, 2} <= kinds  # opened by the constraint: a2a searched, all_gather not


# --- scale: a derived global batch past the bound names --micro-batch -------------------------------------------------

def test_scale_derived_batch_past_the_bound_names_the_micro_batch(cli) -> None:  # type: ignore[no-untyped-def]
    """No --global-batch: the batch is dp x --micro-batch (64 x 1e7 at 64 GPUs, 1.28e9 at 128 in weak scaling); it
    was refused at '--global-batch', an option never given."""
    refused(cli, "scale", *GPT, "--gpus", "64,128", "--micro-batch", "10000000", "--json",
            match="error: --micro-batch: the global batch at 128 GPUs would be 1,280,000,000 sequences")
    refused(cli, "scale", *GPT, "--gpus", "64,128", "--global-batch", "640000000", "--json",
            match="error: --global-batch: the global batch at 128 GPUs would be 1,280,000,000 sequences")


# --- sweep: a fixed point's derived global batch past the bound is an error row, as predict refuses it ---------------

@pytest.mark.parametrize("micro, status", [(100_000_000, "error"), (10**9 // 64, "infeasible")])
def test_sweep_refuses_a_derived_batch_predict_refuses(cli, tmp_path, micro: int, status: str) -> None:  # type: ignore[no-untyped-def]
    """``training: {micro_batch: 100000000}`` at 64 GPUs (dp 64): 6.4e9 sequences a step, which ``predict
    --micro-batch 100000000 -n 64`` refuses; the sweep priced it (a 1221-hour step). At the cap (dp x micro-batch =
    1e9) it is priced (out of memory), as predict prices it."""
    f = tmp_path / "sw.yaml"
    f.write_text("kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [64]\n"
                 f"strategies:\n  - {{label: a, tp: 1}}\ntraining: {{micro_batch: {micro}}}\n")
    row = accepted(cli, "sweep", str(f))["rows"][0]
    assert row["status"] == status, row["message"]
    if status == "error":
        assert row["message"].startswith(f"{f}: training.micro_batch: micro-batch 100,000,000 x dp 64 = "
                                         "6,400,000,000 sequences per step")
        r = cli("predict", *GPT, "-n", "64", "--micro-batch", str(micro), "--json")
        assert r.code == 2


def test_calibrate_runs_refuses_a_derived_batch_predict_refuses(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A run with ``micro_batch: 100000000`` and no global_batch at 64 GPUs was priced at 6.4e9 sequences a step and
    fitted against; predict refuses that job."""
    f = tmp_path / "runs.yaml"
    f.write_text("- {cluster: dgx-h100, model: gpt-1.7b, gpus: 64, micro_batch: 100000000, step_time: 1000 s}\n"
                 "- {cluster: dgx-h100, model: gpt-1.7b, gpus: 64, micro_batch: 1, step_time: 1 s}\n")
    refused(cli, "calibrate", "runs", str(f), "--json", inputs=(f,),
            match=f"error: {f}: run 1 (line 1): micro_batch: micro-batch 100,000,000 x dp 64 = 6,400,000,000 "
                  "sequences per step")


def test_sweep_row_names_the_files_training_field(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A refusal of the sweep's shared training (a cuDNN release the accelerator holds no curve for) named
    'training.cudnn_release' without the file, where predict names --set / the --strategy file and the sweep's own
    row errors name the file (sweep.yaml: gpus[0], strategies[0].tp)."""
    f = tmp_path / "sw.yaml"
    f.write_text("kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [64]\n"
                 "strategies:\n  - {label: a, tp: 1}\n  - best\n"
                 "training: {cudnn_release: '9.99', attention_kernel: cudnn}\n")
    rows = accepted(cli, "sweep", str(f))["rows"]
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all(r["message"].startswith(f"{f}: training.cudnn_release: no attention curve for cuDNN 9.99")
               for r in rows), rows


def test_scale_and_check_name_the_scenarios_micro_batch(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A scenario's micro_batch (no global batch) grown past the bound in weak scaling: scale --scenario named
    '--global-batch' (then '--micro-batch'), options never given, and check named the file's training.global_batch,
    a field it does not hold."""
    f = tmp_path / "cap.yaml"
    f.write_text("kind: scenario\nname: x\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [64, 128]\nmode: weak\n"
                 "training:\n  micro_batch: 10000000\nassertions:\n  max_step_time: 5s\n")
    tail = ": training.micro_batch: the global batch at 128 GPUs would be 1,280,000,000 sequences"
    refused(cli, "scale", "--scenario", str(f), "--json", inputs=(f,), match=f"error: --scenario: {f}{tail}")
    refused(cli, "check", str(f), "--json", inputs=(f,), match=f"error: {f}{tail}")
    refused(cli, "scale", *GPT, "--gpus", "64,128", "--set", "training.micro_batch=10000000", "--json",
            match="error: --set training.micro_batch: the global batch at 128 GPUs")


@pytest.mark.parametrize("args, match", [
    (["-n", "auto_x"], "argument -n/--gpus: 'auto_x' is not an integer; see"),
    (["-n", "64", "--set", "training.micro_batch=auto_x"],
     "error: --set training.micro_batch: Input should be a valid integer, unable to parse string as an integer (got "
     "'auto_x')"),
])
def test_a_word_with_an_underscore_is_not_a_grouping(cli, args: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """A word is refused as not a number, not told to 'write autox' as if it were grouped digits."""
    refused(cli, "predict", *GPT, *args, "--json", match=match)
