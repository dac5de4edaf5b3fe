"""Read nccl-tests output (any era, text or ``-J`` JSON) into rows of size and time.

Parsing follows docs/model.md#nccl-tests-logs (nccl-tests src/util.cu): text logs of
every era (older: no ``root`` column and a float ``error``; middle: ``root`` and ``#wrong``; current:
version and "Collective test starting" lines), launcher prefixes (``srun -l`` ``0:``, mpirun ``[0]``,
``[1,0]<stdout>:``), interleaved ``NCCL INFO``/``WARN`` lines, duplicated headers, ``N/A`` in #wrong,
and the ``-J`` JSON output. A data row is any line whose first two tokens are (ASCII) integers followed
by blocks of (time, algbw, busbw, #wrong) for out-of-place and in-place. Rows with a time that is not
a positive finite number are skipped, and the reader warns naming their lines (an in-place time of 0 or N/A
counts as not measured); a ``-J``
entry whose fields are not numbers is an error naming it.

The file is read by :func:`read_nccl_tests` through :mod:`scalemodel.specs.files` (a regular file of at
most :data:`~scalemodel.specs.files.MAX_LOG_BYTES`, holding at most :data:`MAX_ROWS` data rows) as UTF-8,
or UTF-16 after a UTF-16 byte-order mark; undecodable bytes become U+FFFD.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scalemodel.errors import InputError, first_of
from scalemodel.specs import files, notices
from scalemodel.specs.loader import load_json

MAX_INT_DIGITS = 30
#: The largest size (bytes) a row may print: 1 PiB (2^50). nccl-tests allocates each size's send and receive
#: buffers on every GPU (``AllocateBuffs``: ncclMemAlloc / cudaMalloc of the largest size, NVIDIA/nccl-tests@a0b82b22
#: src/common.cu L1104-1116), so a size past a GPU's memory (288 GiB on a GB300, the catalog's largest) was never
#: run; 1 PiB is some 3,600 times that, so no real log is refused, while a 30-digit size (fix29: it was fitted,
#: and the fit exited 1 on a huge residual) is.
MAX_SIZE_BYTES = float(2**50)
#: The longest time (seconds) one collective may print: an hour. A GPU's whole memory (288 GiB) moved once over a
#: 1 Gbit/s link takes about 41 minutes; a longer time is no measurement of a collective.
MAX_TIME_S = 3600.0
#: Data rows in one log: a test prints one row per size (about 30 for -b 8 -e 8G -f 2), ``-d all`` / ``-o all``
#: a few hundred. The bound keeps a 64 MiB log of short rows (a million of them) from taking minutes to fit.
MAX_ROWS = 20_000

_OP_FROM_TEST = {
    "all_reduce": "allreduce", "reduce_scatter": "reducescatter", "all_gather": "allgather", "alltoall": "alltoall",
    "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv", "hypercube": "sendrecv",
}
_PREFIX = re.compile(r"^\s*(?:\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?|\d+:)\s?")
_GLUED = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?")
_NUM = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$", re.ASCII)
_INT = re.compile(rf"^[0-9]{{1,{MAX_INT_DIGITS}}}$")


@dataclass
class NcclRow:
    size_bytes: float
    count: int
    dtype: str
    time_oop_s: float
    busbw_oop_Bps: float
    time_ip_s: float | None = None
    busbw_ip_Bps: float | None = None

    @property
    def time_s(self) -> float:
        """Mean of out-of-place and in-place times (both measure the same operation)."""
        if self.time_ip_s is None:
            return self.time_oop_s
        return 0.5 * (self.time_oop_s + self.time_ip_s)


@dataclass
class NcclLog:
    op: str
    ranks: int | None
    rows: list[NcclRow] = field(default_factory=list)
    fmt: str = "text"
    nccl_version: str = ""
    #: host of each rank, from the ``#  Rank N Group G Pid P on HOST device D`` lines (empty when not printed)
    rank_hosts: dict[int, str] = field(default_factory=dict)
    #: rows whose check found wrong elements (``#wrong`` > 0 out of place or in place, -J ``nwrong``), as
    #: (where: "line N" or "result N", size in bytes, wrong elements): their times are kept, and the reader says so
    wrong_rows: list[tuple[str, float, int]] = field(default_factory=list)
    #: data rows not fitted, as "line N" (a time that is not a positive finite number, a size or count that is not an
    #: integer of at most 30 digits, or too few columns): the reader says so, where it used to drop them without a word
    skipped_rows: list[str] = field(default_factory=list)

    def skipped_note(self, source: str) -> str | None:
        """One line naming the data rows that were not fitted (None when there are none)."""
        if not self.skipped_rows:
            return None
        shown = first_of(self.skipped_rows, 5)
        return (f"{source[:200]}: {len(self.skipped_rows)} data row(s) not fitted: {shown} (a time that is not a "
                f"positive finite number of microseconds, a size or count that is not a whole number, or missing "
                f"columns); the fit uses the other {len(self.rows)} rows")

    def wrong_note(self, source: str) -> str | None:
        """One line naming the rows whose results nccl-tests found wrong (None when there are none): nccl-tests
        counts the wrong elements of each checked result (src/common.cu CheckData, printed as #wrong); a
        collective that returns wrong data may have taken a path a correct run does not, so its time is
        suspect, yet it is a measurement and is fitted."""
        if not self.wrong_rows:
            return None
        shown_rows = ", ".join(f"{w} (size {s:.0f} B, {n} wrong)" for w, s, n in self.wrong_rows[:5])
        more = f" and {len(self.wrong_rows) - 5} more" if len(self.wrong_rows) > 5 else ""
        return (f"{source[:200]}: {len(self.wrong_rows)} row(s) with #wrong > 0 (nccl-tests found wrong results): "
                f"{shown_rows}{more}; their times are fitted as measured: check the run (a bad GPU, link or "
                f"NCCL setting) or drop the rows")

    def layout(self) -> dict[str, int] | None:
        """GPUs per host in order of first appearance, {host: ranks}, or None when the log names no hosts."""
        if not self.rank_hosts:
            return None
        out: dict[str, int] = {}
        for r in sorted(self.rank_hosts):
            out[self.rank_hosts[r]] = out.get(self.rank_hosts[r], 0) + 1
        return out


def _is_num(tok: str) -> bool:
    return bool(_NUM.match(tok))


def _op_from(text: str) -> str | None:
    m = re.search(r"Collective test (?:starting|concluded):\s*(\w+?)_perf", text)
    if not m:
        m = re.search(r"\b(\w+?)_perf\b", text)
    if m and m.group(1) in _OP_FROM_TEST:
        return _OP_FROM_TEST[m.group(1)]
    return None


def parse_nccl_tests(text: str, *, op: str | None = None) -> NcclLog:
    """Parse nccl-tests output (any era, text or ``-J`` JSON) into rows of size and time."""
    stripped = text.lstrip()
    if stripped.startswith("{") or re.match(r"\[\s*\{", stripped):
        return _parse_json(stripped, op)
    ranks: set[int] = set()
    hosts: dict[int, str] = {}
    rows: list[NcclRow] = []
    version = ""
    wrong: list[tuple[str, float, int]] = []
    skipped: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _PREFIX.sub("", raw)
        line = _GLUED.sub(" ", line)
        if "NCCL INFO" in line or "NCCL WARN" in line:
            continue
        mv = re.search(r"nccl-tests version (\S+)", line)
        if mv:
            version = mv.group(1)
        # no leading "#?\s*": tried at every blank of a line, it made a long run of blanks quadratic
        md = re.search(r"\bRank\s+(\d{1,9})\s+(?:Group\s+\d+\s+)?Pid\s+\d+(?:\s+on\s+(\S+)\s+device)?", line)
        if md:
            ranks.add(int(md.group(1)))
            if md.group(2):
                hosts[int(md.group(1))] = md.group(2)[:100]
            continue
        body = line.lstrip("#").strip() if not line.lstrip().startswith("#") else ""
        toks = body.split()
        # a line that starts as a data row (size, count, type) but is not read as one is said, not dropped unseen
        # (fuzz34: a size such as 1.5 or 1e400, not an integer, was dropped unsaid: a number too, not only digits)
        looks_data = len(toks) >= 2 and (toks[0].lstrip("-").isdigit() or _is_num(toks[0])) \
            and toks[1].lstrip("-").isdigit() \
            and (len(toks) == 2 or not _is_num(toks[2]))
        if len(toks) < 6 or not (_INT.match(toks[0]) and _INT.match(toks[1])):
            if looks_data:
                skipped.append(f"line {lineno}")
            continue
        rest = [t for t in toks[2:] if _is_num(t) or t == "N/A"]
        # a leading integer root column (-1 or a rank) makes the count 4k + 1
        if len(rest) % 4 == 1:
            rest = rest[1:]
        if len(rest) < 3:
            skipped.append(f"line {lineno}")
            continue
        try:
            vals = [float(t) if t != "N/A" else 0.0 for t in rest]
        except ValueError:
            skipped.append(f"line {lineno}")
            continue
        t_oop, bus_oop = vals[0] * 1e-6, vals[2] * 1e9
        t_ip = vals[4] * 1e-6 if len(vals) >= 7 else None
        bus_ip = vals[6] * 1e9 if len(vals) >= 7 else None
        if not (t_oop > 0 and math.isfinite(t_oop) and all(math.isfinite(v) for v in vals)):
            skipped.append(f"line {lineno}")
            continue
        if t_ip is not None and t_ip < 0:  # a negative time is no measurement: the row is skipped, as above
            skipped.append(f"line {lineno}")
            continue
        if t_ip == 0:  # N/A or 0: no in-place measurement (as a -J entry's), not half the mean time
            t_ip = bus_ip = None
        at = f"LOG: line {lineno}"
        size = _physical(float(toks[0]), f"{at}: size", "size")
        _physical(float(toks[1]), f"{at}: count", "size", "elements")
        for t, col in ((t_oop, "out-of-place time"), (t_ip or 0.0, "in-place time")):
            _physical(t, f"{at}: {col}", "time")
        dtype = next((t for t in toks[2:] if not _is_num(t)), "")
        rows.append(NcclRow(size, int(toks[1]), dtype, t_oop, bus_oop, t_ip, bus_ip))
        # #wrong is an integer count (the older era's float "error", e.g. 4e-07, is rounding, not a count)
        n_wrong = sum(int(rest[k]) for k in (3, 7) if k < len(rest) and _INT.match(rest[k]))
        if n_wrong > 0:
            wrong.append((f"line {lineno}", float(toks[0]), n_wrong))
        if len(rows) > MAX_ROWS:
            raise _too_many_rows()
    if not rows and skipped:  # fuzz28: every row's time 0 (or nan) was "no nccl-tests data rows found" (they were)
        raise InputError(f"no data row can be fitted: {len(skipped)} row(s) skipped ({', '.join(skipped[:5])}"
                         f"{' ...' if len(skipped) > 5 else ''}): a time that is not a positive finite number of "
                         "microseconds, a size or count that is not a whole number, or missing columns", where="LOG",
                         allowed="rows of a size sweep with measured times, as all_reduce_perf prints them")
    if not rows:
        raise InputError("no nccl-tests data rows found", where="LOG",
                         allowed="output of all_reduce_perf and the other *_perf tests, text or -J JSON")
    tests = sorted(set(re.findall(r"Collective test starting:\s*(\w+?)_perf", text)))
    if len(tests) > 1:  # the rows of several tests would be fitted as one collective's
        raise InputError(f"the log holds the output of {len(tests)} tests ({', '.join(t[:40] for t in tests[:4])})",
                         where="LOG", allowed="the output of one *_perf test per log (split the file)")
    found = op or _op_from(text) or "allreduce"
    return NcclLog(found, len(ranks) or None, rows, "text", version, hosts if len(hosts) == len(ranks) else {},
                   wrong, skipped)


def _too_many_rows() -> InputError:
    return InputError(f"more than {MAX_ROWS:,} data rows", where="LOG",
                      allowed=f"at most {MAX_ROWS:,} (one test's sweep is about 30 rows; split a longer log)")


def _physical(value: float, where: str, kind: Literal["time", "size"], unit: str = "bytes") -> float:
    """``value`` where it is within what nccl-tests can print, else an error at ``where`` (the log, its line or entry,
    and the field): a time (in seconds, shown in us) up to :data:`MAX_TIME_S`, a size (in ``unit``: bytes, or
    elements, of 1 byte or more each) up to :data:`MAX_SIZE_BYTES`."""
    time = kind == "time"
    if value <= (MAX_TIME_S if time else MAX_SIZE_BYTES):
        return value
    shown = f"{value * 1e6:.4g} us" if time else f"{value:.4g} {unit}"
    bound = "one hour (3.6e9 us)" if time else f"2^50 = {MAX_SIZE_BYTES:.4g} {unit} (1 PiB, past any GPU's memory)"
    raise InputError(f"{shown}: more than nccl-tests can have measured", where=where, allowed=f"at most {bound}")


def _number(x: Any, where: str, default: float | None) -> float:
    """A finite number >= 0 from a -J field (None means the default; no default makes it required)."""
    if x is None and default is not None:
        return default
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise InputError(f"expected a number >= 0, got {str(x)[:40]!r}", where=where,
                         allowed="nccl-tests -J output (numbers for size, count, time and bus_bw)")
    return float(x)


def _entry(r: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    v = r.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InputError(f"{key} is a {type(v).__name__}, not an object", where=where,
                         allowed="nccl-tests -J output")
    return v


def _parse_json(text: str, op: str | None) -> NcclLog:
    doc: Any = load_json(text, "LOG")
    results: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "size" in x and ("out_of_place" in x or "in_place" in x):
                results.append(x)
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    if not results:
        raise InputError("no result entries (size with out_of_place/in_place) in the JSON", where="LOG",
                         allowed="nccl-tests -J output")
    if len(results) > MAX_ROWS:
        raise _too_many_rows()
    rows = []
    wrong: list[tuple[str, float, int]] = []
    for i, r in enumerate(results):
        where = f"LOG: result {i + 1}"
        oop = _entry(r, "out_of_place", where)
        ip = _entry(r, "in_place", where)
        t_oop = _physical(_number(oop.get("time", ip.get("time")), f"{where}: time", 0.0) * 1e-6, f"{where}: time",
                          "time")
        if not t_oop > 0:
            continue
        size = _physical(_number(r["size"], f"{where}: size", None), f"{where}: size", "size")
        count = _physical(_number(r.get("count", 0), f"{where}: count", 0.0), f"{where}: count", "size", "elements")
        t_ip = _physical(_number(ip["time"], f"{where}: in_place.time", None) * 1e-6, f"{where}: in_place.time",
                         "time") if "time" in ip else None
        bus_ip = _number(ip["bus_bw"], f"{where}: in_place.bus_bw", None) * 1e9 if "bus_bw" in ip else None
        rows.append(NcclRow(size, int(count), str(r.get("type", ""))[:40], t_oop,
                            _number(oop.get("bus_bw", 0.0), f"{where}: out_of_place.bus_bw", 0.0) * 1e9,
                            t_ip if t_ip is not None and t_ip > 0 else None, bus_ip))
        n_wrong = sum(int(_number(e.get("nwrong"), f"{where}: {k}.nwrong", 0.0))
                      for k, e in (("out_of_place", oop), ("in_place", ip)))
        if n_wrong > 0:
            wrong.append((f"result {i + 1}", size, n_wrong))
    if not rows:
        raise InputError("no result entry has a positive time", where="LOG",
                         allowed="nccl-tests -J output with measured times")
    ranks = None
    if isinstance(doc, dict):
        devs = doc.get("devices")
        if isinstance(devs, list) and devs:
            ranks = len(devs)
        name = str(doc.get("config", {}).get("test", "")) if isinstance(doc.get("config"), dict) else ""
        op = op or _op_from(name + "_perf " + json.dumps(doc.get("config", ""))) or None
    return NcclLog(op or "allreduce", ranks, rows, "json", wrong_rows=wrong)


def read_nccl_tests(path: str | Path, *, op: str | None = None) -> NcclLog:
    """Read and parse an nccl-tests log file (bounded: see the module docstring)."""
    text = files.read_log(path, limit=files.MAX_LOG_BYTES, what="nccl-tests log")
    try:
        log = parse_nccl_tests(text, op=op)
    except InputError as exc:
        if exc.where == "LOG" and exc.what.startswith("no nccl-tests data rows"):
            exc = InputError(exc.what + files.nul_note(text), where=exc.where, allowed=exc.allowed)
        raise at_log(exc, str(path)) from None
    for note in (log.skipped_note(str(path)), log.wrong_note(str(path))):
        if note:
            notices.warn(note)
    return log


def at_log(exc: InputError, source: str) -> InputError:
    """``exc`` located at the log file ``source`` where the parser wrote the placeholder ``LOG``: "error: LOG: no
    nccl-tests data rows found" named no file."""
    if exc.where == "LOG" or exc.where.startswith("LOG:"):
        return InputError(exc.what, where=source[:200] + exc.where[3:], allowed=exc.allowed)
    return exc
