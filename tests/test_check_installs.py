"""The install-line checker (scripts/install_lines.py, scripts/check_installs.py), offline.

The resolution itself (uv against the index) runs in ./scripts/test.sh through
scripts/check-installs.sh; these tests pin what it resolves (the docs' blocks), how it reads
pip's configuration, and how it judges Requires-Python."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import check_installs  # noqa: E402
from install_lines import (  # noqa: E402
    DocError,
    PipInstall,
    find_blocks,
    parse_marker,
    parse_pip_config,
    parse_pip_install,
    pip_commands,
    to_resolvable,
)


def _blocks():
    return {b.name: b for b in find_blocks(ROOT)}


def test_docs_blocks_are_the_documented_lines():
    blocks = _blocks()
    assert set(blocks) == {"vllm", "verl-cluster", "verl-cpu-tests", "bench-reference", "ray"}
    assert blocks["vllm"].commands == (PipInstall((".[vllm]",)),)
    assert blocks["vllm"].pythons == ("3.11", "3.12", "3.13") and blocks["vllm"].fails_on == ()
    assert blocks["verl-cluster"].commands == (PipInstall((".[verl-vllm]",)),)
    assert blocks["verl-cluster"].pythons == ("3.11", "3.12") and blocks["verl-cluster"].fails_on == ("3.13",)
    assert blocks["verl-cluster"].where.startswith("docs/setup-verl.md:")
    assert blocks["vllm"].where.startswith("docs/setup-vllm.md:")
    assert blocks["verl-cpu-tests"].pythons == ("3.11",)
    assert blocks["ray"].commands == (PipInstall((".[ray]",)),)
    assert blocks["ray"].where.startswith("docs/scale-out.md:") and blocks["ray"].pythons == ("3.11", "3.12")
    bench = blocks["bench-reference"].commands
    assert bench[1] == PipInstall((".",), no_deps=True)


def test_cpu_test_block_is_what_test_verl_sh_installs():
    """docs/setup-verl.md's CPU test line is the one scripts/test-verl.sh runs (minus pip's own upgrade)."""
    script = (ROOT / "scripts" / "test-verl.sh").read_text()
    installed = [c for c in pip_commands(script, "test-verl.sh") if c.requirements != ("pip",)]
    assert installed == list(_blocks()["verl-cpu-tests"].commands)
    assert installed == [PipInstall(("torch==2.13.0",)), PipInstall((".[verl,dev]",))]


def test_every_extra_named_in_the_docs_exists():
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    extras = set(project["optional-dependencies"])
    named = set()
    for block in _blocks().values():
        for command in block.commands:
            for req in command.requirements:
                if req.startswith("."):
                    named |= Requirement("x" + req.lstrip(".")).extras
    assert named == {"vllm", "verl-vllm", "verl", "dev", "ray"}
    assert named <= extras
    # the cluster extra is verl's own pairing on top of ours
    assert project["optional-dependencies"]["verl-vllm"] == ["strands-art[verl,vllm]", "verl[vllm]==0.9.1"]
    vllm = {
        Requirement(r).name: str(Requirement(r).specifier) for r in project["optional-dependencies"]["vllm"]
    }
    assert vllm == {"vllm": "<0.33,>=0.20", "opentelemetry-sdk": "<1.45.2"}
    torch = [Requirement(r) for r in project["dependencies"] if r.startswith("torch")]
    assert [str(r.specifier) for r in torch] == [">=2.11"]


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.md").write_text(text)
    return tmp_path


def test_unmarked_pip_install_is_refused(tmp_path):
    root = _write(tmp_path, "# x\n\n```bash\npip install foo\n```\n")
    with pytest.raises(DocError, match=r"docs/a.md:4: 'pip install' outside an install-check block"):
        find_blocks(root, ("docs/*.md",))
    root = _write(tmp_path, "Run `pip install foo` first.\n")
    with pytest.raises(DocError, match=r"docs/a.md:1"):
        find_blocks(root, ("docs/*.md",))


def test_marked_block_forms(tmp_path):
    text = (
        "<!-- install-check: name=a python=3.11 -->\n```bash\npython3 -m venv v\n"
        "v/bin/pip install -q 'x[y]>=1' \\\n   z  # comment pip install nope\n"
        "python -m pip install --no-deps -e . -c c.txt\n```\n"
    )
    (block,) = find_blocks(_write(tmp_path, text), ("docs/*.md",))
    assert block.where == "docs/a.md:1"
    assert block.commands == (PipInstall(("x[y]>=1", "z")), PipInstall((".",), ("c.txt",), no_deps=True))
    with pytest.raises(DocError, match="not followed by a ``` block"):
        find_blocks(_write(tmp_path, "<!-- install-check: name=a python=3.11 -->\ntext\n"), ("docs/*.md",))
    with pytest.raises(DocError, match="no pip install"):
        find_blocks(
            _write(tmp_path, "<!-- install-check: name=a python=3.11 -->\n```\nls\n```\n"), ("docs/*.md",)
        )
    twice = "<!-- install-check: name=a python=3.11 -->\n```\npip install x\n```\n"
    with pytest.raises(DocError, match="used twice: a"):
        find_blocks(_write(tmp_path, twice + twice), ("docs/*.md",))


def test_marker_fields():
    assert parse_marker(" name=c python=3.11,3.12 fails-on=3.13 ", "f:1") == (
        "c",
        ("3.11", "3.12"),
        ("3.13",),
    )
    for body, msg in [
        ("python=3.11", "needs name= and python="),
        ("name=a python=3.11 pythons=3.12", "bad install-check marker field"),
        ("name=a python=3", "not a Python version"),
        ("name=a python=3.11 fails-on=3.11", "both"),
    ]:
        with pytest.raises(DocError, match=msg):
            parse_marker(body, "f:1")


def test_pip_options():
    assert parse_pip_install(["-e", ".[verl]", "-U", "a==1"], "w") == PipInstall((".[verl]", "a==1"))
    for argv, msg in [
        (["--index-url", "http://x", "a"], "not modelled"),
        (["-r", "req.txt"], "requirement files"),
        (["-e"], "without a value"),
        (["-q"], "without a requirement"),
    ]:
        with pytest.raises(DocError, match=msg):
            parse_pip_install(argv, "w")


@given(st.lists(st.sampled_from(["vllm", "verl", "dev", "verl-vllm", "families"]), unique=True))
def test_local_requirement_becomes_the_checkout(extras):
    spec = "." + (f"[{','.join(extras)}]" if extras else "")
    req = Requirement(to_resolvable(spec, ROOT, "strands-art"))
    assert req.name == "strands-art" and req.extras == set(extras)
    assert req.url == ROOT.as_uri()


def test_non_local_requirement_passes_through():
    assert to_resolvable("torch==2.13.0", ROOT, "strands-art") == "torch==2.13.0"
    assert to_resolvable("verl[vllm]==0.9.1", ROOT, "strands-art") == "verl[vllm]==0.9.1"


def test_pip_config_as_pip_reads_it():
    listing = (
        ":env:.find-links='/opt/wheels'\n"
        "global.constraint='/etc/c.txt'\n"
        "global.extra-index-url='file:///opt/a/simple file:///gone/simple https://mirror/simple'\n"
        "global.find-links='/elsewhere'\n"
        "global.index-url='https://first/simple'\n"
        "install.index-url='https://second/simple'\n"
    )
    present = {"/opt/a/simple", "/opt/wheels"}
    sources = parse_pip_config(listing, {}, exists=present.__contains__)
    assert sources.index_url == "https://second/simple"
    assert sources.extra_index_urls == ["file:///opt/a/simple", "https://mirror/simple"]
    assert sources.find_links == ["/opt/wheels"]  # the environment wins over the file
    assert sources.constraints == []
    assert sources.notes == [
        "pip's extra-index-url file:///gone/simple does not exist here: left out",
        "pip's constraint /etc/c.txt does not exist here: left out",
    ]
    env = parse_pip_config(listing, {"PIP_INDEX_URL": "https://env/simple"}, exists=present.__contains__)
    assert env.index_url == "https://env/simple"
    assert check_installs.uv_source_args(env)[:4] == [
        "--index-url",
        "https://env/simple",
        "--index-strategy",
        "unsafe-best-match",
    ]


# verl's simple page as this index serves it (PEP 503 HTML, entities escaped)
VERL_HTML = (
    '<a href="https://files/verl-0.9.0-py3-none-any.whl#sha256=6e" data-requires-python="&gt;=3.10">x</a><br/>\n'
    '<a href="https://files/verl-0.9.1-py3-none-any.whl#sha256=db" data-requires-python="&lt;3.13,&gt;=3.10">x</a>\n'
    '<a href="https://files/verl-0.9.1.tar.gz#sha256=3e" data-requires-python="&lt;3.13,&gt;=3.10">x</a>\n'
)


def test_requires_python_upper_bound():
    html_page = httpx.Response(200, text=VERL_HTML, headers={"content-type": "text/html"})
    json_page = httpx.Response(
        200,
        json={
            "files": [
                {"filename": "verl-0.9.0-py3-none-any.whl", "requires-python": ">=3.10"},
                {"filename": "verl-0.9.1-py3-none-any.whl", "requires-python": "<3.13,>=3.10"},
                {"filename": "verl-0.9.1.tar.gz", "requires-python": "<3.13,>=3.10"},
            ]
        },
        headers={"content-type": "application/vnd.pypi.simple.v1+json"},
    )
    for page in (html_page, json_page):
        releases = check_installs.by_release(check_installs.parse_simple_page(page))
        assert releases == {Version("0.9.0"): [">=3.10"], Version("0.9.1"): ["<3.13,>=3.10", "<3.13,>=3.10"]}
    assert check_installs.python_allowed(["<3.13,>=3.10"], "3.12")
    assert not check_installs.python_allowed(["<3.13,>=3.10"], "3.13")
    assert check_installs.python_allowed(["<3.13", None], "3.13")  # one file without a bound
    assert check_installs.python_allowed(["not a specifier"], "3.13")  # pip ignores it too
    assert not check_installs.python_allowed(["!=3.13.*"], "3.13")

    index = check_installs.RequiresPythonIndex("https://pypi.org/simple")
    index.releases["verl"] = check_installs.by_release(check_installs.parse_simple_page(html_page))
    index.releases["six"] = {}
    pins = {"verl": "0.9.1", "six": "1.17.0"}
    assert index.conflicts(pins, "3.12") == ([], 1)
    assert index.conflicts(pins, "3.13") == (["verl 0.9.1 requires Python <3.13,>=3.10"], 1)


def test_pins_and_verdicts():
    out = "aiohttp==3.14.5\n    # via x\nstrands-art @ file:///c\nTorch==2.13.0+cpu\nverl[vllm]==0.9.1\n"
    assert check_installs.parse_pins(out) == {"aiohttp": "3.14.5", "torch": "2.13.0+cpu", "verl": "0.9.1"}
    block = _blocks()["verl-cluster"]
    resolved = check_installs.Resolution(True, {"verl": "0.9.1"}, "", 1.0)
    assert check_installs.Check(block, "3.12", True, resolved).passed
    refused = check_installs.Check(block, "3.13", False, resolved, ("verl 0.9.1 requires Python <3.13",))
    assert refused.passed and "fails, as documented: verl 0.9.1" in check_installs.report(refused)
    wrongly = check_installs.Check(block, "3.13", False, resolved)
    assert not wrongly.passed and "the docs say it fails" in check_installs.report(wrongly)
    broken = check_installs.Check(
        block, "3.11", True, check_installs.Resolution(False, {}, "x\nno solution", 2.0)
    )
    assert not broken.passed and "DOES NOT RESOLVE: no solution" in check_installs.report(broken)


def test_list_and_unknown_names(capsys):
    assert check_installs.main(["--list", "--only", "verl-cluster"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("verl-cluster (docs/setup-verl.md:")
    assert "fails-on=3.13" in out and "    pip install -e '.[verl-vllm]'" in out
    assert check_installs.main(["--list", "--only", "nope"]) == 2
    assert "no install line named nope" in capsys.readouterr().err
