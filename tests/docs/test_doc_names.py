"""Every name the documentation gives exists: property paths, operators, files, command flags, links.

Read from README.md and docs/**/*.md (docs/history/ is a log of what was, not checked). Property
paths and operators are checked against what Selvedge registers in the real ``bpy`` module,
script paths against the repository, and the flags after a script against the ``add_argument``
calls of that script (``cli.py``: its parser in ``cli_core.py`` beside it). The reference pages also
have to be complete: every registered property and operator, every ``cli.py`` flag, every OpenJD
job parameter and every bench script has its entry.
"""

import ast
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PROPERTY = re.compile(r"(?<![\w.])(\w+)\.selvedge\.(\w+)")
WM_PROPERTY = re.compile(r"(?<![\w.])(?:wm|WindowManager)\.(selvedge_\w+)")
OPERATOR = re.compile(r"bpy\.ops\.selvedge\.(\w+)(?:\(([^()]*)\))?")
#: Prefixes of ``X.selvedge.Y`` that are module paths, not objects (``bl_ext.user_default.selvedge``).
MODULE_PREFIXES = {"bl_ext", "user_default", "ops"}
SCENE_PREFIXES = {"scene", "Scene"}
#: Not part of Selvedge's settings: every PropertyGroup has them.
BUILTIN_PROPERTIES = {"rna_type", "name"}
PROPERTIES_PAGE = ROOT / "docs" / "user" / "properties.md"
OPERATORS_PAGE = ROOT / "docs" / "user" / "operators.md"
CLI_PAGE = ROOT / "docs" / "user" / "command_line.md"
FARM_PAGE = ROOT / "docs" / "user" / "farm.md"
#: Repository folders and files a path in the docs may start with (``out/``, ``dist/`` are made by runs).
TOP_LEVEL = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")} - {"out", "dist", "wheels", "build"}


def doc_files() -> list[Path]:
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if "history" not in f.relative_to(ROOT).parts]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def code_texts(text: str) -> list[str]:
    """Fenced blocks and inline code spans (outside the blocks)."""
    fenced = [body for _, body in FENCE.findall(text)]
    prose = FENCE.sub("", text)
    return fenced + re.findall(r"`([^`\n]+)`", prose)


def all_docs() -> dict[str, str]:
    return {rel(f): f.read_text(encoding="utf-8") for f in doc_files()}


# ----------------------------------------------------------------------------------------------
# Property paths and operators, against the registered ones
@pytest.fixture(scope="module")
def registered():
    """The RNA of what Selvedge registers: {'object': {...}, 'scene': {...}, 'wm': {...}, 'ops': {...}}."""
    import bpy
    from blender_scenes import factory_scene

    with factory_scene():
        groups = {
            kind: {
                p.identifier: p
                for p in getattr(bpy.types, cls).bl_rna.properties["selvedge"].fixed_type.properties
                if p.identifier not in BUILTIN_PROPERTIES
            }
            for kind, cls in (("object", "Object"), ("scene", "Scene"))
        }
        groups["wm"] = {
            p.identifier: p for p in bpy.types.WindowManager.bl_rna.properties if p.identifier.startswith("selvedge_")
        }
        groups["ops"] = {
            name: {
                p.identifier: p
                for p in getattr(bpy.ops.selvedge, name).get_rna_type().properties
                if p.identifier != "rna_type"
            }
            for name in dir(bpy.ops.selvedge)
        }
        yield groups


def named_properties(text: str) -> set[tuple[str, str]]:
    """(kind, name) of every property path in ``text``: ``obj.selvedge.x``, ``scene.selvedge.x``, ``wm.selvedge_x``."""
    found = {("wm", name) for name in WM_PROPERTY.findall(text)}
    for prefix, name in PROPERTY.findall(text):
        if prefix not in MODULE_PREFIXES:
            found.add(("scene" if prefix in SCENE_PREFIXES else "object", name))
    return found


def missing_properties(docs: dict[str, str], registered) -> list[str]:
    return [
        f"{page}: {kind}.selvedge.{name}"
        for page, text in docs.items()
        for kind, name in sorted(named_properties(text))
        if name not in registered[kind]
    ]


@pytest.mark.blender
def test_every_property_path_in_the_docs_exists(registered):
    assert not missing_properties(all_docs(), registered)
    # The check itself: a page naming a property that does not exist is caught.
    assert missing_properties({"x.md": "set `obj.selvedge.stiffness` and `scene.selvedge.substep`"}, registered) == [
        "x.md: object.selvedge.stiffness",
        "x.md: scene.selvedge.substep",
    ]


def documented_defaults(text: str) -> dict[tuple[str, str], str]:
    """(kind, name) -> the default cell of each row of the properties page's tables."""
    rows = re.findall(r"^\| `(obj|scene|wm)\.selvedge[._](\w+)` \|[^|]*\| `([^`]*)` \|", text, re.M)
    return {
        ("object", name) if kind == "obj" else ("wm", "selvedge_" + name) if kind == "wm" else (kind, name): default
        for kind, name, default in rows
    }


def default_matches(prop, written: str) -> bool:
    value = ast.literal_eval(written)
    if prop.type == "POINTER":  # an ID pointer has no default: it starts empty
        return value is None
    default = prop.default
    if prop.type == "FLOAT":
        return abs(default - value) <= 1e-3 * max(abs(default), 1e-12)
    return default == value


@pytest.mark.blender
def test_properties_page_lists_every_property_with_its_default(registered):
    documented = documented_defaults(PROPERTIES_PAGE.read_text(encoding="utf-8"))
    undocumented = [
        f"{kind}: {name}"
        for kind in ("object", "scene", "wm")
        for name in registered[kind]
        if (kind, name) not in documented
    ]
    assert not undocumented, "add a row to docs/user/properties.md"
    wrong = {
        f"{kind}.{name}": (written, registered[kind][name].default)
        for (kind, name), written in documented.items()
        if name in registered[kind] and not default_matches(registered[kind][name], written)
    }
    assert not wrong, "documented default (as written, as registered)"


def operator_problems(docs: dict[str, str], registered) -> list[str]:
    problems = []
    for page, text in docs.items():
        for name, args in OPERATOR.findall(text):
            if name not in registered["ops"]:
                problems.append(f"{page}: bpy.ops.selvedge.{name} is not an operator")
                continue
            for keyword in ast.parse(f"f({args})").body[0].value.keywords if args else ():
                prop = registered["ops"][name].get(keyword.arg)
                if prop is None:
                    problems.append(f"{page}: bpy.ops.selvedge.{name} has no argument {keyword.arg}")
                elif prop.type == "ENUM" and ast.literal_eval(keyword.value) not in prop.enum_items:
                    problems.append(f"{page}: bpy.ops.selvedge.{name}({keyword.arg}=...) is not one of its values")
    return problems


@pytest.mark.blender
def test_every_operator_in_the_docs_exists_with_its_arguments(registered):
    assert not operator_problems(all_docs(), registered)
    assert operator_problems(
        {"x.md": "`bpy.ops.selvedge.bake()`, `bpy.ops.selvedge.set_role(role='CLOTHES')`"}, registered
    ) == [
        "x.md: bpy.ops.selvedge.bake is not an operator",
        "x.md: bpy.ops.selvedge.set_role(role=...) is not one of its values",
    ]
    page = OPERATORS_PAGE.read_text(encoding="utf-8")
    assert not [name for name in registered["ops"] if f"bpy.ops.selvedge.{name}(" not in page], (
        "add the operator to docs/user/operators.md"
    )


# ----------------------------------------------------------------------------------------------
# Files and command-line flags
def script_flags(script: Path) -> tuple[set[str], set[str]] | None:
    """(every flag, the flags shown in --help) of a script's argparse parser; None: it passes them on."""
    if script.suffix == ".sh":  # a wrapper: the flags of the Python script it runs, if any
        called = re.findall(r"(scripts/\w+\.py|bench/\w+\.py)", script.read_text(encoding="utf-8"))
        return script_flags(ROOT / called[0]) if called else None
    sources = [script]
    if script.name == "cli.py":  # its parser lives in its Blender-free half, cli_core.py
        sources += sorted(ROOT.glob("cli_*.py"))
    every, shown = {"--help"}, {"--help"}
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                names = {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
                hidden = any(k.arg == "help" and getattr(k.value, "attr", None) == "SUPPRESS" for k in node.keywords)
                every |= names
                shown |= set() if hidden else names
    return every, shown


def repo_path(token: str) -> Path | None:
    """The repository file a token names (``./scripts/x.sh``, ``<extension>/cli.py``), or None."""
    token = re.sub(r"^(\./|<extension>/)", "", token.rstrip(",.:;)"))
    if token.split("/")[0] not in TOP_LEVEL or any(c in token for c in "*<>{}$") or token.startswith("-"):
        return None
    return ROOT / token


def command_problems(text: str) -> list[str]:
    """Paths that do not exist and flags their script does not take, in one page's code."""
    problems = []
    for code in code_texts(text):
        for line in re.sub(r"\\\n", " ", code).splitlines():
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                tokens = line.split()
            flags = None  # the flags of the last script named on the line
            for token in tokens:
                if token in {"|", "&&", ";", "||"}:
                    flags = None
                path = repo_path(token)
                if path is not None:
                    if not path.exists():
                        problems.append(f"{token}: no such file")
                    flags = script_flags(path) if path.suffix in {".py", ".sh"} and path.is_file() else None
                elif flags is not None and re.match(r"--[a-z]", token) and token.split("=")[0] not in flags[0]:
                    problems.append(f"{token}: not a flag of the script before it")
    return problems


def test_every_file_and_flag_in_the_docs_exists():
    problems = {page: command_problems(text) for page, text in all_docs().items()}
    assert not {page: p for page, p in problems.items() if p}
    # The check itself.
    assert command_problems(
        "```sh\n./scripts/demo.sh --frame 4\n.venv/bin/python bench/bench_x.py\n```\nrun `cli.py --jobs 2 --job 3`"
    ) == [
        "--frame: not a flag of the script before it",
        "bench/bench_x.py: no such file",
        "--job: not a flag of the script before it",
    ]


def test_command_line_page_names_every_cli_flag():
    every, shown = script_flags(ROOT / "cli.py")
    named = {
        span.split()[0].split("=")[0]
        for span in code_texts(CLI_PAGE.read_text(encoding="utf-8"))
        if re.match(r"--[a-z]", span)
    }
    assert named <= every, "flags on docs/user/command_line.md that cli.py does not take"
    assert shown - {"--help"} <= named, "add the flag to the table of docs/user/command_line.md"


def test_readme_keeps_the_two_set_up_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "./scripts/demo.sh    # headless main job" in readme and "./scripts/test.sh    # all tests" in readme
    assert len(readme.splitlines()) <= 250


def test_farm_page_names_every_job_parameter():
    template = yaml.safe_load((ROOT / "farm" / "openjd" / "selvedge_bake_render.yaml").read_text(encoding="utf-8"))
    parameters = {p["name"] for p in template["parameterDefinitions"]}
    page = FARM_PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"`(\w+)`", "\n".join(line for line in page.splitlines() if line.startswith("| `"))))
    assert parameters - {"ShotIndex", "ChunkStart"} <= named, "add the parameter to the table of docs/user/farm.md"


def test_benchmarks_page_has_a_section_per_bench_script():
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        section = re.search(
            rf"<!-- bench:{script.stem} -->\n```sh\n(.*?)\n```\n(.*?)<!-- /bench:{script.stem} -->", page, re.S
        )
        assert section, f"docs/benchmarks.md has no section for {script.name}"
        assert f"bench/{script.name}" in section.group(1) and "|---" in section.group(2)


# ----------------------------------------------------------------------------------------------
# Links
def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_link_in_the_docs_leads_somewhere():
    broken = []
    for path in doc_files():
        text = FENCE.sub("", path.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"\w+://", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{rel(path)}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", FENCE.sub("", linked.read_text(encoding="utf-8")), re.M)
                if anchor not in {slug(h) for h in headings}:
                    broken.append(f"{rel(path)}: {target} (no such heading)")
    assert not broken
