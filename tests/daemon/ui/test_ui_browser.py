"""``ingestd ui`` in a real browser: Playwright driving the system's Chromium.

One real ``ingestd run`` (the bundled model, a small tree) and one ``ingestd ui``
serve every test of this module; a browser is never downloaded: the tests use
Debian's ``chromium`` and are skipped, saying so, where there is none.

With ``INGESTD_UI_SCREENSHOTS=DIR`` the tests save a screenshot of each page in DIR
(the documentation's are made so: ``docs/img/ui``).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.client import Client
from tests.daemon.ui.conftest import write_config, write_tree
from tests.helpers import ingestd_cmd, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium on PATH (browsers are not downloaded)"
    ),
]

SHOTS = os.environ.get("INGESTD_UI_SCREENSHOTS")


#: Replaces the test's temporary folder in the page's text before a screenshot.
_NEUTRAL = """([base, shown]) => {
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    n.nodeValue = n.nodeValue.split(base).join(shown);
  }
}"""


def _shot(page: Any, name: str, base: Path) -> None:
    """Save a screenshot of ``page`` as ``NAME.png`` in :data:`SHOTS`, when it is set."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.evaluate(_NEUTRAL, [str(base), "/srv/ingestd"])
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def _start_ui(state: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``ingestd ui --listen 127.0.0.1:0``; its URL, read from its stderr."""
    cmd = [*ingestd_cmd(), "ui", "--state-dir", str(state), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            line = proc.stderr.readline().decode()
            lines.append(line)
            if "listening on " in line:
                log.write_text("".join(lines))
                return proc, line.split("listening on ", 1)[1].strip()
    proc.kill()
    raise AssertionError(f"ingestd ui did not start: {''.join(lines)}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A daemon on the ui tree plus ``retired.md``, and the ui: ``(base, url)``.

    The watcher waits 60 s of quiet before it acts on an edit, so what the sync
    action returns with is the action's doing; the mass-deletion guard holds any
    deletion of a scan (more than a tenth of the documents).
    """
    base = tmp_path_factory.mktemp("uibrowser")
    root = write_tree(base / "docs")
    (root / "retired.md").write_text("# Retired\n\nThis page is about to go.\n")
    config = write_config(
        base,
        root,
        watch={"debounce_ms": 60_000, "max_delay_ms": 120_000},
        mass_delete={"max_share": 0.1, "min_count": 0},
    )
    state = base / "state"
    log = (base / "daemon.log").open("w")
    cmd = [*ingestd_cmd(), "run", "--config", str(config), "--state-dir", str(state)]
    daemon = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    ui = None
    try:
        client = Client(state, local=False, start_wait_s=0)

        def ready() -> bool:
            try:
                st = client.status()
            except Exception:
                return False
            d = st.get("daemon") or {}
            docs = sum(s["documents"] for s in st["sources"])
            return d.get("phase") == "watching" and not d.get("queue_depth") and docs == 5

        wait_for(ready, 300, "the daemon to index the tree", interval=0.5)
        ui, url = _start_ui(state, base / "ui.log")
        yield base, url
    finally:
        if ui is not None:
            assert _stop(ui) == 0
        assert _stop(daemon) == 0
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        # evil.test resolves to this machine: a DNS-rebinding page
        args = ["--host-resolver-rules=MAP evil.test 127.0.0.1, MAP attacker.test 127.0.0.1"]
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    p = context.new_page()
    p.set_default_timeout(60_000)
    yield p
    context.close()


def test_the_overview_lists_the_source_with_its_counts(served: tuple[Path, str], page: Any) -> None:
    _base, url = served
    page.goto(url)
    row = page.locator("#source-docs")
    assert row.locator("td.documents").inner_text() == "5"
    assert int(row.locator("td.chunks").inner_text().split()[0]) >= 4
    assert page.locator("header .mode").inner_text().startswith("daemon watching")
    assert "healthy" in page.locator("section.daemon").inner_text()
    assert "5 documents (1 failed)" in page.locator("pre.status").inner_text()
    _shot(page, "overview", _base)


def test_a_skipped_secret_file_shows_its_reason(served: tuple[Path, str], page: Any) -> None:
    _base, url = served
    page.goto(url)
    page.get_by_role("link", name="docs", exact=True).first.click()
    row = page.locator("tr", has=page.get_by_role("cell", name=".env", exact=True))
    assert row.locator("td.state").inner_text() == "failed"
    reason = row.locator("td.reason").inner_text()
    assert "secret-bearing file name" in reason and "files.allow_secret_names" in reason
    log = page.locator("tr", has=page.get_by_role("cell", name="debug.log", exact=True))
    assert "excluded by the glob '*.log'" in log.locator("td.reason").inner_text()
    _shot(page, "files", _base)
    page.get_by_role("link", name="install.md").click()
    first = page.locator("article.chunk").first
    assert "rule markdown" in first.inner_text() and "Run pip install" in first.inner_text()
    _shot(page, "chunks", _base)


def test_a_search_returns_the_expected_passage_with_its_citation(
    served: tuple[Path, str], page: Any
) -> None:
    _base, url = served
    page.goto(url + "search")
    page.get_by_label("query").fill("Where do axolotls live?")
    page.get_by_label("token budget").fill("300")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"/search\?q=Where\+do\+axolotls"))
    first = page.locator("li.result").first
    assert first.locator("a.cite").inner_text() == "guide/animals.md:1-3"
    assert "Axolotls live in the lakes near Mexico City." in first.inner_text()
    assert re.search(r"score \d\.\d{4}", first.inner_text())
    _shot(page, "search", _base)
    shared = page.url
    first.locator("a.cite").click()
    assert page.locator("h1").inner_text() == "guide/animals.md"
    page.goto(shared)  # the URL is the search
    assert page.locator("li.result a.cite").first.inner_text() == "guide/animals.md:1-3"


def test_the_sync_action_makes_an_edit_searchable(served: tuple[Path, str], page: Any) -> None:
    base, url = served
    ships = base / "docs/guide/ships.md"
    ships.write_text(ships.read_text() + "\n## Narwhals\n\nNarwhals sail the Arctic seas.\n")
    query = url + "search?q=narwhals&k=3&mode=sparse"
    page.goto(query)
    assert "Narwhals" not in page.locator("main").inner_text().split("Search", 2)[-1]
    page.goto(url)
    page.locator("#source-docs").get_by_role("button", name="Sync now").click()
    done = page.locator("p.done").inner_text()
    assert done.startswith("docs: 1 indexed"), done
    page.goto(query)
    first = page.locator("li.result").first
    assert first.locator("a.cite").inner_text().startswith("guide/ships.md")
    assert "Narwhals sail the Arctic seas." in first.inner_text()


def test_held_deletions_are_shown_then_released(served: tuple[Path, str], page: Any) -> None:
    base, url = served
    (base / "docs/retired.md").unlink()
    # a scan (a rescan, a start-up reconcile) holds the deletion; an explicit sync would not
    scan = Client(base / "state", local=False).resync(["docs"])
    assert scan["exit_code"] == 3, scan

    def shown() -> bool:  # pages answer from a status up to 2 s old: reload until it is in
        page.goto(url)
        return page.locator("#source-docs a.held").count() == 1

    wait_for(shown, 30, "the held deletion on the overview", interval=0.5)
    page.locator("#source-docs a.held").click()
    assert page.locator("ul.held").inner_text() == "retired.md"
    _shot(page, "held", base)
    page.get_by_role("button", name="Delete these from the index").click()
    assert "1 deleted" in page.locator("p.done").inner_text()
    page.goto(url)
    assert page.locator("#source-docs td.documents").inner_text() == "4"


def test_a_foreign_origin_is_refused(served: tuple[Path, str], page: Any) -> None:
    """A page of another site posts the sync form: refused by its Origin, nothing runs."""
    base, url = served
    before = json.loads(json.dumps(Client(base / "state", local=False).status()))
    attacker = "http://attacker.test/"
    form = (
        f'<form id="f" method="post" action="{url}sync">'
        '<input name="source" value="docs"><input name="csrf" value="guessed"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    page.route(attacker, lambda route: route.fulfill(content_type="text/html", body=form))
    with page.expect_response(f"{url}sync") as answer:
        page.goto(attacker)
    assert answer.value.status == 403
    assert "Invalid Origin header" in page.locator("body").inner_text()
    after = Client(base / "state", local=False).status()
    assert after["sources"][0]["last_sync"] == before["sources"][0]["last_sync"]
    # a DNS-rebinding page (another name for this machine) is refused by its Host
    port = url.rstrip("/").rsplit(":", 1)[1]
    got = page.goto(f"http://evil.test:{port}/")
    assert got is not None and got.status == 421
