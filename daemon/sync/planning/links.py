"""Documents with more than one hard link: re-checked when another name of them changes.

A hard link is a second name of the same file (inode): writing through one name
changes what every name reads. inotify reports the path that was written, not the
other names of its inode, and a name whose other link lies outside every watched root
gets no event at all. So the daemon keeps, per source, the documents whose last stat
showed more than one link (``st_nlink > 1``) with that stat, and

* a change batch of a path adds the known links of its inode (before or after the
  change) whose stat changed since (:meth:`HardLinks.siblings`); a name linked while
  the daemon runs (an event in a root) makes the indexed names of its inode known
  (:meth:`HardLinks.track`, from the manifest), also those that had one link so far;
* every ``watch.hard_link_check_s`` seconds, each known link is stat-checked
  (:meth:`HardLinks.changed`): one outside the roots has changed when its stat has.

A link made outside every root to a file indexed with one name makes no event: that
file is known to have links from the next scan of its source on
(``watch.rescan_interval_s``).

Inodes are compared without the device (a source may span file systems only through
mount points, and a false match costs one stat-checked path, never a wrong write).
Content reached through a hard link from outside a root is indexed, like any file in
it; symlinks are never followed (see :mod:`~ingestd.daemon.sources.walk`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ingestd.daemon.sources.base import FileStat, Source

__all__ = ["HardLinks"]


def _covered(rel: str, scope: Sequence[str]) -> bool:
    return any(not s or rel == s or rel.startswith(s + "/") for s in scope)


class HardLinks:
    """The documents of each source that have more than one hard link, with their stat."""

    def __init__(self) -> None:
        self._sources: dict[str, Source] = {}
        self._docs: dict[str, dict[str, FileStat]] = {}  # source -> path -> last stat seen

    def observe(
        self,
        src: Source,
        found: Mapping[str, FileStat],
        scope: Sequence[str] | None,
    ) -> set[int]:
        """Record what a plan saw of source ``src``.

        Args:
            src: the source.
            found: relative path -> stat of the documents seen.
            scope: the changed paths (files or folders) that were looked at, or ``None``
                for a scan of the whole source.

        Returns:
            The inodes with more than one link that no known name had before: their
            other names may be indexed documents not known yet (see :meth:`track`).
        """
        source = src.name
        self._sources[source] = src
        linked = {rel: st for rel, st in found.items() if st.nlink > 1}
        new = {st.inode for st in linked.values()}
        if new:
            new -= {st.inode for docs in self._docs.values() for st in docs.values()}
        docs = self._docs.setdefault(source, {})
        if scope is None:
            docs.clear()
        else:
            for rel in [r for r in docs if _covered(r, scope)]:
                del docs[rel]
        docs.update(linked)
        if not docs:
            del self._docs[source]
        return new

    def track(self, src: Source, docs: Mapping[str, FileStat]) -> None:
        """Know ``docs`` of source ``src`` as links, with the stat the manifest records.

        Names known already keep their stat. One whose file changed since it was
        indexed (a new link changes its ``ctime``) is synced with the next change of
        another name of its inode, or by the next stat check.

        Args:
            src: a configured source.
            docs: relative path -> the stat recorded when it was indexed.
        """
        self._sources[src.name] = src
        known = self._docs.setdefault(src.name, {})
        for rel, st in docs.items():
            known.setdefault(rel, st)

    def siblings(self, source: str, paths: Iterable[str]) -> dict[str, set[str]]:
        """The other known links of the inodes of ``paths`` whose stat changed.

        The inode of each path is taken before (the last stat seen) and after (now)
        the change. A link returned has its new stat recorded, so that it is handed
        out once per change (two sources' batches never re-queue each other).

        Args:
            source: the source of the changed paths.
            paths: relative paths of a change batch.

        Returns:
            Source name -> relative paths to sync as changed too.
        """
        if not self._docs:
            return {}
        paths = set(paths)
        inodes: set[int] = set()
        known = self._docs.get(source, {})
        this = self._sources.get(source)
        for rel in paths:
            if rel in known:
                inodes.add(known[rel].inode)
            now = this.stat(rel) if this is not None else None
            if now is not None:
                inodes.add(now.inode)
        out: dict[str, set[str]] = {}
        for src, docs in self._docs.items():
            for rel, st in docs.items():
                if st.inode not in inodes or (src == source and rel in paths):
                    continue
                now = self._sources[src].stat(rel)
                if now != st:
                    out.setdefault(src, set()).add(rel)
                    if now is not None:
                        docs[rel] = now
        return out

    def changed(self) -> dict[str, set[str]]:
        """The known links whose stat changed since it was last seen (a stat each).

        Their new stat is recorded (a link that vanished is dropped), so each change is
        returned once.

        Returns:
            Source name -> relative paths to sync as changed.
        """
        out: dict[str, set[str]] = {}
        for src, docs in list(self._docs.items()):
            source = self._sources[src]
            for rel, st in list(docs.items()):
                now = source.stat(rel)
                if now == st:
                    continue
                out.setdefault(src, set()).add(rel)
                if now is None:
                    del docs[rel]
                else:
                    docs[rel] = now
        return out
