"""Hostile-input round 27: what a corpus of 10,429 cases, each in its own process (15 CPU s, 3 GiB address space),
found beyond rounds 6-26 (4,840 --set items, 984 spec / log / framework files, 2,361 options and output paths,
2,244 HuggingFace config.json keys, and ~100 by hand): every command and spec kind with huge / tiny / zero /
negative / NaN / inf numbers, strings, units, unicode, deep nesting, alias bombs, huge and empty files, directories,
/dev/zero, FIFOs, extends cycles and chains, unknown keys, --set on every field of every spec, output paths that are
inputs (same file, symlink, hard link, another spelling). The CLI contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.cli import complete

# --- a rule across two fields, broken by a --set of the other field, named the built-in file's line ------------------
# Each rule below was refused at the line of the field its message names, in the built-in file
# ("error: .../hardware/clusters/dgx-h100.yaml:9: max_gpus: 16384 GPUs is not whole nodes of 7"), a value that is fine
# there, while the user's --set of the other field made the conflict. Now the --set item is named (specs.base
# field_error's `also`, as review21i / review24b did for hybrid.pattern and memory_reserved), the field once.

@pytest.mark.parametrize("cluster, item, said", [
    ("dgx-h100", "cluster.gpus_per_node=7",
     "error: --set cluster.gpus_per_node: max_gpus: 16384 GPUs is not whole nodes of 7; a multiple of gpus_per_node"),
    ("dgx-h100", "cluster.tiers.3.span=8192",
     "error: --set cluster.tiers.3.span: max_gpus: 16384 GPUs is more than the outermost tier 'ib-core' spans (8192)"),
    ("aws-p5", "cluster.accelerator=a100-sxm-80g",
     "error: --set cluster.accelerator: nccl_tuner: 'aws-ofi-p5' on 8 a100-sxm-80g accelerators a node (ampere)"),
    ("aws-p5", "cluster.gpus_per_node=16",
     "error: --set cluster.gpus_per_node: nccl_tuner: 'aws-ofi-p5' on 16 h100-sxm accelerators a node"),
    ("aws-p5", "cluster.tiers.1.protocol=ici", "error: --set cluster.tiers.1.protocol: nccl_tuner: 'aws-ofi-p5' on 8"),
])
def test_a_cluster_rule_broken_by_a_set_names_the_set(cli, cluster: str, item: str,  # type: ignore[no-untyped-def]
                                                     said: str) -> None:
    line = refused(cli, "predict", "-c", cluster, "-m", "llama3-8b", "-n", "64", "--set", item)
    assert line.startswith(said) and ".yaml" not in line, line


@pytest.mark.parametrize("model, item, said", [
    ("nemotron-3-nano", "model.layers=10",
     "error: --set model.layers: hybrid.pattern: has 52 layers, but layers is 10; one character (M * - E) per layer"),
    ("nemotron-3-super", "model.hidden=512",
     "error: --set model.hidden: moe.latent_size: 1024 is not below hidden 512"),
    ("nemotron-3-nano", "model.moe=null", "error: --set model.moe: hybrid.pattern: E layers but no moe block"),
    ("nemotron-3-nano", "model.hybrid.mamba.heads=null",  # heads from expand x hidden / head_dim: 84
     "error: --set model.hybrid.mamba.heads: hybrid.mamba.groups: heads 84 is not a multiple of groups 8"),
])
def test_a_workload_rule_broken_by_a_set_names_the_set(cli, model: str, item: str,  # type: ignore[no-untyped-def]
                                                      said: str) -> None:
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", model, "-n", "64", "--set", item)
    assert line.startswith(said) and ".yaml" not in line, line


def test_the_field_a_set_broke_is_said_once(cli) -> None:  # type: ignore[no-untyped-def]
    """A --set inside the other field's group (tiers.3.span for a rule on tiers) named the refused field twice
    ("--set cluster.tiers.3.span: max_gpus: max_gpus: ...")."""
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64",
                   "--set", "cluster.tiers.3.span=8192")
    assert line.count("max_gpus:") == 1, line


def test_the_rule_of_the_set_field_itself_is_unchanged(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "64", "--set", "model.hybrid.pattern=MMMM",
            match="error: --set model.hybrid.pattern: has 4 layers, but layers is 52")


# --- shell completion with a COMP_CWORD outside the words ------------------------------------------------------------
# COMP_CWORD=-100 (a variable set by hand, or a shell's completion function gone wrong) was an IndexError traceback
# printed into the user's terminal at every TAB; -2 indexed the words from the end. Bash's range is 0 .. len(words).

@pytest.mark.parametrize("cword", ["-100", "-2", "-1", "4", "99999999999999999999"])
def test_completion_with_a_word_index_outside_the_words(capsys: pytest.CaptureFixture[str], cword: str) -> None:
    complete({"COMP_WORDS": "scalemodel predict -c", "COMP_CWORD": cword})
    got = capsys.readouterr().out.split()
    complete({"COMP_WORDS": "scalemodel predict -c"})  # no index: the word after the last, as bash asks
    assert got == capsys.readouterr().out.split() and "dgx-h100" in got


# --- a torchtitan TOML integer of 5,000 digits ------------------------------------------------------------------------
# tomllib reads an integer with int(), whose 4,300-digit limit raised a ValueError that is not a TOMLDecodeError: a
# traceback. DeepSpeed's JSON and Megatron-LM's flags already refused such a number in one line.

def test_a_torchtitan_integer_beyond_python_s_digit_limit(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text("[training]\nseq_len = " + "9" * 5000 + "\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: an integer of more than 4300 digits, beyond what Python reads from text; "
                  "integers of a few digits")
