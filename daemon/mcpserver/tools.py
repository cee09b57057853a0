"""The MCP server of ``ingestd mcp``: four tools over a :class:`~ingestd.daemon.client.Client`.

Built on the official SDK's ``MCPServer`` (FastMCP in 1.x). The tools are what an
agent needs to answer from living documentation:

* ``search``: the ranking ``ingestd search`` returns (hybrid by default);
* ``read``: widen a hit (its neighbours, its section, the file's lines);
* ``sync``: make the index current before answering ("sync, then answer");
* ``status``: how current the index is, per source.

Each is a method of :class:`Tools`, registered on the server by :func:`build_server`:
its signature is the JSON schema of its arguments; it has a description written for a
model (:data:`DESCRIPTIONS`) and a structured result
(:mod:`~ingestd.daemon.mcpserver.models`) beside a short text. They run the blocking
client calls in worker threads that a closed connection abandons (:class:`IngestdServer`
counts them, so the process can exit at once).

Errors are tool errors (``isError``) with one line: the CLI's message for a known
failure, ``invalid arguments for TOOL: ...`` for arguments the schema refuses
(unknown ones included); an unexpected error's traceback goes to the log on stderr.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from ingestd.daemon.client import Client
from ingestd.daemon.client.errors import one_line
from ingestd.daemon.commands.query.read import read_text
from ingestd.daemon.mcpserver.models import (
    HitOut,
    PassageOut,
    ReadOut,
    SearchOut,
    StatusOut,
    SyncOut,
    search_text,
    status_out,
)

__all__ = [
    "DESCRIPTIONS",
    "INSTRUCTIONS",
    "READ_BUDGET",
    "SEARCH_BUDGET",
    "IngestdServer",
    "Tools",
    "build_server",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Tokens (cl100k_base) ``search`` fills with passages by default: about 8 KB of text,
#: the best ten or so chunks, a small share of an agent's context.
SEARCH_BUDGET = 2048
#: Tokens ``read`` returns by default: a section of a few screens, not a whole file.
READ_BUDGET = 1024

INSTRUCTIONS = """\
Answers from a documentation index that ingestd keeps in sync with the files on disk.
Call search first: it returns passages (verbatim spans of files) within a token
budget; read(id=...) widens one to its section and the file's lines around it.
After editing or adding documentation files, call sync (optionally with their paths)
before searching them: it returns once every change made before it is searchable.
status says how fresh each source is."""


class IngestdServer(MCPServer):
    """An ``MCPServer`` whose tool errors are one line, and which counts calls in flight.

    Args:
        client: what the tools ask.
        **kwargs: passed to ``MCPServer``.
    """

    def __init__(self, client: Client, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self._busy = 0
        self._busy_lock = threading.Lock()

    @property
    def busy(self) -> int:
        """Tool calls whose work is still running (in a worker thread)."""
        return self._busy

    async def run_blocking(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a worker thread that a cancelled call abandons (counted in :attr:`busy`)."""

        def counted() -> T:
            try:
                return fn()
            finally:
                with self._busy_lock:
                    self._busy -= 1

        with self._busy_lock:
            self._busy += 1
        return await anyio.to_thread.run_sync(counted, abandon_on_cancel=True)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call a tool; its errors become one-line tool errors (see the module docstring).

        Raises:
            ToolError: unknown arguments, arguments the schema refuses, or the tool's
                failure, with a one-line message.
        """
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        if tool is not None:
            unknown = sorted(set(arguments) - set(tool.input_schema.get("properties", {})))
            if unknown:
                raise ToolError(
                    f"invalid arguments for {name}: unknown argument(s) {', '.join(unknown)}"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            cause: BaseException = exc.__cause__ or exc
            message = one_line(cause, self.client.state_dir)
            if message is None:
                logger.error("tool %s failed", name, exc_info=cause)
                message = f"unexpected error: {type(cause).__name__}: {cause}"
            raise ToolError(" ".join(message.split())) from None
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                problems = [
                    f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                    for e in exc.__cause__.errors(include_url=False)
                ]
                raise ToolError(f"invalid arguments for {name}: " + "; ".join(problems)) from None
            text = str(exc).removeprefix(f"Error executing tool {name}: ")
            raise ToolError(" ".join(text.split())) from None


def _result(out: BaseModel, text: str | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text or out.model_dump_json(indent=1))],
        structured_content=out.model_dump(mode="json"),
    )


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_SYNCS = ToolAnnotations(
    read_only_hint=False,
    destructive_hint=False,
    idempotent_hint=True,
    open_world_hint=False,
)
Mode = Literal["hybrid", "dense", "sparse"]

#: Each tool's description, written for the model that calls it.
DESCRIPTIONS: dict[str, str] = {
    "search": inspect.cleandoc(
        """Search the documentation index; returns passages that answer, best first.

        A passage is a verbatim span of one file: the best-matching chunks, those of
        one file that overlap or touch merged, filling budget_tokens (2048 by default)
        with the best ones. Each has its file (path, relative to its source's root),
        lines (and a PDF's pages or a notebook's cells), heading path, text and chunk
        ids. Ranking is hybrid by default: meaning
        (embeddings) and exact words or identifiers (BM25), fused. Narrow with path
        (a file or folder) or source. Widen a passage with read(id=...). With
        budget_tokens null: the k best chunks (hits) instead.

        A git repository is indexed per version (a branch or tag, e.g. `main`,
        `v2.0`): passages and hits carry `version` and `commit`. To answer about one version, pass
        version="v2.0": only that version's text is searched. status lists each
        source's versions (refs)."""
    ),
    "read": inspect.cleandoc(
        """Read around a search hit, or lines of an indexed file.

        With id (a chunk id from a search passage or hit): the file's verbatim lines
        around it, widened to its enclosing section first, then past it, as far as
        budget_tokens (1024 by default) allows; with budget_tokens null, the section
        (or `context` neighbouring chunks, when it is longer than max_lines). With
        path: lines start_line..end_line of that file within the budget, and the
        chunks overlapping them (a file of a git source also needs version: its
        branch or tag, as hits give it). `stale` is true when the file changed since
        it was indexed."""
    ),
    "sync": inspect.cleandoc(
        """Make the index current, then return: every change to the documentation
        files made before this call is searchable when it returns.

        Call it after editing or adding files and before searching them. With paths,
        only those files or folders are checked (fast); without, every source is
        scanned; sources names sources to sync (a git source is fetched from its
        server first). Says what it did per source, and `complete` false with the
        reason when something could not be made searchable."""
    ),
    "status": inspect.cleandoc(
        """How current the index is: per source its documents, chunks, failed
        documents, the time and age of its last complete sync and of the last change
        made searchable, whether its folder is there; and the daemon keeping it in
        sync (pending changes, lag, health), or null when none runs."""
    ),
}


def build_server(client: Client, *, version: str = "") -> IngestdServer:
    """The MCP server answering from ``client``'s index: :class:`Tools` registered on it.

    Args:
        client: the daemon or state dir the tools ask.
        version: the server version announced at initialization.
    """
    server = IngestdServer(
        client, name="ingestd", version=version, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    Tools(server).register()
    return server


class Tools:
    """The tools of the server: each method is one tool, its signature the tool's schema.

    The descriptions are written for a model (:data:`DESCRIPTIONS`); the arguments'
    descriptions and bounds are in the signatures (``Field``). Every call runs the
    blocking :class:`~ingestd.daemon.client.Client` method in a worker thread
    (:meth:`IngestdServer.run_blocking`).

    Args:
        server: the server the tools are registered on; its client answers them.
    """

    def __init__(self, server: IngestdServer) -> None:
        self.server = server
        self.client = server.client

    def register(self) -> None:
        """Add the four tools to the server, with their descriptions and annotations."""
        for tool, hints in (
            (self.search, _READ_ONLY),
            (self.read, _READ_ONLY),
            (self.sync, _SYNCS),
            (self.status, _READ_ONLY),
        ):
            self.server.add_tool(tool, description=DESCRIPTIONS[tool.__name__], annotations=hints)

    async def search(
        self,
        query: Annotated[
            str,
            Field(min_length=1, description="The question, in words or exact identifiers."),
        ],
        k: Annotated[
            int,
            Field(
                ge=1,
                le=50,
                description="Most passages to return (with budget_tokens null: how many chunks).",
            ),
        ] = 10,
        path: Annotated[
            str | None,
            Field(
                description="Only this file, or the files under this folder (relative to "
                "the source's root, as hits give paths)."
            ),
        ] = None,
        source: Annotated[str | None, Field(description="Only this source (its name).")] = None,
        version: Annotated[
            str | None,
            Field(
                description="Only this version of a versioned source: a git branch or tag "
                "name (e.g. v2.0), as hits' version gives it."
            ),
        ] = None,
        mode: Annotated[
            Mode | None,
            Field(
                description="hybrid (default: meaning and exact words), dense (meaning "
                "only) or sparse (exact words, BM25)."
            ),
        ] = None,
        budget_tokens: Annotated[
            int | None,
            Field(
                ge=64,
                le=32_768,
                description="Fill about this many tokens with passages (cl100k_base tokens "
                "of their text); null: return the k best chunks instead.",
            ),
        ] = SEARCH_BUDGET,
    ) -> Annotated[CallToolResult, SearchOut]:
        """The tool ``search``: :meth:`Client.search <ingestd.daemon.client.Client.search>`."""
        got = await self.server.run_blocking(
            lambda: self.client.search(
                query,
                k,
                source=source,
                path=path,
                mode=mode,
                ranks=False,
                budget_tokens=budget_tokens,
                version=version,
            )
        )
        out = SearchOut(
            query=got.query,
            mode=got.mode,
            passages=[PassageOut.model_validate(p) for p in got.passages]
            if got.passages is not None
            else None,
            hits=[]
            if got.passages is not None
            else [
                HitOut.model_validate({**h, "heading_path": h.get("heading_path") or []})
                for h in got.hits
            ],
            budget_tokens=budget_tokens,
            tokens=got.tokens,
            notes=got.notes,
            indexing=got.indexing,
        )
        return _result(out, search_text(out))

    async def read(
        self,
        id: Annotated[str | None, Field(description="A chunk id from a search hit.")] = None,
        path: Annotated[
            str | None,
            Field(description="Instead of id: an indexed file, relative to its source's root."),
        ] = None,
        source: Annotated[
            str | None, Field(description="The source of path, when several hold it.")
        ] = None,
        start_line: Annotated[
            int | None, Field(ge=1, description="With path: the first line (1-based).")
        ] = None,
        end_line: Annotated[
            int | None, Field(ge=1, description="With path: the last line (inclusive).")
        ] = None,
        context: Annotated[
            int, Field(ge=0, le=20, description="With id: neighbouring chunks on each side.")
        ] = 1,
        max_lines: Annotated[
            int, Field(ge=1, le=2000, description="Most file lines to return.")
        ] = 200,
        budget_tokens: Annotated[
            int | None,
            Field(
                ge=64,
                le=32_768,
                description="Most tokens of the lines returned (cl100k_base); null: "
                "max_lines alone bounds them.",
            ),
        ] = READ_BUDGET,
        version: Annotated[
            str | None,
            Field(description="With path: the branch or tag of a git source's file."),
        ] = None,
    ) -> Annotated[CallToolResult, ReadOut]:
        """The tool ``read``: :meth:`Client.read <ingestd.daemon.client.Client.read>`."""
        got = await self.server.run_blocking(
            lambda: self.client.read(
                id,
                path=path,
                source=source,
                start_line=start_line,
                end_line=end_line,
                context=context,
                max_lines=max_lines,
                budget_tokens=budget_tokens,
                version=version,
            )
        )
        out = ReadOut.model_validate(got)
        return _result(out, _read_text(out))

    async def sync(
        self,
        paths: Annotated[
            list[str] | None,
            Field(
                description="Only these files or folders (absolute, or relative to a "
                "source's root); default: every source."
            ),
        ] = None,
        timeout_s: Annotated[
            float, Field(gt=0, le=3600, description="Give up waiting after this many seconds.")
        ] = 120.0,
        sources: Annotated[
            list[str] | None,
            Field(
                description="Only these sources (names); a git source is fetched first, so "
                "a commit just pushed is searchable when sync returns."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SyncOut]:
        """The tool ``sync``: :meth:`Client.sync <ingestd.daemon.client.Client.sync>`."""
        report = await self.server.run_blocking(
            lambda: self.client.sync(paths, sources=sources, timeout_s=timeout_s)
        )
        out = SyncOut.model_validate(report)
        return _result(out, "\n".join(out.summary) + f"\n({out.seconds:.2f} s)")

    async def status(self) -> Annotated[CallToolResult, StatusOut]:
        """The tool ``status``: :meth:`Client.status <ingestd.daemon.client.Client.status>`."""
        out = status_out(await self.server.run_blocking(self.client.status))
        return _result(out)


def _read_text(out: ReadOut) -> str:
    """``read``'s answer as text: where it is, then the file's lines."""
    got = out.model_dump(exclude_none=True)  # a key the text lacks is null in the model
    return read_text(got, more="a larger budget_tokens or max_lines", sync="call sync")
