"""review18b: Megatron-LM launch scripts that bash and argparse read differently from the parser of review17f.

Each expectation is what bash passes to pretrain_gpt.py, worked by hand from the shell's rules (bash(1): SHELL GRAMMAR
(lists of commands), Arrays ("${name[@]}" expands each element to a word; referencing an array without a subscript
is its element 0), Here Documents (the lines up to the delimiter are the command's standard input)), then argparse's
(a repeated option: the last one wins). The echo / printf / here-document texts hold flags that bash never passes.
"""

from __future__ import annotations

from pathlib import Path

from scalemodel.specs.frameworks import read_strategy_file

LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64\n"


def _read(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "launch.sh"
    p.write_text(text)
    return read_strategy_file(str(p))


# --- commands that print their arguments pass none of them ---

def test_echo_after_the_launch_sets_nothing(tmp_path: Path) -> None:
    """bash runs the launch (tp 2), then echo prints its words: argparse never sees '--tensor-model-parallel-size 8'.
    Before: the echo line's words were appended to the launch's and argparse's last-wins rule read tp 8."""
    s = _read(tmp_path, LAUNCH + "echo done --tensor-model-parallel-size 8\n")
    assert s.strategy["tp"] == 2
    assert any(u.startswith("echo done") and "prints its arguments" in u for u in s.unused)
    assert not any("given again" in u for u in s.unused)


def test_printf_before_the_launch_sets_nothing(tmp_path: Path) -> None:
    """printf's words are its own: no pipeline-parallel size reaches pretrain_gpt.py. Before: pp 4."""
    s = _read(tmp_path, "printf '%s\\n' --pipeline-model-parallel-size 4\n" + LAUNCH)
    assert s.strategy["tp"] == 2 and "pp" not in s.strategy


def test_echo_in_a_bare_flag_list(tmp_path: Path) -> None:
    """A flags file with no launch command: the echo line still passes nothing. Before: pp 4."""
    s = _read(tmp_path, "--tensor-model-parallel-size 2 --micro-batch-size 1\necho --pipeline-model-parallel-size 4\n")
    assert s.strategy["tp"] == 2 and "pp" not in s.strategy


# --- here-documents are a command's input ---

def test_here_document_after_the_launch_sets_nothing(tmp_path: Path) -> None:
    """The here-document's line is cat's standard input, not a command. Before: tp 8 (merged, last wins)."""
    s = _read(tmp_path, LAUNCH + "cat > cfg.yaml <<EOF\n  tp: --tensor-model-parallel-size 8\nEOF\n")
    assert s.strategy["tp"] == 2
    assert any("here-document" in u for u in s.unused)


def test_apostrophe_in_a_here_document_is_not_a_quote(tmp_path: Path) -> None:
    """bash reads "it's" in a here-document as text: the script runs the launch with tp 2. Before: refused,
    "No closing quotation" (the apostrophe opened a quote that ran to the end of the file)."""
    s = _read(tmp_path, "cat > notes.txt <<'END'\nit's the first run\nEND\n" + LAUNCH)
    assert s.strategy["tp"] == 2 and s.training["micro_batch"] == 1


def test_dash_here_document_strips_tabs_before_the_delimiter(tmp_path: Path) -> None:
    """<<- strips leading tabs, so '\\tEND' closes it and the launch after it is read (tp 2)."""
    s = _read(tmp_path, "cat <<-END\n\t--pipeline-model-parallel-size 4\n\tEND\n" + LAUNCH)
    assert s.strategy["tp"] == 2 and "pp" not in s.strategy


# --- arrays are expanded where the launch names them ---

def test_array_expanded_at_its_reference(tmp_path: Path) -> None:
    """'--tensor-model-parallel-size 4 "${ARGS[@]}"' with ARGS holding tp 2: argparse sees 4 then 2 and keeps 2.
    Before: the array's words stood where the array was written (line 1), so 2 then 4: tp 4."""
    s = _read(tmp_path, "ARGS=(--tensor-model-parallel-size 2)\n"
                        'torchrun pretrain_gpt.py --tensor-model-parallel-size 4 "${ARGS[@]}" --micro-batch-size 1\n')
    assert s.strategy["tp"] == 2


def test_array_no_command_names_passes_nothing(tmp_path: Path) -> None:
    """An array the launch never expands: bash passes none of it (pp stays unset). Before: pp 4."""
    s = _read(tmp_path, "UNUSED=(--pipeline-model-parallel-size 4)\n" + LAUNCH)
    assert "pp" not in s.strategy
    assert any(u.startswith("UNUSED=") and "expands" in u for u in s.unused)


def test_array_named_without_a_subscript_is_its_first_element(tmp_path: Path) -> None:
    """$ARGS of an array is "${ARGS[0]}": only --sequence-parallel is passed, not the tensor-parallel size.
    Before: every element was read (tp 2)."""
    s = _read(tmp_path, "ARGS=(--sequence-parallel --tensor-model-parallel-size 2)\n"
                        "torchrun pretrain_gpt.py $ARGS --micro-batch-size 1\n")
    assert "tp" not in s.strategy and s.strategy["sequence_parallel"] is True


def test_array_expanded_twice(tmp_path: Path) -> None:
    """"${A[@]}" named twice passes its words twice (the same micro-batch, no conflict)."""
    s = _read(tmp_path, "A=(--micro-batch-size 2)\n"
                        'torchrun pretrain_gpt.py "${A[@]}" --tensor-model-parallel-size 2 "${A[@]}"\n')
    assert s.training["micro_batch"] == 2 and s.strategy["tp"] == 2
    assert not any("given again" in u for u in s.unused)


# --- the launch among several launch-word commands; a variable given flags twice ---

def test_the_launch_is_chosen_after_expansion(tmp_path: Path) -> None:
    """A preprocessing command on its own line, then the launch whose flags are all in $GPT_ARGS: the launch is the
    torchrun (3 Megatron-LM flags once expanded), the preprocessing command is said and its flags not read."""
    s = _read(tmp_path, "GPT_ARGS=\"--tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64\"\n"
                        "python tools/preprocess_data.py --input x.json --workers 8 --seq-length 4096\n"
                        "torchrun pretrain_gpt.py $GPT_ARGS\n")
    assert s.strategy["tp"] == 2 and s.training["micro_batch"] == 1
    assert "seq_len" not in s.training
    assert any(u.startswith("python tools/preprocess_data.py") and "line 3" in u for u in s.unused)


def test_flags_assigned_in_both_branches_are_said(tmp_path: Path) -> None:
    """if / else assigning TP_ARGS: bash runs one branch, which depends on $BIG at run time. The later (tp 2) is read
    and the earlier assignment is said, not dropped silently."""
    s = _read(tmp_path, 'if [ "$BIG" = 1 ]; then TP_ARGS="--tensor-model-parallel-size 8"; '
                        'else TP_ARGS="--tensor-model-parallel-size 2"; fi\n'
                        "torchrun pretrain_gpt.py $TP_ARGS --micro-batch-size 1\n")
    assert s.strategy["tp"] == 2
    assert any(u.startswith("TP_ARGS=--tensor-model-parallel-size 8") and "assigned again" in u for u in s.unused)


def test_case_branch_assignment_is_read(tmp_path: Path) -> None:
    """'big) TP="..." ;;': the word after a case pattern is an assignment (read as the later branch, and said)."""
    s = _read(tmp_path, 'case "$SIZE" in\n  big) TP="--tensor-model-parallel-size 8" ;;\n'
                        '  *) TP="--tensor-model-parallel-size 2" ;;\nesac\n'
                        "torchrun pretrain_gpt.py $TP --micro-batch-size 1\n")
    assert s.strategy["tp"] == 2
    assert any("assigned again" in u for u in s.unused)


def test_self_extension_is_not_a_second_assignment(tmp_path: Path) -> None:
    """ARGS="$ARGS --more" adds to what ARGS holds: no note, every flag read."""
    s = _read(tmp_path, 'ARGS="--tensor-model-parallel-size 2"\nARGS="$ARGS --micro-batch-size 1"\n'
                        "torchrun pretrain_gpt.py $ARGS\n")
    assert s.strategy["tp"] == 2 and s.training["micro_batch"] == 1
    assert s.unused == []


def test_a_count_flag_without_its_value_is_refused_even_if_given_again(tmp_path: Path) -> None:
    """An array named without [@] passes its first element, '--micro-batch-size', and the next word is a flag:
    argparse stops at it ("expected one argument"), whatever the later '--micro-batch-size 2'. Before: micro-batch 2
    read, the valueless one only noted as given again."""
    import pytest

    from scalemodel.errors import InputError

    with pytest.raises(InputError, match="--micro-batch-size: expected a count, got no value"):
        _read(tmp_path, "B=(--micro-batch-size 1)\n"
                        'torchrun pretrain_gpt.py $B --tensor-model-parallel-size 4 --micro-batch-size 2\n')


def test_a_shift_in_arithmetic_is_not_a_here_document(tmp_path: Path) -> None:
    """'$((1<<y))' shifts; it opens no here-document, so the launch after it (and a later line reading 'y') is read
    as written: tp 2."""
    s = _read(tmp_path, "X=$((1<<y))\n" + LAUNCH + "y\n")
    assert s.strategy["tp"] == 2 and not any("here-document" in u for u in s.unused)
