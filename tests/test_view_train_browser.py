"""``strands-art view`` on recorded ``strands-art train`` runs, in a real headless browser
(Debian's chromium via Playwright), the server the real command in a subprocess.

The run directories are real runs of the command, kept small (tests/data/train-lookup:
``train --env lookup``; tests/data/train-migrationbench: ``train --env migrationbench``; how each
was recorded is in its ``command.txt`` and ``RECORDED.md``), with the model's checkpoints,
TensorBoard events and the environment's work files left out. The assertions compare what the
pages show with the files the run wrote: the trainer's rows as trained
(``rows/ob-NNNNNN.trained.parquet``), the trajectory store and ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pytest

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/setup-system.sh)"
)
DATA = Path(__file__).parent / "data"
RUNS = ("train-lookup", "train-migrationbench")
# recorded runs whose outer batch 2 has a group with rewards that differ (train-lookup's groups of
# batch 2 all tied; its batch 0 carries the non-zero advantages checked below)
SIGNAL_IN_BATCH_2 = ("train-migrationbench",)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("train-view")
    out = []
    for name in RUNS:
        if (DATA / name).is_dir():
            shutil.copytree(DATA / name, base / name)
            out.append(base / name)
    return out


@contextmanager
def view_command(*dirs: str | Path) -> Iterator[str]:
    """The real ``strands-art view DIRS...`` in a subprocess on a free port: its base URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_art.cli", "view", *map(str, dirs), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert m, f"no URL in the first output line: {line!r}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(runs: list[Path]):
    """The real command on every recorded run (the first one's run page; /compare: all)."""
    if not runs:
        pytest.skip("no recorded training run under tests/data")
    with view_command(*runs) as url:
        yield url


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
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))  # type: ignore[attr-defined]
    yield pg
    assert pg.errors == [], f"JavaScript errors: {pg.errors}"  # type: ignore[attr-defined]
    ctx.close()


def trained(run: Path, b: int) -> list[dict]:
    return pq.read_table(run / "rows" / f"ob-{b:06d}.trained.parquet").to_pylist()


def metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def shot(page, name: str) -> None:
    out = os.environ.get("STRANDS_ART_VIEWER_SHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(out) / name), full_page=False)


@pytest.mark.parametrize("k", range(len(RUNS)))
def test_a_rollout_of_outer_batch_2_and_its_row_as_trained(
    server: str, runs: list[Path], page, k: int
) -> None:
    if k >= len(runs):
        pytest.skip(f"tests/data/{RUNS[k]} is not recorded")
    run, q = runs[k], f"run={k}"
    recs = [r for r in trained(run, 2) if r["forwarded"]]
    assert recs, "outer batch 2 trained no row"
    rec = max(recs, key=lambda r: (abs(r["advantage"]), r["rollout_id"]))  # the strongest signal
    rid, index = rec["rollout_id"], rec["row_index"]
    if RUNS[k] in SIGNAL_IN_BATCH_2:  # a group whose rewards differ: the advantage shown is not a 0 = 0
        assert rec["advantage"] != 0, f"{RUNS[k]}: every group of outer batch 2 tied"
    # a row that was trained: the trainer's logprobs are recorded numbers on every trained token
    lists = [rec[key] for key in ("loss_mask", "trainer_logprobs", "sampler_logprobs", "importance_weight")]
    assert len({len(v) for v in lists}) == 1, "the trained lists do not cover the same tokens"
    on = [i for i, m in enumerate(rec["loss_mask"]) if m]
    assert on and all(
        isinstance(rec["trainer_logprobs"][i], float) and math.isfinite(rec["trainer_logprobs"][i])
        for i in on
    )
    assert min(rec["trainer_logprobs"][i] for i in on) < -0.01  # real logprobs, not a column of zeros

    page.goto(f"{server}?{q}")
    page.wait_for_selector("#batch-table")
    # every rollout of batch 0 shows the trainer's own advantage (batch 2's groups may all tie)
    page.locator('#batch-table tr[data-batch="0"] button').click()
    page.wait_for_function("document.querySelector('select[data-key=\"batch\"]').value === '0'")
    for r in trained(run, 0):
        if r["row_index"] == 0:
            page.wait_for_selector(f'table#rollouts tr[data-rollout="{r["rollout_id"]}"]')
            cell = page.locator(f'table#rollouts tr[data-rollout="{r["rollout_id"]}"] td').nth(4)
            a = r["advantage"]
            assert cell.locator(".adv").inner_text() == (
                "–" if a is None else f"{'+' if a > 0 else ''}{a:.3f}"
            )
    page.locator('#batch-table tr[data-batch="2"] button').click()
    page.wait_for_function("document.querySelector('select[data-key=\"batch\"]').value === '2'")
    page.wait_for_selector(f'table#rollouts tr[data-rollout="{rid}"]')
    shown = page.locator("table#rollouts tbody tr").evaluate_all("rs => rs.map(r => r.dataset.rollout)")
    assert shown and all(s.startswith("b2-") for s in shown)
    cells = page.locator(f'table#rollouts tr[data-rollout="{rid}"] td')
    assert (
        cells.nth(4).locator(".adv").inner_text()
        == f"{'+' if rec['advantage'] > 0 else ''}{rec['advantage']:.3f}"
    )
    if k == 0:  # the docs' pictures of a training run: this real run
        page.locator("#batches-card").scroll_into_view_if_needed()
        shot(page, "viewer-train-run.png")
        page.wait_for_selector("#metrics-card .plot svg")
        page.locator("#metrics-card").scroll_into_view_if_needed()
        shot(page, "viewer-training.png")
    cells.nth(0).get_by_role("link").click()  # the rollout opens from the run page
    page.wait_for_selector(".turn")
    assert f"id={rid}" in page.url

    page.goto(f"{server}row?id={rid}&row={index}&{q}")
    page.wait_for_selector("body[data-ready='1']")
    stored_mask = next(
        r["loss_mask"] for r in pq.read_table(run / "trajectories" / "rows" / f"part-{rid}.parquet").to_pylist()
        if r["row_index"] == index
    )  # fmt: skip
    assert sum(rec["loss_mask"]) == sum(stored_mask) > 0  # nothing filtered: every sampled token trained
    assert page.locator("#stat-trained").inner_text() == f"{sum(rec['loss_mask']):,}"
    adv = rec["advantage"]
    assert page.locator("#stat-advantage").inner_text() == f"{'+' if adv > 0 else ''}{adv:.3f}"

    # the mismatch overlay: the listed gaps are the stored values, largest first
    gaps = sorted(
        ((abs(t - s), i, t, s) for i, (m, t, s) in enumerate(zip(rec["loss_mask"], rec["trainer_logprobs"], rec["sampler_logprobs"], strict=True)) if m),
        reverse=True,
    )[:20]  # fmt: skip
    buttons = page.locator("#gaps button")
    assert buttons.count() == len(gaps)
    for n, (_, i, t, s) in enumerate(gaps[:5]):
        b = buttons.nth(n)
        assert int(b.get_attribute("data-pos")) == i
        assert float(b.get_attribute("data-gap")) == pytest.approx(round(t - s, 4), abs=1e-4)
        assert f"trainer {t:.4f} · sampler {s:.4f}" in b.inner_text()  # the stored values, as shown
    buttons.nth(0).click()  # the inspector of the largest gap's token
    _, i, t, s = gaps[0]
    page.wait_for_selector('#insp-table tr[data-k="trainer logprob"]')
    row = lambda key: page.locator(f'#insp-table tr[data-k="{key}"] td').nth(1).inner_text()  # noqa: E731
    assert float(row("trainer logprob")) == pytest.approx(t, abs=1e-4)
    assert float(row("sampler logprob")) == pytest.approx(s, abs=1e-4)
    assert float(row("importance weight")) == pytest.approx(rec["importance_weight"][i], abs=1e-4)
    assert row("clipped") == ("yes" if rec["clipped"][i] else "no")
    page.select_option("#shade-by", "gap")  # shading by the gap recolours the trained tokens
    colour = page.locator(f'#tokens .tok[data-i="{i}"]').evaluate("e => e.style.backgroundColor")
    assert colour.startswith("rgb(") and colour != "rgb(255, 255, 255)"
    if k == 0:
        shot(page, "viewer-train-row.png")

    # the least likely trained token (a gap near 0 shows 0.0000 either way): its inspector shows
    # the trainer's and the sampler's own recorded logprobs, both well below 0
    j = min(on, key=lambda i: (rec["sampler_logprobs"][i], i))
    page.goto(f"{server}row?id={rid}&row={index}&{q}&pos={j}")
    page.wait_for_selector('#insp-table tr[data-k="trainer logprob"]')
    assert int(row("index")) == j
    t, s = rec["trainer_logprobs"][j], rec["sampler_logprobs"][j]
    assert t < -0.01 and s < -0.01
    assert row("trainer logprob") == f"{round(t, 4):.4f}" and row("sampler logprob") == f"{round(s, 4):.4f}"
    assert float(row("importance weight")) == pytest.approx(rec["importance_weight"][j], abs=1e-4)


@pytest.mark.parametrize("k", range(len(RUNS)))
def test_a_held_out_rollout_opens(server: str, runs: list[Path], page, k: int) -> None:
    if k >= len(runs):
        pytest.skip(f"tests/data/{RUNS[k]} is not recorded")
    evals = [r for r in metrics(runs[k]) if r["kind"] == "eval"]
    if not evals:
        pytest.skip(f"{RUNS[k]} was recorded without held-out tasks")
    page.goto(f"{server}?run={k}")
    page.wait_for_selector("#eval-list")
    page.locator("#eval-list a").first.click()
    page.wait_for_selector("table#rollouts tbody tr")
    held = page.locator("table#rollouts tbody tr").evaluate_all(
        "rs => rs.map(r => [r.dataset.rollout, r.dataset.split])"
    )
    assert held and all(
        rid.startswith(f"eval-b{evals[0]['outer_batch']}-") and split == "eval" for rid, split in held
    )
    assert len(held) == evals[0]["val_rollouts"]
    page.locator("table#rollouts tbody tr").first.get_by_role("link").first.click()
    page.wait_for_selector(".turn")
    assert "id=eval-b" in page.url


def test_the_compare_page_totals_are_sums_over_each_runs_metrics(server: str, runs: list[Path], page) -> None:
    page.goto(server + "compare")
    page.wait_for_selector("body[data-ready='1']")
    for k, run in enumerate(runs):
        train = [r for r in metrics(run) if r["kind"] == "train"]
        evals = [r for r in metrics(run) if r["kind"] == "eval" and r["outer_batch"] > 0]  # after training
        for key in ("rows", "optimizer_steps", "rollout_s", "processed_tokens", "actor_update_s", "e2e_s"):
            cell = page.locator(f'#totals tr[data-key="{key}"] td[data-run="{k}"]')
            value = cell.get_attribute("data-value")
            if all(key in r for r in train):
                assert float(value) == pytest.approx(sum(r[key] for r in train)), (run.name, key)
            else:  # a run that does not record the key shows a dash, not a made-up number
                assert value == "" and cell.inner_text().startswith("—"), (run.name, key)
        # evaluation seconds: every held-out evaluation after a batch (most batches have none after them)
        eval_cell = page.locator(f'#totals tr[data-key="eval_s"] td[data-run="{k}"]').get_attribute(
            "data-value"
        )
        eval_s = [r["eval_s"] for r in evals if "eval_s" in r]
        assert (float(eval_cell) if eval_cell else None) == (pytest.approx(sum(eval_s)) if eval_s else None)
        last = page.locator(f'#totals tr[data-key="val_reward"] td[data-run="{k}"]').get_attribute(
            "data-value"
        )
        assert (float(last) if last else None) == (pytest.approx(evals[-1]["val_reward"]) if evals else None)
    if len(runs) > 1:
        base = sum(r["rows"] for r in metrics(runs[0]) if r["kind"] == "train")
        other = sum(r["rows"] for r in metrics(runs[1]) if r["kind"] == "train")
        pct = page.locator('#totals tr[data-key="rows"] td[data-run="1"] .pct').inner_text().strip()
        assert pct == f"{'+' if other > base else ''}{100 * (other - base) / base:.1f} %"
        # the trainer's totals where both ran a pass (bench/seed_tables.py's rule), said in one line
        t0, t1 = ({r["outer_batch"]: r for r in metrics(x) if r["kind"] == "train"} for x in runs[:2])
        both = [
            b
            for b in t0
            if b in t1 and t0[b].get("processed_tokens", 0) > 0 and t1[b].get("processed_tokens", 0) > 0
        ]
        said = page.locator("#trained-pct").inner_text()
        assert (
            f"over the {len(both)} outer batch(es) where both ran a pass"
            if both
            else "no outer batch where both"
        ) in said
    shot(page, "viewer-runs-compare.png")


def test_the_compare_page_lists_the_batches_runs_have_not_every_number_below_the_last(
    runs: list[Path], page, tmp_path: Path
) -> None:
    """A run whose metrics.jsonl names outer batch 1,000,000,000 (hand-edited or hostile): the
    compare page lists the batches that exist, not a row for every number below the last one
    (the page looped a billion times and never became ready)."""
    if not runs:
        pytest.skip("no recorded training run under tests/data")
    odd = tmp_path / "odd"
    shutil.copytree(runs[0], odd)
    with open(odd / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"kind": "train", "outer_batch": 10**9, "rows": 1}) + "\n")
    with view_command(runs[0], odd) as url:
        page.goto(url + "compare")
        page.wait_for_selector("body[data-ready='1']", timeout=20_000)
        shown = page.locator("#per-batch tbody tr").evaluate_all("rs => rs.map(r => +r.dataset.batch)")
        batches = sorted({r["outer_batch"] for r in metrics(odd) if r["kind"] == "train"})
        assert sorted(set(shown)) == batches and len(shown) == 2 * len(batches)


def test_the_compare_page_pairs_every_rollout_of_runs_over_a_thousand(page, tmp_path: Path) -> None:
    """Two runs of 1,001 rollouts with the same ids, one of which (the last by id) differs: the
    page reads every rollout (1,000 an API request), so it pairs all 1,001 and lists the one that
    differs first (it read the first 1,000 only, and missed it)."""
    from strands_art.store import TrajectoryStore
    from tests.test_store import traj

    dirs = []
    for name, last_reward in (("a", 1.0), ("b", 0.0)):
        store = TrajectoryStore(tmp_path / name)
        for i in range(1001):
            store.append(traj(f"t{i:04d}", last_reward if i == 1000 else 1.0))
        dirs.append(str(tmp_path / name))
    with view_command(*dirs) as url:
        page.goto(url + "compare")
        page.wait_for_selector("#pairs-table")
        assert page.locator("#pairs-table tbody tr").first.get_attribute("data-rollout") == "t1000"
        assert "first 300 of 1001" in page.locator("#pairs").inner_text()


def test_the_code_that_trained_the_run_is_shown_with_a_mixed_series_said(
    server: str, runs: list[Path], page
) -> None:
    """RUN_DIR/code.jsonl on the run page: one row per process, and a run two commits trained is
    said above them (its numbers are not one code's)."""
    lines = [
        {"at": "2026-12-05T07:13:16Z", "resume": False, "from_batch": 0, "commit": "a" * 40, "dirty": False,
         "strands_art": "0.1.0", "python": "3.11.7", "torch": "2.13.0"},
        {"at": "2026-12-05T09:13:16Z", "resume": True, "from_batch": 2, "commit": "b" * 40, "dirty": True,
         "strands_art": "0.1.0", "python": "3.11.7", "torch": None},
    ]  # fmt: skip
    (runs[0] / "code.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    try:
        page.goto(f"{server}?run=0")
        page.wait_for_selector("table.code")
        cells = page.locator("table.code tr").evaluate_all(
            "rs => rs.slice(1).map(r => [...r.cells].map(c => c.textContent))"
        )
        assert cells == [
            ["2026-12-05T07:13:16Z", "0", "aaaaaaaaaa", "0.1.0", "3.11.7", "2.13.0"],
            [
                "2026-12-05T09:13:16Z (resume)",
                "2",
                "bbbbbbbbbb + uncommitted changes",
                "0.1.0",
                "3.11.7",
                "unknown",
            ],
        ]
        said = page.locator("#config .banner").all_text_contents()
        assert said == [
            "trained by 2 different commits: read its numbers per process",
            "a process ran with uncommitted changes",
        ]
        if len(runs) > 1:  # the compare page says the runs ran different code (the other: none recorded)
            page.goto(server + "compare")
            page.wait_for_selector("body[data-ready='1']")
            note = page.locator("#code-note").inner_text()
            assert f"{runs[0].name}: aaaaaaaaaa then bbbbbbbbbb; {runs[1].name}: not recorded" in note
            (runs[1] / "code.jsonl").write_text(json.dumps(lines[0]) + "\n")
            (runs[0] / "code.jsonl").write_text(json.dumps(lines[0]) + "\n")
            page.goto(server + "compare")
            page.wait_for_selector("body[data-ready='1']")
            assert page.locator("#code-note").inner_text() == "Every run was trained by commit aaaaaaaaaa."
    finally:
        for run in runs:
            (run / "code.jsonl").unlink(missing_ok=True)
