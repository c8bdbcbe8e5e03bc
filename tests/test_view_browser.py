"""``strands-art view`` driven in a real headless browser (Debian's chromium via Playwright).

The run directory is a real ``strands-art migrate`` run recorded by tests/support/make_view_run.py
(tests/data/view-run: real gateway, tree capture, Qwen3 template, real tools and Maven builds,
a scripted policy), copied per module; the server is the real command (``python -m
strands_art.cli view``) in a subprocess. The assertions read what a person sees on the page.
Screenshots go to ``$STRANDS_ART_VIEWER_SHOTS`` when set (docs/images for docs/viewer.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.make_view_run import XSS

from strands_art.envs.migrationbench.run.progress import LiveBoard
from strands_art.store import TrajectoryStore
from strands_art.training.grpo import GRPOConfig, group_advantages
from strands_art.training.metrics import MetricsLog

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/setup-system.sh)"
)
DATA = Path(__file__).parent / "data" / "view-run"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("view") / "run"
    shutil.copytree(DATA, d)
    return d


@pytest.fixture(scope="module")
def server(run_dir: Path):
    """The real ``strands-art view`` command on a free loopback port; yields its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_art.cli", "view", str(run_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert m, f"no URL in the first output line: {line!r}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))  # type: ignore[attr-defined]
    yield pg
    assert pg.dialogs == [], f"a dialog fired: {pg.dialogs}"  # type: ignore[attr-defined]
    assert pg.errors == [], f"JavaScript errors: {pg.errors}"  # type: ignore[attr-defined]
    ctx.close()


def shot(page, name: str) -> None:
    out = os.environ.get("STRANDS_ART_VIEWER_SHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(out) / name), full_page=False)


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def fork_event(run_dir: Path, rid: str) -> dict:
    [traj] = [t for t in TrajectoryStore(run_dir / "trajectories") if t.rollout_id == rid]
    [ev] = [e for e in traj.events if e["kind"] == "fork"]
    return ev


def test_run_page_to_rollout_to_row(server: str, run_dir: Path, page) -> None:
    page.goto(server)
    page.wait_for_selector("table#rollouts tbody tr")
    rows = page.locator("table#rollouts tbody tr")
    assert rows.count() == len(results(run_dir)) == 4
    rec = {r["rollout_id"]: r for r in results(run_dir)}
    for rid, r in rec.items():
        cells = page.locator(f'tr[data-rollout="{rid}"] td')
        assert cells.nth(2).inner_text() == f"{r['reward']:.2f}"
        assert cells.nth(6).inner_text() == str(r["turns"])
        assert cells.nth(7).inner_text() == str(r["rows"])
    # the alpha group has equal rewards: marked zero-variance; compiler-props is not
    assert page.locator('.group[data-group="alpha"] .chip.zero').count() == 1
    assert page.locator('.group[data-group="compiler-props"].zero').count() == 0
    shot(page, "viewer-run.png")

    page.get_by_role("link", name="alpha-r0").first.click()
    page.wait_for_selector(".turn")
    assert page.url.endswith("/rollout?id=alpha-r0")
    page.get_by_role("link", name="row 0").first.click()
    page.wait_for_selector("body[data-ready='1']")
    loss_mask = next(
        r["loss_mask"]
        for r in pq.read_table(run_dir / "trajectories" / "rows" / "part-alpha-r0.parquet").to_pylist()
        if r["row_index"] == 0
    )
    # every token styled as trained, collected while scrolling through the virtualized pane
    trained = page.evaluate(
        """async () => {
            const pane = document.getElementById('tokens'); const seen = new Set(); const all = new Set();
            for (let top = 0; top <= pane.scrollHeight; top += pane.clientHeight / 2) {
                pane.scrollTop = top; pane.dispatchEvent(new Event('scroll'));
                await new Promise(r => requestAnimationFrame(r));
                for (const t of pane.querySelectorAll('.tok')) {
                    all.add(t.dataset.i);
                    if (t.classList.contains('s')) seen.add(t.dataset.i);
                }
            }
            return [seen.size, all.size];
        }"""
    )
    assert trained == [sum(loss_mask), len(loss_mask)]
    assert page.locator("#stat-sampled").inner_text() == str(sum(loss_mask))


def test_fork_marker_at_the_event_token_index(server: str, run_dir: Path, page) -> None:
    ev = fork_event(run_dir, "alpha-r0")
    page.goto(server + "row?id=alpha-r0&row=0")
    page.wait_for_selector("body[data-ready='1']")
    button = page.locator(f'#marklist button[data-kind="fork"][data-pos="{ev["position"]}"]')
    button.focus()  # reachable by keyboard
    page.keyboard.press("Enter")
    marker = page.locator(f'#tokens .marker[data-kind="fork"][data-pos="{ev["position"]}"]')
    marker.wait_for()
    # the marker sits right before the token at the event's index, which now has the focus ring
    after = marker.evaluate("m => m.nextElementSibling.dataset.i")
    assert after == str(ev["position"])
    assert page.locator("#tokens .tok.cur").get_attribute("data-i") == str(ev["position"])
    assert "fork" in page.locator("#inspector").inner_text()
    # keyboard: → moves to the next token, the inspector follows
    page.keyboard.press("ArrowRight")
    assert page.locator("#tokens .tok.cur").get_attribute("data-i") == str(ev["position"] + 1)
    shot(page, "viewer-row.png")


def test_rollout_page_shows_fork_and_hostile_text_as_text(server: str, run_dir: Path, page) -> None:
    ev = fork_event(run_dir, "alpha-r0")
    page.goto(server + "rollout?id=alpha-r0")
    page.wait_for_selector(".turn")
    box = page.locator(f'.event[data-kind="fork"][data-pos="{ev["position"]}"]')
    assert box.count() == 1
    assert "the row: what was sampled" in box.inner_text().lower()
    assert ev["reason"] in box.inner_text()
    text = page.locator("main").inner_text()
    for payload in XSS:
        assert payload in text  # shown as characters
    assert "\\x1b[31mRED\\x1b[0m" in text  # the ANSI escape as characters, not colour
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 2  # ours: common.js and rollout.js
    assert page.evaluate("typeof window.alert") == "function"
    box.evaluate("b => b.closest('.turn').scrollIntoView({block: 'start'})")
    shot(page, "viewer-rollout.png")


def test_group_comparison_shows_both_advantages(server: str, run_dir: Path, page) -> None:
    rec = {r["rollout_id"]: r for r in results(run_dir)}
    ids = ["compiler-props-r0", "compiler-props-r1"]
    want = group_advantages([rec[i]["reward"] for i in ids], GRPOConfig())
    assert want[0] > 0 > want[1]
    page.goto(server + "rollout?id=compiler-props-r0")
    page.wait_for_selector("#group")
    page.get_by_role("link", name="compare side by side").first.click()
    page.wait_for_selector(".cols.two")
    for rid, adv in zip(ids, want, strict=True):
        col = page.locator(f'.col[data-rollout="{rid}"]')
        stats = col.locator(".stats").first.inner_text()
        assert f"{adv:+.3f}" in stats and f"{rec[rid]['reward']:.2f}" in stats
    shot(page, "viewer-compare.png")


def test_live_view_picks_up_an_appended_rollout(server: str, run_dir: Path, page) -> None:
    page.goto(server)
    page.wait_for_selector("table#rollouts tbody tr")
    assert page.locator('tr[data-rollout="alpha-r9"]').count() == 0
    # a rollout finishes while the page is open: the runner's order (part, trajectory line, results line)
    src = run_dir / "trajectories"
    line = next(ln for ln in (src / "trajectories.jsonl").read_text().splitlines() if '"alpha-r1"' in ln[:40])
    d = json.loads(line)
    d["rollout_id"] = "alpha-r9"
    table = pq.read_table(src / "rows" / "part-alpha-r1.parquet")
    table = table.set_column(0, "rollout_id", pa.array(["alpha-r9"] * table.num_rows))
    pq.write_table(table, src / "rows" / "part-alpha-r9.parquet")
    with open(src / "trajectories.jsonl", "a") as f:
        f.write(json.dumps(d) + "\n")
    rec = next(r for r in results(run_dir) if r["rollout_id"] == "alpha-r1") | {
        "rollout_id": "alpha-r9",
        "reward": 0.5,
    }
    with open(run_dir / "results.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    # and another is in flight (the runner's LiveBoard, as the terminal's live rows show it)
    board = LiveBoard(run_dir / "live.json")
    board.update("beta-r3", turn=3, last_call="shell: mvn -q clean verify")
    page.wait_for_selector('tr[data-rollout="alpha-r9"]', timeout=10_000)
    page.wait_for_selector("#inflight li", timeout=10_000)
    assert page.locator("#inflight li").inner_text().startswith("beta-r3  turn 3  shell: mvn -q clean verify")
    board.close()
    page.wait_for_selector("#inflight-card", state="hidden", timeout=10_000)
    assert page.locator("#stat-rollouts").inner_text() == "5"
    # alpha's rewards now differ: the group is no longer zero-variance
    page.wait_for_function(
        "!document.querySelector('.group[data-group=\"alpha\"]').classList.contains('zero')"
    )
    # a torn line (a writer killed mid-line) is reported, the page keeps working
    with open(run_dir / "results.jsonl", "a") as f:
        f.write('{"rollout_id": "alpha-r10", "rew')
    page.wait_for_selector("text=results.jsonl ends in a torn line", timeout=10_000)
    assert page.locator("table#rollouts tbody tr").count() == 5


def test_missing_parquet_part_is_shown_as_such(server: str, run_dir: Path, page) -> None:
    (run_dir / "trajectories" / "rows" / "part-alpha-r1.parquet").unlink()
    page.goto(server)
    page.wait_for_selector("text=Parquet part missing for 1 rollout(s): alpha-r1")
    page.goto(server + "row?id=alpha-r1&row=0")
    page.wait_for_selector("body[data-ready='1']")
    assert "Parquet part of this rollout is missing" in page.locator("main").inner_text()
    assert page.locator("#tokens .tok").count() > 0


def test_unknown_rollout_is_a_clear_error(server: str, page) -> None:
    page.goto(server + "rollout?id=no-such-rollout")
    page.wait_for_selector(".banner.bad")
    assert "no stored trajectory for rollout 'no-such-rollout'" in page.locator("main").inner_text()


def test_training_metrics_are_plotted_per_outer_batch(server: str, run_dir: Path, page) -> None:
    """A training run's metrics.jsonl (written by the loop's MetricsLog) as plots on the run page."""
    log = MetricsLog(run_dir / "metrics.jsonl")
    log.write({"kind": "eval", "outer_batch": 0, "val_reward": 0.25})
    for b in range(6):
        log.write({"kind": "train", "outer_batch": b, "reward_mean": 0.2 + 0.1 * b, "loss": 0.5 / (b + 1),
                   "approx_kl": 0.01 * b, "clip_fraction": 0.02 * b, "grad_norm": 1.5 - 0.1 * b, "lr": 1e-5,
                   "rows_per_rollout": 1.5, "zero_advantage_groups": 6 - b})  # fmt: skip
    log.write({"kind": "eval", "outer_batch": 6, "val_reward": 0.75})
    page.goto(server)
    page.wait_for_selector("#metrics-card .plot svg")
    titles = page.locator("#metrics-card .plot h3").all_inner_texts()
    assert [t.split(" (")[0] for t in titles][:6] == [
        "reward", "loss", "KL", "clip fraction", "grad norm", "learning rate",
    ]  # fmt: skip
    # one dot per record: 6 training batches + 2 held-out evaluations on the reward plot
    assert page.locator("#metrics-card .plot").nth(0).locator("circle").count() == 8
    assert page.locator("#metrics-card .plot").nth(1).locator("circle").count() == 6
