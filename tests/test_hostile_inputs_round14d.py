"""Hostile-input round 14d: the gaps round 14b found but left out (an empty plan under a sliding window and context
parallelism, an empty --set path segment, the origin of an fp8 refusal, the sweep file on per-point errors, and
hardware validate of a scenario running check's cross-checks).

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

WINDOW = ["-c", "dgx-h100", "-m", "mistral-7b", "-n", "64"]  # mistral-7b: sliding-window attention


# --- an empty plan under a sliding window and cp >= 2 says why and what to do ------------------------------------
# "plan --constraint cp>=2" on a sliding-window model searched only the p2p exchange (the default; the others need
# --allow cp-exchanges), which Transformer Engine refuses under a window: the plan was empty and said only
# "No feasible strategy among N candidates (cp_window_unsupported: N)".

_HINT = "add --allow cp-exchanges, or --constraint cp_comm_type=a2a"


@pytest.mark.parametrize("pin", [["--constraint", "cp>=2"], ["--set", "strategy.cp=2"]])
def test_an_empty_plan_under_a_window_names_the_way_out(cli, pin: list[str]) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "plan", *WINDOW, *pin)
    assert got["ranked"] == [] and "cp_window_unsupported" in got["infeasible_by_reason"], got["why"]
    assert "sliding-window attention is refused on the p2p ring" in got["why"] and _HINT in got["why"], got["why"]
    r = cli("plan", *WINDOW, *pin)
    assert r.code == 0 and "--allow cp-exchanges" in r.out.replace("\n", " "), r.out[-600:]


def test_the_window_hint_is_not_given_once_the_exchanges_are_searched(cli) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "plan", *WINDOW, "--constraint", "cp>=2", "--constraint", "cp_comm_type=p2p")
    assert got["ranked"] == [] and _HINT not in got["why"], got["why"]


# --- an empty part of a --set path is refused ------------------------------------------------------------------
# "--set training..precision=fp8" dropped the empty part and set training.precision; "--set a..b=1" on check's
# scenario was refused as the unknown key 'a', not for the empty part; "--set training.global_batch.=64" was taken.

_EMPTY_PART = "the path has an empty part (two dots in a row, or a dot at its start or end)"
CAPACITY = str(__import__("pathlib").Path(__file__).resolve().parent.parent / "examples" / "capacity" /
               "gpt3-175b-dgx-h100.yaml")


@pytest.mark.parametrize("item", ["training..precision=fp8", "strategy.tp.=2", "model..layers=2",
                                  "cluster..price_per_gpu_hour=1", "training. .precision=fp8"])
@pytest.mark.parametrize("command", ["predict", "plan"])
def test_an_empty_set_path_part_is_refused(cli, item: str, command: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, command, "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", item,
            match=f"error: --set {item.split('=')[0]}: {_EMPTY_PART}")


@pytest.mark.parametrize("item", ["a..b=1", "training..global_batch=64", ".training.global_batch=64",
                                  "training.global_batch.=64"])
def test_an_empty_set_path_part_is_refused_on_a_scenario(cli, item: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "check", CAPACITY, "--set", item, match=f"error: --set {item.split('=')[0]}: {_EMPTY_PART}")


# --- a precision the accelerator has no peak for names where it was written ------------------------------------
# fp8 on an A100 was "error: precision: accelerator 'a100-sxm-80g' has no fp8 peak" whether the user wrote
# --precision, --set training.precision, a --strategy file or a scenario (check too): only fp4's peak was checked
# where the setting's origin is known.

_NO_FP8 = "accelerator 'a100-sxm-80g' has no fp8 peak; one of: fp64, fp32, tf32, bf16, fp16"
A100 = ["-c", "dgx-a100", "-m", "gpt-1.7b", "-n", "8"]


@pytest.mark.parametrize("how, where", [(["--precision", "fp8"], "--precision"),
                                        (["--set", "training.precision=fp8"], "--set training.precision")])
@pytest.mark.parametrize("command", ["predict", "plan", "memory", "scale", "sensitivity"])
def test_fp8_off_an_fp8_peak_names_the_option(cli, command: str, how: list[str], where: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, command, *A100, *how, match=f"error: {where}: {_NO_FP8}")


def test_fp8_off_an_fp8_peak_names_the_strategy_file(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: strategy\ntraining:\n  precision: fp8\n")
    refused(cli, "predict", *A100, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: training.precision: {_NO_FP8}")


_SCENARIO = ("kind: scenario\nname: s\ncluster: {cluster}\nmodel: gpt-1.7b\ngpus: [8]\n"
             "training: {{global_batch: 8, {training}}}\nassertions: {{max_step_time: 100s}}\n")


def test_fp8_off_an_fp8_peak_names_the_scenario(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "scen.yaml"
    f.write_text(_SCENARIO.format(cluster="dgx-a100", training="precision: fp8"))
    refused(cli, "scale", "--scenario", str(f), inputs=(f,),
            match=f"error: --scenario: {f}: training.precision: {_NO_FP8}")
    refused(cli, "check", str(f), inputs=(f,), match=f"error: {f}: training.precision: {_NO_FP8}")
    refused(cli, "check", str(f), "--set", "training.precision=fp8",
            match=f"error: --set training.precision: {_NO_FP8}")


# --- hardware validate of a scenario runs check's cross-checks --------------------------------------------------
# A scenario with a cuDNN release the accelerator does not hold, a module_precision module the model lacks or fp4
# on an H100 was "ok: ... is a valid scenario spec" to hardware validate (the schema only), and refused by check.

@pytest.mark.parametrize("cluster, training, where, what", [
    ("dgx-b200", "cudnn_release: '9.9'", "training.cudnn_release", "no attention curve for cuDNN 9.9 on b200"),
    ("dgx-b200", "precision: fp8, module_precision: {moe_latent: bf16}", "training.module_precision.moe_latent",
     "the model has no LatentMoE (moe.latent_size not set)"),
    ("dgx-h100", "precision: fp4", "training.precision", "precision fp4 (NVFP4) needs Blackwell tensor cores"),
    ("dgx-a100", "precision: fp8", "training.precision", _NO_FP8),
])
def test_hardware_validate_of_a_scenario_refuses_what_check_refuses(cli, tmp_path, cluster: str, training: str,  # type: ignore[no-untyped-def]
                                                                    where: str, what: str) -> None:
    f = tmp_path / "scen.yaml"
    f.write_text(_SCENARIO.format(cluster=cluster, training=training))
    line = refused(cli, "hardware", "validate", str(f), inputs=(f,), match=f"error: {f}: {where}: {what}")
    assert refused(cli, "check", str(f), inputs=(f,)) == line


def test_hardware_validate_names_the_set_item_of_a_scenario(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "scen.yaml"
    f.write_text(_SCENARIO.format(cluster="dgx-h100", training="precision: bf16"))
    refused(cli, "hardware", "validate", str(f), "--set", "training.precision=fp4", inputs=(f,),
            match="error: --set training.precision: precision fp4 (NVFP4) needs Blackwell tensor cores")
    assert accepted(cli, "hardware", "validate", str(f))["kind"] == "scenario"


# --- a sweep point's error names the sweep file ----------------------------------------------------------------
# "point 0 (gpt-1.7b, dgx-a100, 8 GPUs, best): precision: accelerator 'a100-sxm-80g' has no fp8 peak" and "best: no
# feasible strategy among ...": neither named the sweep file nor the field in it (a fixed strategy's field and a GPU
# count did).

_SWEEP = "kind: sweep\nname: t\nmodels: [{model}]\nclusters: [dgx-a100]\ngpus: [8]\nstrategies:\n  - best\n" \
         "  - {{label: mine, tp: 1}}\ntraining: {{global_batch: 8, precision: {precision}}}\n"


@pytest.mark.parametrize("model, precision, where, what", [
    ("gpt-1.7b", "fp8", ["training.precision", "training.precision"], _NO_FP8),
    ("gpt3-175b", "bf16", ["strategies[0]", None], "no feasible strategy among"),
])
def test_a_sweep_point_error_names_the_sweep_file(cli, tmp_path, model: str, precision: str,  # type: ignore[no-untyped-def]
                                                  where: list[str | None], what: str) -> None:
    f = tmp_path / "sw.yaml"
    f.write_text(_SWEEP.format(model=model, precision=precision))
    rows = accepted(cli, "sweep", str(f))["rows"]
    for row, field in zip(rows, where, strict=True):
        if field is not None:
            assert row["status"] == "error" and row["message"].startswith(f"{f}: {field}: {what}"), row["message"]
    r = cli("sweep", str(f))
    text = "".join(r.out.split())  # the table's line, wrapped anywhere in a long path
    line = f"point 0 ({model}, dgx-a100, 8 GPUs, best): {f}: {where[0]}: {what}"
    assert r.code == 0 and "".join(line.split()) in text, r.out[-800:]
