"""Every command in README.md, docs/*.md and the results READMEs runs as written, or names only what exists.

Commands come from fenced ```bash blocks and from inline code spans that start like a command
(`python -m ...`, `.venv/bin/python ...`, `make ...`, `.venv/bin/pytest ...`). What runs:
``--help`` forms (each module's help must succeed) and every ```python block, in a fresh interpreter,
unless the HTML comment just before its fence says ``<!-- not run: why -->``. What is checked for the
long commands (training, sweeps, make targets), without running them:

- ``python -m MODULE ...``: the module exists, its ``--help`` succeeds and lists every ``--flag`` the
  command uses, and a value given to a flag with choices is one of them;
- dotted overrides (``algo.lr=3e-4``) and sweep grid keys are fields of ``RunConfig``;
- ``papermill NOTEBOOK OUT -p NAME VALUE``: the notebook exists and NAME is in its parameters cell;
- ``python SCRIPT.py --flag``: the script exists and declares the flag;
- ``make TARGET VAR=VALUE``: the Makefile defines the target and uses the variable;
- repository paths named by a command exist (paths with ``<placeholders>`` are not checked);
- relative links and images of the pages point at files (and headings) that exist.

``python`` means ``sys.executable``. Commands are checked from the repository root.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "results" / "README.md",
    *sorted((ROOT / "results").glob("*/README.md")),
]
REPO_DIRS = ("results/", "notebooks/", "tests/", "benchmarks/", "docs/", "data/", "rspo_kit/", "widgets/")
PYTHONS = {"python", "python3", ".venv/bin/python", ".venv/bin/python3"}
INLINE_COMMAND = re.compile(
    r"^(?:(?:\.venv/bin/)?python3? (?:-m [\w.]+|\S+\.py)|make [\w-]+|(?:\.venv/bin/)?pytest )"
)
NOT_RUN = re.compile(r"<!--\s*not run\b[^>]*-->\s*$")
ENV = {**os.environ, "COLUMNS": "200", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    text: str
    skipped: bool = False

    def __str__(self) -> str:
        return (
            f"{self.page}:{self.line}: {self.text[:70]}"
            if "\n" not in self.text
            else f"{self.page}:{self.line}"
        )


def fenced_blocks(text: str, page: str, lang: str) -> list[Snippet]:
    """The ```lang blocks of a page; ``skipped`` if ``<!-- not run: ... -->`` sits just before the fence."""
    blocks = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if m.group(1) == lang:
            line = text.count("\n", 0, m.start()) + 1
            skipped = bool(NOT_RUN.search(text[: m.start()].rstrip()))
            blocks.append(Snippet(page, line, m.group(2), skipped))
    return blocks


def commands_of(text: str, page: str) -> list[Snippet]:
    """Shell commands: every logical line of the ```bash blocks, and inline spans that start like one."""
    commands = []
    for block in fenced_blocks(text, page, "bash"):
        lines = block.text.replace("\\\n", " ").splitlines()
        commands += [
            Snippet(page, block.line + 1 + i, line.strip()) for i, line in enumerate(lines) if line.strip()
        ]
    prose = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    for m in re.finditer(r"`([^`\n]+)`", prose):
        if INLINE_COMMAND.match(m.group(1)):
            commands.append(Snippet(page, prose.count("\n", 0, m.start()) + 1, m.group(1)))
    return commands


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


COMMANDS = [c for page in PAGES for c in commands_of(_read(page), _rel(page))]
PYTHON_BLOCKS = [b for page in PAGES for b in fenced_blocks(_read(page), _rel(page), "python")]


# ---- what a command may name ---------------------------------------------------------------------


@functools.cache
def help_text(module: str) -> str:
    """``python -m module --help``; fails the test if it does not succeed."""
    run = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"`python -m {module} --help` failed:\n{run.stderr[-2000:]}"
    return run.stdout


def config_fields() -> set[str]:
    from rspo_kit.train.config import RunConfig

    cfg = RunConfig()
    return {
        f"{part.name}.{f.name}"
        for part in dataclasses.fields(cfg)
        for f in dataclasses.fields(getattr(cfg, part.name))
    }


@functools.cache
def makefile_targets() -> tuple[set[str], str]:
    text = _read(ROOT / "Makefile")
    targets = set()
    for m in re.finditer(r"^([\w.-]+(?:[ \t]+[\w.-]+)*)[ \t]*:(?!=)", text, re.M):
        targets |= set(m.group(1).split())
    return targets, text


def notebook_parameters(path: Path) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    cells = json.loads(_read(path))["cells"]
    source = next(
        "".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])
    )
    return set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*[:=]", source, re.M))


def _flag_present(flag: str, help_out: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_out) is not None


def _choices(flag: str, help_out: str) -> list[str] | None:
    m = re.search(rf"(?<![\w-]){re.escape(flag)}\s+\[?\{{([^}}]+)\}}", help_out)
    return m.group(1).split(",") if m else None


def _check_paths(args: list[str]) -> None:
    for arg in args:
        if arg.startswith(REPO_DIRS) and "<" not in arg and "*" not in arg:
            assert (ROOT / arg).exists(), f"{arg} does not exist"


def check_module_command(module: str, args: list[str]) -> None:
    assert importlib.util.find_spec(module) is not None, f"no module {module}"
    if not any(a.startswith("-") for a in args):
        return  # a module run without flags may do real work (e.g. rewrite manifests): existence only
    out = help_text(module)
    for i, arg in enumerate(args):
        if not arg.startswith("--") or arg == "--help":
            continue
        flag = arg.split("=", 1)[0]
        assert _flag_present(flag, out), f"{flag} is not an option of `python -m {module}`"
        choices = _choices(flag, out)
        value = args[i + 1] if i + 1 < len(args) else None
        if choices and value and not value.startswith("-") and "=" not in value:
            assert value in choices, f"{flag} {value}: not one of {choices}"
    if module == "rspo_kit.train":
        fields = config_fields()
        for arg in args:
            if "=" in arg and not arg.startswith("-"):
                key = arg.split("=", 1)[0]
                assert key in fields, f"override {key!r} is not a config field"
    if module == "rspo_kit.experiments.sweep" and "--grid" in args:
        grid = json.loads(args[args.index("--grid") + 1])
        notebook = ROOT / next(a for a in args if a.endswith(".ipynb"))
        parameters = notebook_parameters(notebook) if notebook.exists() else set()
        unknown = set(grid) - config_fields() - {"variant"} - parameters
        assert not unknown, (
            f"grid keys {sorted(unknown)}: not config fields, 'variant' or notebook parameters"
        )
    if module == "papermill":
        positional = [a for a in args if not a.startswith("-")]
        notebook = ROOT / positional[0]
        assert notebook.exists(), f"{positional[0]} does not exist"
        names = notebook_parameters(notebook)
        for i, arg in enumerate(args):
            if arg in ("-p", "--parameters"):
                assert args[i + 1] in names, f"{args[i + 1]} is not a parameter of {positional[0]}"
    _check_paths(args)


def check_command(command: str) -> None:
    """Run a ``--help`` form; check any other command against what it names (module docstring)."""
    tokens = shlex.split(command, comments=True)
    if not tokens:
        return
    head, args = tokens[0], tokens[1:]
    if head in PYTHONS and args[:1] == ["-m"]:
        module, rest = args[1], args[2:]
        if rest == ["--help"]:
            help_text(module)
        else:
            check_module_command(module, rest)
    elif head in PYTHONS:
        script = ROOT / args[0]
        assert script.exists(), f"{args[0]} does not exist"
        source = _read(script)
        for arg in args[1:]:
            if arg.startswith("--"):
                assert f'"{arg}"' in source, f"{arg} is not an option of {args[0]}"
        _check_paths(args[1:])
    elif head == "make":
        targets, makefile = makefile_targets()
        for arg in args:
            if "=" in arg:
                name, value = arg.split("=", 1)
                assert re.search(rf"\b{name}\b", makefile), f"the Makefile does not use {name}"
                if name == "PROTOCOL" and "<" not in value:
                    from rspo_kit.train.presets import PRESETS

                    assert value in PRESETS, f"PROTOCOL={value}: not a preset"
            elif not arg.startswith("-"):
                assert arg in targets, f"`make {arg}`: no such target in the Makefile"
    elif head.endswith("pytest"):
        _check_paths([a for a in args if not a.startswith("-")])


# ---- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_command_runs_or_names_what_exists(command):
    check_command(command.text)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=str)
def test_python_block_runs(block, tmp_path):
    if block.skipped:
        pytest.skip("marked <!-- not run -->")
    run = subprocess.run(
        [sys.executable, "-c", block.text], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"{block} failed:\n{run.stderr[-3000:]}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: _rel(p))
def test_links_point_at_what_exists(page):
    text = re.sub(r"^```.*?^```", "", _read(page), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name} links to {target}, which does not exist"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", _read(file), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{page.name}: no heading #{anchor} in {path}"


def test_the_pages_have_commands_and_snippets():
    assert {c.page for c in COMMANDS} >= {"README.md", "docs/experiments.md", "docs/training.md"}
    assert any(c.page.startswith("results/") for c in COMMANDS)
    assert any(c.text.endswith("rspo_kit.train --help") for c in COMMANDS)
    assert len(PYTHON_BLOCKS) >= 4


# A study whose README calls its report.md "that command's output" reproduces it from its archives
# (its one report command that names no file of its own: see STUDY_TABLES for those that do).
_WRITES_A_FILE = re.compile(r" > (results/\S+\.md)$")
STUDY_REPORTS = [
    c
    for c in COMMANDS
    if c.page.startswith("results/")
    and "rspo_kit.experiments.report" in c.text
    and not _WRITES_A_FILE.search(c.text)
    and "that command's output" in _read(ROOT / c.page)
    and (ROOT / c.page).with_name("report.md").exists()
]


@pytest.mark.parametrize("command", STUDY_REPORTS, ids=str)
def test_a_study_report_is_what_its_command_prints(command):
    tokens = shlex.split(command.text)
    argv = [sys.executable, *tokens[1:]]
    out = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == _read((ROOT / command.page).with_name("report.md")), (
        f"{command.page}'s report.md is not what its report command prints now"
    )


# A study's table (the paper's Table 1 beside ours, or a report of one of its archives) is what its
# command writes (``CMD > FILE``).
STUDY_TABLES = [
    c
    for c in COMMANDS
    if c.page.startswith("results/")
    and ("rspo_kit.experiments.paper_table" in c.text or "rspo_kit.experiments.report" in c.text)
    and _WRITES_A_FILE.search(c.text)
]


@pytest.mark.parametrize("command", STUDY_TABLES, ids=str)
def test_a_study_table_is_what_its_command_writes(command):
    text, _, target = command.text.rpartition(" > ")
    argv = [sys.executable, *shlex.split(text)[1:]]
    out = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == _read(ROOT / target), f"{target} is not what {command.page}'s command writes now"


def test_the_study_reports_are_checked():
    assert len(STUDY_REPORTS) >= 2
    assert len(STUDY_TABLES) >= 2


# ---- the checker itself fails where it should ----------------------------------------------------


@pytest.mark.parametrize(
    "command, complaint",
    [
        ("python -m rspo_kit.experiments.report OUT --no-such-flag", "--no-such-flag is not an option"),
        (
            "python -m rspo_kit.experiments.report OUT --curve curve_success results/no_such_study",
            "does not exist",
        ),
        ("python -m rspo_kit.no_such_module --flag", "no module"),
        ("make no-such-target", "no such target"),
        ("make demo NO_SUCH_VARIABLE_X=1", "does not use"),
        ("python benchmarks/webshop_speed.py --no-such-flag", "not an option"),
    ],
)
def test_checker_rejects_what_does_not_exist(command, complaint):
    with pytest.raises(AssertionError, match=complaint):
        check_command(command)


def test_checker_rejects_an_unknown_override_without_running_help(monkeypatch):
    monkeypatch.setitem(globals(), "help_text", lambda module: "--preset --env --grid")
    with pytest.raises(AssertionError, match=r"'algo\.lrr' is not a config field"):
        check_command("python -m rspo_kit.train --preset tiny algo.lrr=1")
    with pytest.raises(AssertionError, match="not config fields"):
        check_command(
            """python -m rspo_kit.experiments.sweep notebooks/04_training.ipynb --grid '{"algo.nme": [1]}'"""
        )


def test_not_run_marker_skips_exactly_the_next_block():
    page = "text\n<!-- not run: trains for minutes -->\n```python\nslow()\n```\n\n```python\nfast()\n```\n"
    blocks = fenced_blocks(page, "page.md", "python")
    assert [(b.text, b.skipped) for b in blocks] == [("slow()\n", True), ("fast()\n", False)]


def test_inline_commands_and_continuations_are_extracted():
    page = "Run `make demo` or `make_env(x)`.\n```bash\npython -m a.b --x \\\n    --y 1   # note\n```\n"
    assert [c.text for c in commands_of(page, "p.md")] == [
        "python -m a.b --x      --y 1   # note",
        "make demo",
    ]


def _section(page: str, heading: str) -> str:
    text = _read(ROOT / "docs" / page)
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_presets_table_lists_every_preset():
    from rspo_kit.train.presets import PRESETS

    rows = re.findall(r"^\| `([\w.-]+)` \|", _section("training.md", "Presets"), re.M)
    assert rows == list(PRESETS)


def test_every_open_choice_of_the_swap_is_documented_with_its_default():
    from rspo_kit.train.config import SwapConfig

    table = _section("training.md", "RSPO's open choices")
    for f in dataclasses.fields(SwapConfig):
        if f.name == "mode":
            continue
        stated = re.search(rf"swap\.{f.name}`? = `?([^\s`,)]+)", table)
        assert stated, f"docs/training.md's open choices do not state swap.{f.name} = its default"
        value = stated.group(1).strip("\"'")
        same = value == str(f.default) or (
            isinstance(f.default, float) and re.fullmatch(r"[\d.]+", value) and float(value) == f.default
        )
        assert same, f"docs/training.md says swap.{f.name} = {value}; the default is {f.default!r}"


def test_every_alternative_of_a_swap_mode_is_documented():
    from typing import Literal, get_args, get_type_hints

    from rspo_kit.train.config import SwapConfig

    table = _section("training.md", "RSPO's open choices")
    for name, hint in get_type_hints(SwapConfig).items():
        if name != "mode" and getattr(hint, "__origin__", None) is Literal:
            for value in get_args(hint):
                assert f"`{value}`" in table or f'"{value}"' in table, (
                    f"swap.{name}: {value!r} is not documented"
                )
