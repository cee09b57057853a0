"""One document from bytes on disk to point ids and payloads (no store, no model).

:func:`prepare_document` reads, decodes and chunks one file with its rule and derives
what a from-scratch ingest would store for it: the point ids (content-addressed,
DESIGN.md point 4) and the payloads. The sync engine writes what it returns; ``verify``
and the from-scratch oracle compare against it, so both apply the same file policy.

File policy (a document that breaks it is *failed*: no chunks, its error in ``status``):

* a secret-bearing name (``.env``, ``id_rsa``, ``.ssh/``, ``*.pem``, ...: see
  :mod:`~ingestd.daemon.sync.preparing.secret_files`): skipped unread;
* over ``files.max_bytes`` bytes: skipped unread;
* binary or not UTF-8 (see :func:`ingestd.chunkers.text.decode`), or a file its rule's
  reader cannot read (a malformed notebook, an encrypted PDF or one without a text
  layer, a file over a format's bounds: see :mod:`ingestd.chunkers.readers`);
* a file that would become more text than it may (AsciiDoc attribute references, PDF
  streams, HTML tables...: at most 8 characters per byte of the file, see
  :mod:`ingestd.chunkers.readers.expansion`), found by its reader or its chunker as the
  text is made, before it is all made;
* text holding a private-key block or an access token;
* a chunker error, or any other error while preparing this one document;
* more than ``files.max_chunks`` chunks (a pathological file would otherwise hold the
  embedder for many minutes);
* text that is not prose (base64, minified code, long runs without whitespace) in all
  its chunks; a document with prose loses only the chunks that are not prose, and keeps
  a note of how many in the manifest (see :mod:`~ingestd.daemon.sync.preparing.nonprose`).

Paths whose name is not valid UTF-8 never get here: the scanner skips them
(:func:`~ingestd.daemon.sources.walk.name_problem`), since the manifest, the point ids and
the payload all store paths as UTF-8 text.

A file that vanished or could not be opened raises
:class:`~ingestd.daemon.sync.types.UnreadableFile`: it is
retried later, never treated as deleted.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ingestd.chunkers.base import Chunk
from ingestd.chunkers.text import UndecodableError
from ingestd.daemon.config import FilesConfig
from ingestd.daemon.sources.base import FileStat, Source
from ingestd.daemon.sources.versions import (
    VERSION_KEY,
    VERSION_SEP,
    commit_of,
    split_document,
    strip_keys,
)
from ingestd.daemon.sync.preparing.nonprose import (
    leave_out_nonprose,
    nonprose_error,
    partly_skipped_note,
)
from ingestd.daemon.sync.preparing.rules import Rule
from ingestd.daemon.sync.preparing.secret_files import SecretPolicy
from ingestd.daemon.sync.types import SyncInterrupted, UnreadableFile
from ingestd.store.search.query import PATH_KEY, path_prefixes
from ingestd.store.search.sparse import SparseVec, document_vector
from ingestd.store.vectors.ids import chunk_hash, content_hash, point_ids

__all__ = [
    "PROVENANCE_KEYS",
    "PreparedDocument",
    "prepare_document",
    "read_file",
    "sparse_vector",
    "strip_provenance",
]

logger = logging.getLogger(__name__)

#: Payload keys that say when and from where a point was written; outside comparisons.
#: (``commit``, a versioned source's: a commit of the version whose file is this text.)
PROVENANCE_KEYS = frozenset({"indexed_at", "git_commit", "commit"})


@dataclass
class PreparedDocument:
    """A document read and chunked, ready to be written.

    Attributes:
        path: POSIX path relative to the source root.
        stat: the stat read before the bytes.
        content_hash: sha256 hex of the raw bytes (``""`` when they were not read).
        rule: the rule that chunked it.
        chunks: its chunks in document order.
        ids: point id of each chunk.
        hashes: chunk hash of each chunk (of its embedded text).
        payloads: payload of each chunk (provenance keys included).
        error: why the document failed, or ``None``.
        note: what of an indexed document was left out (chunks that are not prose),
            or ``None``; the manifest keeps it in the ``error`` column of an ``ok`` row.
    """

    path: str
    stat: FileStat
    content_hash: str
    rule: Rule
    chunks: list[Chunk] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    payloads: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    note: str | None = None

    @property
    def size(self) -> int:
        """Size of the file, in bytes."""
        return self.stat.size


def prepare_document(
    src: Source,
    rel: str,
    rule: Rule,
    files: FilesConfig,
    git_commit: str | None = None,
) -> PreparedDocument:
    """Read, decode and chunk document ``rel`` of ``src``; compute its point ids and payloads.

    Args:
        src: the source (its name is payload ``source`` and part of the point ids).
        rel: POSIX path relative to the source.
        rule: the rule matching ``rel``.
        files: the file policy (``max_bytes``, ``max_chunks``, the secret checks).
        git_commit: HEAD's commit of a git source (payload ``git_commit``).

    Raises:
        UnreadableFile: the file vanished or could not be opened (retry later).
        SyncInterrupted: a stop was requested while the chunker embedded sentences.
    """
    source = src.name
    version, _ = split_document(src, rel)
    if version is not None:
        git_commit = commit_of(src, version) or git_commit
    st = src.stat(rel)
    if st is None:
        raise UnreadableFile(f"{rel}: vanished before it could be read")
    secrets = _secret_policy(files.allow_secret_names, files.allow_secret_content)
    error = secrets.name_error(rel)
    if error is None and st.size > files.max_bytes:
        error = f"file too large ({st.size} bytes > files.max_bytes {files.max_bytes}); skipped"
    if error is not None:
        return PreparedDocument(rel, st, "", rule, error=error)
    data = read_file(src, rel)
    prep = PreparedDocument(rel, st, content_hash(data), rule)
    try:
        _chunk(prep, source, data, files, secrets, git_commit, version)
    except SyncInterrupted:
        raise
    except Exception as exc:  # one document's failure is its own, never its batch's
        logger.exception("cannot prepare %s", rel)
        prep.error = f"cannot be prepared: {type(exc).__name__}: {exc}"
    if prep.error is not None:
        prep.chunks, prep.ids, prep.hashes, prep.payloads = [], [], [], []
        prep.note = None
    return prep


def read_file(src: Source, rel: str) -> bytes:
    """The bytes of document ``rel`` of ``src``.

    Raises:
        UnreadableFile: it vanished or could not be opened or read (retry later).
    """
    try:
        return src.read(rel)
    except FileNotFoundError:
        raise UnreadableFile(f"{rel}: vanished while being read") from None
    except OSError as exc:
        raise UnreadableFile(f"{rel}: cannot be read ({exc.strerror or exc})") from None


@functools.lru_cache(maxsize=8)
def _secret_policy(allow_names: Sequence[str], allow_content: Sequence[str]) -> SecretPolicy:
    return SecretPolicy(tuple(allow_names), tuple(allow_content))


def _chunk(
    prep: PreparedDocument,
    source: str,
    data: bytes,
    files: FilesConfig,
    secrets: SecretPolicy,
    git_commit: str | None,
    version: str | None = None,
) -> None:
    """Read, check and chunk ``data`` into ``prep`` (or set ``prep.error``).

    The rule's reader gives the text (decoded, or extracted from a notebook, HTML or
    PDF) that the secret checks, the chunks and their offsets refer to.
    """
    rel, rule = prep.path, prep.rule
    try:
        doc = rule.reader.read(data)
    except UndecodableError as exc:
        prep.error = str(exc)
        return
    prep.error = secrets.content_error(rel, doc.text)
    if prep.error is not None:
        return
    try:
        chunks = rule.chunker.chunk_document(doc)
    except SyncInterrupted:
        raise
    except UndecodableError as exc:  # over a format's bound while chunking (an expansion)
        prep.error = str(exc)
        return
    except Exception as exc:
        logger.exception("chunker %s failed on %s", rule.name, rel)
        prep.error = f"chunker {rule.name!r} failed: {type(exc).__name__}: {exc}"
        return
    if len(chunks) > files.max_chunks:
        prep.error = (
            f"would make {len(chunks)} chunks (> files.max_chunks {files.max_chunks}); skipped"
        )
        return
    prep.error = nonprose_error(chunks)
    if prep.error is not None:
        return
    kept, left_out = leave_out_nonprose(chunks)
    if left_out:
        prep.note = partly_skipped_note(left_out, sum(1 for c in chunks if not c.is_parent))
        chunks = kept
    prep.chunks = chunks
    prep.hashes = [chunk_hash(c.embed_text) for c in chunks]
    # a versioned source's ids leave the version out: versions share points
    path = rel.partition(VERSION_SEP)[2] if version is not None else rel
    prep.ids = point_ids(source, path, prep.hashes)
    prep.payloads = _payloads(source, rel, prep, git_commit, version)


def _payloads(
    source: str,
    rel: str,
    prep: PreparedDocument,
    git_commit: str | None,
    version: str | None = None,
) -> list[dict[str, Any]]:
    rule = prep.rule
    path = rel.partition(VERSION_SEP)[2] if version is not None else rel
    base: dict[str, Any] = {
        "source": source,
        "path": path,
        "doc_hash": prep.content_hash,
        "chunker": rule.chunker_name,
        "rule": rule.name,
        "rule_fingerprint": rule.fingerprint,
        PATH_KEY: path_prefixes(path),  # what `search --path` matches, exactly
    }
    if version is not None:
        base[VERSION_KEY] = version
        if git_commit:
            base["commit"] = git_commit
    out = []
    for i, c in enumerate(prep.chunks):
        # strategy extras, as JSON types: a server returns lists, never tuples
        p: dict[str, Any] = json.loads(json.dumps(dict(c.meta))) if c.meta else {}
        p.update(base)
        p.update(
            chunk_hash=prep.hashes[i],
            ordinal=i,
            start_char=c.start,
            end_char=c.end,
            start_line=c.start_line,
            end_line=c.end_line,
            n_tokens=c.n_tokens,
            heading_path=list(c.heading_path),
            text=c.text,
        )
        if c.parent is not None:
            p["parent_id"] = prep.ids[c.parent]
        if c.is_parent:
            p["is_parent"] = True
        if git_commit:
            p["git_commit"] = git_commit
        out.append(p)
    return out


def sparse_vector(chunk: Chunk) -> SparseVec | None:
    """The BM25 vector of a chunk's embedded text; ``None`` for a parent (never searched)."""
    return None if chunk.is_parent else document_vector(chunk.embed_text)


def strip_provenance(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` without the provenance keys (``indexed_at``, ``git_commit``, ``commit``).

    A point shared by versions loses them from each version's differences too.
    """
    return strip_keys(payload, PROVENANCE_KEYS)
