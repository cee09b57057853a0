"""``ingestd mcp``: the index served to agents over the Model Context Protocol.

- :mod:`~ingestd.daemon.mcpserver.tools`: the server and its tools (``search``,
  ``read``, ``sync``, ``status``), over a :class:`~ingestd.daemon.client.Client`;
- :mod:`~ingestd.daemon.mcpserver.models`: the tools' structured results;
- :mod:`~ingestd.daemon.mcpserver.transport`: stdio and streamable HTTP;
- :mod:`~ingestd.daemon.mcpserver.stop`: SIGINT and SIGTERM end the stdio server,
  whenever they land.

Built on the official ``mcp`` SDK (2.x), imported only by ``ingestd mcp``.
"""
