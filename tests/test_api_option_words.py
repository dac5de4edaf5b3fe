"""The Python API names its arguments, not the CLI's options, in the text of an error too.

calibrate_log on an nccl-tests log that does not say how many ranks ran was answered
"cannot tell how many ranks the log used; pass --ranks N": there is no --ranks in the API, its argument is ``ranks``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import scalemodel
from scalemodel.errors import InputError

_ONE_ROW = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            "        8    2 float sum -1 10.0 0.00 0.00 0 10.0 0.00 0.00 0\n")


def test_calibrate_log_asks_for_the_ranks_argument(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(_ONE_ROW)
    with pytest.raises(InputError) as exc:
        scalemodel.calibrate_log(log, "dgx-h100")
    text = str(exc.value)
    assert text.startswith(f"{log}: cannot tell how many ranks the log used; pass ranks N"), text
    assert "--" not in text.replace(str(log), ""), text


def test_the_cli_still_names_its_option(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "nccl.log"
    log.write_text(_ONE_ROW)
    r = cli("calibrate", str(log), "-c", "dgx-h100")
    assert r.code == 2 and "pass --ranks N" in r.err, (r.code, r.err)
