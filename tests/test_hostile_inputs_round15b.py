"""Hostile-input round 15b: the surfaces added after round 15 (the flex dispatcher's backend, shared-expert
overlap, the align switches, their Megatron-LM flags, cuDNN releases, piped hybrid patterns, plan --strategy).

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

SMALL = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8"]


# --- a --set value with a byte that is not UTF-8 -----------------------------------------------------------------
# "--set strategy.moe_flex_backend=$'\xff'" (any --set value) was a UnicodeEncodeError traceback: the shell's byte
# reaches Python as a lone surrogate (os.fsdecode's surrogateescape) and PyYAML's reader encodes the value as UTF-8.

@pytest.mark.parametrize("item, byte", [("strategy.moe_flex_backend=\udcff", "\\xff"),
                                        ("training.micro_batch=1\udcfe", "\\xfe"),
                                        ("model.name=a\udc80b", "\\x80")])
def test_a_set_value_with_a_byte_not_utf8_is_refused(cli, item: str, byte: str) -> None:  # type: ignore[no-untyped-def]
    path = item.split("=")[0]
    line = refused(cli, "predict", *SMALL, "--set", item,
                   match=f"error: --set {path}: the value has a byte that is not UTF-8 ({byte}); a value in UTF-8 text")
    line.encode("utf-8")  # the line itself is UTF-8 (no lone surrogate)


# --- a --constraint spelled with an alias replaces the --strategy file's pin, as its key does -----------------------
# plan --strategy run.sh (--moe-flex-dispatcher-backend hybridep, --micro-batch-size 1) with "--constraint
# flex_backend=deepep" (or moe_flex_dispatcher_backend=, mb=, moe_flex=) was refused, "no moe_flex_backend meets
# moe_flex_backend=deepep, moe_flex_backend=hybridep together": the file's pin was kept beside the constraint, which
# replaces it when written moe_flex_backend=deepep.

MOE_LAUNCH = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
              "--expert-model-parallel-size 8 --micro-batch-size 1 --bf16 --moe-token-dispatcher-type flex "
              "--moe-flex-dispatcher-backend hybridep\n")


@pytest.mark.parametrize("text, field, value", [
    ("flex_backend=deepep", "moe_flex_backend", "deepep"), ("moe_flex_dispatcher_backend=deepep", "moe_flex_backend",
                                                            "deepep"),
    ("moe_flex=false", "moe_flex_dispatcher", False), ("mb=2", "micro_batch", 2), ("MB=2", "micro_batch", 2),
])
def test_a_constraint_alias_replaces_the_strategy_file_pin(cli, tmp_path, text: str, field: str, value) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(MOE_LAUNCH)
    got = accepted(cli, "plan", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--top", "2", "--strategy", str(f),
                   "--constraint", text)
    assert got["ranked"], got["why"]
    for row in got["ranked"]:
        assert row["strategy"]["tp"] == 2  # the file's other pins hold
        assert row["strategy"][field] == value, row["strategy"]


# --- plan warns of a flex dispatcher backend on a model without MoE layers -----------------------------------------
# "plan -m llama3-8b --constraint moe_flex_backend=hybridep" (or --set strategy.moe_flex_backend=hybridep) ranked the
# dense rows without a word; round 15 warned of moe_flex_dispatcher / moe_a2a_overlap there, as predict does.

DENSE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--top", "1", "--json"]


@pytest.mark.parametrize("args, said", [
    (["--constraint", "moe_flex_backend=hybridep"], "constraint moe_flex_backend=hybridep"),
    (["--constraint", "flex_backend=hybridep"], "constraint moe_flex_backend=hybridep"),
    (["--set", "strategy.moe_flex_backend=hybridep"], "strategy.moe_flex_backend = hybridep"),
])
def test_plan_warns_of_a_flex_backend_on_a_dense_model(cli, args: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *DENSE, *args)
    assert r.code == 0 and f"warning: {said} is not priced: the model has no MoE layers" in r.err, r.err


@pytest.mark.parametrize("args", [["--constraint", "moe_flex_backend=deepep"],
                                  ["--set", "strategy.moe_flex_backend=deepep"]])
def test_plan_does_not_warn_of_the_default_flex_backend(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *DENSE, *args)
    assert r.code == 0 and "no MoE layers" not in r.err, r.err


# --- a bidirectional control in a file name is written as its escape -----------------------------------------------
# "--strategy $'\u202eyaml.txt'" printed the U+202E (right-to-left override) raw in the error line, which reversed the
# rest of the line on the terminal; the warnings already wrote it as \u202e, and the line's C0/C1 controls as \x1b.

@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200f", "\u2028", "\ufeff"])
def test_an_invisible_or_bidi_character_in_an_error_line_is_escaped(cli, tmp_path, char: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / f"{char}yaml.txt"
    f.write_text("nothing here\n")
    line = refused(cli, "predict", *SMALL, "--strategy", str(f), inputs=(f,),
                   match=f"{tmp_path}/\\u{ord(char):04x}yaml.txt: ")
    assert char not in line, line


def test_an_accented_file_name_in_an_error_line_is_kept(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "modèle.txt"
    f.write_text("nothing here\n")
    refused(cli, "predict", *SMALL, "--strategy", str(f), inputs=(f,), match=f"{tmp_path}/modèle.txt: ")
