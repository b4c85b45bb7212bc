"""Build Selvedge's Blender extension zips, one per platform and Blender Python, with the wheels bundled.

Usage (any Python >= 3.11 with pip; Blender itself is not needed)::

    python scripts/build_extension.py                                     # every platform, Python 3.11 and 3.13
    python scripts/build_extension.py --platform linux-x64 --python 3.11  # one archive
    python scripts/build_extension.py --offline                          # only use wheels already in wheels/

Options may be repeated (``--platform linux-x64 --platform windows-x64``). Output goes to
``dist/`` (``--output-dir``): one ``selvedge-<version>-<platform>-blender<range>.zip`` per
platform and Python, e.g. ``selvedge-0.1.0-linux_x64-blender4.2-5.0.zip`` (Python 3.11 wheels)
and ``selvedge-0.1.0-linux_x64-blender5.1-5.x.zip`` (Python 3.13 wheels). Each archive's
manifest carries the ``blender_version_min``/``blender_version_max`` of the Blender releases
that run its Python (:data:`BLENDER_FOR_PYTHON`), so Blender refuses the wrong one instead of
installing wheels it cannot load. Install one with Blender's *Install from Disk* or
``blender --command extension install-file -r user_default -e <zip>``.

What happens:

1. Wheels are fetched with ``pip download --no-deps --only-binary=:all: --python-version X.Y
   --platform TAG`` for each (platform, Python) pair into ``wheels/<platform>/cpXY/`` (ignored
   by git) and reused from there on later runs. The pins are numba and llvmlite from
   ``requirements/solver.txt`` and :data:`ONNXRUNTIME`. NumPy is never bundled: Blender ships
   it (:data:`SHIPPED_BY_BLENDER`).
2. For each Python, a staging folder ``dist/staging/cpXY/selvedge/`` gets the extension's files
   (the source folder minus the manifest's ``[build] paths_exclude_pattern``, gitignore style as
   in Blender), that Python's wheels under ``wheels/``, and a manifest written from the
   ``tomllib``-parsed source manifest with the Blender version range, ``platforms`` and
   ``wheels`` filled in for every requested platform. Blender's own ``extension build
   --split-platforms`` can be run on this folder and gives the same zips (the package test
   checks that).
3. One zip per platform and Python: the staged files, only that platform's wheels, and a
   manifest whose ``platforms`` and ``wheels`` name that platform only, repeated under
   ``[build.generated]`` as Blender's split build writes it. Wheels are stored uncompressed,
   everything else deflated, as Blender does.

Blender 4.2-5.0 run Python 3.11 and Blender 5.1+ Python 3.13, hence the two archives per platform
(a single archive with both wheel sets would be twice the download: llvmlite alone is ~56 MB per Python).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "blender_manifest.toml"

#: Blender platform -> pip ``--platform`` tags accepted for it (pip does not widen manylinux_2_x
#: tags by itself). Linux: glibc 2.28 is Blender 4.2's own floor (VFX platform 2024). macOS:
#: Blender 4.2-5.0 need macOS 11.2+, Blender 5.1 macOS 12+; onnxruntime's arm64 wheels ask
#: for macOS 14 (see :data:`ONNXRUNTIME`), so Selvedge's learned models need macOS 14+.
PLATFORM_TAGS = {
    "linux-x64": ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"),
    "windows-x64": ("win_amd64",),
    "macos-arm64": ("macosx_14_0_arm64", "macosx_13_0_arm64", "macosx_12_0_arm64", "macosx_11_0_arm64"),
}
#: Python versions of the Blender releases we support (4.2-5.0: 3.11; 5.1+: 3.13).
PYTHONS = ("3.11", "3.13")
#: Python -> the ``blender_version_min`` and ``blender_version_max`` (the first release it does
#: NOT support, as Blender reads it) of that Python's archive. Blender 5.1 moved to Python 3.13;
#: the 3.13 range ends before 6.0, where the next Python change is expected.
BLENDER_FOR_PYTHON = {"3.11": ("4.2.0", "5.1.0"), "3.13": ("5.1.0", "6.0.0")}
#: The ONNX runtime used by ``models/``: cp311 and cp313 wheels exist for all three platforms.
ONNXRUNTIME = "onnxruntime==1.32.0"
#: Blender bundles these; shipping our own copy would shadow Blender's.
SHIPPED_BY_BLENDER = {"numpy"}
SOLVER_REQUIREMENTS = ROOT / "requirements" / "solver.txt"


class BuildError(Exception):
    """The build cannot go on; the message says why."""


# ----------------------------------------------------------------------------------------------
# Requirements and wheels
def normalize(name: str) -> str:
    """Project name as wheel file names spell it (PEP 427/503)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def bundled_requirements(solver_requirements: Path = SOLVER_REQUIREMENTS) -> list[tuple[str, str]]:
    """``[(name, version)]`` to bundle: the solver's ``name==version`` pins minus Blender's own, then onnxruntime."""
    pins = []
    for line in solver_requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, _, marker = line.partition(";")
        name, sep, version = requirement.partition("==")
        if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()):
            raise BuildError(f"{solver_requirements}: expected 'name==version' pins only, got {line!r}")
        if normalize(name) in SHIPPED_BY_BLENDER:
            continue  # Blender's own (its pin and environment marker only concern the dev venvs)
        if marker.strip():
            raise BuildError(
                f"{solver_requirements}: bundled pins must hold for every Python; {line!r} has an environment marker"
            )
        pins.append((name.strip(), version.strip()))
    name, _, version = ONNXRUNTIME.partition("==")
    return pins + [(name, version)]


def python_tag(python: str) -> str:
    return "cp" + python.replace(".", "")


def wheel_dir(cache: Path, platform: str, python: str) -> Path:
    return cache / platform / python_tag(python)


def find_wheel(folder: Path, name: str, version: str) -> Path | None:
    """The cached wheel of ``name==version`` in ``folder`` (one per folder by construction)."""
    found = sorted(folder.glob(f"{normalize(name)}-{version}-*.whl")) if folder.is_dir() else []
    found = [p for p in found if normalize(p.name.split("-")[0]) == normalize(name)]
    if len(found) > 1:
        raise BuildError(
            f"several cached wheels for {name}=={version} in {folder}: {[p.name for p in found]}; "
            "delete the folder and build again"
        )
    return found[0] if found else None


def fetch_wheels(platform: str, python: str, requirements, cache: Path, offline: bool, log=print) -> list[Path]:
    """The wheels for one (platform, Python) pair, downloaded with pip unless already cached."""
    folder = wheel_dir(cache, platform, python)
    missing = [(n, v) for n, v in requirements if find_wheel(folder, n, v) is None]
    if missing:
        if offline:
            raise BuildError(f"--offline: no cached wheel for {', '.join(f'{n}=={v}' for n, v in missing)} in {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python,
            "--dest",
            str(folder),
            "--quiet",
        ]
        for tag in PLATFORM_TAGS[platform]:
            command += ["--platform", tag]
        command += [f"{n}=={v}" for n, v in missing]
        log(f"pip download ({platform}, Python {python}): {' '.join(f'{n}=={v}' for n, v in missing)}")
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"pip download failed for {platform}, Python {python}:\n{result.stderr.strip()}")
    wheels = []
    for name, version in requirements:
        wheel = find_wheel(folder, name, version)
        if wheel is None:
            raise BuildError(f"pip reported success but no {name}=={version} wheel is in {folder}")
        wheels.append(wheel)
    return wheels


# ----------------------------------------------------------------------------------------------
# Manifest
def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise BuildError(f"cannot write {type(value).__name__} values to the manifest")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_assign(key: str, value) -> str:
    """``key = value``; long arrays (the wheel list) one item per line."""
    line = f"{_toml_key(key)} = {_toml_value(value)}"
    if isinstance(value, list) and len(line) > 100:
        line = f"{_toml_key(key)} = [\n" + "".join(f"  {_toml_value(v)},\n" for v in value) + "]"
    return line


def toml_dumps(data: dict) -> str:
    """TOML text for a manifest: scalars, arrays and inline tables at the top, tables after.

    Only ``[build]`` (and ``[build.generated]``) become table sections; any other table is
    written inline, so the text keeps the source manifest's shape.
    """
    lines, tables = [], []
    for key, value in data.items():
        if key == "build" and isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(_toml_assign(key, value))
    for name, table in tables:
        sub = {k: v for k, v in table.items() if isinstance(v, dict)}
        lines += ["", f"[{name}]"] + [_toml_assign(k, v) for k, v in table.items() if k not in sub]
        for key, value in sub.items():
            lines += ["", f"[{name}.{_toml_key(key)}]"] + [_toml_assign(k, v) for k, v in value.items()]
    text = "\n".join(lines) + "\n"
    if tomllib.loads(text) != data:  # cheap guard against a writer bug
        raise BuildError("internal error: the manifest does not survive a TOML round trip")
    return text


def load_manifest(source: Path) -> dict:
    with open(source / MANIFEST, "rb") as fh:
        manifest = tomllib.load(fh)
    if "generated" in manifest.get("build", {}):
        raise BuildError(f"{source / MANIFEST}: [build.generated] is reserved for built archives")
    if manifest.get("wheels"):
        raise BuildError(f"{source / MANIFEST}: leave 'wheels' out of the source manifest; the build fills it in")
    unknown = [p for p in manifest.get("platforms", ()) if p not in PLATFORM_TAGS]
    if unknown:
        raise BuildError(f"{source / MANIFEST}: no wheel tags known for platforms {unknown}; add them to PLATFORM_TAGS")
    return manifest


def with_wheels(manifest: dict, platforms, wheels: list[str], python: str) -> dict:
    """A copy of ``manifest`` for one Python's archive: ``blender_version_min``/``max`` of that Python
    (:data:`BLENDER_FOR_PYTHON`, in place of the source's ``blender_version_min``), then ``platforms``
    and ``wheels``, right after ``platforms`` in key order."""
    low, high = BLENDER_FOR_PYTHON[python]
    out = {}
    for key, value in manifest.items():
        if key in ("wheels", "blender_version_max"):
            continue
        if key == "blender_version_min":
            out["blender_version_min"], out["blender_version_max"] = low, high
            continue
        out[key] = list(platforms) if key == "platforms" else value
        if key == "platforms":
            out["wheels"] = list(wheels)
    if "blender_version_min" not in out:
        out["blender_version_min"], out["blender_version_max"] = low, high
    if "platforms" not in out:
        out["platforms"], out["wheels"] = list(platforms), list(wheels)
    return out


def blender_range_label(python: str) -> str:
    """``blender4.2-5.0`` / ``blender5.1-5.x``: the releases an archive is for, as its file name says it."""
    low, high = (tuple(map(int, v.split(".")[:2])) for v in BLENDER_FOR_PYTHON[python])
    last = f"{high[0]}.{high[1] - 1}" if high[1] else f"{high[0] - 1}.x"
    return f"blender{low[0]}.{low[1]}-{last}"


def archive_name(manifest: dict, platform: str, python: str) -> str:
    return f"{manifest['id']}-{manifest['version']}-{platform.replace('-', '_')}-{blender_range_label(python)}.zip"


# ----------------------------------------------------------------------------------------------
# Files
#: What Blender's builder leaves out when the manifest has no ``[build]`` table.
DEFAULT_EXCLUDE = ("__pycache__/", ".*", "/*.zip", "*.blend[1-9]")


def exclude_patterns(manifest: dict) -> PathExclude:
    build = manifest.get("build", {})
    if "paths" in build:
        raise BuildError("[build] paths is not supported by this script; use paths_exclude_pattern")
    return PathExclude(build.get("paths_exclude_pattern", DEFAULT_EXCLUDE) if build else DEFAULT_EXCLUDE)


class PathExclude:
    """The gitignore-style subset of Blender's ``paths_exclude_pattern``, read as Blender reads it:
    ``*``/``?``/``[]`` globs that never cross ``/``; a leading ``/`` anchors at the root, otherwise
    the pattern matches the path's last components at any depth; a trailing ``/`` matches folders only.
    Negation and ``**`` are refused rather than guessed at.
    """

    def __init__(self, patterns):
        self.rules = []
        for pattern in patterns:
            if pattern.startswith("!") or "**" in pattern:
                raise BuildError(f"paths_exclude_pattern {pattern!r}: '!' and '**' are not supported by this script")
            folder_only = pattern.endswith("/")
            body = pattern.strip("/")
            self.rules.append((body.split("/"), pattern.startswith("/"), folder_only))

    def excluded(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` is excluded, itself or through an excluded parent folder (as Blender's
        matcher reads a path below an excluded folder, e.g. ``docs/x/r.md`` under ``/docs/``)."""
        parts = rel.split("/")
        return any(self._matches(parts[:i], True) for i in range(1, len(parts))) or self._matches(parts, is_dir)

    def _matches(self, parts: list[str], is_dir: bool) -> bool:
        for segments, anchored, folder_only in self.rules:
            if folder_only and not is_dir:
                continue
            if len(parts) < len(segments) or (anchored and len(parts) != len(segments)):
                continue
            if all(map(fnmatch.fnmatchcase, parts[len(parts) - len(segments) :], segments)):
                return True
        return False


def extension_files(source: Path, exclude: PathExclude) -> list[str]:
    """Root-relative POSIX paths of the files that go into the extension, sorted."""
    files = []
    for folder, dirs, names in os.walk(source):
        base = Path(folder).relative_to(source).as_posix()
        rel = (lambda n: n) if base == "." else (lambda n: f"{base}/{n}")
        dirs[:] = sorted(d for d in dirs if not exclude.excluded(rel(d), True))
        files += [rel(n) for n in names if n != MANIFEST and not exclude.excluded(rel(n), False)]
    return sorted(files)


# ----------------------------------------------------------------------------------------------
# Build
@dataclass
class Build:
    staging: dict  # Python ("3.11") -> its staging folder
    zips: dict  # (platform, Python) -> Path
    wheels: dict  # (platform, Python) -> list of "./wheels/<file>"


def stage(source: Path, staging: Path, manifest: dict, platforms, wheels_by_platform: dict, python: str) -> list[str]:
    """Fill ``staging`` (emptied first) for one Python; returns the manifest's full wheel list."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    exclude = exclude_patterns(manifest)
    for rel in extension_files(source, exclude):
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, staging / rel)
    all_wheels = []
    (staging / "wheels").mkdir()
    for platform in platforms:
        for wheel in wheels_by_platform[platform]:
            if f"./wheels/{wheel.name}" not in all_wheels:  # a universal2 wheel serves two platforms
                shutil.copy2(wheel, staging / "wheels" / wheel.name)
                all_wheels.append(f"./wheels/{wheel.name}")
    text = toml_dumps(with_wheels(manifest, platforms, all_wheels, python))
    (staging / MANIFEST).write_text(text, encoding="utf-8")
    return all_wheels


def write_zip(staging: Path, manifest: dict, platform: str, python: str, wheels: list[str], out: Path) -> None:
    """One platform's archive for one Python, written next to ``out`` and renamed into place when complete."""
    generated = {"platforms": [platform], "wheels": wheels}
    data = with_wheels(manifest, [platform], wheels, python)
    data["build"] = {**data.get("build", {}), "generated": generated}
    exclude = exclude_patterns(manifest)
    files = [f for f in extension_files(staging, exclude) if not f.startswith("wheels/")]
    temp = out.with_name("." + out.name)
    with zipfile.ZipFile(temp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr(MANIFEST, toml_dumps(data))
        for wheel in wheels:
            rel = wheel.removeprefix("./")
            zf.write(staging / rel, rel, compress_type=zipfile.ZIP_STORED)
        for rel in files:
            zf.write(staging / rel, rel)
    os.replace(temp, out)


def build(
    platforms=None,
    pythons=PYTHONS,
    *,
    source: Path = ROOT,
    output: Path | None = None,
    cache: Path | None = None,
    offline: bool = False,
    log=print,
) -> Build:
    """Fetch wheels and write one zip per platform and Python; the Python API behind the command line."""
    source = Path(source)
    output = Path(output) if output else source / "dist"
    cache = Path(cache) if cache else source / "wheels"
    manifest = load_manifest(source)
    platforms = list(platforms or manifest.get("platforms") or PLATFORM_TAGS)
    for platform in platforms:
        if platform not in PLATFORM_TAGS:
            raise BuildError(f"unknown platform {platform!r}; known: {', '.join(PLATFORM_TAGS)}")
        if manifest.get("platforms") and platform not in manifest["platforms"]:
            raise BuildError(f"platform {platform!r} is not in the manifest's platforms {manifest['platforms']}")
    for python in pythons:
        if python not in PYTHONS:
            raise BuildError(f"unsupported Python {python!r}; Blender's are {', '.join(PYTHONS)}")
    exclude = exclude_patterns(manifest)
    for folder in (output, cache):
        if folder.resolve().is_relative_to(source.resolve()) and folder.resolve() != source.resolve():
            parts = folder.resolve().relative_to(source.resolve()).parts
            if not any(exclude.excluded("/".join(parts[:i]), True) for i in range(1, len(parts) + 1)):
                raise BuildError(
                    f"{folder} is inside the extension folder but not excluded by the manifest's "
                    "paths_exclude_pattern; it would end up in the archive"
                )
    requirements = bundled_requirements(source / "requirements" / "solver.txt")
    result = Build({}, {}, {})
    output.mkdir(parents=True, exist_ok=True)
    for python in pythons:
        wheels_by_platform = {p: fetch_wheels(p, python, requirements, cache, offline, log) for p in platforms}
        staging = output / "staging" / python_tag(python) / manifest["id"]
        stage(source, staging, manifest, platforms, wheels_by_platform, python)
        result.staging[python] = staging
        for platform in platforms:
            key = (platform, python)
            result.wheels[key] = [f"./wheels/{w.name}" for w in wheels_by_platform[platform]]
            result.zips[key] = output / archive_name(manifest, platform, python)
            write_zip(staging, manifest, platform, python, result.wheels[key], result.zips[key])
            log(
                f"built {result.zips[key]} ({result.zips[key].stat().st_size / 2**20:.1f} MiB, "
                f"{len(result.wheels[key])} wheels, Blender {' to before '.join(BLENDER_FOR_PYTHON[python])})"
            )
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--platform",
        action="append",
        choices=sorted(PLATFORM_TAGS),
        help="build for this Blender platform only (repeatable; default: the manifest's)",
    )
    parser.add_argument(
        "--python",
        action="append",
        choices=PYTHONS,
        help="bundle wheels for this Python only (repeatable; default: all)",
    )
    parser.add_argument("--output-dir", type=Path, default=None, help="where the zips go (default: dist/)")
    parser.add_argument("--wheel-cache", type=Path, default=None, help="download cache (default: wheels/)")
    parser.add_argument("--offline", action="store_true", help="use cached wheels only, never run pip")
    args = parser.parse_args(argv)
    try:
        build(
            args.platform,
            tuple(args.python or PYTHONS),
            output=args.output_dir,
            cache=args.wheel_cache,
            offline=args.offline,
        )
    except BuildError as error:
        print(f"build_extension: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
