"""``pip install -e .`` maps the repository root onto the package ``selvedge`` and lists every package.

The package list in pyproject.toml is explicit (setuptools cannot discover subpackages of a root
mapped onto another name), so a new package folder must be added there; this test says which.
An editable install was checked by hand in a throwaway venv (``import selvedge`` from any folder).
"""

from pathlib import Path

from setuptools.config.pyprojecttoml import read_configuration

ROOT = Path(__file__).resolve().parents[2]
#: Folders that are not part of the package (they have no __init__.py today; this keeps it so).
NOT_PACKAGES = {"tests", "bench", "scripts", "devtools", "farm", "docs", "requirements", "out", "dist", "wheels"}


def test_every_package_folder_is_listed_under_its_selvedge_name():
    config = read_configuration(ROOT / "pyproject.toml")
    assert config["build-system"]["build-backend"] == "setuptools.build_meta"
    setuptools = config["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"selvedge": "."}
    listed = set(setuptools["packages"])
    on_disk = {"selvedge"} | {
        "selvedge." + ".".join(init.parent.relative_to(ROOT).parts)
        for init in ROOT.rglob("__init__.py")
        if init.parent != ROOT
        and init.relative_to(ROOT).parts[0] not in NOT_PACKAGES | {".venv"}
        and not any(part.startswith(".") for part in init.relative_to(ROOT).parts)
    }
    assert listed == on_disk, "pyproject.toml [tool.setuptools] packages"
    for name in listed:
        assert (ROOT.joinpath(*name.split(".")[1:]) / "__init__.py").is_file(), name
    data = config["tool"]["setuptools"]["package-data"]
    assert (ROOT / "models" / "selvedge_gnn.onnx").is_file() and "*.onnx" in data["selvedge.models"]
