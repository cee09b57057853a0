"""The pages of ``ingestd ui`` (Starlette, Jinja2 templates shipped in the package).

Routes (every page works without JavaScript; each answers with HTML):

* ``GET /``: the overview: the daemon's health, lag and work in progress, each source
  with its versions, documents, chunks, last sync, problems and held deletions, the
  migrations, and the lines ``ingestd status`` prints; it refreshes itself (a
  ``<meta http-equiv="refresh">``) while the daemon works.
* ``GET /files?source=S&folder=F``: one folder of a source (:mod:`~ingestd.daemon.ui.files`).
* ``GET /chunks?source=S&path=P[&version=V]``: a document's chunks as the index holds them.
* ``GET /search?q=...&k=...&mode=...&source=...&path=...&version=...&budget=...``: a
  search; the URL is the search, to share.
* ``GET /held?source=S``: the deletions held for a source, and the form that
  releases them; ``POST /sync`` and ``POST /release`` (a running daemon only, each
  with the page's CSRF token).

The app is built by :func:`create_app`; :func:`~ingestd.daemon.ui.guard.guarded`
puts the Host/Origin check and the token in front of it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ingestd.chunkers.errors import IngestdError
from ingestd.chunkers.readers.document import cite_text
from ingestd.daemon.client import DaemonError, NoDaemon
from ingestd.daemon.commands.status_text import format_when, migration_lines, status_lines
from ingestd.daemon.ui.files import MAX_ROWS, folder_entries, manifest_prefix
from ingestd.daemon.ui.guard import Csrf
from ingestd.store.search.citation import version_text

if TYPE_CHECKING:
    from ingestd.daemon.ui.frontdoor import FrontDoor

__all__ = ["MAX_K", "MODES", "REFRESH_S", "create_app"]

HERE = Path(__file__).parent
#: Seconds between two loads of the overview while the daemon works.
REFRESH_S = 3
#: Most hits of one search (as the MCP server's ``search``).
MAX_K = 50
#: The search modes.
MODES = ("hybrid", "dense", "sparse")


def _working(st: dict[str, Any]) -> bool:
    """Whether the daemon is busy (the overview then refreshes itself)."""
    d = st.get("daemon")
    if not d:
        return False
    busy = d.get("phase") != "watching" or d.get("queue_depth") or d.get("progress")
    return bool(busy or d.get("in_flight") or st.get("migrations"))


class Pages:
    """The request handlers over one :class:`~ingestd.daemon.ui.frontdoor.FrontDoor`."""

    def __init__(self, door: FrontDoor) -> None:
        self.door = door
        self.csrf = Csrf()
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        env = self.templates.env
        env.filters["when"] = _when
        env.filters["cite"] = cite_text
        env.filters["version_text"] = version_text
        env.globals["csrf"] = self.csrf.token

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        """Template ``name`` with ``ctx``; ``daemon`` (running or not) always set."""
        ctx.setdefault("daemon", None)
        return self.templates.TemplateResponse(request, name, ctx, status_code=status)

    def problem(self, request: Request, message: str, status: int) -> Response:
        """The error page: one line, and the way back."""
        return self.render(request, "error.html", status, message=message)

    # -- pages ----------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        """``GET /``."""
        st = self.door.status()
        return self.render(
            request,
            "overview.html",
            st=st,
            daemon=st.get("daemon"),
            refresh=REFRESH_S if _working(st) else None,
            text="\n".join(status_lines(st, time.time())),
            migrations=list(migration_lines(st.get("migrations") or [], time.time())),
        )

    def files(self, request: Request) -> Response:
        """``GET /files``: the sources, or one folder of one."""
        st = self.door.status()
        name = request.query_params.get("source")
        if not name:
            return self.render(request, "files.html", st=st, daemon=st.get("daemon"), source=None)
        src = next((s for s in st["sources"] if s["source"] == name), None)
        if src is None:
            return self.problem(request, f"no source named {name!r}", 404)
        folder = request.query_params.get("folder", "").strip("/")
        if ".." in folder.split("/"):
            return self.problem(request, "a folder inside the source, please", 400)
        versioned = "refs" in src
        try:
            with self.door.manifest() as m:
                docs = (
                    []
                    if m is None
                    else m.documents_in(name, manifest_prefix(folder, versioned), MAX_ROWS)
                )
        except ValueError as exc:
            return self.problem(request, str(exc), 501)
        local = not versioned and not src.get("root_missing")
        skipped = {k["path"]: k["reason"] for k in src.get("skipped") or []}
        entries = folder_entries(
            folder,
            docs,
            versioned=versioned,
            root=Path(src["root"]) if local else None,
            flt=self.door.source_filter(name, st) if local else None,
            skipped=skipped,
        )
        crumbs = []
        parts = folder.split("/") if folder else []
        for i, part in enumerate(parts):
            crumbs.append((part, "/".join(parts[: i + 1])))
        return self.render(
            request,
            "files.html",
            st=st,
            daemon=st.get("daemon"),
            source=src,
            folder=folder,
            crumbs=crumbs,
            entries=entries,
            versioned=versioned,
            cut=len(docs) >= MAX_ROWS,
        )

    def chunks(self, request: Request) -> Response:
        """``GET /chunks``: one indexed document's chunks."""
        q = request.query_params
        source, path = q.get("source"), q.get("path")
        if not source or not path:
            return self.problem(request, "give source and path", 400)
        version = q.get("version") or None
        if version is None and "/" in path and q.get("versioned"):
            version, path = path.split("/", 1)
        try:
            got = self.door.chunks(source, path, version)
        except DaemonError as exc:
            return self.problem(request, str(exc), 404 if exc.exit_code == 1 else 400)
        return self.render(request, "chunks.html", doc=got, daemon=self._daemon())

    def search(self, request: Request) -> Response:
        """``GET /search``: the form, and the answer when ``q`` is given."""
        q = request.query_params
        form: dict[str, Any] = {
            "q": q.get("q", ""),
            "k": _int(q.get("k"), 10, 1, MAX_K),
            "mode": q.get("mode") if q.get("mode") in MODES else "",
            "source": q.get("source", ""),
            "path": q.get("path", ""),
            "version": q.get("version", ""),
            "budget": _int(q.get("budget"), 0, 0, 32_768),
        }
        st = self.door.status()
        ctx: dict[str, Any] = {"form": form, "modes": MODES, "st": st, "daemon": st.get("daemon")}
        if form["q"].strip():
            try:
                ctx["answer"] = self.door.search(
                    form["q"],
                    k=int(form["k"]),
                    mode=form["mode"] or None,
                    source=form["source"] or None,
                    path=form["path"] or None,
                    version=form["version"] or None,
                    budget_tokens=int(form["budget"]) or None,
                    ranks=False,
                )
            except IngestdError as exc:  # a bad filter, a locked state dir: one line
                ctx["error"] = str(exc)
        return self.render(request, "search.html", **ctx)

    def held(self, request: Request) -> Response:
        """``GET /held``: what the guard holds for a source, and the release form."""
        source = request.query_params.get("source", "")
        try:
            paths = self.door.held(source)
        except NoDaemon as exc:
            return self.problem(request, str(exc), 409)
        except DaemonError as exc:
            return self.problem(request, str(exc), 400)
        return self.render(request, "held.html", source=source, paths=paths, daemon=self._daemon())

    async def act(self, request: Request) -> Response:
        """``POST /sync`` and ``POST /release``: checked, then run off the event loop."""
        from starlette.concurrency import run_in_threadpool

        form = await request.form()
        if not self.csrf.valid(form.get("csrf")):
            return self.problem(request, "this form is stale or not ours: reload the page", 403)
        source = str(form.get("source") or "")
        what = request.url.path.strip("/")
        fn = self.door.sync if what == "sync" else self.door.release
        try:
            got = await run_in_threadpool(fn, source)
        except NoDaemon as exc:
            return self.problem(request, str(exc), 409)
        except DaemonError as exc:
            return self.problem(request, str(exc), 400)
        daemon = self.door.status(fresh=True).get("daemon")  # the next page shows the change
        return self.render(request, "done.html", what=what, source=source, got=got, daemon=daemon)

    def _daemon(self) -> dict[str, Any] | None:
        return self.door.status().get("daemon")


def _when(ts: object) -> str:
    """A time in ``status``'s words; ``-`` for a key the daemon did not send."""
    if ts is None or isinstance(ts, int | float):
        return format_when(ts, time.time())
    return "-"


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int(value))) if value else default
    except ValueError:
        return default


def create_app(door: FrontDoor) -> Starlette:
    """The Starlette app of the pages over ``door`` (unguarded: see the module docstring)."""
    pages = Pages(door)

    async def not_found(request: Request, _exc: Exception) -> Response:
        return pages.problem(request, f"no page at {request.url.path}", 404)

    async def known_failure(request: Request, exc: Exception) -> Response:
        """A failure ingestd explains in one line (a damaged or locked state dir...)."""
        return pages.problem(request, str(exc), 503)

    app = Starlette(
        routes=[
            Route("/", pages.overview),
            Route("/files", pages.files),
            Route("/chunks", pages.chunks),
            Route("/search", pages.search),
            Route("/held", pages.held),
            Route("/sync", pages.act, methods=["POST"]),
            Route("/release", pages.act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
        ],
        exception_handlers={404: not_found, IngestdError: known_failure},
    )
    app.state.pages = pages
    return app
