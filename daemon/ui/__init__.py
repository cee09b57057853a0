"""``ingestd ui``: a small local web application for the people who run ingestd.

- :mod:`~ingestd.daemon.ui.frontdoor`: what the pages read and do, through the
  :class:`~ingestd.daemon.client.Client` (the running daemon, else the state dir,
  read-only).
- :mod:`~ingestd.daemon.ui.files`: one folder of a source, indexed and not, and why.
- :mod:`~ingestd.daemon.ui.app`: the pages (Starlette, Jinja2 templates and a CSS
  file shipped in the package: no build step, nothing fetched from elsewhere).
- :mod:`~ingestd.daemon.ui.guard`: Host/Origin checks and the token of ``ingestd mcp
  --http``, and the CSRF token of every action.

Importing this package imports nothing of Starlette or Jinja2 (``ingestd --help``
stays fast); :func:`serve` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingestd.daemon.mcpserver.transport import Address
    from ingestd.daemon.ui.frontdoor import FrontDoor

__all__ = ["serve"]


def serve(door: FrontDoor, address: Address, token: str | None) -> int:
    """Serve the UI on ``address`` until SIGINT or SIGTERM; returns the exit status (0).

    Raises:
        OSError: the address cannot be listened on.
    """
    from ingestd.daemon.mcpserver.transport import serve_asgi
    from ingestd.daemon.ui.app import create_app
    from ingestd.daemon.ui.guard import guarded

    app = create_app(door)
    return serve_asgi(lambda port: guarded(app, address.host, port, token), address, "ingestd ui")
