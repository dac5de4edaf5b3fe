"""Strict JSON output, shared console helpers, and the one atomic writer of every output file."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from scalemodel.errors import InputError
from scalemodel.specs import notices
from scalemodel.specs.files import read_by_this_invocation

SCHEMA_VERSION = "1.0"


def _plain(obj: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses and pydantic models to JSON-ready values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise InputError(f"a result is not finite ({obj!r}), so no JSON was written", where="result",
                             allowed="inputs within physical ranges (sizes, bandwidths, latencies, times)")
        return obj
    if hasattr(obj, "model_dump"):
        return _plain(obj.model_dump(mode="json"))
    if hasattr(obj, "__dataclass_fields__"):
        return _plain({k: getattr(obj, k) for k in obj.__dataclass_fields__})
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return _plain(float(obj))
    return str(obj)


def to_json(payload: dict[str, Any], command: str) -> str:
    """One strictly valid JSON document with ``schema_version`` and ``command`` first, and the
    ``warnings`` raised while reading the inputs (:mod:`scalemodel.specs.notices`) last."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "command": command}
    doc.update(payload)
    own = list(payload.get("warnings", []))
    doc["warnings"] = own + [w for w in notices.current() if w not in own]
    return json.dumps(_plain(doc), allow_nan=False, indent=2)


def emit_json(payload: dict[str, Any], command: str) -> None:
    sys.stdout.write(to_json(payload, command) + "\n")


# --- files the tool writes ------------------------------------------------------------------------

def check_output_path(path: str | os.PathLike[str], option: str) -> Path:
    """Refuse an output path before any work: a folder (or a name ending in /), a missing folder,
    something that is not a regular file, or a file this invocation has read (an input)."""
    text = os.fspath(path)
    shown = text if len(text) <= 200 else text[:200] + "..."
    if not text or text.endswith(("/", os.sep)) or text in (".", ".."):
        raise InputError(f"{shown!r} names a folder, not a file", where=option, allowed="a file path, e.g. out.yaml")
    p = Path(text)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot write {shown!r}: {getattr(exc, 'strerror', None) or exc}", where=option,
                         allowed="a writable file path") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{shown!r} is a folder", where=option, allowed="a file path inside it")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{shown!r} exists and is not a regular file", where=option,
                             allowed="a new file or a regular file to replace")
        source = read_by_this_invocation(p)
        if source is not None:
            raise InputError(f"{shown!r} is an input of this command ({source}); writing it would replace it",
                             where=option, allowed="a different output file")
    parent = p.resolve().parent if st is not None else (p.parent if str(p.parent) else Path("."))
    if not parent.is_dir():
        raise InputError(f"folder {str(parent)!r} does not exist", where=option,
                         allowed="a file path in an existing folder")
    return p


def _new_file_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_file(path: str | os.PathLike[str], data: str | bytes, option: str) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in the target's folder, flushed to disk,
    then renamed over the target, so an interrupted or failed run leaves the previous file as it was.
    Refuses what :func:`check_output_path` refuses. A symlink is followed (the file it points to is
    replaced); a replaced file keeps its permission bits. Every file scalemodel writes goes through here.
    """
    p = check_output_path(path, option)
    target = Path(os.path.realpath(p))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = _new_file_mode()
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = ""
    except OSError as exc:
        raise InputError(f"cannot write {str(p)!r}: {exc.strerror or exc}", where=option,
                         allowed="a writable file path") from None
    finally:
        if tmp:  # failed or interrupted (KeyboardInterrupt included): the old file is untouched
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p
