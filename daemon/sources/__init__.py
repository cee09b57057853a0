"""Sources: the documents the daemon keeps in sync, behind one interface.

* :mod:`~ingestd.daemon.sources.base`: the :class:`Source` interface, a document's
  identity (:class:`FileStat`) and a listing (:class:`Scan`);
* :mod:`~ingestd.daemon.sources.kinds`: the table of source kinds (``local``, ``git``,
  ``sitemap``);
* :mod:`~ingestd.daemon.sources.local`: a folder on the local file system, with its
  filter (:mod:`~ingestd.daemon.sources.filter`) and walk
  (:mod:`~ingestd.daemon.sources.walk`);
* :mod:`~ingestd.daemon.sources.git`: a git repository's branches and tags, each a
  version (:mod:`~ingestd.daemon.sources.versions`), read from a bare mirror
  (:mod:`~ingestd.daemon.sources.mirror`) by a hardened ``git``
  (:mod:`~ingestd.daemon.sources.gitcmd`);
* :mod:`~ingestd.daemon.sources.sitemap`: a documentation site read through its sitemap,
  a kind in a subpackage of its own.

This folder holds the 12 modules a folder may hold (``tests/test_structure.py``): a new
kind is a subpackage, as ``sitemap`` is, plus its entry in the table.
"""
