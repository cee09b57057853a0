"""The command that serves the index to other programs: ``mcp``.

``ingestd mcp`` is an MCP server (:mod:`ingestd.daemon.mcpserver`) over the same
:class:`~ingestd.daemon.client.Client` applications use: it asks the running daemon
through its control socket, or opens the state dir for each call when none runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options, socket_option
from ingestd.daemon.cli.shared.state import load_light

if TYPE_CHECKING:
    from ingestd.daemon.mcpserver.tools import IngestdServer
    from ingestd.daemon.mcpserver.transport import Address

__all__ = ["listen_address", "mcp_cmd", "ui_cmd"]


def listen_address(
    spec: str, token: str | None, allow_remote: bool, option: str, env: str
) -> Address:
    """The ``HOST:PORT`` of ``option``: loopback, or else ``--allow-remote`` and a token.

    The rule of ``ingestd mcp --http`` and ``ingestd ui --listen``: other machines are
    served only when asked explicitly, and never without a token.

    Raises:
        click.BadParameter: ``spec`` is not ``HOST:PORT``.
        click.UsageError: a remote address without ``--allow-remote`` or a token.
    """
    from ingestd.daemon.mcpserver import transport

    try:
        address = transport.Address(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    if not transport.is_loopback(address.host):
        if not allow_remote:
            raise click.UsageError(
                f"{option} {spec}: not a loopback address; to serve other machines "
                f"pass --allow-remote and a token (--token or {env})"
            )
        if not token:
            raise click.UsageError(
                f"{option} {spec} --allow-remote: other machines need a token: "
                f"give it with --token or {env}"
            )
    return address


@click.command("mcp")
@common_options
@socket_option
@click.option(
    "--http",
    "http_address",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; HOST must be a "
    "loopback address (127.0.0.1, ::1, localhost) unless --allow-remote. Port 0 picks one.",
)
@click.option(
    "--token",
    envvar="INGESTD_MCP_TOKEN",
    help="With --http: require 'Authorization: Bearer TOKEN' (env INGESTD_MCP_TOKEN, "
    "better than the option: a command line is visible to other users).",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="With --http: allow an address other machines reach (needs --token).",
)
@handle_errors
def mcp_cmd(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    http_address: str | None,
    token: str | None,
    allow_remote: bool,
) -> None:
    """Serve the index to agents over MCP (the Model Context Protocol), on stdio.

    Tools: search (the ranking of `ingestd search`), read (widen a hit: its section,
    neighbours and file lines), sync (make the index current, then return) and status
    (how fresh each source is). Through the running daemon when there is one, else on
    the state dir itself. Logs go to stderr (warnings unless --log-level).

    Example:

    
        ingestd mcp --state-dir ~/.local/state/ingestd     # what an agent launches
        INGESTD_MCP_TOKEN=s3cret ingestd mcp --http 127.0.0.1:8765
    """
    import logging

    from ingestd.daemon.mcpserver.stop import exit_on_stop_signals

    if http_address is None:  # first of all: a Ctrl-C during the start exits 0 too
        exit_on_stop_signals(0)
    from ingestd.daemon.mcpserver import transport

    address = None
    if http_address is not None:
        address = listen_address(http_address, token, allow_remote, "--http", "$INGESTD_MCP_TOKEN")
    elif token or allow_remote:
        raise click.UsageError("--token and --allow-remote go with --http")
    _cfg, sd = load_light(config_path, state_dir, log_level or "WARNING")
    # the SDK configures the root logger unless it has a handler: stderr, plain
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    server = _server(config_path, sd, socket_path)
    if address is None:
        sys.exit(transport.serve_stdio(server))
    try:
        code = transport.serve_http(server, address, token)
    except OSError as exc:
        raise Fatal(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sys.exit(code)


def _server(config_path: Path | None, state_dir: Path, socket_path: Path | None) -> IngestdServer:
    from importlib.metadata import PackageNotFoundError, version

    try:
        from ingestd.daemon.mcpserver.tools import build_server
    except ImportError as exc:  # the mcp SDK is missing or broken
        raise Fatal(
            f"ingestd mcp needs the mcp package (pip install 'mcp>=2.3,<3'): {exc}"
        ) from None
    from ingestd.daemon.client import Client

    try:
        ver = version("ingestd")
    except PackageNotFoundError:
        ver = ""
    client = Client(state_dir, socket=socket_path, config=config_path)
    return build_server(client, version=ver)


@click.command("ui")
@common_options
@socket_option
@click.option(
    "--listen",
    "listen",
    default="127.0.0.1:8765",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to serve the pages; HOST must be a loopback address (127.0.0.1, ::1, "
    "localhost) unless --allow-remote. Port 0 picks one.",
)
@click.option(
    "--token",
    envvar="INGESTD_UI_TOKEN",
    help="Require this token (env INGESTD_UI_TOKEN, better than the option): open the "
    "printed address with ?token=TOKEN once, or send 'Authorization: Bearer TOKEN'.",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow an address other machines reach (needs --token).",
)
@handle_errors
def ui_cmd(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    socket_path: Path | None,
    listen: str,
    token: str | None,
    allow_remote: bool,
) -> None:
    """Serve a local web page: what is indexed and why not, and a search to try.

    Pages: the overview (each source's versions, documents, chunks, last sync, lag,
    health, problems, held deletions, migrations; it refreshes while the daemon works),
    the files of each source (indexed or not, with the reason and how to change it; a
    file's chunks), and search (mode, filters, token budget; each search is a URL).
    Through the running daemon, which also lets you sync a source now and release held
    deletions; with no daemon the state dir is read, read-only. Stop with Ctrl-C.

    Example:

    
        ingestd ui --state-dir ~/.local/state/ingestd      # then open http://127.0.0.1:8765/
    """
    address = listen_address(listen, token, allow_remote, "--listen", "$INGESTD_UI_TOKEN")
    from ingestd.store.common.extras import extra_hint, missing_modules

    # Starlette comes with mcp, but imports Jinja2 only when a page is first built
    missing = missing_modules("ui")
    if missing:
        raise Fatal(f"ingestd ui needs {extra_hint('ui')} ({', '.join(missing)} not installed)")
    _cfg, sd = load_light(config_path, state_dir, log_level or "WARNING")
    from ingestd.daemon.ui import serve
    from ingestd.daemon.ui.frontdoor import FrontDoor

    door = FrontDoor(sd, config=config_path, socket=socket_path)
    try:
        code = serve(door, address, token)
    except OSError as exc:
        raise Fatal(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sys.exit(code)
