"""Who may use ``ingestd ui``: the MCP HTTP server's rules, and a CSRF token for each action.

* **Host and Origin** (DNS rebinding, cross-site requests): on a loopback address the
  ``Host`` header must name a loopback address on the UI's own port, and an
  ``Origin``, when the browser sends one, the UI's own origin; checked by the MCP SDK's
  :class:`~mcp.server.transport_security.TransportSecurityMiddleware` with the
  settings ``ingestd mcp --http`` uses
  (:func:`~ingestd.daemon.mcpserver.transport.rebinding_protection`), narrowed to the
  port. A request that fails gets the SDK's answer: 421 for the host, 403 for the
  origin.
* **Token**: as ``ingestd mcp --http``: required to serve other machines, allowed on
  loopback; checked by :class:`~ingestd.daemon.mcpserver.transport.BearerToken`
  (``Authorization: Bearer TOKEN``, constant-time). A browser gets it once from a
  ``?token=TOKEN`` link (the address ``ingestd ui`` prints), which sets an HTTP-only,
  same-site cookie that stands for the header from then on.
* **CSRF**: every action is a ``POST`` carrying the form field ``csrf``, a random
  token of this server process that only its own pages hold (a page of another
  origin cannot read them); compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode

from ingestd.daemon.mcpserver.transport import (
    ASGIApp,
    BearerToken,
    Receive,
    Scope,
    Send,
    is_loopback,
    rebinding_protection,
)

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecurityMiddleware

__all__ = ["COOKIE", "Csrf", "HostOriginCheck", "TokenCookie", "guarded"]

#: The cookie that carries the token in a browser.
COOKIE = "ingestd_ui_token"


class HostOriginCheck:
    """Pure ASGI middleware: the SDK's Host/Origin validation of every HTTP request.

    Args:
        app: the ASGI app it guards.
        host: the address listened on; only a loopback one is checked (elsewhere the
            token guards, as for ``ingestd mcp --http``).
        port: the port listened on.
    """

    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self.check: TransportSecurityMiddleware | None = None
        if is_loopback(host):
            self.check = TransportSecurityMiddleware(rebinding_protection(host, port))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 421 (Host) or 403 (Origin) to a request that fails; pass the others on."""
        if scope["type"] == "http" and self.check is not None:
            from starlette.requests import Request

            refused = await self.check.validate_request(Request(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


class TokenCookie:
    """Pure ASGI middleware: the token from a link or a cookie, as the bearer header.

    ``?token=TOKEN`` on any page answers with a redirect to the same page without it
    that sets the cookie :data:`COOKIE` (HTTP-only, ``SameSite=Strict``); a request
    with the cookie and no ``Authorization`` header gets ``Authorization: Bearer`` with
    the cookie's value, which :class:`BearerToken` then checks.

    Args:
        app: the app it hands requests to (a :class:`BearerToken`).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Set the cookie from a link, or turn the cookie into the bearer header."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            rest = urlencode({k: v for k, v in query.items() if k != "token"}, doseq=True)
            location = scope.get("path", "/") + (f"?{rest}" if rest else "")
            cookie = f"{COOKIE}={query['token'][0]}; Path=/; HttpOnly; SameSite=Strict"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode("latin-1")),
                        (b"set-cookie", cookie.encode("latin-1")),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        headers = list(scope.get("headers") or [])
        if not any(k == b"authorization" for k, _ in headers):
            for k, v in headers:
                if k != b"cookie":
                    continue
                for part in v.decode("latin-1").split(";"):
                    name, _, value = part.strip().partition("=")
                    if name == COOKIE:
                        headers.append((b"authorization", f"Bearer {value}".encode("latin-1")))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


class Csrf:
    """The CSRF token of this server process (see the module docstring)."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(32)

    def valid(self, got: object) -> bool:
        """Whether ``got`` (a form field's value) is this process's token."""
        return isinstance(got, str) and hmac.compare_digest(got, self.token)


def guarded(app: ASGIApp, host: str, port: int, token: str | None) -> ASGIApp:
    """``app`` behind the Host/Origin check, then the token (when one is given)."""
    if token:
        app = TokenCookie(BearerToken(app, token))
    return HostOriginCheck(app, host, port)
