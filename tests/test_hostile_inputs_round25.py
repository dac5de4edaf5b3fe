"""Hostile-input round 25: the fields and options of round 24 (clock_jitter_cv, stage_layers / first_last_stage_layers
/ chunk layers, learned position tables against sequence overrides, MTP fields, FP8 recipe aliases, loss_impl, EP /
ETP with experts they do not divide), calibrate with hostile run logs, check and sensitivity with contradictory
budgets, plan with spaces empty after constraints, scale --set spellings, output paths, and the Python API with NumPy
values and spec copies.

Each case is one finding of a corpus of 1192 cases run one process per case (timeout and memory cap, sequentially on
one core, under /tmp); the CLI contract is test_hostile_inputs.py's, the API's docs/api.md's (bad values raise
InputError naming the argument, not the command line's option).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import LOG, MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

import scalemodel
from scalemodel.errors import InputError

# --- the API named the command line's options ---------------------------------------------------------------------
# predict(ep=3) on Mixtral was refused as "--ep: --ep 3 x etp 1 needs ...", predict(tp=3) on 16 GPUs with "or change
# --tp/--pp/--cp", predict(dp=3) with "leave --dp out": options a Python caller never wrote (docs/api.md: "naming the
# field or argument (straggler_cv: ..., not the command line's --straggler-cv)").


@pytest.mark.parametrize("call, starts, absent", [
    (lambda: scalemodel.predict("dgx-h100", "mixtral-8x7b", 64, ep=3),
     "ep: ep 3 x etp 1 needs an MoE model whose 8 experts ep divides", "--ep"),
    (lambda: scalemodel.memory("dgx-h100", "mixtral-8x7b", 64, ep=16),
     "ep: ep 16 x etp 1 needs an MoE model whose 8 experts ep divides", "--ep"),
    (lambda: scalemodel.predict("dgx-h100", "mixtral-8x7b", 64, ep=2, etp=3),
     "ep / strategy.etp: ep 2 x etp 3 needs", "--ep"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 16, tp=3),
     "gpus: 16 GPUs is not a multiple of tp x pp x cp = 3 x 1 x 1 = 3; a multiple of 3, or change tp/pp/cp", "--tp"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 16, dp=3),
     "dp: dp x tp x pp x cp = 3 but gpus is 16; dp = gpus / (tp pp cp), or leave dp out to derive it", "--dp"),
], ids=["ep", "memory-ep", "ep-etp", "tp", "dp"])
def test_api_refusals_name_the_keyword_argument(call, starts: str, absent: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        call()
    assert str(exc.value).startswith(starts), str(exc.value)
    assert absent not in str(exc.value) and "; " in str(exc.value), str(exc.value)


def test_the_cli_still_names_its_options(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--ep", "3",
            match="error: --ep: --ep 3 x etp 1 needs an MoE model whose 8 experts ep divides")


# --- Megatron-LM's --fp8-recipe outside its choices ----------------------------------------------------------------
# "--fp8-recipe current" (the spec's alias of tensorwise, not a Megatron word) was priced as delayed scaling with a
# warning; Megatron-LM refuses it (TransformerConfig.fp8_recipe: Literal['tensorwise', 'delayed', 'mxfp8',
# 'blockwise', 'custom'], argparse's choices generated from it). custom stays read and not priced (test_fp8_casts).

@pytest.mark.parametrize("flags, value", [("--fp8-format hybrid --fp8-recipe current", "current"),
                                          ("--fp8-format e4m3 --fp8-recipe Delayed", "Delayed"),
                                          ("--fp8-format hybrid --fp8-recipe fp8-cs", "fp8-cs"),
                                          ("--fp8-recipe rowwise", "rowwise")])
def test_megatron_fp8_recipe_outside_its_choices_is_refused(cli, tmp_path: Path, flags: str, value: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *MEG_BASE, "--strategy", str(f), inputs=(f,),
            match=f"--fp8-recipe: unknown fp8 recipe: {value!r}; tensorwise, delayed, mxfp8, blockwise or custom "
                  "(Megatron-LM's choices)")


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed"])
def test_megatron_fp8_recipe_within_its_choices_still_reads(cli, tmp_path: Path, recipe: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, f"--fp8-format hybrid --fp8-recipe {recipe}")
    doc = accepted(cli, "predict", *MEG_BASE, "--strategy", str(f))
    assert doc["inputs"]["strategy_file"]["training"]["fp8_recipe"] == recipe


# --- an output file's name on the "wrote" line ----------------------------------------------------------------------
# calibrate --out, sweep --out and scale --plot printed the name through rich's markup: "[red]r.yaml" was said as
# "wrote r.yaml" (the file written is "[red]r.yaml"), and a name with a line break printed on two lines.

@pytest.mark.parametrize("name, shown", [("[red]r.yaml", "[red]r.yaml"), ("a\nb.yaml", "a\\nb.yaml")])
def test_calibrate_says_the_overlay_it_wrote_as_named(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      name: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    r = cli("calibrate", str(LOG), "-c", "dgx-h100", "--force", "--out", name)
    assert r.code == 0, r.err
    assert (tmp_path / name).is_file()
    assert r.out.splitlines()[-1] == f"wrote {shown} (use it as --cluster {shown})", r.out[-300:]


def test_sweep_and_plot_say_the_files_they_wrote_as_named(cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "s.yaml"
    sweep.write_text("kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                     "strategies: [{tp: 1, label: a}]\n")
    r = cli("sweep", str(sweep), "--out", "[red]o\n.csv")
    assert r.code == 0 and r.out.splitlines()[-1] == "wrote [red]o\\n.csv", (r.err, r.out[-300:])
    r = cli("scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8,16", "--plot", "[b]p.svg")
    assert r.code == 0 and r.out.splitlines()[-1] == "plot written to [b]p.svg", (r.err, r.out[-300:])
    assert (tmp_path / "[red]o\n.csv").is_file() and (tmp_path / "[b]p.svg").is_file()


# --- a training log's negative speeds -------------------------------------------------------------------------------
# "elapsed time per iteration (ms): -1500.0" (and torchtitan's "tps: -5000") did not match the speed's number (no sign
# in it): a log of nothing but speed lines was refused as "no iteration-speed line found". The sign is read and the
# value refused as the zero and nan speeds are.

MEGATRON_LINE = " iteration {i}/ 1000 | consumed samples: 64 | elapsed time per iteration (ms): {t} |\n"


@pytest.mark.parametrize("line, said", [
    (MEGATRON_LINE, "line 1: '-1500.0' is not a positive finite step_time_s; a log of iterations that ran (no "
                    "negative, nan or zero speeds)"),
    ("[titan] step: {i}  loss:  2.0  tps: {t}  mfu: 30%\n", "line 1: '-1500.0' is not a positive finite "
                                                            "tokens_per_s_per_gpu; "),
], ids=["megatron", "torchtitan"])
def test_a_training_log_with_negative_speeds_says_so(cli, tmp_path: Path, line: str, said: str) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "l.log"
    log.write_text("".join(line.format(i=i, t="-1500.0") for i in range(1, 30)))
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"- name: r1\n  cluster: dgx-h100\n  model: gpt-1.7b\n  gpus: 16\n  global_batch: 64\n"
                    f"  log: {log}\n")
    refused(cli, "calibrate", "runs", str(runs), "--factors", "overhead_s", inputs=(runs, log),
            match=f"log: {log}: {said}")
