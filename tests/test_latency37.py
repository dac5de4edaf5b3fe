"""latency37: a predict without ``--strategy`` does not import the strategy-file reader (benchmarks/README.md).

The refusal that names a strategy file's unread FSDP flags (commands.common._zero_not_read) needs only the words
``ZERO_NOT_READ``, which now live in specs.training; the StrategyFile dataclass (three methods exec'd from source at
class creation) loads with a ``--strategy`` reader alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from scalemodel.specs import megatron_args, strategy_file, training

_PREDICT = ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "64", "--tp", "8", "--json"]


def _modules_after(argv: list[str]) -> set[str]:
    """The scalemodel modules a fresh process has imported after running ``argv`` through the CLI."""
    code = ("import contextlib, io, json, sys\nfrom scalemodel.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(json.loads(sys.argv[1]))\n    except SystemExit:\n        pass\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scalemodel'))))\n")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True, check=True,
                         env=env)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_dense_predict_does_not_import_the_strategy_file_reader() -> None:
    mods = _modules_after(_PREDICT)
    assert "scalemodel.engine.predict" in mods  # the query ran
    assert "scalemodel.specs.strategy_file" not in mods


def test_the_words_are_one_object_on_every_route() -> None:
    # the reader that writes the entry (megatron_args), the StrategyFile that finds it, and the refusal that
    # quotes it read the same text
    assert strategy_file.ZERO_NOT_READ is training.ZERO_NOT_READ is megatron_args.ZERO_NOT_READ
    sf = strategy_file.StrategyFile("x.sh", "megatron", unused=["--use-torch-fsdp2 (FSDP is not read from the flags: "
                                                                 "give --zero fsdp)", "--foo (not modelled)"])
    assert sf.zero_not_read() == ["--use-torch-fsdp2 (FSDP is not read from the flags: give --zero fsdp)"]
