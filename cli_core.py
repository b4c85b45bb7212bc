"""The Blender-free half of the command line (``cli.py``): arguments, shot lists, the worker pool,
progress and summary formatting. No ``bpy`` here, so it is unit-tested in plain Python and the
coordinating process of a multi-shot run never loads Blender at all.

Process model: the coordinator expands the .blend arguments into shots, fails missing files at
once, and runs the rest in a bounded pool (``--jobs``) of worker processes, one shot each. A
worker is a fresh interpreter (``python cli.py --worker ...``) or a fresh Blender
(``blender -b -P cli.py -- --worker ...``) started with ``NUMBA_NUM_THREADS`` set to ``--threads``
so that ``jobs x threads`` never exceeds the cores. Workers print human progress lines and
machine-readable ``@selvedge {json}`` event lines on stdout; the coordinator copies every line
into the shot's log file, echoes the human ones, and builds the summary from the events.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Prefix of the machine-readable lines a worker prints (one JSON object after it).
EVENT_PREFIX = "@selvedge "
#: The solver's ``SOLVE_MODES`` as a literal: the coordinator runs without Numba (a test checks they match).
SOLVE_MODES = ("auto", "serial", "colored", "jacobi")
#: Placeholder in ``--out`` replaced by the shot's name (the .blend file's stem).
SHOT_FIELD = "{shot}"

USAGE_EXAMPLES = """\
examples:
  blender -b shot.blend -P cli.py -- --frames 1 250 --objects Shirt --out //cache
  python cli.py shots/*.blend --out //cache/{shot} --jobs 2 --threads 1 --save
  blender -b -P cli.py -- "shots/sh0[1-4]*.blend" --jobs 4 --summary-json bake.json

exit status: 0 when every shot baked, 1 when any shot failed, 2 for bad arguments.
"""


class UsageError(Exception):
    """The command line itself is wrong (exit status 2)."""


def script_args(argv: list[str]) -> list[str]:
    """The script's own arguments: everything after the first ``--`` (Blender's convention), or all
    of ``argv[1:]`` when there is no ``--`` (``python cli.py ...``)."""
    if "--" in argv:
        return argv[argv.index("--") + 1 :]
    return argv[1:]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cli.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=USAGE_EXAMPLES,
        description="Bake Selvedge cloth in .blend files headless: one PC2 cache (+ JSON sidecar) per cloth "
        "object, played back by a Mesh Cache modifier. Without .blend arguments (inside Blender), "
        "bakes the open file in this process.",
    )
    p.add_argument(
        "blends",
        nargs="*",
        metavar="BLEND",
        help=".blend files or glob patterns (quoted globs are expanded here); each is one shot. Put "
        "them before the options: --objects takes every name that follows it",
    )
    p.add_argument(
        "--frames",
        nargs=2,
        type=int,
        metavar=("START", "END"),
        help="frame range to bake (default: the scene's Selvedge range)",
    )
    p.add_argument(
        "--objects",
        nargs="+",
        metavar="NAME",
        help="bake only these cloth objects (default: every object whose Selvedge role is Cloth)",
    )
    p.add_argument(
        "--out",
        metavar="FOLDER",
        help="cache folder; '//' is relative to each .blend, '{shot}' is replaced by the .blend's name "
        "(default: the scene's Scene > Selvedge > Cache Folder)",
    )
    p.add_argument("--substeps", type=int, metavar="N", help="solver substeps per frame")
    p.add_argument("--iterations", type=int, metavar="N", help="constraint passes per substep")
    p.add_argument("--mode", choices=SOLVE_MODES, help="solve mode")
    p.add_argument(
        "--stretch-refinements",
        type=int,
        metavar="N",
        help="run a frame that ends stretched again with 2x, 4x ... the substeps, up to N times (0: off; "
        "default: the shot's Stretch Refinements)",
    )
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="shots baked at once (worker processes; default 1)")
    p.add_argument(
        "--threads", type=int, metavar="N", help="Numba threads per worker (default: cores // jobs, at least 1)"
    )
    p.add_argument(
        "--shape-keys",
        action="store_true",
        help="bake to shape keys (stored in the .blend) instead of a PC2 cache; needs --save when "
        "baking .blend files given on the command line",
    )
    p.add_argument(
        "--save",
        action="store_true",
        help="save each .blend after a successful bake, with the Mesh Cache modifier (or shape keys) set "
        "up and the settings given here",
    )
    p.add_argument(
        "--progress-every",
        type=int,
        default=1,
        metavar="N",
        help="print a progress line every N frames (default 1; the last frame is always printed)",
    )
    p.add_argument(
        "--logs", metavar="FOLDER", help="folder for the per-shot log files (default: next to each shot's cache folder)"
    )
    p.add_argument("--summary-json", metavar="FILE", help="also write the summary as JSON to FILE")
    p.add_argument(
        "--blender",
        metavar="PATH",
        help="run the workers with this Blender executable (default: the running Blender, or this "
        "Python, which then needs the bpy module)",
    )
    p.add_argument(
        "--worker-timeout",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stop a worker that has not finished its shot after SECONDS (default 0: no limit); the "
        "shot fails with a message saying so",
    )
    p.add_argument(
        "--enable-autoexec",
        action="store_true",
        help="let the .blend files run their Python scripts and drivers (Blender's -y)",
    )
    # Internal: the coordinator starts workers with these.
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--shot-name", help=argparse.SUPPRESS)
    return p


@dataclass
class Options:
    blends: list[str]
    frames: tuple[int, int] | None
    objects: list[str] | None
    out: str | None
    substeps: int | None
    iterations: int | None
    mode: str | None
    jobs: int
    threads: int
    shape_keys: bool
    save: bool
    progress_every: int
    logs: str | None
    summary_json: str | None
    blender: str | None
    enable_autoexec: bool
    worker: bool
    shot_name: str | None
    worker_timeout: float = 0.0
    stretch_refinements: int | None = None


def parse_args(args: list[str], cpu_count: int | None = None) -> Options:
    """Parse the script's arguments (see :func:`script_args`); raises :class:`UsageError`."""
    parser = build_parser()

    def fail(message):
        raise UsageError(message)

    parser.error = fail  # argparse would sys.exit(2) inside Blender's -P script; we decide ourselves
    ns = parser.parse_args(args)
    if ns.frames is not None and ns.frames[1] < ns.frames[0]:
        raise UsageError(f"--frames {ns.frames[0]} {ns.frames[1]}: the end frame must not precede the start")
    for name in ("substeps", "iterations", "jobs", "threads", "progress_every"):
        value = getattr(ns, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if ns.stretch_refinements is not None and not 0 <= ns.stretch_refinements <= 4:
        raise UsageError(f"--stretch-refinements must be from 0 to 4, got {ns.stretch_refinements}")
    if ns.worker_timeout < 0:
        raise UsageError(f"--worker-timeout must be 0 (no limit) or more seconds, got {ns.worker_timeout:g}")
    if ns.out is not None and not ns.out.strip():
        raise UsageError("--out is empty")
    cores = cpu_count or os.cpu_count() or 1
    threads = ns.threads or max(1, cores // ns.jobs)
    return Options(
        blends=list(ns.blends),
        frames=tuple(ns.frames) if ns.frames else None,
        objects=ns.objects,
        out=ns.out,
        substeps=ns.substeps,
        iterations=ns.iterations,
        mode=ns.mode,
        jobs=ns.jobs,
        threads=threads,
        shape_keys=ns.shape_keys,
        save=ns.save,
        progress_every=ns.progress_every,
        logs=ns.logs,
        summary_json=ns.summary_json,
        blender=ns.blender,
        enable_autoexec=ns.enable_autoexec,
        worker=ns.worker,
        shot_name=ns.shot_name,
        worker_timeout=ns.worker_timeout,
        stretch_refinements=ns.stretch_refinements,
    )


def worker_args(options: Options, blend: str, shot_name: str) -> list[str]:
    """The arguments a worker gets for one shot (the shared options, one .blend)."""
    out = [
        blend,
        "--worker",
        "--shot-name",
        shot_name,
        "--threads",
        str(options.threads),
        "--progress-every",
        str(options.progress_every),
    ]
    if options.frames:
        out += ["--frames", str(options.frames[0]), str(options.frames[1])]
    if options.objects:
        out += ["--objects", *options.objects]
    if options.out is not None:
        out += ["--out", options.out]
    for name in ("substeps", "iterations", "mode", "stretch_refinements"):
        value = getattr(options, name)
        if value is not None:
            out += [f"--{name.replace('_', '-')}", str(value)]
    if options.shape_keys:
        out.append("--shape-keys")
    if options.save:
        out.append("--save")
    if options.enable_autoexec:
        out.append("--enable-autoexec")
    return out


# ----------------------------------------------------------------------------------------------
# Shots
@dataclass
class Shot:
    name: str
    blend: str  # absolute path as given (may not exist)
    cache_folder: str | None = None  # absolute, when --out says where (else the worker reports it)
    log: str | None = None


def _has_magic(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def expand_shots(patterns: list[str]) -> tuple[list[Shot], list[str]]:
    """Shots for the .blend arguments, in the order given (globs sorted), each file once.

    Returns ``(shots, problems)``: a pattern that matches nothing is a problem, and so is a plain
    path that does not exist (it stays a shot so that it shows up, failed, in the summary).
    """
    shots, problems, seen = [], [], set()
    for pattern in patterns:
        if _has_magic(pattern):
            matches = sorted(glob.glob(os.path.expanduser(pattern)))
            if not matches:
                problems.append(f"{pattern}: no file matches this pattern")
                continue
        else:
            matches = [os.path.expanduser(pattern)]
        for match in matches:
            path = os.path.abspath(match)
            if path in seen:
                continue
            seen.add(path)
            shots.append(Shot(name=Path(path).stem, blend=path))
    names: dict[str, int] = {}
    for shot in shots:  # two shots called 'a' (in different folders) become 'a' and 'a-2'
        count = names.get(shot.name, 0) + 1
        names[shot.name] = count
        if count > 1:
            shot.name = f"{shot.name}-{count}"
    return shots, problems


def resolve_out(out: str, blend: str, shot_name: str) -> str:
    """``--out`` for one shot as an absolute folder: '{shot}' filled in, '//' relative to the .blend."""
    folder = out.replace(SHOT_FIELD, shot_name)
    if folder.startswith("//"):
        folder = os.path.join(os.path.dirname(blend), folder[2:])
    return os.path.abspath(os.path.expanduser(folder))


def blend_relative_out(out: str, shot_name: str) -> str:
    """``--out`` as the worker stores it in the scene: '{shot}' filled in, '//' kept."""
    return out.replace(SHOT_FIELD, shot_name)


def plan_logs(shots: list[Shot], out: str | None, logs: str | None) -> None:
    """Per-shot log files: in ``--logs``, else next to the shot's cache folder, else next to the .blend."""
    used: set[str] = set()
    for shot in shots:
        if out is not None:
            shot.cache_folder = resolve_out(out, shot.blend, shot.name)
        if logs:
            folder = os.path.abspath(logs)
        elif shot.cache_folder:
            folder = os.path.dirname(shot.cache_folder.rstrip(os.sep)) or shot.cache_folder
        else:
            folder = os.path.dirname(shot.blend)
        path = os.path.join(folder, f"{shot.name}.selvedge.log")
        if path in used:
            path = os.path.join(folder, f"{shot.name}-{len(used)}.selvedge.log")
        used.add(path)
        shot.log = path


def shared_cache_folders(shots: list[Shot]) -> list[str]:
    """Problems: two shots that would write into the same cache folder at the same time."""
    owner: dict[str, str] = {}
    problems = []
    for shot in shots:
        if shot.cache_folder is None:
            continue
        key = os.path.normcase(shot.cache_folder)
        if key in owner:
            problems.append(
                f"shots {owner[key]} and {shot.name} would both write into {shot.cache_folder}; "
                f"put {SHOT_FIELD} in --out (e.g. --out //cache/{SHOT_FIELD})"
            )
        else:
            owner[key] = shot.name
    return problems


# ----------------------------------------------------------------------------------------------
# Results and formatting
@dataclass
class ShotResult:
    shot: str
    blend: str
    status: str = "pending"  # ok | failed
    message: str = ""
    frames: list[int] = field(default_factory=list)  # [first, last] when known
    objects: list[str] = field(default_factory=list)
    seconds: float = 0.0
    caches: list[str] = field(default_factory=list)  # '//...' when relative to the .blend
    cache_folder: str = ""
    shape_keys: int = 0
    saved: bool = False
    log: str = ""
    returncode: int | None = None
    threads: int | None = None  # Numba threads the worker ran with

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def event_line(event: str, **data) -> str:
    return EVENT_PREFIX + json.dumps({"event": event, **data}, sort_keys=True)


def parse_event(line: str) -> dict | None:
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        doc = json.loads(line[len(EVENT_PREFIX) :])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def progress_line(shot: str, obj: str, frame: int, last: int, done: int, total: int, ms: float, strain: float) -> str:
    """One progress line: shot, object, frame, time per frame, max edge strain."""
    return (
        f"{shot} | {obj} | frame {frame} of {last} ({done}/{total}) | {ms:8.1f} ms/frame | "
        f"max strain {100 * strain:6.2f}%"
    )


def summary_table(results: list[ShotResult]) -> str:
    """The end-of-run table: one row per shot, then one line per cache file and per failure."""
    header = ("shot", "status", "frames", "objects", "seconds", "caches")
    rows = []
    for r in results:
        frames = f"{r.frames[0]}-{r.frames[1]}" if len(r.frames) == 2 else "-"
        if r.shape_keys and not r.caches:
            caches = f"{r.shape_keys} shape keys" + (" (saved)" if r.saved else "")
        else:
            caches = ", ".join(r.caches) if r.caches else "-"
        rows.append((r.shot, r.status.upper(), frames, ",".join(r.objects) or "-", f"{r.seconds:.1f}", caches))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    lines = [
        "Selvedge bake summary",
        "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows]
    failed = [r for r in results if not r.ok]
    for r in failed:
        lines.append(f"FAILED {r.shot} ({r.blend}): {r.message}" + (f"  [log: {r.log}]" if r.log else ""))
    ok = len(results) - len(failed)
    lines.append(f"{ok} of {len(results)} shot(s) baked" + (f", {len(failed)} failed" if failed else ""))
    return "\n".join(lines)


def write_summary_json(path: str, results: list[ShotResult]) -> None:
    doc = {"ok": all(r.ok for r in results), "shots": [asdict(r) for r in results]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=1), encoding="utf-8")


def overwritten_caches(results: list[ShotResult]) -> None:
    """Mark shots whose cache files another shot of the same run also wrote (the later one won)."""
    writer: dict[str, ShotResult] = {}
    for r in results:
        if not r.ok:
            continue
        for cache in r.caches:
            key = os.path.normcase(_absolute_cache(cache, r.blend))
            if key in writer and writer[key] is not r:
                for clash in (writer[key], r):
                    clash.status = "failed"
                    clash.message = (
                        f"{writer[key].shot} and {r.shot} both wrote {key}; one overwrote the other "
                        f"(put {SHOT_FIELD} in --out)"
                    )
            writer[key] = r


def _absolute_cache(cache: str, blend: str) -> str:
    return os.path.join(os.path.dirname(blend), cache[2:]) if cache.startswith("//") else cache


# ----------------------------------------------------------------------------------------------
# The pool
#: Seconds a worker may take to exit once it has reported its result. A worker that reported and
#: does not exit is hung in its interpreter's teardown (the 4.x bpy modules do, see module_exit.py):
#: it is stopped and its shot keeps its result, with a note.
EXIT_GRACE_S = 120.0


class _Watchdog:
    """Kills a process when a deadline passes; the deadline can be moved (``arm``) while it runs."""

    def __init__(self, proc):
        self.proc, self.fired, self.reason = proc, False, ""
        self._timer = None
        self._lock = threading.Lock()

    def arm(self, seconds: float, reason: str) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(seconds, self._fire, args=(reason,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, reason: str) -> None:
        with self._lock:
            if self.proc.poll() is None:
                self.fired, self.reason = True, reason
                self.proc.kill()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()


class Pool:
    """Run shots in at most ``jobs`` worker processes at a time (a thread per running worker).

    ``timeout`` (seconds, 0: none) stops a worker that has not finished; a worker that reported its
    result and does not exit within :data:`EXIT_GRACE_S` is stopped too, keeping its result.
    """

    def __init__(self, command_for, env_for, echo=print, timeout: float = 0.0, exit_grace: float = EXIT_GRACE_S):
        self.command_for = command_for  # shot -> argv
        self.env_for = env_for  # shot -> environment
        self.echo = echo
        self.timeout = timeout
        self.exit_grace = exit_grace
        self._lock = threading.Lock()

    def _say(self, text: str) -> None:
        with self._lock:
            self.echo(text)

    def run(self, shots: list[Shot], jobs: int) -> list[ShotResult]:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(self.run_one, shots))

    def run_one(self, shot: Shot) -> ShotResult:
        result = ShotResult(shot=shot.name, blend=shot.blend, cache_folder=shot.cache_folder or "")
        t0 = time.perf_counter()
        log, log_path, log_note = _open_log(shot.log)
        result.log = log_path or ""
        if log_note:
            self._say(f"{shot.name} | note: {log_note}")
        started: dict = {}
        try:
            argv = self.command_for(shot)
            if log:
                log.write(f"$ {' '.join(argv)}\n")
            self._say(f"{shot.name} | started: {shot.blend}" + (f" (log: {log_path})" if log_path else ""))
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self.env_for(shot),
                    text=True,
                    encoding="utf-8",
                    errors="replace",
                    bufsize=1,
                )
            except OSError as error:
                result.status, result.message = "failed", f"cannot start the worker {argv[0]!r}: {error}"
                return result
            watchdog = _Watchdog(proc)
            if self.timeout:
                watchdog.arm(self.timeout, "timeout")
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                if log:
                    log.write(raw)
                    log.flush()
                event = parse_event(line)
                if event is None:
                    if line.strip():
                        self._say(line if line.startswith(shot.name + " |") else f"{shot.name} | {line}")
                    continue
                kind = event.get("event")
                if kind == "start":
                    started = event
                    result.frames = event.get("frames", [])
                    result.objects = event.get("objects", [])
                    result.cache_folder = event.get("cache_folder", result.cache_folder)
                    result.threads = event.get("threads")
                elif kind == "result":
                    for key in (
                        "status",
                        "message",
                        "frames",
                        "objects",
                        "caches",
                        "cache_folder",
                        "shape_keys",
                        "saved",
                    ):
                        if key in event:
                            setattr(result, key, event[key])
                    watchdog.arm(self.exit_grace, "exit")
            result.returncode = proc.wait()
            watchdog.cancel()
            if watchdog.fired and watchdog.reason == "timeout" and result.status == "pending":
                result.status = "failed"
                result.message = (
                    f"the worker did not finish within --worker-timeout {self.timeout:g} s and was stopped; see the log"
                )
            elif watchdog.fired and watchdog.reason == "exit":
                note = (
                    f"the worker reported its result but did not exit within {self.exit_grace:g} s and was "
                    "stopped (a bpy module hanging in its teardown)"
                )
                result.message = f"{result.message}; {note}" if result.message else note
                if result.ok:
                    self._say(f"{shot.name} | note: {note}")
            elif result.status == "pending":
                result.status = "failed"
                result.message = f"the worker stopped without a result (exit status {result.returncode}); see the log"
            elif result.ok and result.returncode != 0 and not watchdog.fired:
                result.status = "failed"
                result.message = f"the worker exited with status {result.returncode} after baking"
            if not result.ok:
                removed = remove_temporary_files(started)
                if removed:
                    result.message += f" (removed {len(removed)} temporary file(s))"
        finally:
            result.seconds = time.perf_counter() - t0
            if log:
                log.write(f"# {result.status}: {result.message}\n")
                log.close()
        return result


def _open_log(path: str | None):
    """Open a shot's log; if its folder cannot be written, fall back to the temporary folder."""
    if not path:
        return None, None, None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "w", encoding="utf-8"), path, None
    except OSError as error:
        fallback_dir = os.path.join(tempfile.gettempdir(), "selvedge-logs")
        fallback = os.path.join(fallback_dir, os.path.basename(path))
        try:
            os.makedirs(fallback_dir, exist_ok=True)
            return (
                open(fallback, "w", encoding="utf-8"),
                fallback,
                f"cannot write the log {path} ({error.strerror or error}); logging to {fallback}",
            )
        except OSError:
            return None, None, f"cannot write the log {path} ({error.strerror or error}); no log"


def remove_temporary_files(started: dict) -> list[str]:
    """After a worker died mid-bake, remove the temporary cache files it left (only its own names).

    The cache writers use ``.<name>.<random>.tmp`` next to the destination and remove them
    themselves on any Python-level failure; this covers a worker that was killed or crashed.
    """
    folder = started.get("cache_folder")
    stems = started.get("stems") or []
    removed = []
    if not folder or not os.path.isdir(folder):
        return removed
    for stem in stems:
        for ext in ("pc2", "json"):
            for tmp in glob.glob(os.path.join(glob.escape(folder), f".{glob.escape(stem)}.{ext}.*.tmp")):
                try:
                    os.unlink(tmp)
                    removed.append(tmp)
                except OSError:
                    pass
    return removed


def worker_environment(threads: int, base: dict | None = None) -> dict:
    """A worker's environment: a fixed Numba thread count (read by Numba when it is imported)."""
    env = dict(os.environ if base is None else base)
    env["NUMBA_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env
