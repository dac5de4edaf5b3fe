"""noflags39: the Megatron-LM launch reader's ``--no-*`` switches.

"--no-" was a harmless prefix, so ``--overlap-grad-reduce --no-overlap-grad-reduce`` kept the overlap on without a
word, though NVIDIA/Megatron-LM has no ``--no-overlap-grad-reduce`` (argparse refuses the launch: "unrecognized
arguments"). Now (1) the ``--no-*`` switches that change a priced quantity set their strategy field (each checked
here against the field Megatron-LM's argparse dest names, and the prediction against the same field set by hand with
``--set``), (2) Megatron-LM's other ``--no-*`` switches are accepted without a word and move nothing, (3) a ``--no-*``
flag Megatron-LM has not is named as not used, as another unknown flag is, and (4) a switch given with its negation
is refused with exit 2, naming both.

The flag names below are copied by hand from NVIDIA/Megatron-LM megatron/training/arguments.py (core_r0.8.0,
core_v0.13.1, core_v0.15.0, d98e8a64dd), not from the reader's tables.
"""

from __future__ import annotations

import json

import pytest

from scalemodel.errors import InputError
from scalemodel.specs.frameworks import read_strategy_file

BASE = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --use-distributed-optimizer --micro-batch-size 1 "
        "--global-batch-size 64 --bf16")
PREDICT = ("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--json")


def _read(tmp_path, flags: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"{BASE} {flags}\n")
    return read_strategy_file(str(f))


def _step(cli, tmp_path, flags: str, *extra: str) -> float:  # type: ignore[no-untyped-def]
    f = tmp_path / "launch.sh"
    f.write_text(f"{BASE} {flags}\n")
    r = cli(*PREDICT, "--strategy", str(f), *extra)
    assert r.code == 0, r.err
    return float(json.loads(r.out)["step_time_s"])


# ---------------------------------------------------------------------------------------------------------------
# (4) a switch and its negation together: Megatron-LM defines one of the two, its argparse refuses the other

@pytest.mark.parametrize(("flags", "kept"), [
    # store_true only (arguments.py L3121 at d98e8a64dd); no --no-overlap-grad-reduce in any release
    ("--overlap-grad-reduce --no-overlap-grad-reduce", "Megatron-LM has --overlap-grad-reduce"),
    ("--no-overlap-grad-reduce --overlap-grad-reduce", "Megatron-LM has --overlap-grad-reduce"),
    # store_true from f9283c5a8a, replaced by store_false --no-... at 4eeff55d1f: never both
    ("--overlap-p2p-communication --no-overlap-p2p-communication", "Megatron-LM has --no-overlap-p2p-communication"),
    # store_false --no-rope-fusion (dest apply_rope_fusion); no --rope-fusion
    ("--rope-fusion --no-rope-fusion", "Megatron-LM has --no-rope-fusion"),
    # d98e8a64dd's generated --disable-align-grad-reduce; no --align-grad-reduce
    ("--align-grad-reduce --disable-align-grad-reduce", "Megatron-LM has --disable-align-grad-reduce"),
])
def test_a_switch_and_its_negation_are_refused(cli, tmp_path, flags, kept) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"{BASE} {flags}\n")
    r = cli(*PREDICT, "--strategy", str(f))
    assert r.code == 2, (r.code, r.err)
    assert "Traceback" not in r.err and r.out == ""
    base, neg = sorted(flags.split(), key=lambda w: w.startswith(("--no-", "--disable-")))
    assert r.err.startswith(f"error: --strategy: {f}: {base} and {neg}: a switch and its negation"), r.err
    assert kept in r.err, r.err


def test_both_forms_that_one_release_defines_are_not_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """core_r0.8.0 to core_v0.15.0 define --ckpt-fully-parallel-save (store_true) and --no-ckpt-fully-parallel-save
    (store_false) both; argparse keeps the last, so the pair is a launch Megatron-LM runs. Nothing priced."""
    with_pair = _read(tmp_path, "--ckpt-fully-parallel-save --no-ckpt-fully-parallel-save")
    alone = _read(tmp_path, "")
    assert with_pair.strategy == alone.strategy and with_pair.training == alone.training
    assert not any("ckpt" in u for u in with_pair.unused), with_pair.unused


# ---------------------------------------------------------------------------------------------------------------
# (3) a --no-* flag Megatron-LM has not: named as not used, and it moves nothing

def test_an_unknown_no_flag_is_named_and_moves_nothing(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, "--overlap-grad-reduce --no-overlap-param-gathering")
    note = next((u for u in sf.unused if u.startswith("--no-overlap-param-gathering")), None)
    assert note is not None and "not a Megatron-LM switch" in note and "unrecognized argument" in note, sf.unused
    assert sf.strategy["overlap"] is True  # the unknown flag turns nothing off
    r_plain = _step(cli, tmp_path, "--overlap-grad-reduce")
    f = tmp_path / "unknown.sh"
    f.write_text(f"{BASE} --overlap-grad-reduce --no-overlap-param-gathering\n")
    r = cli(*PREDICT, "--strategy", str(f))
    assert r.code == 0 and "--no-overlap-param-gathering (not a Megatron-LM switch" in r.err, r.err
    assert float(json.loads(r.out)["step_time_s"]) == r_plain


def test_an_unknown_no_flag_alone_is_named_not_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--no-overlap-grad-reduce without --overlap-grad-reduce contradicts nothing: named as not used (the reader's
    rule for an unknown flag), overlap left at its default."""
    sf = _read(tmp_path, "--no-overlap-grad-reduce")
    assert any(u.startswith("--no-overlap-grad-reduce (not a Megatron-LM switch") for u in sf.unused), sf.unused
    assert "overlap" not in sf.strategy or sf.strategy["overlap"] is False


# ---------------------------------------------------------------------------------------------------------------
# (2) Megatron-LM's --no-* switches that change nothing the reader prices: no word, nothing moves

HARMLESS = ("--no-load-optim", "--no-load-rng", "--no-save-optim", "--no-save-rng", "--no-mmap-bin-files",
            "--no-data-sharding", "--no-initialization", "--no-one-logger", "--no-log-loss-scale-to-tensorboard",
            "--no-barrier-with-level-1-timing", "--no-create-attention-mask-in-dataloader",
            "--no-masked-softmax-fusion", "--no-persist-layer-norm", "--no-gradient-reduce-div-fusion",
            "--no-clone-scatter-output-in-embedding", "--no-scatter-gather-tensors-in-pipeline",
            "--no-manual-gc-eval", "--no-pin-cpu-grads", "--no-pin-cpu-params", "--no-ckpt-fully-parallel-save",
            "--no-use-tokenizer-model-from-checkpoint-args", "--no-strict-fsdp-dtensor-load",
            # not read where they change nothing priced: no fp8, no --tp-comm-overlap, no --swiglu
            "--no-fp8-wgrad", "--no-tp-comm-overlap-ag", "--no-bias-swiglu-fusion")


def test_harmless_no_switches_are_silent_and_move_nothing(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, " ".join(HARMLESS))
    alone = _read(tmp_path, "")
    assert sf.unused == alone.unused, sf.unused
    assert sf.strategy == alone.strategy and sf.training == alone.training
    assert _step(cli, tmp_path, " ".join(HARMLESS)) == _step(cli, tmp_path, "")


def test_no_switches_take_no_value(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """store_false takes no value: argparse refuses --no-load-optim=false ("ignored explicit argument")."""
    with pytest.raises(InputError, match="takes no value"):
        _read(tmp_path, "--no-load-optim=false")


def test_no_flags_with_a_value(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--no-rope-freq (type=no_rope_freq_type: which layers skip RoPE) describes the model; --no-weight-decay-cond-type
    (choices=['apply_wd_to_qk_layernorm']) is the optimizer's: each takes its value, neither is an unknown switch."""
    sf = _read(tmp_path, "--no-rope-freq 4 --no-weight-decay-cond-type apply_wd_to_qk_layernorm")
    assert not any("not a Megatron-LM switch" in u for u in sf.unused), sf.unused
    assert any(u.startswith("model flags (") and "--no-rope-freq" in u for u in sf.unused), sf.unused
    assert not any("apply_wd" in u or u.startswith("4") for u in sf.unused), sf.unused


# ---------------------------------------------------------------------------------------------------------------
# (1) the --no-* switches the reader prices: the field their argparse dest turns off

@pytest.mark.parametrize(("flag", "field", "value"), [
    # store_false, dest gradient_accumulation_fusion (arguments.py at 847781764f)
    ("--no-gradient-accumulation-fusion", "grad_accumulation_fusion", False),
    # store_false, dest apply_rope_fusion: Megatron-Core's eager RoPE
    ("--no-rope-fusion", "eager_rope", True),
    # store_false, dest bias_dropout_fusion (gpt-1.7b has biases: no --disable-bias-linear here)
    ("--no-bias-dropout-fusion", "eager_bias_dropout_add", True),
    # store_false, dest align_grad_reduce / align_param_gather
    ("--no-align-grad-reduce", "align_grad_reduce", False),
    ("--no-align-param-gather", "align_param_gather", False),
    # store_false, dest check_for_nan_in_loss_and_grad: the gradient's and the loss's check (both below)
    ("--no-check-for-nan-in-loss-and-grad", "check_for_nan_in_grad", False),
    # store_false, dest async_tensor_model_parallel_allreduce (without --sequence-parallel)
    ("--no-async-tensor-model-parallel-allreduce", "tp_async_allreduce", False),
])
def test_priced_no_switch_sets_its_field(cli, tmp_path, flag, field, value) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, f"--overlap-grad-reduce {flag}")
    assert sf.strategy[field] is value, sf.strategy
    assert sf.fields[field] == flag
    assert field not in _read(tmp_path, "--overlap-grad-reduce").strategy or \
        _read(tmp_path, "--overlap-grad-reduce").strategy[field] is not value
    # the launch's switch prices as the field set by hand on the launch without it
    by_flag = _step(cli, tmp_path, f"--overlap-grad-reduce {flag}")
    sets = ["--set", f"strategy.{field}={str(value).lower()}"]
    if flag == "--no-check-for-nan-in-loss-and-grad":
        assert sf.strategy["check_for_nan_in_loss"] is False
        sets += ["--set", "strategy.check_for_nan_in_loss=false"]
    by_hand = _step(cli, tmp_path, "--overlap-grad-reduce", *sets)
    assert by_flag == by_hand


def test_gradient_accumulation_fusion_off_moves_the_step(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The unfused add (tests/test_grad_accumulation_fusion.py prices it by hand) makes the step slower, and only in
    the launch that passes the switch."""
    assert _step(cli, tmp_path, "--no-gradient-accumulation-fusion") > _step(cli, tmp_path, "")


# ---------------------------------------------------------------------------------------------------------------
# switches that turn off what the model prices on, not read: named where they change it

@pytest.mark.parametrize(("flags", "named"), [
    # noflags40 reads --no-bias-swiglu-fusion / --no-bias-gelu-fusion (strategy eager_activation) and the
    # --no-/--disable-tp-comm-overlap-ag / -rs / -bulk-* parts (tests/test_noflags40.py); these two stay unread:
    # Transformer Engine >= 2.0 ignores fp8_wgrad, >= 1.5 the split parts
    ("--fp8-format hybrid --no-fp8-wgrad", "--no-fp8-wgrad (not read"),
    ("--tp-comm-overlap --sequence-parallel --no-tp-comm-split-ag", "--no-tp-comm-split-ag (changes nothing"),
    # core_r0.8.0 to core_v0.15.0 spell the same parts --disable-tp-comm-* (arguments.py L2094-2109, L2254-2258 at
    # core_v0.15.0); review39: they were listed as unknown flags, without why
    ("--tp-comm-overlap --sequence-parallel --disable-tp-comm-split-rs", "--disable-tp-comm-split-rs (changes nothing"),
])
def test_not_read_switches_are_named(tmp_path, flags, named) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, flags)
    assert any(u.startswith(named) for u in sf.unused), sf.unused
    assert sum(u.split(" ")[0] == named.split(" ")[0] for u in sf.unused) == 1, sf.unused  # named once


@pytest.mark.parametrize("flags", [
    "--no-bias-swiglu-fusion",  # no --swiglu: Megatron-LM reads bias_gelu_fusion (argument_utils.py L314-319)
    "--swiglu --no-bias-gelu-fusion",
    "--disable-bias-linear --no-bias-gelu-fusion",  # validate_args turns bias_gelu_fusion off without biases
    "--no-fp8-wgrad",  # no fp8
    "--no-tp-comm-overlap-rs",  # no --tp-comm-overlap
    "--disable-tp-comm-split-rs",
])
def test_not_read_switches_silent_where_they_change_nothing(tmp_path, flags) -> None:  # type: ignore[no-untyped-def]
    sf = _read(tmp_path, flags)
    assert not any("not read" in u or "not a Megatron-LM switch" in u for u in sf.unused), sf.unused
