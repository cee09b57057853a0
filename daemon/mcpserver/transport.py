"""How ``ingestd mcp`` talks: stdio (what desktop agents and IDEs launch), or streamable HTTP.

**stdio.** The protocol owns stdout: nothing else is ever written there (logs go to
stderr, and the SDK points file descriptor 1 at stderr while it serves). The server
ends when its client closes stdin, exit status 0; a tool call still running then is
asked to stop and abandoned after a grace period (the sync engine's write order
makes an interrupted write harmless). SIGINT and SIGTERM exit at once, status 0, from
the start of the command on, whenever they land (see
:mod:`~ingestd.daemon.mcpserver.stop`): the SDK's stdin reader sits in a blocking read
that an event loop cannot cancel.

**HTTP.** ``--http HOST:PORT`` serves streamable HTTP at ``/mcp``, stateless, with
JSON answers. The address must be a loopback one (DNS-rebinding protection checks
the ``Host`` and ``Origin`` headers), unless the caller explicitly allows a remote one
and gives a bearer token; a token can guard a loopback address too (other local
users). Requests without ``Authorization: Bearer TOKEN`` get 401 (RFC 6750), compared
in constant time. Port 0 picks a free port; the address is printed on stderr.
SIGINT and SIGTERM stop the server gracefully, status 0.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from ingestd.daemon.mcpserver.stop import exit_on_stop_signals
from ingestd.daemon.mcpserver.tools import IngestdServer

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings

__all__ = [
    "EXIT_GRACE_S",
    "Address",
    "BearerToken",
    "NoEventStream",
    "http_app",
    "is_loopback",
    "rebinding_protection",
    "serve_asgi",
    "serve_http",
    "serve_stdio",
]

logger = logging.getLogger(__name__)

#: Seconds a tool call still running when stdin closes gets to stop.
EXIT_GRACE_S = 3.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def serve_stdio(server: IngestdServer) -> int:
    """Serve on stdin/stdout until the client closes stdin; returns the exit status (0).

    SIGINT and SIGTERM end the process with status 0
    (:func:`~ingestd.daemon.mcpserver.stop.exit_on_stop_signals`, which ``ingestd mcp``
    installs first of all; again here for a caller that did not).
    """
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        exit_on_stop_signals(0)
    server.run("stdio")
    if server.busy:  # a call in flight (a long sync): stop it, wait a little, then go
        server.client.interrupt()
        deadline = time.monotonic() + EXIT_GRACE_S
        while server.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        if server.busy:
            logger.warning("stdin closed during a tool call; exiting without waiting for it")
            sys.stderr.flush()
            os._exit(0)
    return 0


class Address:
    """A ``HOST:PORT`` to listen on (``[::1]:PORT`` for IPv6).

    Raises:
        ValueError: from the constructor: not ``HOST:PORT``, or a bad port.
    """

    def __init__(self, spec: str) -> None:
        host, sep, port = spec.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{spec!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
        self.host = host
        self.port = int(port)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerToken:
    """Pure ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``.

    The answer is the SDK's own ``RequireAuthMiddleware``'s
    (``mcp/server/auth/middleware/bearer_auth.py``), reduced to one static token
    instead of its OAuth token verifier: a missing or wrong token gets 401 with
    ``WWW-Authenticate: Bearer error="invalid_token"`` (RFC 6750, section 3). Tokens
    are compared with :func:`hmac.compare_digest` (constant time). Lifespan events
    pass (the SDK's app starts its session manager there).

    Args:
        app: the ASGI app it guards.
        token: the token.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 to an HTTP request without the token; pass everything else on.

        The description says which: no ``Authorization`` header ("bearer token
        required"), or a token that is not the one ("the bearer token is not the
        server's").
        """
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self._expected):
                what = "the bearer token is not the server's" if got else "bearer token required"
                await _answer(
                    send,
                    401,
                    {"error": "invalid_token", "error_description": what},
                    [(b"www-authenticate", b'Bearer error="invalid_token"')],
                )
                return
        await self.app(scope, receive, send)


class NoEventStream:
    """Pure ASGI middleware: ``GET`` (an event stream for the server's own messages) gets 405.

    The server is stateless and answers every request in JSON: it never sends a
    message of its own, so it offers no stream, as the MCP specification allows
    ("Streamable HTTP", listening for messages from the server: the server MUST
    return ``text/event-stream`` or else 405 Method Not Allowed). The SDK's app would
    otherwise hold such a stream open for as long as the client keeps it.

    Args:
        app: the ASGI app it guards.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 405 to a ``GET``; pass everything else on."""
        if scope["type"] == "http" and scope.get("method") == "GET":
            body = {"error": "method_not_allowed", "error_description": "no event stream here"}
            await _answer(send, 405, body, [(b"allow", b"POST, DELETE")])
            return
        await self.app(scope, receive, send)


async def _answer(
    send: Send, status: int, body: dict[str, str], headers: list[tuple[bytes, bytes]]
) -> None:
    """Send a whole JSON response."""
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def rebinding_protection(host: str, port: int | str = "*") -> TransportSecuritySettings:
    """The SDK's DNS-rebinding check for a server on loopback address ``host``.

    A web page must not reach a local server: the ``Host`` header must name a loopback
    address (``127.0.0.1``, ``localhost``, ``[::1]`` or ``host``) and an ``Origin``, when
    sent, be ``http://`` one of them, on ``port`` (``"*"``: any).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    names = sorted({"127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host})
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:{port}" for n in names],
        allowed_origins=[f"http://{n}:{port}" for n in names],
    )


def http_app(server: IngestdServer, host: str, token: str | None) -> ASGIApp:
    """The ASGI app of ``server`` at ``/mcp``, stateless with JSON answers, guarded."""
    security = rebinding_protection(host) if is_loopback(host) else None
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
    )
    app = NoEventStream(app)
    return BearerToken(app, token) if token else app


def serve_http(server: IngestdServer, address: Address, token: str | None) -> int:
    """Serve streamable HTTP on ``address`` until SIGINT or SIGTERM; returns the exit status.

    The caller checks that a non-loopback address is allowed (see the module
    docstring). The socket is bound here, so a busy port is one line and port 0 is
    reported as the port it got.

    Raises:
        OSError: the address cannot be listened on (in use, not local, no permission).
    """
    return serve_asgi(
        lambda _port: http_app(server, address.host, token), address, "ingestd mcp", "/mcp"
    )


def serve_asgi(
    make_app: Callable[[int], ASGIApp], address: Address, name: str, path: str = "/"
) -> int:
    """Serve an ASGI app with uvicorn on ``address`` until SIGINT or SIGTERM; the exit status.

    The socket is bound first, so a busy port is one line, and ``make_app`` is given
    the port it got (port 0 picks one); ``NAME: listening on http://HOST:PORTPATH`` is
    printed on stderr.

    Args:
        make_app: builds the app for the bound port.
        address: where to listen.
        name: the program, in the line printed.
        path: the app's path, in the line printed.

    Raises:
        OSError: the address cannot be listened on (in use, not local, no permission).
    """
    import uvicorn

    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    port = sock.getsockname()[1]
    shown = f"[{address.host}]" if family == socket.AF_INET6 else address.host
    print(f"{name}: listening on http://{shown}:{port}{path}", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        make_app(port),
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )

    # uvicorn stops gracefully on SIGINT/SIGTERM, then raises the signal again under
    # the handler found at start: make that an orderly exit with status 0
    def stop(_sig: int, _frame: FrameType | None) -> None:
        raise SystemExit(0)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        sock.close()
    return 0
