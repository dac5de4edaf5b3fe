"""Hostile-input corpus of round 39 (fuzz39): what session 38 added to plan's pins and the launch readers.

Run from the project root: ``python scripts/fuzz39.py [--only SECTION] [--list] [--text] [--verbose]``. Each case
runs the CLI in process through scripts/fuzz36.py's harness and its one reporting driver (``drive``: 20 s CPU /
300 s wall alarm; exit 0, 1 or 2 only; no traceback; on exit 2 one ``error:`` line and nothing on stdout; ``--json``
parsed with ``parse_constant`` raising and no non-finite float; no ``nan`` / ``inf`` word in a table; no input
file changed); besides, an error line cut at 300 characters, a case over 20 s of wall clock or 1 GiB of new peak
memory is a finding. Findings are printed one a line; the last line counts the cases and the findings.

Sections: eqpins (every --constraint key pinned with ``=`` to values outside its kind: 0, negatives, past int64,
words, empty), switches (plan's PIPELINE_SWITCHES, RECOMPUTE_SWITCHES and job.PIN_CHECKS pins beside constraints and
files that contradict them), stages (stage_layers beside first/last stage and chunk layers, through predict, plan, a
strategy file and a Megatron-LM launch), nanloss (strategy.check_for_nan_in_loss over every command and file kind),
launch (Megatron-LM launch lines and DeepSpeed configs whose flags contradict one another), cmds (scale,
sensitivity and check over odd GPU lists, factors, scenario files and runs-like inputs).

Round 39: 1,482 cases (eqpins 700, switches 305, launch 146, stages 138, nanloss 109, cmds 84), 0 tracebacks, hangs,
invalid JSON or non-finite numbers. Findings (fixed; tests/test_fuzz39.py): a 300-count --gpus list that does not
rise and a 300-character boolean value cut their errors at 300 characters before the allowed (cmds, nanloss);
'=' pins bucket=1.5 / bucket=1KB ranked plans predict refuses, memory=60GB searched for exactly 60 GB (eqpins).
Beside them, by hand from the brief: first_stage_layers 33 of 32 with pp searched (plan and scale --best), the
recompute_modules + recompute_layers pair, scale --gpus past 1e8. After the fixes cmds and nanloss ran again with no
finding but three calibrate runs cases over 20 s of wall clock at load 9-12 on two cores (one rerun alone: 2.4 s of
CPU, 8 s of wall clock): the machine's, not the cases'. Left as found (no finding of the harness): every
'--no-*' Megatron-LM flag is read as harmless, so '--no-overlap-grad-reduce' (no such Megatron flag) after
'--overlap-grad-reduce' leaves overlap on without a word. Found by hand beside the corpus and fixed: scale --best
with recompute_modules pinned and recompute searched was refused "add recompute: selective" where plan validates it at
selective (commands/plan._build_specs).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from fuzz36 import DENSE, MOE, TOP, Case, _write, drive, judge_cut, judge_wall_rss  # noqa: E402

#: every constraint key plan reads (specs.constraints), with values outside its kind
KEYS = ["dp", "tp", "pp", "cp", "ep", "micro_batch", "virtual_stages", "cp_a2a_size", "zero", "recompute", "schedule",
        "sequence_parallel", "algorithm", "sync", "memory", "overlap", "compression", "dp_comm", "assignment",
        "bucket", "layout", "cp_comm_type", "moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend"]
ODD = ["0", "-1", "-0", "1.5", "1e9", str(2**63), str(2**70), "x", "", "nan", "inf", "true", "null", "[]",
       "\u0662", "1_000", "2**4", "1 GB", "-1 GB", "ps:0", "interleaved:0", "local:-1", "topk:2", "tp-tp-dp"]
LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16 "


def sec_eqpins(tmp: Path) -> Iterator[Case]:
    for key in KEYS:
        base = MOE if key.startswith("moe") or key == "ep" else DENSE
        for v in ODD:
            yield f"eqpins.{key}", ["plan", *base, "--constraint", f"{key}={v}", *TOP], ()
        for op in ("==", "!=", "<=", ">="):
            yield f"eqpins.{key}.op", ["plan", *base, "--constraint", f"{key}{op}{2**70}", *TOP], ()


def sec_switches(tmp: Path) -> Iterator[Case]:
    rec = [("recompute_layers", "4"), ("recompute_layers", "0"), ("recompute_layers", "33"),
           ("recompute_method", "uniform"), ("recompute_method", "block"), ("recompute_modules", "core_attn"),
           ("recompute_modules", "titan_op"), ("recompute_modules", "moe_act"), ("recompute_modules", "")]
    cons = [[], ["--constraint", "recompute=none"], ["--constraint", "recompute=full"],
            ["--constraint", "recompute=selective"], ["--constraint", "recompute!=full"],
            ["--set", "strategy.recompute=selective"], ["--set", "strategy.recompute=full"]]
    for field, v in rec:
        for c in cons:
            for base in (DENSE, MOE):
                yield "switches.rec", ["plan", *base, "--set", f"strategy.{field}={v}", *c, *TOP], ()
    for (f1, v1), (f2, v2) in ((rec[0], rec[5]), (rec[3], rec[5]), (rec[0], rec[3]), (rec[1], rec[6])):
        yield "switches.rec2", ["plan", *DENSE, "--set", f"strategy.{f1}={v1}", "--set", f"strategy.{f2}={v2}",
                                *TOP], ()
        f = _write(tmp, f"rec_{f1}_{f2}.yaml", f"kind: strategy\n{f1}: {v1}\n{f2}: {v2}\n")
        yield "switches.rec2.file", ["plan", *DENSE, "--strategy", str(f), *TOP], (f,)
    pipe = [("first_stage_layers", v) for v in ("0", "1", "16", "31", "32", "33", "1000000000")] + [
        ("last_stage_layers", v) for v in ("0", "31", "32")] + [
        ("first_chunk_layers", v) for v in ("0", "29", "30", "31")] + [("defer_embedding_wgrad", "true")]
    pp = [[], ["--constraint", "pp=1"], ["--constraint", "pp<=2"], ["--constraint", "pp=4"], ["--set", "strategy.pp=4"],
          ["--constraint", "schedule=1f1b"], ["--constraint", "virtual_stages=4"], ["-n", "2"], ["-n", "1"],
          ["--set", "strategy.schedule=interleaved:4", "--set", "strategy.pp=2"]]
    for field, v in pipe:
        for c in pp:
            args = [*DENSE, *c] if c[:1] != ["-n"] else [*DENSE[:4], *c]
            yield "switches.pipe", ["plan", *args, "--set", f"strategy.{field}={v}", *TOP], ()
    for mods in ("titan_op", "jax_qkvo", "jax_qkv", "jax_qkvo,moe", "jax_qkvo,jax_qkv"):
        for base in (DENSE, MOE, ["-m", "deepseek-v3", "-c", "gb200-nvl72", "-n", "256"]):
            yield "switches.pin_checks", ["plan", *base, "--set", f"strategy.recompute_modules={mods}", *TOP], ()
    for n in ("1", "4", "1000000000"):
        for cl in ("dgx-h100", "tpu-v5p-pod"):
            yield "switches.offload", ["plan", "-m", "llama3-8b", "-c", cl, "-n", "16",
                                       "--set", f"strategy.offload_layers={n}", *TOP], ()


def sec_stages(tmp: Path) -> Iterator[Case]:
    forms = [["--set", "strategy.stage_layers=[8, 8, 8, 8]", "--set", "strategy.first_stage_layers=8"],
             ["--set", "strategy.stage_layers=[16, 16]", "--set", "strategy.last_chunk_layers=4"],
             ["--set", "strategy.first_stage_layers=4", "--set", "strategy.last_chunk_layers=4"],
             ["--set", "strategy.stage_layers=[0, 32]"], ["--set", "strategy.stage_layers=[32, 0]"],
             ["--set", "strategy.first_stage_layers=0", "--set", "strategy.last_stage_layers=0"],
             ["--set", "strategy.first_stage_layers=0", "--set", "strategy.last_stage_layers=32"],
             ["--set", "strategy.first_chunk_layers=0", "--set", "strategy.last_chunk_layers=0"],
             ["--set", "strategy.stage_layers=[4, 4, 4, 4, 4, 4, 4, 4]", "--set", "strategy.schedule=interleaved:2"],
             ["--set", "strategy.stage_layers=[4, 4, 4, 4, 4, 4, 4, 4]", "--set", "strategy.schedule=interleaved:4"]]
    pps = [["--pp", "2"], ["--pp", "4"], ["--pp", "4", "--schedule", "interleaved:2"], []]
    for form in forms:
        for pp in pps:
            for cmd in ("predict", "memory"):
                yield "stages.predict", [cmd, *DENSE, *pp, *form, "--json"], ()
        yield "stages.plan", ["plan", *DENSE, *form, *TOP], ()
        yield "stages.scale", ["scale", *DENSE[:4], "--gpus", "8,16", "--pp", "2", *form, "--json"], ()
    files = ["stage_layers: [8, 8, 8, 8]\nfirst_stage_layers: 8\n", "pp: 2\nstage_layers: [33, -1]\n",
             "pp: 2\nfirst_stage_layers: 16\nlast_stage_layers: 16\nstage_layers: [16, 16]\n",
             "pp: 4\nschedule: interleaved:2\nfirst_chunk_layers: 2\nlast_chunk_layers: 2\n",
             "pp: 4\nschedule: 1f1b\nfirst_chunk_layers: 2\n", "pp: 1\nfirst_stage_layers: 0\n"]
    for i, body in enumerate(files):
        f = _write(tmp, f"stages{i}.yaml", "kind: strategy\n" + body)
        for cmd in (["predict", *DENSE], ["plan", *DENSE, "--top", "2"], ["memory", *DENSE]):
            yield "stages.file", [*cmd, "--strategy", str(f), "--json"], (f,)
    flags = ["--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 5 "
             "--decoder-last-pipeline-num-layers 5",
             "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 0",
             "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 40",
             "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*16|t*16L' "
             "--decoder-first-pipeline-num-layers 16",
             "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*15|t*16L'",
             "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*16|t*16L' "
             "--num-layers-per-virtual-pipeline-stage 4",
             "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 3",
             "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
             "--num-layers-per-virtual-pipeline-stage 4",
             "--pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
             "--decoder-first-pipeline-num-layers 7",
             "--pipeline-model-parallel-size 4 --account-for-loss-in-pipeline-split "
             "--num-virtual-stages-per-pipeline-rank 2"]
    for i, fl in enumerate(flags):
        f = _write(tmp, f"stmeg{i}.sh", LAUNCH + fl + "\n")
        for cmd in (["predict", *DENSE[:4], "-n", "64"], ["plan", *DENSE[:4], "-n", "64", "--top", "2"]):
            yield "stages.megatron", [*cmd, "--strategy", str(f), "--json"], (f,)


def sec_nanloss(tmp: Path) -> Iterator[Case]:
    vals = ["true", "false", "yes", "1", "0", "2", "null", "[]", "'true'", ".nan", "x" * 300]
    for v in vals:
        for extra in ([], ["--pp", "4"], ["--pp", "4", "--schedule", "interleaved:2"], ["--zero", "3"]):
            yield "nanloss.predict", ["predict", *DENSE, *extra, "--set", f"strategy.check_for_nan_in_loss={v}",
                                      "--json"], ()
        yield "nanloss.plan", ["plan", *DENSE, "--set", f"strategy.check_for_nan_in_loss={v}", *TOP], ()
        yield "nanloss.scale", ["scale", *DENSE[:4], "--gpus", "8,16", "--set",
                                f"strategy.check_for_nan_in_loss={v}", "--json"], ()
        yield "nanloss.sens", ["sensitivity", *DENSE, "--set", f"strategy.check_for_nan_in_loss={v}", "--json"], ()
        f = _write(tmp, f"nl{abs(hash(v))}.yaml", f"kind: strategy\ncheck_for_nan_in_loss: {v}\n")
        yield "nanloss.file", ["predict", *DENSE, "--strategy", str(f), "--json"], (f,)
        runs = _write(tmp, f"nlr{abs(hash(v))}.yaml", "".join(
            f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, check_for_nan_in_loss: {v}, step_time: {t}}}\n"
            for g, t in ((8, "4 s"), (16, "2.1 s"), (32, "1.1 s"))))
        yield "nanloss.runs", ["calibrate", "runs", str(runs), "--json"], (runs,)
    for fl in ("--no-check-for-nan-in-loss-and-grad", "--check-for-nan-in-loss-and-grad",
               "--no-check-for-nan-in-loss-and-grad --check-for-nan-in-loss-and-grad",
               "--check-for-nan-in-loss-and-grad=false", "--no-check-for-nan-in-loss-and-grad 1"):
        f = _write(tmp, f"nlm{abs(hash(fl))}.sh", LAUNCH + "--pipeline-model-parallel-size 2 " + fl + "\n")
        yield "nanloss.megatron", ["predict", *DENSE[:4], "-n", "64", "--strategy", str(f), "--set",
                                   "strategy.check_for_nan_in_loss=false", "--json"], (f,)
        yield "nanloss.megatron", ["predict", *DENSE[:4], "-n", "64", "--strategy", str(f), "--json"], (f,)


def sec_launch(tmp: Path) -> Iterator[Case]:
    meg = ["--bf16 --fp16", "--fp16 --bf16", "--tensor-model-parallel-size 4", "--micro-batch-size 2",
           "--recompute-granularity full --recompute-activations --recompute-method uniform --recompute-num-layers 1",
           "--recompute-granularity selective --recompute-modules core_attn --recompute-num-layers 2",
           "--recompute-granularity full --recompute-method block --recompute-num-layers 2 --recompute-modules mlp",
           "--use-distributed-optimizer --use-torch-fsdp2", "--use-torch-fsdp2 --use-megatron-fsdp",
           "--sequence-parallel --tensor-model-parallel-size 1",
           "--fp8-format hybrid --fp8-recipe mxfp8 --fp4-format e2m1",
           "--fp8-format e4m3 --fp8-param-gather --no-fp8-param-gather",
           "--overlap-grad-reduce --no-overlap-grad-reduce", "--pipeline-model-parallel-size 2 "
           "--pipeline-model-parallel-size 4", "--context-parallel-size 2 --cp-comm-type a2a --cp-comm-type p2p",
           "--expert-model-parallel-size 8", "--num-experts 8 --expert-model-parallel-size 3",
           "--global-batch-size 3 --micro-batch-size 2", "--seq-length 0", "--seq-length 4096 --seq-length 8192",
           "--moe-token-dispatcher-type flex --moe-enable-deepep --moe-token-dispatcher-type alltoall",
           "--cpu-offloading --cpu-offloading-num-layers 0", "--cpu-offloading-num-layers 40 --cpu-offloading",
           "--optimizer-cpu-offload --optimizer-offload-fraction -1"]
    for i, fl in enumerate(meg):
        f = _write(tmp, f"meg{i}.sh", LAUNCH + fl + "\n")
        for cmd in (["predict", *DENSE[:4], "-n", "64"], ["plan", *DENSE[:4], "-n", "64", "--top", "2"],
                    ["predict", *MOE]):
            yield "launch.megatron", [*cmd, "--strategy", str(f), "--json"], (f,)
    ds = ['"bf16": {"enabled": true}, "fp16": {"enabled": true}',
          '"zero_optimization": {"stage": 1}, "zero_stage": 3',
          '"train_batch_size": 7, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3',
          '"train_micro_batch_size_per_gpu": 0', '"gradient_accumulation_steps": -1',
          '"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": '
          '{"device": "nvme"}}', '"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}',
          '"pipeline": {"stages": 4}',
          '"pipeline": {"partition_method": "uniform", "activation_checkpoint_interval": 1}',
          '"zero_optimization": {"stage": 3}, "pipeline": {"stages": 2}',
          '"zero_optimization": {"stage": 2, "reduce_bucket_size": 0}',
          '"zero_optimization": {"stage": 2, "reduce_bucket_size": -5e8}',
          '"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1e400}',
          '"communication_data_type": "fp8"', '"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}']
    for i, body in enumerate(ds):
        f = _write(tmp, f"ds{i}.json", '{"train_micro_batch_size_per_gpu": 1, ' + body + "}")
        for extra in ([], ["--pp", "2", "--set", "strategy.deepspeed_pipeline=true"], ["--zero", "3"]):
            yield "launch.deepspeed", ["predict", *DENSE, "--strategy", str(f), *extra, "--json"], (f,)
        yield "launch.deepspeed.plan", ["plan", *DENSE, "--strategy", str(f), *TOP], (f,)
    for pins in (["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.megatron_ddp=true"],
                 ["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.nanotron_trainer=true"],
                 ["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.schedule=zb"],
                 ["--set", "strategy.deepspeed_pipeline=true", "--constraint", "zero=3"],
                 ["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.first_stage_layers=4"],
                 ["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.stage_layers=[16, 16]"],
                 ["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.pp=1"]):
        yield "launch.dspipe.plan", ["plan", *DENSE, *pins, *TOP], ()
        sets = [a if not a.startswith("--constraint") else "--set" for a in pins]
        sets = [a.replace("zero=3", "strategy.zero=3") for a in sets]
        yield "launch.dspipe.predict", ["predict", *DENSE, "--pp", "2", *sets, "--json"], ()


def sec_cmds(tmp: Path) -> Iterator[Case]:
    for g in ["8,2**70", f"8,{2**70}", "8," + "9" * 40, "1", "1,2,3,5,7,11,13", "16,8", "8,8", "-8,8", "+8,16",
              "8,16,", "8;16", "8 ,16", "0x10", "\u0668,16", "8,100000000", "8,99999999", "8," * 300 + "9999"]:
        yield "cmds.scale", ["scale", *DENSE[:4], "--gpus", g, "--json"], ()
        yield "cmds.scale.best", ["scale", *DENSE[:4], "--gpus", g, "--best", "--json"], ()
    for fac in ["0", "-1", "1", "1e-300", "1e300", "nan", "inf", "2", "0.5", "1.0000001"]:
        yield "cmds.sens", ["sensitivity", *DENSE, "--factor", fac, "--json"], ()
    scen = ["gpus: [8, 16]\nassertions: {min_scaling_efficiency: 1.5}\n",
            "gpus: [8, 16]\nassertions: {max_step_time: 0 s}\n",
            "gpus: [8, 16]\nassertions: {max_step_time: -1 s}\n",
            "gpus: [8, 16]\nassertions: {max_memory: 0 GB}\n",
            "gpus: [8, 16]\nassertions: {}\n", "gpus: [8, 16]\nassertions: null\n",
            "gpus: [8, 16]\nassertions: {min_mfu: 0.3, min_mfu: 0.4}\n",
            "gpus: 8\nstrategy: {recompute_layers: 2, recompute_modules: core_attn}\nassertions: {min_mfu: 0.1}\n",
            "gpus: 16\nstrategy: {pp: 2, first_stage_layers: 33}\nassertions: {min_mfu: 0.1}\n",
            "gpus: [8, 16]\nbest: true\nstrategy: {first_stage_layers: 33}\nassertions: {min_mfu: 0.1}\n",
            "gpus: [8, 100000001]\nassertions: {min_mfu: 0.1}\n", "gpus: []\nassertions: {min_mfu: 0.1}\n"]
    for i, body in enumerate(scen):
        f = _write(tmp, f"scen{i}.yaml", "kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\n" + body)
        yield "cmds.check", ["check", str(f), "--json"], (f,)
        yield "cmds.check.pess", ["check", str(f), "--pessimistic"], (f,)
        yield "cmds.scale.scen", ["scale", "--scenario", str(f), "--json"], (f,)
    runs = _write(tmp, "runs.yaml", "- {cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 4 s}\n")
    for cmd in (["check", str(runs)], ["scale", "--scenario", str(runs)], ["sensitivity", *DENSE, "--strategy",
                                                                           str(runs)],
                ["scale", *DENSE[:4], "--gpus", "8,16", "--strategy", str(runs)]):
        yield "cmds.runs_as_other", [*cmd, "--json"], (runs,)


SECTIONS: dict[str, Callable[[Path], Iterator[Case]]] = {
    "eqpins": sec_eqpins, "switches": sec_switches, "stages": sec_stages, "nanloss": sec_nanloss,
    "launch": sec_launch, "cmds": sec_cmds}


def main_() -> int:
    return drive("fuzz39", __doc__, SECTIONS, judges=(judge_cut, judge_wall_rss(20.0, 1 << 20)))


if __name__ == "__main__":
    raise SystemExit(main_())
