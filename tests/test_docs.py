"""The docs stay runnable: every ``strands-art SUB ...`` command that README.md, CHANGELOG.md,
bench/README.md and docs/*.md show
(fenced shell blocks, and inline code spans that start with ``strands-art``) names a real
subcommand and only flags its real argparse parser defines (``strands_art.cli.build_parser``,
built without running anything); ``./scripts/migrate.sh ARGS`` is checked against ``migrate``;
``python -m strands_art.X`` names a module that exists; and every relative markdown link (and
its ``#anchor``, as GitHub spells heading anchors) resolves."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from strands_art.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")]
)
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^\s*```(\S*)")
#: an inline code span (it may wrap onto the next line) that runs strands-art or scripts/migrate.sh
INLINE_COMMAND = re.compile(
    r"`((?:\.venv/bin/)?strands-art [^`\n]+(?:\n[^`\n]+)?|\./scripts/migrate\.sh[^`\n]*(?:\n[^`\n]+)?)`"
)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Subcommand name -> its parser (the one ``_SubParsersAction`` of the top parser)."""
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings}


def _blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(first line number, language, lines) of each fenced block."""
    blocks, current, lang, start = [], None, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match and current is None:
            current, lang, start = [], match.group(1).lower(), number + 1
        elif match:
            blocks.append((start, lang, current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _outside_code_lines(text: str) -> list[str]:
    """The page's lines with fenced blocks blanked (line numbers kept)."""
    lines = text.splitlines()
    for start, _, body in _blocks(text):
        for i in range(start - 2, min(start + len(body), len(lines))):
            lines[i] = ""
    return lines


def commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each shell command of the page: fenced shell blocks (lines
    joined at a trailing backslash, a leading ``$`` prompt dropped) and inline code spans that
    start with ``strands-art`` or ``./scripts/migrate.sh``, also wrapped over two lines (a
    table's ``\\|`` read as an alternative, not a pipe)."""
    found = []
    for start, lang, body in _blocks(text):
        if lang not in SHELL_LANGS:
            continue
        pending, first = "", start
        for offset, line in enumerate(body):
            if not pending:
                first = start + offset
            stripped = line.strip()
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            if "`" not in pending + stripped:  # a backtick: markdown in a plain block, not shell
                found.append((first, re.sub(r"^\$\s+", "", pending + stripped)))
            pending = ""
    prose = "\n".join(_outside_code_lines(text))
    for match in INLINE_COMMAND.finditer(prose):
        number = prose.count("\n", 0, match.start()) + 1
        found.append((number, " ".join(match.group(1).replace("\\|", "/").split())))
    return found


def _segments(command: str) -> list[list[str]]:
    """The command's simple commands (split at pipes, ``&&``, ``;``, redirections), as words;
    comments dropped, placeholder brackets (``[--flag X]``, ``<run>``) kept as plain words."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote in an illustrative line: plain words
        words = command.split("#", 1)[0].split()
    segments, current = [], []
    for word in words:
        if word and set(word) <= set("|&;<>()"):
            segments.append(current)
            current = []
        else:
            current.append(word.strip("[]"))
    segments.append(current)
    return [s for s in segments if s]


def check_command(command: str, parser: argparse.ArgumentParser) -> list[str]:
    """What is wrong with one documented command line: an unknown subcommand, a flag its parser
    does not define, a ``python -m`` module that does not exist. Empty when it is runnable."""
    subs = subparsers(parser)
    problems = []
    for words in _segments(command):
        for i, word in enumerate(words):
            if word.endswith("strands-art") and i + 1 < len(words):
                rest = words[i + 1 :]
                while rest and rest[0] in ("-v", "-vv", "--verbose"):
                    rest = rest[1:]
                if not rest or rest[0] in ("-h", "--help") or rest[0].isupper():  # SUB: a placeholder
                    break
                if rest[0] not in subs:
                    problems.append(f"unknown subcommand {rest[0]!r}")
                    break
                problems += _unknown_flags(rest[1:], subs[rest[0]], f"strands-art {rest[0]}")
                break
            if word.endswith("scripts/migrate.sh"):
                problems += _unknown_flags(words[i + 1 :], subs["migrate"], "./scripts/migrate.sh")
                break
            if word == "-m" and i + 1 < len(words) and words[i + 1].startswith("strands_art"):
                module = words[i + 1]
                path = ROOT / module.replace(".", "/")
                if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
                    problems.append(f"python -m {module}: no such module")
                break
    return problems


def _unknown_flags(words: list[str], sub: argparse.ArgumentParser, name: str) -> list[str]:
    known = option_strings(sub)
    flags = [w.split("=", 1)[0] for w in words if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", w)]
    return [f"{name}: no flag {flag}" for flag in flags if flag not in known]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page: its headings (GitHub's ``-1``, ``-2`` for repeats) and ``id=``/``name=``."""
    found: set[str] = set()
    for line in _outside_code_lines(text):
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = _slug(match.group(1))
            candidate, n = slug, 0
            while candidate in found:
                n += 1
                candidate = f"{slug}-{n}"
            found.add(candidate)
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def check_links(text: str, page: Path) -> list[str]:
    """Dead relative links of a page: a file that does not exist, or an anchor no heading makes."""
    problems = []
    for number, line in enumerate(_outside_code_lines(text), 1):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            if not path_part:
                if anchor not in anchors(text):
                    problems.append(f"{page.name}:{number}: no anchor #{anchor} in {page.name}")
                continue
            dest = (page.parent / path_part).resolve()
            if not dest.exists():
                problems.append(f"{page.name}:{number}: dead link {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                problems.append(f"{page.name}:{number}: no anchor #{anchor} in {path_part}")
    return problems


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documented_commands_parse(page: Path, parser):
    problems = [
        f"{page.name}:{number}: {problem}  [{command}]"
        for number, command in commands(page.read_text())
        for problem in check_command(command, parser)
    ]
    assert problems == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    assert check_links(page.read_text(), page) == []


def test_the_docs_show_commands_for_each_main_subcommand(parser):
    """The checks above see real commands: the README and docs show train, migrate, view,
    make-tasks and serve lines (a parser that found nothing would pass vacuously)."""
    seen = set()
    for page in PAGES:
        for _, command in commands(page.read_text()):
            seen.update(
                w for words in _segments(command) for w in words[1:2] if words[0].endswith("strands-art")
            )
    assert {"train", "migrate", "view", "make-tasks", "serve"} <= seen


def test_a_made_up_flag_a_bad_subcommand_and_a_missing_module_are_caught(parser):
    doc = (
        "Try it:\n\n```bash\n"
        "strands-art train --env lookup --run-dir runs/x \\\n    --no-such-flag 3   # quick try\n"
        'flock "$LOCK" strands-art migrate --tasks a --rollouts-per-tasks 2 | tee log\n'
        "strands-art trian --env lookup\n"
        "./scripts/migrate.sh --all-task\n"
        "python -m strands_art.nowhere.module --x\n"
        "strands-art view RUN [--port 8765] [--opn]\n"
        "```\n\nand `strands-art make-tasks OUT [--split train\\|eval] [--kind K]`, or\n"
        "`.venv/bin/strands-art train --env lookup\n--outer-batch 2` (wrapped).\n"
    )
    found = [(n, p) for n, c in commands(doc) for p in check_command(c, parser)]
    assert found == [
        (4, "strands-art train: no flag --no-such-flag"),
        (6, "strands-art migrate: no flag --rollouts-per-tasks"),
        (7, "unknown subcommand 'trian'"),
        (8, "./scripts/migrate.sh: no flag --all-task"),
        (9, "python -m strands_art.nowhere.module: no such module"),
        (10, "strands-art view: no flag --opn"),
        (13, "strands-art make-tasks: no flag --kind"),
        (14, "strands-art train: no flag --outer-batch"),
    ]
    good = (
        "```bash\nstrands-art train --env lookup --run-dir runs/x --outer-batches=2  # comment --bogus\n```\n"
    )
    assert [p for _, c in commands(good) for p in check_command(c, parser)] == []


def test_a_dead_link_and_a_missing_anchor_are_caught(tmp_path):
    (tmp_path / "other.md").write_text(
        "# Other page\n\n## The `train` command (CPU)\n\n```\n# not a heading\n```\n"
    )
    page = tmp_path / "page.md"
    text = (
        "# Page\n\n[ok](other.md#the-train-command-cpu) [self](#page) [web](https://example.com/x)\n"
        "[dead](nowhere.md) [bad anchor](other.md#not-a-heading) [bad self](#nothing)\n"
        "`[in code](nowhere.md)`\n"
    )
    assert check_links(text, page) == [
        "page.md:4: dead link nowhere.md",
        "page.md:4: no anchor #not-a-heading in other.md",
        "page.md:4: no anchor #nothing in page.md",
    ]
