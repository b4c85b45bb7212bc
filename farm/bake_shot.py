"""Farm task: bake one shot of a job with the Selvedge CLI (the Bake step of farm/openjd/).

Run by Blender (what a farm worker does)::

    blender -b --python-exit-code 1 -P bake_shot.py -- --project /mnt/proj --shots "shots/a.blend,shots/b.blend" \
        --shot-count 2 --shot-index 1 --frames 1 48 --cache "//cache/{shot}"

or by a Python that has the ``bpy`` module (``python bake_shot.py -- ...``). The Open Job Description
template embeds this file, so a worker only needs Blender and the Selvedge extension.

``--shots`` is a comma-separated list of .blend paths relative to ``--project`` (glob patterns are
expanded, sorted); ``--shot-index`` (1-based) picks this task's shot and ``--shot-count`` must equal
the number of shots the list expands to, so that a job whose task count disagrees with its shot
list fails every task with a clear message instead of silently skipping shots. The bake itself is
``cli.py <shot> --frames ... --out ...`` (found with ``--selvedge``, else in the installed
extension): one worker process, per-shot log next to the cache folder, temporary files only until
the bake succeeds (a failed bake leaves no partial cache), exit status 1 on failure.
"""

import argparse
import os
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # farm_shots.py lies beside this script
from farm_shots import TaskError, resolve_shot, script_args, split_list


def parse(argv):
    p = argparse.ArgumentParser(prog="bake_shot.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--project", required=True, help="project folder the shot paths are relative to")
    p.add_argument("--shots", required=True, help="comma-separated .blend paths or globs, relative to --project")
    p.add_argument("--shot-count", type=int, required=True, help="number of shots the job was built for")
    p.add_argument("--shot-index", type=int, required=True, help="this task's shot, 1-based")
    p.add_argument("--frames", type=int, nargs=2, metavar=("START", "END"), required=True)
    p.add_argument(
        "--cache", default="//cache/{shot}", help="cache folder; '//' = next to the .blend, {shot} = its name"
    )
    p.add_argument("--objects", default="", help="comma-separated cloth object names (default: every cloth object)")
    p.add_argument("--substeps", type=int, default=0, help="0: the shot's own setting")
    p.add_argument("--iterations", type=int, default=0, help="0: the shot's own setting")
    p.add_argument(
        "--mode", default="scene", help="auto, serial, colored, jacobi, or 'scene' for the shot's own setting"
    )
    p.add_argument("--threads", type=int, default=0, help="Numba threads (0: every core of the worker)")
    p.add_argument("--save", default="false", help="'true': save the shot with its Mesh Cache modifiers set up")
    p.add_argument(
        "--selvedge",
        default="",
        help="the Selvedge extension folder (holding cli.py); default: the installed extension",
    )
    return p.parse_args(script_args(argv))


def find_cli(selvedge):
    """cli.py of the Selvedge extension: ``--selvedge`` if given, else the installed extension's folder."""
    if selvedge:
        cli = os.path.join(os.path.expanduser(selvedge), "cli.py")
        if not os.path.isfile(cli):
            raise TaskError(f"no cli.py in the Selvedge folder {selvedge!r} (SelvedgeDir)")
        return cli
    try:
        import addon_utils

        for module in addon_utils.modules(refresh=False):
            if module.__name__.split(".")[-1] == "selvedge":
                cli = os.path.join(os.path.dirname(module.__file__), "cli.py")
                if os.path.isfile(cli):
                    return cli
    except ImportError:
        pass
    raise TaskError(
        "the Selvedge extension is not installed for this Blender; install it on the worker "
        "(blender --command extension install-file -r user_default -e selvedge-*.zip) or set "
        "SelvedgeDir to the extension folder"
    )


def cli_arguments(opts, blend):
    args = [blend, "--frames", str(opts.frames[0]), str(opts.frames[1]), "--out", opts.cache, "--jobs", "1"]
    objects = split_list(opts.objects)
    if objects:
        args += ["--objects", *objects]
    if opts.substeps:
        args += ["--substeps", str(opts.substeps)]
    if opts.iterations:
        args += ["--iterations", str(opts.iterations)]
    if opts.mode and opts.mode != "scene":
        args += ["--mode", opts.mode]
    if opts.threads:
        args += ["--threads", str(opts.threads)]
    if opts.save.lower() in ("1", "true", "yes"):
        args.append("--save")
    return args


def main(argv):
    opts = parse(argv)
    try:
        blend = resolve_shot(opts.project, opts.shots, opts.shot_count, opts.shot_index)
        cli = find_cli(opts.selvedge)
    except TaskError as error:
        print(f"selvedge bake: FAILED: {error}", flush=True)
        return 1
    name = os.path.splitext(os.path.basename(blend))[0]
    print(f"selvedge bake: shot {opts.shot_index} of {opts.shot_count}: {name} ({blend})", flush=True)
    if not os.path.isfile(blend):
        # cli.py reports this too; say it here in the task's own words before it does.
        print(f"selvedge bake: FAILED: shot {name}: {blend}: no such .blend file", flush=True)
        return 1
    argv_cli = [sys.argv[0], "--", *cli_arguments(opts, blend)]
    print("selvedge bake: cli.py " + " ".join(argv_cli[2:]), flush=True)
    saved = sys.argv
    sys.argv = argv_cli
    try:
        runpy.run_path(cli, run_name="__main__")
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        return code
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
