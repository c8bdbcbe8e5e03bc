"""The MigrationBench task generator without Maven: determinism, structure, splits, the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tree_sitter_java
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tree_sitter import Language, Parser

from strands_art.cli import main as cli_main
from strands_art.envs.migrationbench.generate.gen_project import build_project
from strands_art.envs.migrationbench.generate.generate import (
    HELDOUT_KIND,
    KINDS,
    SPLITS,
    GenerateError,
    generate_task,
    make_tasks,
    plan,
    task_rng,
)
from strands_art.envs.migrationbench.tasks.javatests import collect_tests
from strands_art.envs.migrationbench.tasks.tasks import load_task, load_tasks

_JAVA = Parser(Language(tree_sitter_java.language()))

# What a Java 8 level looks like in a POM, and what each removed-API hazard looks like in main code.
_JAVA8_LEVEL = re.compile(r">1\.8<|<maven\.compiler\.release>8<|<release>8<")
_HAZARD_TEXT = {
    "javax-annotation": None,  # fixed by a dependency: the code stays
    "jaxb": None,
    "nashorn": "javax.script",
    "reflective-access": "setAccessible",
    "base64": "sun.misc",
}


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except git's index (it records stat data of this checkout)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "index"
    }


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_same_seed_gives_byte_identical_tasks(tmp_path: Path) -> None:
    a = make_tasks(tmp_path / "a", ["multi-module", "nashorn", "reflective-access"], 5, 17)
    b = make_tasks(tmp_path / "b", ["multi-module", "nashorn", "reflective-access"], 5, 17)
    assert (
        [d.name for d in a]
        == [d.name for d in b]
        == [
            "multi-module-0000017",
            "nashorn-0000018",
            "reflective-access-0000019",
            "multi-module-0000020",
            "nashorn-0000021",
        ]
    )
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert files_a.keys() == files_b.keys()
    assert [k for k in files_a if files_a[k] != files_b[k]] == []
    assert any("/.git/objects/" in k for k in files_a)  # the git objects are compared too
    # a different seed gives a different project
    c = make_tasks(tmp_path / "c", ["nashorn"], 1, 22)
    assert (c[0] / "repo").is_dir()
    assert _files(c[0]) != _files(a[1])
    # ... and so does the same seed of another kind
    assert task_rng("jaxb", 3).random() != task_rng("base64", 3).random()


def test_same_seed_same_tasks_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    """Two CLI processes with different PYTHONHASHSEED write the same bytes (sets never order output)."""
    for h in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": h}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "strands_art.cli",
                "make-tasks",
                str(tmp_path / h),
                "--n",
                "4",
                "--seed",
                "9",
                "--kinds",
                "profile,parent-pom,jaxb,surefire-argline",
                "--no-verify",
            ],
            env=env,
            check=True,
            capture_output=True,
        )
    assert _files(tmp_path / "1") == _files(tmp_path / "2")


@pytest.mark.parametrize("kind", list(KINDS))
def test_task_structure(kind: str, tmp_path: Path) -> None:
    task_dir = generate_task(kind, 40 + len(kind), tmp_path)
    task = load_task(task_dir)  # the record passes the loader's checks
    record = json.loads((task_dir / "task.json").read_text())
    repo = task_dir / "repo"
    # repo/ is a git repository at base_commit with a clean work tree
    assert _git(repo, "rev-parse", "HEAD").strip() == record["base_commit"]
    assert _git(repo, "status", "--porcelain") == ""
    # no object in repo/.git but the ones of that commit: the migrated files never entered it
    all_objects = _git(repo, "cat-file", "--batch-all-objects", "--batch-check").split("\n")
    reachable = _git(repo, "rev-list", "--objects", "--all").split("\n")
    assert len(all_objects) == len(reachable)
    # test count: the static @Test count, and it is the generator's own
    inventory = collect_tests(repo)
    assert task.num_test_cases == len(inventory.methods) == record["generated"]["test_methods"] > 0
    assert len(set(inventory.keys())) == len(inventory.methods)  # no duplicate test method
    # every Java file parses
    for path in repo.rglob("*.java"):
        assert not _JAVA.parse(path.read_bytes()).root_node.has_error, path
    poms = {p: p.read_text() for p in repo.rglob("pom.xml")}
    assert any(_JAVA8_LEVEL.search(t) for t in poms.values()), kind

    # the reference patch applies, touches no test source, and leaves no Java 8 level or hazard
    subprocess.run(["git", "apply", "--check", str(task_dir / "reference.patch")], cwd=repo, check=True)
    patch = (task_dir / "reference.patch").read_text()
    touched = re.findall(r"^diff --git a/(\S+) b/", patch, flags=re.M)
    assert touched and not any("/src/test/" in f or f.startswith("src/test/") for f in touched)
    _git(repo, "apply", str(task_dir / "reference.patch"))
    poms = {p: p.read_text() for p in repo.rglob("pom.xml")}
    assert not any(_JAVA8_LEVEL.search(t) for t in poms.values()), kind
    assert not any(
        re.search(r"PermSize|ConcMarkSweep|ParNew|AggressiveOpts|SplitVerifier|CMSClass", t)
        for t in poms.values()
    )
    if _HAZARD_TEXT.get(kind):
        main = "".join(p.read_text() for p in repo.rglob("src/main/java/**/*.java"))
        assert _HAZARD_TEXT[kind] not in main
    if kind in ("javax-annotation", "jaxb"):
        assert any(
            ("javax.annotation-api" if kind == "javax-annotation" else "jaxb-api") in t for t in poms.values()
        )
    assert collect_tests(repo).keys() == inventory.keys()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(list(KINDS)), seed=st.integers(0, 3_000_000))
def test_projects_are_well_formed(kind: str, seed: int) -> None:
    """Any (kind, seed): the same project twice, Java that parses, a change to make, tests kept."""
    p1, p2 = build_project(kind, task_rng(kind, seed)), build_project(kind, task_rng(kind, seed))
    assert p1.before == p2.before and p1.after == p2.after and p1.meta == p2.meta
    assert "pom.xml" in p1.before and p1.after
    for path, text in p1.before.items():
        if path.endswith(".java"):
            assert not _JAVA.parse(text.encode()).root_node.has_error, (path, text)
    for path, text in p1.after.items():
        assert "src/test/" not in path
        if text is None:
            assert path in p1.before  # only existing files are deleted
        elif path.endswith(".java"):
            assert not _JAVA.parse(text.encode()).root_node.has_error, (path, text)
        assert p1.before.get(path) != text
    assert p1.meta["test_methods"] >= 2


def test_splits_have_disjoint_seeds_and_a_held_out_kind() -> None:
    train = plan(None, 40, 0, "train")
    evals = plan(None, 40, 0, "eval")
    held = plan(None, 5, 0, "heldout-kind")
    assert {s for _, s in train}.isdisjoint({s for _, s in evals})
    assert all(SPLITS["train"][0] <= s < SPLITS["train"][1] for _, s in train)
    assert all(SPLITS["eval"][0] <= s < SPLITS["eval"][1] for _, s in evals)
    assert {k for k, _ in held} == {HELDOUT_KIND}
    assert HELDOUT_KIND not in {k for k, _ in train + evals}
    assert {k for k, _ in train} == set(KINDS) - {HELDOUT_KIND}
    # the kinds are used in turn, seeds consecutive
    assert [k for k, _ in train[:3]] == list(KINDS)[:3] and [s for _, s in train[:3]] == [0, 1, 2]
    assert plan(["jaxb"], 2, 5, "eval") == [("jaxb", 1_000_005), ("jaxb", 1_000_006)]


@pytest.mark.parametrize(
    ("kinds", "n", "seed", "split", "message"),
    [
        (["nope"], 1, 0, None, "unknown kind"),
        (["jaxb", "jaxb"], 2, 0, None, "twice"),
        (None, 0, 0, None, "--n"),
        (None, 1, -1, None, "--seed"),
        (None, 2, 999_999, "train", "exceeds split train"),
        (None, 10_001, 0, None, r"--n must be in \[1, 10000\]"),
        (None, 3, (1 << 40) - 2, None, "--seed must be in"),  # its last task's seed would pass the bound
        ([HELDOUT_KIND], 1, 0, "train", "held-out kind"),
        (["jaxb"], 1, 0, "heldout-kind", "only the held-out kind"),
        (None, 1, 0, "test", "unknown split"),
    ],
)
def test_plan_refuses_bad_arguments(kinds, n, seed, split, message) -> None:
    with pytest.raises(GenerateError, match=message):
        plan(kinds, n, seed, split)


def test_make_tasks_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(GenerateError, match="not an empty directory"):
        make_tasks(tmp_path, ["jaxb"], 1, 0)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_cli_makes_a_split_that_migrate_can_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "eval"
    assert (
        cli_main(["make-tasks", str(out), "--split", "eval", "--n", "3", "--seed", "7", "--no-verify"]) == 0
    )
    assert "made 3 tasks of 3 kinds" in capsys.readouterr().out
    tasks = load_tasks(out)  # what `strands-art migrate --tasks-dir` reads
    assert [t.name for t in tasks] == [
        "compiler-plugin-1000008",
        "java-level-props-1000007",
        "release-flag-1000009",
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["split"] == "eval" and [t["seed"] for t in manifest["tasks"]] == [
        1_000_007,
        1_000_008,
        1_000_009,
    ]
    assert all(t.record["generated"]["split"] == "eval" for t in tasks)
    assert cli_main(["make-tasks", str(tmp_path / "x"), "--kinds", "jaxb,bogus", "--no-verify"]) == 2
    assert "unknown kind(s) ['bogus']" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--timeout", "-1"], "--timeout"),
        (["--fork-count", "-2"], "--fork-count"),
        (["--n", "0"], "--n must be in [1, 10000], got 0"),
        (["--n", "1000000000"], "--n must be in [1, 10000]"),
        (["--split", "heldout-kind", "--kinds", "nashorn"], "only the held-out kind base64"),
        (["--kinds", ""], "an empty kind"),
        (["--kinds", "jaxb,,nashorn"], "an empty kind"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli_main(["make-tasks", str(out), "--no-verify", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not out.exists()


def test_cli_refuses_a_file_as_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("mine")
    assert cli_main(["make-tasks", str(target), "--no-verify", "--n", "1"]) == 2
    assert "is not an empty directory" in capsys.readouterr().err
    assert target.read_text() == "mine"
    assert cli_main(["make-tasks", str(target / "sub"), "--no-verify", "--n", "1"]) == 2  # a bad argument
    assert f"cannot make {target / 'sub'}: Not a directory" in capsys.readouterr().err
    assert cli_main(["make-tasks", "", "--no-verify", "--n", "1"]) == 2  # not the current directory
    assert "OUT_DIR is empty (an unset variable?)" in capsys.readouterr().err
