"""Extension packaging end to end, with the real bpy module and Blender's own extension machinery.

Runs on each development stack (``scripts/test.sh``): Python 3.11 / bpy 5.0.1 tests the cp311
archive (Blender 4.2-5.0), Python 3.13 / bpy 5.3.0 the cp313 one (Blender 5.1+).

1. ``scripts/build_extension.py`` builds the linux-x64 archive with this Python's wheels
   (downloaded once into ``wheels/``). Independent references for the archive:
   Blender's own builder (``bl_pkg/cli/blender_ext.py build --split-platforms``) run on the
   repository itself must pick the same extension files, byte for byte; run on our staging
   folder it must produce the same archive (same entries, bytes, compression and manifest once
   Blender applies ``[build.generated]``); Blender's own ``validate`` must accept the archive.
2. A child process runs the bpy module in an environment like Blender's own Python: bpy and its
   declared dependencies for this Python (numpy, requests, ...; environment markers honoured)
   only, no project source and no venv packages on ``sys.path``, so numba, llvmlite and
   onnxruntime can only come from the archive. Every ``BLENDER_USER_*`` folder, ``HOME`` and the Numba cache
   point into a temporary folder. It adds a local extension repository in a temporary folder
   (``preferences.extension_repo_add``), installs the archive with
   ``extensions.package_install_files`` (enable on install), bakes a pinned grid with
   ``selvedge.bake_cache`` and reads the PC2 back through Blender's Mesh Cache modifier, bakes
   to shape keys, bakes with the learned network on (the shipped ONNX model through the bundled
   onnxruntime); then disables, re-enables and bakes again, disables, and uninstalls: no class,
   property, handler, package file or wheel is left behind.
3. This process builds the same scene and runs the solver from the source tree (with the
   development environment's numba) on the same inputs, as ``test_blender_bake`` does: the
   installed extension's playback must match it to float32 precision.

The child is this file run as a script (``python -S tests/blender/test_extension_package.py child ...``),
so nothing at module level may need more than the standard library and NumPy. It ends through the
installed extension's ``module_exit.exit_process`` (the 4.x bpy modules crash or hang at exit).
"""

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    sys.path.insert(0, sys.argv[4])  # the child's Blender-like site folder, before NumPy is imported
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests/: the shared helper modules

import numpy as np
from blender_scenes import evaluated_co, grid_cloth

ROOT = Path(__file__).resolve().parents[2]
FIRST, LAST = 1, 6  # the frame range of test_blender_bake's reference run
FRAMES = (FIRST, 2, 4, LAST)
ATOL = 1e-6  # as in test_blender_bake: a few float32 ulps of ~1 m positions
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the archive under test is this Python's
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"


def bundled_pins():
    """What the archive must bundle: requirements/solver.txt's pins minus NumPy, and the build's onnxruntime."""
    pins = {}
    for line in (ROOT / "requirements" / "solver.txt").read_text().splitlines():
        requirement = line.split("#", 1)[0].split(";", 1)[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==")
            pins[name.strip()] = version.strip()
    build_script = (ROOT / "scripts" / "build_extension.py").read_text()
    pins["onnxruntime"] = re.search(r'^ONNXRUNTIME = "onnxruntime==([^"]+)"', build_script, re.M).group(1)
    del pins["numpy"]
    return pins


PINS = bundled_pins()


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def blender_ext_path():
    import bpy

    return Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"


# ----------------------------------------------------------------------------------------------
# Scene (used by the child and by the reference run here)
def make_cloth():
    """The grid of ``test_blender_bake.make_cloth``: 5x5 vertices, rotated, moving, two pinned corners."""
    return grid_cloth(FIRST, LAST)


# ----------------------------------------------------------------------------------------------
# Child process: the installed extension in an isolated Blender
def onnx_add_model() -> bytes:
    """A one-node ONNX model, ``Y = X + X`` for ``X: float[3]``, in protobuf wire format written by
    hand so that running it needs no ``onnx`` or ``protobuf`` package."""

    def varint(n):
        out = bytearray()
        while True:
            n, low = n >> 7, n & 0x7F
            out.append(low | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def message(number, payload):
        payload = payload.encode() if isinstance(payload, str) else payload
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def integer(number, value):
        return varint(number << 3) + varint(value)

    tensor = integer(1, 1) + message(2, message(1, integer(1, 3)))  # elem_type FLOAT, shape [3]
    value_info = lambda name: message(1, name) + message(2, message(1, tensor))
    node = message(1, "X") + message(1, "X") + message(2, "Y") + message(4, "Add")
    graph = message(1, node) + message(2, "g") + message(11, value_info("X")) + message(12, value_info("Y"))
    return integer(1, 8) + message(7, graph) + message(8, integer(2, 13))  # IR 8, opset 13


def registration_state():
    """What an add-on's register() can leave behind, as plain data."""
    import bpy

    handlers = {
        name: len(value)
        for name in dir(bpy.app.handlers)
        if not name.startswith("_") and isinstance(value := getattr(bpy.app.handlers, name), list)
    }
    return {
        "types": sorted(dir(bpy.types)),
        "object_properties": sorted(p.identifier for p in bpy.types.Object.bl_rna.properties),
        "scene_properties": sorted(p.identifier for p in bpy.types.Scene.bl_rna.properties),
        "object_attributes": sorted(a for a in dir(bpy.types.Object) if "selvedge" in a.lower()),
        "operators": sorted(dir(bpy.ops.selvedge)),
        "handlers": handlers,
        "extended_ui": sorted(
            name
            for name in dir(bpy.types)
            if getattr(getattr(getattr(bpy.types, name), "draw", None), "_draw_funcs", None)
        ),
        "addon_keymaps": sorted((km.name, len(km.keymap_items)) for km in addon_keymaps.keymaps)
        if (addon_keymaps := bpy.context.window_manager.keyconfigs.addon)
        else None,
    }


def child_bake(cache_dir):
    import bpy

    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    obj, _ = make_cloth()
    bpy.context.scene.selvedge.cache_folder = str(cache_dir)
    t0 = time.perf_counter()
    result = bpy.ops.selvedge.bake_cache()
    seconds = time.perf_counter() - t0
    mod = obj.modifiers[0]
    return {
        "result": sorted(result),
        "seconds": seconds,
        "modifiers": [(m.name, m.type, m.cache_format, bpy.path.abspath(m.filepath)) for m in obj.modifiers],
        "pc2_sha256": hashlib.sha256(Path(bpy.path.abspath(mod.filepath)).read_bytes()).hexdigest(),
        "files": sorted(p.name for p in Path(cache_dir).iterdir()),
    }, {f"frame{f}": evaluated_co(obj, f) for f in FRAMES}


def child_bake_shape_keys():
    import bpy

    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    obj, _ = make_cloth()
    result = bpy.ops.selvedge.bake_shape_keys()
    keys = obj.data.shape_keys
    return {"result": sorted(result), "keys": len(keys.key_blocks) if keys else 0}, {
        f"frame{f}": evaluated_co(obj, f) for f in FRAMES
    }


def child_bake_network(cache_dir):
    import bpy

    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    obj, _ = make_cloth()
    scene = bpy.context.scene
    scene.selvedge.cache_folder = str(cache_dir)
    scene.selvedge.network_mode = "ACCELERATION"
    try:
        result = bpy.ops.selvedge.bake_cache()
    finally:
        scene.selvedge.network_mode = "OFF"
    sidecar = json.loads((Path(cache_dir) / f"{obj.name}.json").read_text())
    return {
        "result": sorted(result),
        "network": {k: sidecar["network"][k] for k in ("mode", "events")},
        "network_frames": len(sidecar["network"]["frames"]),
        "network_active": all(f["network_active"] for f in sidecar["network"]["frames"]),
    }, {f"frame{f}": evaluated_co(obj, f) for f in FRAMES}


def child_main(zip_path, work):
    import bpy

    work = Path(work)
    out = {
        "importable_before": {},
        "sys_path": list(sys.path),
        "selvedge_importable": importlib.util.find_spec("selvedge") is not None,
    }
    for name in PINS:
        try:
            __import__(name)
            out["importable_before"][name] = True
        except ImportError:
            out["importable_before"][name] = False
    prefs = bpy.context.preferences
    out["user_config"] = bpy.utils.user_resource("CONFIG")
    out["user_extensions"] = bpy.utils.user_resource("EXTENSIONS")

    repo_dir = work / "repo"
    out["repo_add"] = sorted(
        bpy.ops.preferences.extension_repo_add(
            name="Selvedge Test", type="LOCAL", use_custom_directory=True, custom_directory=str(repo_dir)
        )
    )
    repo = next(r for r in prefs.extensions.repos if Path(r.directory) == repo_dir)
    out["repos"] = [(r.module, r.directory, r.use_remote_url) for r in prefs.extensions.repos]
    module = f"bl_ext.{repo.module}.selvedge"
    before = registration_state()

    t0 = time.perf_counter()
    out["install"] = sorted(
        bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo=repo.module, enable_on_install=True)
    )
    out["install_seconds"] = time.perf_counter() - t0
    out["enabled"] = module in prefs.addons
    out["installed_files"] = sorted(
        p.relative_to(repo_dir / "selvedge").as_posix()
        for p in (repo_dir / "selvedge").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    site = Path(out["user_extensions"]) / ".local" / "lib" / f"python{PYTHON}" / "site-packages"
    out["site_packages"] = str(site)
    out["wheel_tags"] = {
        p.name: [line.split(": ", 1)[1] for line in (p / "WHEEL").read_text().splitlines() if line.startswith("Tag: ")]
        for p in sorted(site.glob("*.dist-info"))
    }

    import llvmlite
    import numba
    import onnxruntime

    out["modules"] = {m.__name__: (m.__file__, m.__version__) for m in (numba, llvmlite, onnxruntime)}
    session = onnxruntime.InferenceSession(onnx_add_model(), providers=["CPUExecutionProvider"])
    out["onnx_y"] = session.run(None, {"X": np.array([1.0, 2.0, 3.5], dtype=np.float32)})[0].tolist()

    exit_process = importlib.import_module(f"{module}.module_exit").exit_process
    out["bake1"], positions = child_bake(work / "cache1")
    setup = sys.modules[f"{module}.solver._numba_setup"]
    out["solver_numba"] = setup.numba.__file__
    out["numba_cache_dir"] = setup.CACHE_DIR
    out["shape_keys"], shape_key_positions = child_bake_shape_keys()
    positions.update({f"shape_keys_{k}": v for k, v in shape_key_positions.items()})
    out["network"], network_positions = child_bake_network(work / "cache_network")
    positions.update({f"network_{k}": v for k, v in network_positions.items()})
    out["enabled_state"] = registration_state()

    bpy.ops.preferences.addon_disable(module=module)
    out["disabled_state"] = registration_state()
    bpy.ops.preferences.addon_enable(module=module)
    out["bake2"], _ = child_bake(work / "cache2")
    bpy.ops.preferences.addon_disable(module=module)
    out["disabled_again_state"] = registration_state()
    out["before_state"] = before

    out["uninstall"] = sorted(bpy.ops.extensions.package_uninstall(repo_directory=str(repo_dir), pkg_id="selvedge"))
    out["after_uninstall"] = {
        "package_exists": (repo_dir / "selvedge").exists(),
        "repo_files": sorted(p.relative_to(repo_dir).as_posix() for p in repo_dir.rglob("*") if p.is_file()),
        "site_packages": sorted(p.name for p in site.iterdir()) if site.exists() else [],
    }
    np.savez(work / "positions.npz", **positions)
    (work / "result.json").write_text(json.dumps(out, indent=1))
    return exit_process


# ----------------------------------------------------------------------------------------------
# Tests (this process)
_BUILD = {}


def linux_build(tmp_path_factory):
    """The linux-x64 build for this Python, once per session (wheels cached in the repository's wheels/)."""
    if "build" not in _BUILD:
        builder = load_module("selvedge_build_extension", ROOT / "scripts" / "build_extension.py")
        t0 = time.perf_counter()
        build = builder.build(["linux-x64"], (PYTHON,), output=tmp_path_factory.mktemp("dist"))
        _BUILD.update(build=build, builder=builder, seconds=time.perf_counter() - t0)
    return _BUILD["build"], _BUILD["builder"]


def blender_build(source, output):
    Path(output).mkdir(parents=True)
    result = subprocess.run(
        [
            sys.executable,
            str(blender_ext_path()),
            "build",
            "--source-dir",
            str(source),
            "--output-dir",
            str(output),
            "--split-platforms",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {p.name: p for p in Path(output).glob("*.zip")}


def entries(path):
    with zipfile.ZipFile(path) as zf:
        return {i.filename: (i.CRC, i.file_size, i.compress_type) for i in zf.infolist()}


def test_archive_is_what_blenders_own_split_build_makes(tmp_path_factory, tmp_path):
    import bpy

    build, builder = linux_build(tmp_path_factory)
    ours = build.zips["linux-x64", PYTHON]
    source_manifest = tomllib.loads((ROOT / "blender_manifest.toml").read_text())
    label = {"3.11": "blender4.2-5.0", "3.13": "blender5.1-5.x"}[PYTHON]
    assert ours.name == f"selvedge-{source_manifest['version']}-linux_x64-{label}.zip"
    blenders_name = f"selvedge-{source_manifest['version']}-linux_x64.zip"  # Blender's split build's name
    print(f"build: {_BUILD['seconds']:.1f} s, archive {ours.stat().st_size / 2**20:.1f} MiB")
    ext = load_module("selvedge_test_blender_ext", blender_ext_path())

    # Blender's builder on the repository itself (no wheels): the same extension files, byte for byte.
    from_repo = blender_build(ROOT, tmp_path / "from_repo")[blenders_name]
    repo_files = {k: v for k, v in entries(from_repo).items() if k != "blender_manifest.toml"}
    our_files = {k: v for k, v in entries(ours).items() if not k.startswith("wheels/") and k != "blender_manifest.toml"}
    assert our_files == repo_files
    assert (
        "__init__.py" in our_files and "solver/kernels.py" in our_files and "operators/bake/simulation.py" in our_files
    )
    assert not [
        f
        for f in our_files
        if re.match(r"(tests|scripts|bench|devtools|requirements|wheels|dist|farm)/|\.|pyproject\.toml", f)
        or "__pycache__" in f
        or f.endswith(".pyc")
    ]

    # Blender's builder on our staging folder: the same archive.
    built = blender_build(build.staging[PYTHON], tmp_path / "from_staging")
    assert list(built) == [blenders_name]
    from_staging = built[blenders_name]
    theirs_entries, our_entries = entries(from_staging), entries(ours)
    del theirs_entries["blender_manifest.toml"], our_entries["blender_manifest.toml"]
    assert our_entries == theirs_entries
    with zipfile.ZipFile(ours) as a, zipfile.ZipFile(from_staging) as b:
        manifests = [tomllib.loads(z.read("blender_manifest.toml").decode()) for z in (a, b)]
    for manifest in manifests:
        ext.pkg_manifest_dict_apply_build_generated_table(manifest)
    assert manifests[0] == manifests[1]
    manifest = manifests[0]
    assert manifest["platforms"] == ["linux-x64"]
    versioned = ("platforms", "wheels", "build", "blender_version_min", "blender_version_max")
    assert {k: v for k, v in manifest.items() if k not in versioned} == {
        k: v for k, v in source_manifest.items() if k not in versioned
    }
    # The Blender range: this Python's releases (4.2-5.0 ship 3.11, 5.1+ 3.13), and this bpy inside it.
    low, high = {"3.11": ("4.2.0", "5.1.0"), "3.13": ("5.1.0", "6.0.0")}[PYTHON]
    assert (manifest["blender_version_min"], manifest["blender_version_max"]) == (low, high)
    version = tuple(bpy.app.version)
    assert tuple(map(int, low.split("."))) <= version < tuple(map(int, high.split("."))), version

    # Blender's validator accepts it.
    check = subprocess.run(
        [sys.executable, str(blender_ext_path()), "validate", str(ours)], capture_output=True, text=True
    )
    assert check.returncode == 0 and "Success" in check.stdout, check.stdout + check.stderr

    # The wheels: exactly the pins, this Python's only, for linux-x64 by Blender's own reading of the tags;
    # no NumPy.
    wheel_entries = sorted(k for k in our_entries if k.startswith("wheels/"))
    assert sorted(w.removeprefix("./") for w in manifest["wheels"]) == wheel_entries
    names = {}
    for wheel in wheel_entries:
        name, version, python, abi, platform = Path(wheel).stem.split("-")
        names[name] = version
        assert python == abi == TAG
        assert all("linux-x64" in ext.blender_platforms_from_wheel_platform(p) for p in platform.split("."))
    assert names == PINS
    assert set(names) == {"numba", "llvmlite", "onnxruntime"}
    assert (ROOT / "scripts" / "build_extension.py").exists() and "build_extension.py" not in str(our_entries)
    # The script's reading of exclude patterns agrees with Blender's on paths the archive test does not meet.
    patterns = source_manifest["build"]["paths_exclude_pattern"] + ["/docs/*.md", "build", "a/b/"]
    ours_match, blenders = builder.PathExclude(patterns), ext.PathPatternMatch(patterns)
    for path, is_dir in [
        ("tests", True),
        ("x/tests", True),
        ("tests", False),
        ("x/__pycache__", True),
        ("__pycache__", False),
        ("m.pyc", False),
        ("x/m.pyc", False),
        ("x/.hidden", False),
        (".cache", True),
        ("a.zip", False),
        ("x/a.zip", False),
        ("docs/r.md", False),
        ("docs/x/r.md", False),
        ("x/docs/r.md", False),
        ("build", False),
        ("x/build", True),
        ("a/b", True),
        ("x/a/b", True),
        ("x/y/a/b", True),
        ("a/b", False),
        ("b", True),
        ("solver/kernels.py", False),
    ]:
        assert ours_match.excluded(path, is_dir) == blenders.test_path(path + "/" * is_dir), (path, is_dir)
    # The platform table of the other builds: every pip tag is one Blender reads as that platform.
    assert sorted(builder.PLATFORM_TAGS) == sorted(source_manifest["platforms"])
    for platform, tags in builder.PLATFORM_TAGS.items():
        assert all(ext.blender_platforms_from_wheel_platform(tag) == [platform] for tag in tags), platform


def blender_like_site(folder: Path) -> Path:
    """Links to bpy and its declared dependencies only (those whose environment markers hold for this
    Python, no extras): the Python packages a Blender release ships with."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # not installed in every venv; pip carries a copy
        from pip._vendor.packaging.requirements import Requirement

    wanted, todo = set(), ["bpy"]
    while todo:
        key = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if key in wanted:
            continue
        wanted.add(key)
        for text in importlib.metadata.requires(key) or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    folder.mkdir()
    for key in sorted(wanted):
        dist = importlib.metadata.distribution(key)
        for top in sorted({f.parts[0] for f in dist.files or () if f.parts[0] != ".."}):
            link = folder / top
            if not link.exists():
                link.symlink_to(dist.locate_file(top))
    assert not any((folder / name).exists() for name in PINS)
    return folder


def test_installed_archive_bakes_what_the_solver_computes(tmp_path_factory, tmp_path):
    build, _ = linux_build(tmp_path_factory)
    work = tmp_path / "work"
    work.mkdir()
    site = blender_like_site(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BLENDER_", "NUMBA_", "SELVEDGE_"))}
    env.update(
        {
            f"BLENDER_USER_{k.upper()}": str(tmp_path / "user" / k)
            for k in ("config", "scripts", "datafiles", "extensions")
        }
    )
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"),
        XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"),
        PYTHONNOUSERSITE="1",
    )
    t0 = time.perf_counter()
    archive = build.zips["linux-x64", PYTHON]
    child = subprocess.run(
        [sys.executable, "-S", __file__, "child", str(archive), str(work), str(site)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    child_seconds = time.perf_counter() - t0
    assert child.returncode == 0, (child.stdout + child.stderr)[-6000:]
    got = json.loads((work / "result.json").read_text())
    positions = np.load(work / "positions.npz")
    print(
        f"child Blender: {child_seconds:.1f} s in all; install {got['install_seconds']:.1f} s; "
        f"first bake {got['bake1']['seconds']:.1f} s (Numba compiles), second {got['bake2']['seconds']:.3f} s"
    )

    # Isolation: Blender's user folders are ours; the packages exist only through the archive.
    user = tmp_path / "user"
    assert Path(got["user_config"]) == user / "config" and Path(got["user_extensions"]) == user / "extensions"
    assert [d for _, d, _ in got["repos"] if not Path(d).is_relative_to(tmp_path) and "/system" not in d] == []
    assert got["importable_before"] == dict.fromkeys(PINS, False)
    # No project source and no venv packages on the child's sys.path: the standard library, the
    # Blender-like site, tests/ (the scene helpers, which import nothing of Selvedge's) and the script's folder.
    for entry in got["sys_path"]:
        path = Path(os.path.abspath(entry))  # links not followed: the site folder links into this venv
        assert (
            path in (ROOT / "tests", ROOT / "tests" / "blender")
            or path.is_relative_to(site)
            or path.is_relative_to(sys.base_prefix)
            or path.is_relative_to(user)
        ), entry
        assert "site-packages" not in path.parts or path.is_relative_to(user), entry
        assert path.is_relative_to(site) or not path.is_relative_to(sys.prefix) or sys.prefix == sys.base_prefix, entry
    assert not got["selvedge_importable"]

    # Installed and enabled through Blender's machinery; the wheels for this Python only, in Blender's wheel folder.
    assert got["repo_add"] == got["install"] == ["FINISHED"] and got["enabled"]
    with zipfile.ZipFile(archive) as zf:
        packaged = sorted(n for n in zf.namelist() if not n.endswith("/"))
    assert got["installed_files"] == packaged
    site_packages = Path(got["site_packages"])
    assert site_packages == user / "extensions" / ".local" / "lib" / f"python{PYTHON}" / "site-packages"
    assert {k: v[0].startswith(f"{TAG}-{TAG}-") for k, v in got["wheel_tags"].items()} == {
        f"{name}-{version}.dist-info": True for name, version in PINS.items()
    }
    for name, version in PINS.items():
        file, module_version = got["modules"][name]
        assert Path(file).is_relative_to(site_packages) and module_version == version, (name, file, module_version)
    assert Path(got["solver_numba"]).is_relative_to(site_packages)
    assert Path(got["numba_cache_dir"]).is_relative_to(tmp_path)  # not the user's ~/.cache
    assert got["onnx_y"] == [2.0, 4.0, 7.0]

    # The bake went through the installed operator and Blender's Mesh Cache modifier reads it back.
    bake1 = got["bake1"]
    assert bake1["result"] == ["FINISHED"] and bake1["files"] == ["Cloth.json", "Cloth.pc2"]
    assert bake1["modifiers"] == [["Selvedge Cache", "MESH_CACHE", "PC2", str(work / "cache1" / "Cloth.pc2")]]

    # Register/unregister leave no trace; enabling again bakes the identical file.
    assert got["disabled_state"] == got["before_state"] == got["disabled_again_state"]
    assert got["enabled_state"]["operators"] and got["enabled_state"]["object_attributes"] == ["selvedge"]
    assert got["bake2"]["result"] == ["FINISHED"] and got["bake2"]["pc2_sha256"] == bake1["pc2_sha256"]

    # Shape keys and the learned network through the installed extension and its bundled onnxruntime.
    assert got["shape_keys"] == {"result": ["FINISHED"], "keys": 1 + LAST - FIRST + 1}
    network = got["network"]
    assert network["result"] == ["FINISHED"] and network["network"]["mode"] == "B"
    assert "ExecutionProvider" in network["network"]["events"][0]
    assert network["network_frames"] == LAST - FIRST and network["network_active"]

    # Uninstalling removes the package and its wheels: nothing of it is left in the repository or
    # in Blender's wheel folder.
    assert got["uninstall"] == ["FINISHED"] and not got["after_uninstall"]["package_exists"]
    assert got["after_uninstall"]["repo_files"] == []
    assert not [n for n in got["after_uninstall"]["site_packages"] if n.split("-")[0] in PINS]

    # The reference: the source tree's solver on the same inputs, in this process.
    import bpy

    import selvedge

    bake_tests = load_module(
        "selvedge_test_blender_bake_reference", ROOT / "tests" / "blender" / "test_bake_operators.py"
    )
    assert (bake_tests.FIRST, bake_tests.LAST) == (FIRST, LAST)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    try:
        obj, pinned = make_cloth()
        expected, expected_world, pin_world, _ = bake_tests.reference_run(obj, pinned)
        for other in list(bpy.data.objects):
            bpy.data.objects.remove(other)
        _, source_network = child_bake_network(tmp_path / "source_network")
    finally:
        selvedge.unregister()
        bpy.ops.wm.read_factory_settings(use_empty=True)
    errors = {f: float(np.abs(positions[f"frame{f}"] - expected[f]).max()) for f in FRAMES}
    print("max |installed extension's Mesh Cache playback - source solver| per frame (m):", errors)
    assert max(errors.values()) <= ATOL
    shape_key_errors = [float(np.abs(positions[f"shape_keys_frame{f}"] - expected[f]).max()) for f in FRAMES]
    assert max(shape_key_errors) <= ATOL, shape_key_errors
    # The network bake: the source tree's network bake on the same scene, and not the pure XPBD motion.
    network_errors = [float(np.abs(positions[f"network_frame{f}"] - source_network[f"frame{f}"]).max()) for f in FRAMES]
    assert max(network_errors) <= ATOL, network_errors
    assert np.abs(positions[f"network_frame{LAST}"] - positions[f"frame{LAST}"]).max() > 1e-5
    # Not vacuous: the free corner fell, the pinned corners travelled with the animated object.
    assert (pin_world[LAST][:, 2] - expected_world[LAST][:, 2]).max() > 0.05
    assert np.linalg.norm(pin_world[LAST][pinned[0]] - pin_world[FIRST][pinned[0]]) > 0.12
    assert np.abs(positions[f"frame{LAST}"] - positions[f"frame{FIRST}"]).max() > 0.05


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child_main(*sys.argv[2:4])(0)
