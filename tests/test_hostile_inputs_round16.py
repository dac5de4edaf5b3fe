"""Hostile-input round 16: framework readers' settings that contradict each other or that the reader passed over
(Megatron-LM's virtual-stage flags, torchtitan's stage and async-TP keys), a NemotronH layer list that is not one,
and a --strategy file's SM count named as an option never given.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_hostile_inputs import MEG_LAUNCH, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

MOE = ["-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64"]
PP2 = "--pipeline-model-parallel-size 2 "


# --- Megatron-LM's virtual-stage flags that Megatron-LM refuses together -------------------------------------------
# "--num-layers-per-virtual-pipeline-stage 2 --num-virtual-stages-per-pipeline-rank 4" was priced at interleaved:4 and
# the other flag dropped without a word; Megatron-LM's validate_args asserts no more than one of them (arguments.py
# L928-939 at d98e8a64dd), and asserts --num-layers-per-virtual-pipeline-stage without uneven first/last stages.

@pytest.mark.parametrize("flags, match", [
    ("--num-layers-per-virtual-pipeline-stage 2 --num-virtual-stages-per-pipeline-rank 4",
     "--num-layers-per-virtual-pipeline-stage 2 and --num-virtual-stages-per-pipeline-rank 4 both given"),
    ("--virtual-pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 4",
     "two different counts of virtual stages per rank"),
    ("--num-layers 32 --num-layers-per-virtual-pipeline-stage 2 --decoder-first-pipeline-num-layers 12",
     "--num-layers-per-virtual-pipeline-stage with --decoder-first-pipeline-num-layers"),
    ("--num-layers 32 --num-layers-per-virtual-pipeline-stage 2 --decoder-last-pipeline-num-layers 12",
     "with --decoder-last-pipeline-num-layers"),
])
def test_megatron_virtual_stage_flags_megatron_refuses_together(cli, tmp_path, flags: str, match: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, PP2 + flags)
    line = refused(cli, "predict", *MOE, "--strategy", str(f), inputs=(f,), match=match)
    assert line.startswith(f"error: --strategy: {f}: --"), line


@pytest.mark.parametrize("flags, schedule", [
    ("--virtual-pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 4", "interleaved:4"),
    ("--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 12", "interleaved:2"),
    ("--num-layers 32 --num-layers-per-virtual-pipeline-stage 4", "interleaved:4"),  # 32 / (2 x 4)
])
def test_megatron_virtual_stage_flags_megatron_accepts_still_read(cli, tmp_path, flags: str, schedule: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, PP2 + flags)
    assert accepted(cli, "predict", *MOE, "--strategy", str(f))["inputs"]["strategy"]["schedule"] == schedule


# --- torchtitan's stage keys and async TP are said, not dropped ------------------------------------------------------
# pipeline_parallel_layers_per_stage was checked for its range and then dropped: the schedule was priced at 2 virtual
# stages per rank (or 1) whatever it gave, where torchtitan derives ceil((layers + 2) / N) / pp stages per rank
# (torchtitan/distributed/pipeline_parallel.py L219-257 @b5bcd76c66); enable_async_tensor_parallel = true,
# pipeline_parallel_split_points and module_fqns_per_model_part were in the reader's read set, priced without them and
# without a word ('yes' taken for the switch too).

TITAN = "[training]\nlocal_batch_size = 1\nseq_len = 4096\n[parallelism]\n"


def _titan(tmp_path, body: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text(TITAN + body)
    return f


@pytest.mark.parametrize("body, said", [
    ("pipeline_parallel_degree = 2\npipeline_parallel_schedule = 'Interleaved1F1B'\n"
     "pipeline_parallel_layers_per_stage = 3\n",
     "parallelism.pipeline_parallel_layers_per_stage 3 (torchtitan's virtual stages per rank are ceil((layers + 2) / 3)"
     " / pp, from the model's layers: priced as interleaved:2"),
    ("pipeline_parallel_degree = 2\npipeline_parallel_schedule = '1F1B'\npipeline_parallel_layers_per_stage = 1\n",
     "priced as 1f1b, 1 stage per rank"),
    ("tensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n",
     "parallelism.enable_async_tensor_parallel (async TP's collective matmuls are not modelled"),
    ("pipeline_parallel_degree = 2\npipeline_parallel_split_points = ['layers.4']\n",
     "parallelism.pipeline_parallel_split_points (a manual split of the layers is priced as the even split"),
    ("pipeline_parallel_degree = 2\nmodule_fqns_per_model_part = [['tok_embeddings', 'layers.0'], ['output']]\n",
     "parallelism.module_fqns_per_model_part (a manual split"),
])
def test_torchtitan_stage_and_async_tp_keys_are_said(cli, tmp_path, body: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = _titan(tmp_path, body)
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert "torchtitan settings not used" in r.err and said in r.err, r.err


@pytest.mark.parametrize("body", ["pipeline_parallel_layers_per_stage = 4\n",  # pp 1: no pipeline
                                  "tensor_parallel_degree = 2\nenable_async_tensor_parallel = false\n",
                                  "enable_async_tensor_parallel = true\n"])  # tp 1: no TP collective
def test_torchtitan_keys_that_change_nothing_are_not_said(cli, tmp_path, body: str) -> None:  # type: ignore[no-untyped-def]
    # the mode written out: a TOML without it is said since round 17 (torchtitan's default AC mode is selective)
    f = _titan(tmp_path, body + "[activation_checkpoint]\nmode = 'none'\n")
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0 and "not used" not in r.err, r.err


def test_torchtitan_async_tp_not_a_boolean_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _titan(tmp_path, "tensor_parallel_degree = 2\nenable_async_tensor_parallel = 'yes'\n")
    refused(cli, "predict", *MOE, "--strategy", str(f), inputs=(f,),
            match=f"{f}: parallelism.enable_async_tensor_parallel: expected true or false, got 'yes'")


# --- a --strategy file's SM count is named as the file wrote it ------------------------------------------------------
# plan / scale --best with a launch script's "--moe-deepep-num-sms 999999999" were refused as "error: --set
# strategy.ep_dispatch_sms: ep_dispatch_sms = 999999999 exceeds ...", an option the command line does not have;
# predict named the file's flag.

@pytest.mark.parametrize("command", [["plan", *MOE, "--top", "1"],
                                     ["scale", "--best", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64,128"]])
def test_a_file_sm_count_beyond_the_chip_names_the_file_flag(cli, tmp_path, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--expert-model-parallel-size 8 --moe-token-dispatcher-type flex "
                                  "--moe-deepep-num-sms 999999999")
    line = refused(cli, *command, "--strategy", str(f), inputs=(f,),
                   match=f"error: --strategy: {f}: --moe-deepep-num-sms: ep_dispatch_sms = 999999999 exceeds the 132")
    assert "--set" not in line.split(";")[0], line


def test_a_set_sm_count_beyond_the_chip_still_names_set(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", *MOE, "--top", "1", "--set", "strategy.ep_dispatch_sms=1000",
            match="error: --set strategy.ep_dispatch_sms: ep_dispatch_sms = 1000 exceeds the 132")


# --- a NemotronH config's layer list that is not a list of layers -----------------------------------------------------
# layers_block_type [] or a mapping, or a list none of whose kinds is modelled (["hybrid"] x 52), in a NemotronH config
# without hybrid_override_pattern was passed over: the file was priced as a plain transformer of num_hidden_layers
# (an MLP in every layer) under a generic "keys not understood" warning.

def _nemotron_h(tmp_path, kinds):  # type: ignore[no-untyped-def]
    from test_mamba import NANO_HF
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**{k: v for k, v in NANO_HF.items() if k != "hybrid_override_pattern"},
                             "layers_block_type": kinds}))
    return f


@pytest.mark.parametrize("kinds, match", [
    ([], "layers_block_type: expected a non-empty list of layer kinds, got '[]'"),
    ({"a": 1}, "layers_block_type: expected a non-empty list of layer kinds"),
    ("M*M*", "layers_block_type: expected a non-empty list of layer kinds, got 'M*M*'"),
    (["hybrid"] * 52, "layers_block_type: layer kind(s) hybrid not modelled"),
])
def test_a_nemotron_h_layer_list_that_is_not_one_is_refused(cli, tmp_path, kinds, match: str) -> None:  # type: ignore[no-untyped-def]
    f = _nemotron_h(tmp_path, kinds)
    refused(cli, "predict", "-c", "gb200-nvl72", "-m", str(f), "-n", "64", "--seq-len", "8192", inputs=(f,),
            match=f"{f}: {match}")


def test_a_nemotron_h_layer_list_of_known_kinds_still_reads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from test_mamba import NANO_HF
    kinds = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    f = _nemotron_h(tmp_path, [kinds[c] for c in NANO_HF["hybrid_override_pattern"]])
    got = accepted(cli, "predict", "-c", "gb200-nvl72", "-m", str(f), "-n", "64", "--seq-len", "8192")
    assert got["inputs"]["model"]


# --- a cp_a2a_size no ranked plan uses is said -----------------------------------------------------------------------
# "plan --constraint cp_a2a_size=16" at 64 GPUs (cp at most 8 for mixtral's rows) ranked cp 8 rows of cp_comm_type a2a
# showing cp_a2a_size 16 (99999999999 too), a size no all-to-all group has and that predict of the same strategy warns
# "is not used", without a word. The size acts only on a2a+p2p rows with 1 < cp_a2a_size < cp dividing cp.

# (999999999, within a spec's integers: fuzzpin38 refuses an '=' pin past 1e9, tests/test_fuzzpin38.py)
@pytest.mark.parametrize("pin", [["--constraint", "cp_a2a_size=16"], ["--constraint", "cp_a2a_size=999999999"],
                                 ["--set", "strategy.cp_a2a_size=16"]])
def test_plan_says_a_cp_a2a_size_no_ranked_plan_uses(cli, pin: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *MOE, "--top", "3", *pin, "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["ranked"]
    assert rows and all(row["strategy"]["cp_comm_type"] != "a2a+p2p" or row["strategy"]["cp"] <= 16 for row in rows)
    assert "acts on none of the ranked plans: cp_a2a_size sizes the all-to-all groups of cp_comm_type a2a+p2p" in r.err


def test_plan_does_not_warn_of_a_cp_a2a_size_a_ranked_plan_uses(cli) -> None:  # type: ignore[no-untyped-def]
    # cp pinned at 8 (a size cp_a2a_size 4 acts on): unpinned, the ranked rows are cp 4 since this round's model
    # (NCCL's LL caps, driver memory totals), where a size of 4 acts on nothing and is rightly said to
    r = cli("plan", *MOE, "--top", "3", "--constraint", "cp_a2a_size=4", "--constraint", "cp_comm_type=a2a+p2p",
            "--constraint", "cp=8", "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["ranked"]
    assert any(row["strategy"]["cp"] % 4 == 0 and row["strategy"]["cp"] > 4 for row in rows), rows
    assert "acts on none" not in r.err, r.err


# --- a dispatch overhead under static assignment is said -------------------------------------------------------------
# "--dispatch-overhead 20ms" (or strategy.dispatch_overhead) without --assignment dynamic was dropped without a word:
# it prices the scheduling of each micro-batch pulled from a shared queue, which static assignment has none of.

SMALL = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8"]


@pytest.mark.parametrize("args", [["--dispatch-overhead", "20ms"], ["--set", "strategy.dispatch_overhead=20ms"],
                                  ["--assignment", "static", "--dispatch-overhead", "20ms"]])
def test_a_dispatch_overhead_under_static_assignment_is_said(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *SMALL, *args, "--json")
    assert r.code == 0, r.err
    assert ("warning: strategy.dispatch_overhead = 0.02 s is not priced: it is the scheduling time of each micro-batch "
            "pulled from a shared queue, and assignment is static") in r.err, r.err


@pytest.mark.parametrize("args", [["--assignment", "dynamic", "--dispatch-overhead", "20ms"],
                                  ["--dispatch-overhead", "0s"], []])
def test_a_dispatch_overhead_that_is_priced_is_not_warned(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *SMALL, *args, "--json")
    assert r.code == 0 and "dispatch_overhead" not in r.err, r.err


# --- a training log's number with commas that do not group thousands --------------------------------------------------
# "elapsed time per iteration (ms): 1,2,3,4" was read as 1234 ms: the reader dropped every comma. Commas group
# thousands only (torchtitan writes tps with f"{tps:,}").

def _log_speed(tmp_path, line: str):  # type: ignore[no-untyped-def]
    from scalemodel.specs.train_logs import read_train_log
    f = tmp_path / "train.log"
    f.write_text("".join(line.format(i=i) for i in range(1, 31)))
    return read_train_log(f)


@pytest.mark.parametrize("line, shown", [
    (" iteration {i}/ 100 | elapsed time per iteration (ms): 1,2,3,4 |\n", "'1,2,3,4' is not a number"),
    ("step: {i}  loss: 1.0  tps: 12,34  tflops: 1\n", "'12,34' is not a number"),
    ("step: {i}  loss: 1.0  tps: 1,2345  tflops: 1\n", "'1,2345' is not a number"),
])
def test_a_log_number_with_commas_not_grouping_thousands_is_refused(tmp_path, line: str, shown: str) -> None:
    from scalemodel.errors import InputError
    with pytest.raises(InputError) as e:
        _log_speed(tmp_path, line)
    assert shown in e.value.what and e.value.where.endswith("train.log: line 1"), (e.value.what, e.value.where)


@pytest.mark.parametrize("line, value", [
    (" iteration {i}/ 100 | elapsed time per iteration (ms): 1,234.5 |\n", 1.2345),
    ("step: {i}  loss: 1.0  tps: 12,345  tflops: 1\n", 12345.0),
    ("epoch=0/micro_step={i}/global_step={i}, RunningAvgSamplesPerSec=10, CurrSamplesPerSec=1,000, MemAllocated=1GB\n",
     1000.0),
])
def test_a_log_number_with_grouped_thousands_still_reads(tmp_path, line: str, value: float) -> None:
    assert _log_speed(tmp_path, line).value == pytest.approx(value)


# --- Megatron-LM's recompute flags as Megatron-LM resolves them -------------------------------------------------------
# "--recompute-activations --recompute-granularity full" was priced as full recompute: validate_args sets the
# granularity to selective whenever --recompute-activations is given (arguments.py L607-608 at d98e8a64dd).
# "--recompute-granularity selective --recompute-method block --recompute-num-layers 2" dropped the method without a
# word: validate_args asserts against it and TransformerConfig raises on recompute_num_layers with selective.

DENSE70 = ["-c", "dgx-h100", "-m", "llama3-70b", "-n", "256"]


def test_recompute_activations_makes_the_granularity_selective(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--recompute-activations --recompute-granularity full")
    r = cli("predict", *DENSE70, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["inputs"]["strategy"]["recompute"] == "selective"
    assert "--recompute-granularity full (with --recompute-activations Megatron-LM sets the granularity to selective)" \
        in r.err, r.err


@pytest.mark.parametrize("flags, match", [
    ("--recompute-granularity selective --recompute-method block --recompute-num-layers 2",
     "--recompute-method: --recompute-method and --recompute-num-layers with selective recompute"),
    ("--recompute-granularity selective --recompute-num-layers 2",
     "--recompute-num-layers: --recompute-num-layers with selective recompute"),
    ("--recompute-activations --recompute-method uniform --recompute-num-layers 1",
     "--recompute-method: --recompute-method and --recompute-num-layers with selective recompute "
     "(--recompute-activations sets the granularity to selective)"),
    ("--recompute-activations --recompute-granularity full --recompute-method block --recompute-num-layers 4",
     "--recompute-method: --recompute-method and --recompute-num-layers with selective recompute "
     "(--recompute-activations sets the granularity to selective)"),
])
def test_partial_recompute_flags_with_selective_are_refused(cli, tmp_path, flags: str, match: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *DENSE70, "--strategy", str(f), inputs=(f,), match=f"{f}: {match}")


@pytest.mark.parametrize("flags, recompute", [("--recompute-activations", "selective"),
                                              ("--recompute-granularity full --recompute-method block "
                                               "--recompute-num-layers 4", "full"),
                                              ("--recompute-granularity selective", "selective")])
def test_recompute_flags_megatron_accepts_still_read(cli, tmp_path, flags: str, recompute: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    assert accepted(cli, "predict", *DENSE70, "--strategy", str(f))["inputs"]["strategy"]["recompute"] == recompute


# --- a Megatron-LM flag written with one dash is said --------------------------------------------------------------
# "-tensor-model-parallel-size 4" was passed over as a positional word without a word (tp stayed the script's 2);
# Megatron-LM's argparse refuses it.

def test_a_megatron_flag_with_one_dash_is_said(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "-tensor-model-parallel-size 4 -sequence-parallel")
    r = cli("predict", *DENSE70, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "-tensor-model-parallel-size (one dash: not the flag --tensor-model-parallel-size)" in r.err, r.err
    assert "-sequence-parallel (one dash: not the flag --sequence-parallel)" in r.err, r.err
    assert json.loads(r.out)["inputs"]["strategy"]["tp"] == 2  # MEG_LAUNCH's own --tensor-model-parallel-size


def test_a_python_option_with_one_dash_is_not_said(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("python -u -m torch.distributed.run pretrain_gpt.py " + MEG_LAUNCH.split(" ", 2)[2] + "\n")
    r = cli("predict", *DENSE70, "--strategy", str(f), "--json")
    assert r.code == 0 and "one dash" not in r.err, r.err


# --- a field missing under a group a --set item made names the --set item ---------------------------------------------
# "--set accelerator.attention_releases.9.99.cudnn.fwd.attn_max=0.5" (a release b200 does not hold) was refused as
# "error: .../hardware/clusters/dgx-b200.yaml:6: accelerator.attention_releases.9.99.cudnn.fwd.seq_half: missing
# required field": the cluster file, which has no 9.99, was blamed for what the --set item left out.

@pytest.mark.parametrize("item, missing", [
    ("accelerator.attention_releases.9.99.cudnn.fwd.attn_max=0.5", "accelerator.attention_releases.9.99.cudnn.fwd."
                                                                   "seq_half: missing required field"),
    ("accelerator.attention_releases.9.99.cudnn.bwd={attn_max: 0.5, seq_half: 900, head_half: 50}",
     "accelerator.attention_releases.9.99.cudnn.fwd: missing required field"),
])
def test_a_field_missing_under_a_group_a_set_item_made_names_the_item(cli, item: str, missing: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-b200", "-m", "llama3-8b", "-n", "8", "--set", item,
                   match=f"error: --set {item.split('=')[0]}: {missing}")
    assert "dgx-b200.yaml" not in line, line


def test_a_field_refused_in_the_file_still_names_the_file(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The file's own release without its bwd curve is the file's error, a --set item making another release
    beside it or not."""
    acc, clu = tmp_path / "acc.yaml", tmp_path / "c.yaml"
    acc.write_text("kind: accelerator\nextends: b200\nname: myb\nattention_releases:\n"
                   "  '9.30': {cudnn: {fwd: {attn_max: 0.9, seq_half: 900, head_half: 50}}}\n")
    clu.write_text("kind: cluster\nextends: dgx-b200\nname: myc\naccelerator: acc.yaml\n")
    for sets in ([], ["--set", "accelerator.attention_releases.9.99.cudnn.fwd.attn_max=0.5"]):
        # fuzz38: without a --set into the accelerator, its own file and line (acc.yaml:5, the release's line), as
        # `-c` reads a file; with one, the cluster file's accelerator field, as before
        line = refused(cli, "predict", "-c", str(clu), "-m", "llama3-8b", "-n", "8", *sets, inputs=(acc, clu),
                       match=f"{acc}:5: attention_releases.9.30.cudnn.bwd: missing required field" if not sets else
                       "accelerator.attention_releases.9.30.cudnn.bwd: missing required field")
        assert line.startswith(f"error: {tmp_path}/"), line


# --- a --scheduler peer that is no Dask scheduler ---------------------------------------------------------------------
# "sweep --scheduler tcp://HOST:8786" where HOST answered the connection with an HTTP response (a proxy) was a
# traceback: distributed read "HTTP/1.1" as a frame length of 3.5e18 bytes and numpy raised MemoryError.

def _sweep_at_peer_is_refused(cli, tmp_path, reply: bytes, hold_s: float, match: str) -> None:  # type: ignore[no-untyped-def]
    """A one-point sweep run with --scheduler at a local peer that sends ``reply`` to every connection (and holds it
    ``hold_s`` seconds before closing) is refused with ``match``."""
    pytest.importorskip("distributed")
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(reply)
            time.sleep(hold_s)
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                 "strategies: [{label: a}]\n")
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        refused(_cli_in_a_process, "sweep", str(f), "--scheduler", address, "--json", inputs=(f,),
                match=match.format(address=address))
    finally:
        server.close()


def _cli_in_a_process(*args: str) -> SimpleNamespace:
    """``scalemodel`` in a process of its own (code, out, err as the ``cli`` fixture gives them). The peer tests run
    it so: a Client distributed half-built against a peer that is no scheduler is left in scalemodel's connect thread
    and collected later, and its ``close()`` from that thread deadlocked a later test's in-process LocalCluster
    start in the same pytest worker (tests/test_sweep.py::test_dask_cluster hung a CI run in LoopRunner.start)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True, text=True, cwd=root,
                       env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    return SimpleNamespace(code=r.returncode, out=r.stdout, err=r.stderr)


def test_a_scheduler_address_that_answers_as_no_scheduler_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _sweep_at_peer_is_refused(cli, tmp_path, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", 0.0,
                              "error: --scheduler: '{address}' did not answer as a Dask scheduler")


# "sweep --scheduler" at a peer that accepted the connection and never answered waited forever: the Client's own
# timeout covers the TCP connect, not its handshake read. The connection is now given up after CONNECT_TIMEOUT_S +
# HANDSHAKE_GRACE_S (10 + 5 s).

def test_a_scheduler_that_never_answers_is_given_up(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import threading
    import time

    from scalemodel.engine import grid

    release = threading.Event()

    class Silent:
        class Client:  # distributed's name; _connect makes the object first, then runs its constructor
            def __init__(self, address: str, timeout: str) -> None:
                release.wait(60)  # a handshake read that never returns

            def close(self) -> None:  # the connect thread closes what it built after the give-up
                pass

    assert (grid.CONNECT_TIMEOUT_S, grid.HANDSHAKE_GRACE_S) == (10, 5)  # the product's wait: 15 s
    monkeypatch.setattr(grid, "CONNECT_TIMEOUT_S", 0)
    monkeypatch.setattr(grid, "HANDSHAKE_GRACE_S", 0.2)  # the same give-up path, without waiting 5 s for it
    t0 = time.perf_counter()
    try:
        with pytest.raises(TimeoutError, match="the peer accepted the connection but did not answer"):
            grid._connect(Silent, "tcp://192.0.2.1:8786")
    finally:
        release.set()
    assert time.perf_counter() - t0 < 10


def test_a_scheduler_peer_with_garbled_frames_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a frame count of 8 and one frame length of 3, then bytes that are no frames
    _sweep_at_peer_is_refused(cli, tmp_path, (8).to_bytes(8, "little") + (3).to_bytes(8, "little") + b"\x01\x02\x03"
                              + b"\xc1" * 16, 0.5, "error: --scheduler: ")
