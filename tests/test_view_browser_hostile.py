"""The run page over a hostile run directory, in the real browser (the fixtures of
test_view_browser: the real ``strands-art view`` command, Debian's chromium; the ``page``
fixture fails on any dialog or JavaScript error): bidi overrides and ANSI escapes in task
names, stop reasons and configuration values show as escapes, markup as text, values of the
wrong type and absurd numbers neither break the page nor its layout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.make_view_run import XSS

from tests.test_view_browser import DATA, browser, page, server  # noqa: F401 - fixtures
from tests.test_view_hostile import add_odd_trajectory

HOSTILE = "\u202eevil\u202c " + XSS[0] + " \x1b[31mRED"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("view-hostile") / "run"
    shutil.copytree(DATA, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["note"] = HOSTILE
    (d / "config.json").write_text(json.dumps(cfg))
    recs = [
        {"rollout_id": "h1", "reward": 1e308, "task": HOSTILE, "stop_reason": HOSTILE},
        {"rollout_id": "h2", "reward": "bad", "task": 7, "stop_reason": ["x"], "turns": "3"},
        {"rollout_id": "L" * 600, "reward": float("nan"), "times": {"wall_s": "x"}},
    ]
    with open(d / "results.jsonl", "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    add_odd_trajectory(d)
    (d / "metrics.jsonl").write_text('{"kind": "train", "outer_batch": 0, "loss": NaN}\nnull\n[1]\n')
    return d


def test_run_page_over_hostile_values(server: str, page) -> None:  # noqa: F811
    page.goto(server + "?sort=reward")
    page.wait_for_selector('tr[data-rollout="h1"]')
    text = page.locator("main").inner_text()
    assert "\u202e" not in text and "\x1b" not in text  # before: the override reordered the cell
    assert "\\u202eevil\\u202c" in text and "\\x1b[31mRED" in text
    assert text.count(XSS[0]) >= 3  # task, stop reason, configuration value: as characters
    assert page.locator("img").count() == 0 and page.locator("script").count() == 2
    mean = page.locator(".stat", has_text="mean reward").inner_text()
    assert len(mean) < 40, mean  # before: 1e308's 309 digits ran off the card
    assert "[object Object]" not in text and "'truncated'" not in text  # a cut id shows its head
    assert page.locator('tr[data-rollout="' + "L" * 500 + '"]').count() == 1


def test_rollout_page_over_odd_shapes(server: str, page) -> None:  # noqa: F811
    """Messages and tool calls that are not objects (before: a TypeError left the page at
    "Loading…"), shown as text; the 10 MB tool result folded with its full size."""
    page.goto(server + "rollout?id=odd")
    page.wait_for_selector(".turn")
    page.evaluate("document.querySelectorAll('details').forEach((d) => (d.open = true))")
    text = page.locator("main").inner_text()
    assert "a string message" in text and "call \\u202e<b>x" in text
    assert "javascript:alert(2)" in text and "<img src=x onerror=alert(3)>" in text
    assert "tool result, 10,000,000 characters (show)" in text
    assert page.locator("img").count() == 0 and "\u202e" not in text
