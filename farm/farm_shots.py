"""What both farm task scripts share: the job's shot list and its errors.

``bake_shot.py`` and ``render_frames.py`` import this file from their own folder; the Open Job
Description template embeds it next to them (same ``filename`` folder), so a worker still needs
only Blender and the Selvedge extension.
"""

import glob
import os


class TaskError(Exception):
    """A task that cannot run as the job describes it: reported in one line, exit status 1."""


def script_args(argv):
    return argv[argv.index("--") + 1 :] if "--" in argv else argv[1:]


def split_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def resolve_shot(project, shots, count, index):
    """The absolute .blend path of shot ``index`` (1-based); TaskError when the job is inconsistent."""
    project = os.path.abspath(os.path.expanduser(project))
    paths = []
    for item in split_list(shots):
        pattern = item if os.path.isabs(item) else os.path.join(project, item)
        if any(c in item for c in "*?["):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise TaskError(f"shot pattern {item!r} matches no file in {project}")
            paths += matches
        else:
            paths.append(os.path.normpath(pattern))
    if not paths:
        raise TaskError("the job's shot list is empty")
    if len(paths) != count:
        raise TaskError(
            f"the shot list names {len(paths)} shot(s) but the job has ShotCount={count} tasks; "
            "make ShotCount equal the number of shots"
        )
    if not 1 <= index <= count:
        raise TaskError(f"shot index {index} is outside 1..{count}")
    return paths[index - 1]
