"""A Hypothesis state machine: any sequence of edits and syncs keeps the invariant.

Rules create, modify, delete and rename files and folders of real md-docs text; a
sync is either a scan or an event-style sync of the touched paths. After every sync,
``verify`` (which re-derives the from-scratch result by chunking the files) must be
clean: store == manifest == files.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.helpers import MD_DOCS, fake_vectors, make_engine

SNIPPETS = [p.read_text() for p in sorted((MD_DOCS / "docs/concepts").rglob("*.md"))[:8]]
NAMES = ["a.md", "b.md", "sub/c.md", "sub/d.md", "sub/deep/e.md", "f.txt"]


class SyncMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ingestd-sm-"))
        self.root = self.tmp / "docs"
        self.root.mkdir()
        self.engine = make_engine(
            self.root,
            self.tmp / "state",
            fake_vectors,
            mass_delete={"max_share": 1.0, "min_count": 0},
        )
        self.name = next(iter(self.engine.context.sources))
        self.touched: set[str] = set()
        self.synced = True

    def files(self) -> list[str]:
        return sorted(
            p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()
        )

    @rule(name=st.sampled_from(NAMES), text=st.sampled_from(SNIPPETS))
    def write(self, name: str, text: str) -> None:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        self.touched.add(name)
        self.synced = False

    @precondition(lambda self: self.files())
    @rule(data=st.data())
    def modify(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.files()))
        p = self.root / name
        lines = p.read_text().split("\n\n")
        i = data.draw(st.integers(0, max(0, len(lines) - 1)))
        lines.insert(i, "An inserted paragraph that changes one chunk.")
        p.write_text("\n\n".join(lines))
        self.touched.add(name)
        self.synced = False

    @precondition(lambda self: self.files())
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.files()))
        (self.root / name).unlink()
        self.touched.add(name)
        self.synced = False

    @precondition(lambda self: self.files())
    @rule(data=st.data(), dest=st.sampled_from(NAMES))
    def rename(self, data: st.DataObject, dest: str) -> None:
        name = data.draw(st.sampled_from(self.files()))
        if (self.root / dest).exists():
            return
        (self.root / dest).parent.mkdir(parents=True, exist_ok=True)
        (self.root / name).rename(self.root / dest)
        self.touched |= {name, dest}
        self.synced = False

    @precondition(lambda self: (self.root / "sub").is_dir() and not (self.root / "moved").exists())
    @rule()
    def move_folder(self) -> None:
        shutil.move(str(self.root / "sub"), str(self.root / "moved"))
        self.touched |= {"sub", "moved"}
        self.synced = False

    @rule(events=st.booleans())
    def sync(self, events: bool) -> None:
        if events:
            self.engine.sync(self.name, sorted(self.touched))
        else:
            self.engine.sync(self.name)
        self.touched.clear()
        self.synced = True

    @invariant()
    def store_equals_from_scratch(self) -> None:
        if self.synced:
            report = self.engine.verify(self.name)
            assert report.clean, report.as_dict()

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


TestSyncMachine = SyncMachine.TestCase
TestSyncMachine.settings = settings(
    max_examples=20,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
