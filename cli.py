"""Selvedge's command line: bake cloth in .blend files headless, one shot or many.

Inside Blender (the extension installed and enabled, installed but disabled, or not installed)::

    blender -b shot.blend -P <extension>/cli.py -- --frames 1 250 --objects Shirt --out //cache
    blender -b -P <extension>/cli.py -- shots/*.blend --out //cache/{shot} --jobs 2 --save

With Python and the ``bpy`` module (the folder may have any name)::

    python <extension>/cli.py shots/*.blend --out //cache/{shot} --jobs 2 --threads 1
    cd <extension> && python -m cli shots/a.blend --frames 1 48

Without .blend arguments the file Blender has open is baked in this process, and on success the
script returns so that later Blender arguments (``-f 1`` to render, say) see the baked result.
With .blend arguments every file is a shot baked in its own worker process (at most ``--jobs``
at a time, each with ``--threads`` Numba threads); see ``cli_core.py``.
Run ``cli.py --help`` for the flags. Exit status: 0 all shots baked, 1 a shot failed, 2 bad
arguments.
"""

import importlib
import importlib.util
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Set when the open file baked inside Blender: the script then returns instead of exiting.
_KEEP_BLENDER_RUNNING = False
_IN_BLENDER = "bpy" in sys.modules and bool(getattr(getattr(sys.modules["bpy"], "app", None), "binary_path", ""))


# ----------------------------------------------------------------------------------------------
# Finding the package this file belongs to
def _loaded_package():
    """This folder's package if something imported it already (an enabled extension: bl_ext.<repo>.selvedge)."""
    init = os.path.normcase(str(HERE / "__init__.py"))
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and os.path.normcase(os.path.abspath(path)) == init:
            return module
    return None


def _enable_installed_extension():
    """Inside Blender: enable this folder's extension if it is installed but disabled; else None."""
    try:
        import addon_utils

        init = os.path.normcase(str(HERE / "__init__.py"))
        for module in addon_utils.modules(refresh=False):
            if os.path.normcase(os.path.abspath(getattr(module, "__file__", "") or "")) == init:
                addon_utils.enable(module.__name__, default_set=False, handle_error=None)
                return sys.modules.get(module.__name__)
    except Exception as error:  # fall back to loading the folder directly
        print(f"selvedge: could not enable the installed extension ({error}); loading {HERE} directly")
    return None


def load_package():
    """The Selvedge package (relative imports need one), importing this folder as ``selvedge`` if needed."""
    if __package__:  # python -m selvedge.cli
        return importlib.import_module(__package__)
    package = _loaded_package()
    if package is None and _IN_BLENDER:
        package = _enable_installed_extension()
    if package is not None:
        return package
    name = "selvedge" if "selvedge" not in sys.modules else "selvedge_cli"
    spec = importlib.util.spec_from_file_location(name, HERE / "__init__.py", submodule_search_locations=[str(HERE)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


def _support(package):
    return importlib.import_module(package.__name__ + ".cli_core")


def _ensure_registered(package):
    import bpy

    if not hasattr(bpy.types.Scene, "selvedge"):
        package.register()


def _set_numba_threads(threads: int) -> None:
    """Fix the Numba thread count: by environment before Numba is imported, and at run time after."""
    if "numba" not in sys.modules:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        return
    try:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    except Exception as error:
        print(f"selvedge: could not set the Numba thread count to {threads}: {error}")


def _numba_threads():
    numba = sys.modules.get("numba")
    return int(numba.get_num_threads()) if numba is not None else None


# ----------------------------------------------------------------------------------------------
# One shot, in this process (a worker, or the file Blender has open)
class ShotFailed(Exception):
    pass


def _apply_settings(bpy, opts, support, shot_name):
    scene = bpy.context.scene
    s = scene.selvedge
    if opts.frames:
        s.use_scene_frame_range = False
        s.frame_start, s.frame_end = opts.frames
    if opts.substeps:
        s.substeps = opts.substeps
    if opts.iterations:
        s.iterations = opts.iterations
    if opts.mode:
        s.solve_mode = opts.mode
    if opts.stretch_refinements is not None:
        s.stretch_refinements = opts.stretch_refinements
    if opts.out is not None:
        with warnings.catch_warnings():
            # Blender 4.5+ warns that this StringProperty lacks PATH_SUPPORTS_BLEND_RELATIVE; the bake
            # resolves '//' itself (bpy.path.abspath), so the value is right.
            warnings.simplefilter("ignore", RuntimeWarning)
            s.cache_folder = support.blend_relative_out(opts.out, shot_name)


def _restrict_objects(bpy, names):
    """Bake only ``names``: other cloth objects get role None for the bake; returns the undo list."""
    scene = bpy.context.scene
    in_scene = {o.name for o in scene.objects}
    missing = [n for n in names if n not in in_scene]
    if missing:
        raise ShotFailed(f"no object named {', '.join(map(repr, missing))} in scene {scene.name!r}")
    not_cloth = [n for n in names if bpy.data.objects[n].selvedge.role != "CLOTH"]
    if not_cloth:
        raise ShotFailed(
            f"{', '.join(map(repr, not_cloth))}: not a Selvedge cloth (role "
            f"{bpy.data.objects[not_cloth[0]].selvedge.role.title()}); set Object > Selvedge > Role "
            "to Cloth and save the file"
        )
    undo = []
    for obj in scene.objects:
        if obj.selvedge.role == "CLOTH" and obj.name not in names:
            undo.append(obj)
            obj.selvedge.role = "NONE"
    return undo


def bake_open_file(opts, package, shot_name, emit) -> dict:
    """Bake the open file's scene as ``opts`` says; returns the result event's fields. Raises on failure."""
    import bpy

    from_package = importlib.import_module(package.__name__ + ".operators.bake")
    support = _support(package)
    _apply_settings(bpy, opts, support, shot_name)
    # The solver's packages loaded (a DependencyError fails the shot with its one message) and, on the
    # first bake on this machine, Numba's compile announced in the log and timed apart from the frames.
    importlib.import_module(package.__name__ + ".dependencies").prepare_bake(
        lambda level, text: print(f"{shot_name} | {text}", flush=True),
        bpy.context.scene.selvedge.network_mode,
        log=None,
    )
    undo = _restrict_objects(bpy, opts.objects) if opts.objects else []
    try:
        messages = []
        job_class = from_package.ShapeKeyBake if opts.shape_keys else from_package.CacheBake
        job = job_class(bpy.context, log=messages.append)
        sim = job.sim
        objects = [run.obj.name for run in sim.runs]
        folder = str(job.folder) if not opts.shape_keys else ""
        emit(
            support.event_line(
                "start",
                shot=shot_name,
                frames=[sim.first, sim.last],
                objects=objects,
                cache_folder=folder,
                stems=getattr(job, "stems", []),
                blend=bpy.data.filepath,
                threads=_numba_threads(),
            )
        )
        print(
            f"{shot_name} | baking {', '.join(objects)}, frames {sim.first}-{sim.last}"
            + (f" into {folder}" if folder else " to shape keys"),
            flush=True,
        )
        every = max(1, opts.progress_every)
        while True:
            more = job.step()
            if sim.done and (sim.done % every == 0 or sim.finished):
                for run in sim.runs:
                    d = run.cloth.last_diagnostics
                    print(
                        support.progress_line(
                            shot_name,
                            run.obj.name,
                            sim.first + sim.done,
                            sim.last,
                            sim.done,
                            sim.total,
                            float(d.timings_ms.get("total", sim.last_ms)),
                            float(d.strain_max),
                        ),
                        flush=True,
                    )
            if not more:
                break
        written = job.finish()
        for message in messages:
            if "warning" in message.lower():
                print(f"{shot_name} | {message}", flush=True)
    finally:
        for obj in undo:
            obj.selvedge.role = "CLOTH"
    result = {"frames": [sim.first, sim.last], "objects": objects, "cache_folder": folder}
    if opts.shape_keys:
        result["shape_keys"] = sum(len(v) for v in written.values())
    else:
        result["caches"] = [bpy.data.objects[name].selvedge.bake_cache_file for name in objects]
    if opts.save:
        bpy.ops.wm.save_mainfile()
        result["saved"] = True
        print(f"{shot_name} | saved {bpy.data.filepath}", flush=True)
    return result


def _failure_message(error: BaseException) -> str:
    if isinstance(error, OSError):
        return f"{error.strerror or error} ({error.filename or 'file'})"
    text = str(error).strip() or type(error).__name__
    return text


def run_worker(opts, package) -> int:
    """``--worker``: open one .blend, bake it, print the result event; the exit status says how it went."""
    support = _support(package)

    def emit(line):
        print(line, flush=True)

    blend = opts.blends[0] if opts.blends else ""
    shot = opts.shot_name or Path(blend).stem
    t0 = time.perf_counter()
    fields = {}
    try:
        _set_numba_threads(opts.threads)
        import bpy

        _ensure_registered(package)
        if not os.path.isfile(blend):
            raise ShotFailed(f"{blend}: no such .blend file")
        if os.path.abspath(bpy.data.filepath or "") != os.path.abspath(blend):
            try:
                bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False, use_scripts=opts.enable_autoexec)
            except RuntimeError as error:
                raise ShotFailed(f"cannot open {blend}: {str(error).strip()}") from None
        fields = bake_open_file(opts, package, shot, emit)
        status, message, code = "ok", "", 0
    except Exception as error:
        status, message, code = "failed", _failure_message(error), 1
        if not _expected(package, error):
            traceback.print_exc()
        print(f"{shot} | FAILED: {message}", flush=True)
    emit(
        support.event_line(
            "result", shot=shot, status=status, message=message, seconds=time.perf_counter() - t0, **fields
        )
    )
    return code


def _expected(package, error) -> bool:
    errors = importlib.import_module(package.__name__ + ".operators.errors")
    return isinstance(error, (ShotFailed, *errors.EXPECTED_ERRORS))


def run_open_file(opts, package) -> int:
    """Inside Blender without .blend arguments: bake the open file here and print a one-row summary."""
    import bpy

    support = _support(package)
    _set_numba_threads(opts.threads)
    _ensure_registered(package)
    shot = opts.shot_name or Path(bpy.data.filepath).stem or "untitled"
    result = support.ShotResult(shot=shot, blend=bpy.data.filepath)
    t0 = time.perf_counter()
    try:
        for key, value in bake_open_file(opts, package, shot, lambda line: None).items():
            setattr(result, key, value)
        result.status = "ok"
    except Exception as error:
        result.status, result.message = "failed", _failure_message(error)
        if not _expected(package, error):
            traceback.print_exc()
    result.seconds = time.perf_counter() - t0
    global _KEEP_BLENDER_RUNNING
    _KEEP_BLENDER_RUNNING = result.ok
    print(support.summary_table([result]), flush=True)
    if opts.summary_json:
        support.write_summary_json(opts.summary_json, [result])
    return 0 if result.ok else 1


# ----------------------------------------------------------------------------------------------
# Many shots: the coordinator (no bpy needed here)
def run_shots(opts, package) -> int:
    support = _support(package)
    if opts.shape_keys and not opts.save:
        raise support.UsageError(
            "--shape-keys keeps its result in the .blend: add --save (or bake the open file "
            "inside Blender without .blend arguments)"
        )
    shots, problems = support.expand_shots(opts.blends)
    if not shots:
        raise support.UsageError("; ".join(problems) or "no .blend files given")
    support.plan_logs(shots, opts.out, opts.logs)
    clashes = support.shared_cache_folders(shots)
    if clashes:
        raise support.UsageError("; ".join(clashes))
    for problem in problems:
        print(f"selvedge: {problem}", flush=True)

    if opts.blender:
        executable = [opts.blender, "-b", "--python-exit-code", "1", "-P", str(HERE / "cli.py"), "--"]
    elif _IN_BLENDER:
        import bpy

        executable = [bpy.app.binary_path, "-b", "--python-exit-code", "1", "-P", str(HERE / "cli.py"), "--"]
    else:
        executable = [sys.executable, str(HERE / "cli.py")]
    print(f"selvedge: {len(shots)} shot(s), {opts.jobs} at a time, {opts.threads} Numba thread(s) each", flush=True)

    missing = [s for s in shots if not os.path.isfile(s.blend)]
    pool = support.Pool(
        lambda shot: executable + support.worker_args(opts, shot.blend, shot.name),
        lambda shot: support.worker_environment(opts.threads),
        echo=lambda text: print(text, flush=True),
        timeout=opts.worker_timeout,
    )
    results_by_shot = {}
    for shot in missing:
        results_by_shot[shot.name] = support.ShotResult(
            shot=shot.name, blend=shot.blend, status="failed", message=f"{shot.blend}: no such .blend file"
        )
        print(f"{shot.name} | FAILED: {shot.blend}: no such .blend file", flush=True)
    runnable = [s for s in shots if s.name not in results_by_shot]
    for result in pool.run(runnable, opts.jobs):
        results_by_shot[result.shot] = result
    results = [results_by_shot[s.name] for s in shots]
    support.overwritten_caches(results)
    print(support.summary_table(results), flush=True)
    if opts.summary_json:
        support.write_summary_json(opts.summary_json, results)
    return 0 if all(r.ok for r in results) else 1


def main(argv=None) -> int:
    argv = list(sys.argv if argv is None else argv)
    package = load_package()
    support = _support(package)
    args = support.script_args(argv) if (not _IN_BLENDER or "--" in argv) else []
    try:
        opts = support.parse_args(args)
        if opts.worker:
            return run_worker(opts, package)
        if not opts.blends:
            if _IN_BLENDER:
                import bpy

                if bpy.data.filepath:
                    return run_open_file(opts, package)
            raise support.UsageError("no .blend files given (and no file is open in Blender)")
        return run_shots(opts, package)
    except support.UsageError as error:
        print(f"selvedge: error: {error}", file=sys.stderr, flush=True)
        print(
            "usage: cli.py [--] BLEND... [--frames START END] [--objects NAME...] [--out FOLDER] "
            "[--jobs N] [--threads N] ...  (--help for all flags)",
            file=sys.stderr,
            flush=True,
        )
        return 2


if __name__ == "__main__":
    status = main()
    # Inside Blender a successful bake of the open file returns, so that Blender goes on with its
    # remaining arguments (-f 1 to render, say); every other outcome ends the process with its status,
    # through module_exit: the 4.x bpy modules crash (4.2) or hang (4.5) in their own teardown at exit.
    if not (_IN_BLENDER and _KEEP_BLENDER_RUNNING and status == 0):
        importlib.import_module(load_package().__name__ + ".module_exit").exit_process(status)
