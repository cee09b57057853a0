"""The manifest: which files ingestd has seen and which point ids it wrote for them.

:class:`Manifest` is one object over one database, made of parts that each own some
tables:

* :mod:`ingestd.store.manifest.database`: the tables (a stored format: change them only
  with a new migration), the migrations, and the engine set-up;
* :mod:`ingestd.store.manifest.documents`: documents and their chunks (point ids), and
  the typed rows the manifest returns;
* :mod:`ingestd.store.manifest.sources`: sources, and what each source holds;
* :mod:`ingestd.store.manifest.collections`: the profile that made a collection's
  points, and the build of a new version of a collection.

The rows of a build's documents are :mod:`ingestd.store.manifest.builds`'s. What ``status`` reads
is :class:`~ingestd.store.manifest.reader.ManifestReader`, which :class:`Manifest` and the
SQLAlchemy-free :class:`~ingestd.store.manifest.view.ManifestView` both provide.
"""

from __future__ import annotations

from ingestd.store.common.damage import StateDamagedError
from ingestd.store.manifest.collections import CollectionRecords, ModelMismatchError
from ingestd.store.manifest.database import sqlite_url
from ingestd.store.manifest.documents import (
    RECORD_COLUMNS,
    AdoptedDocument,
    ChunkRow,
    DocRow,
    DocumentRecord,
    DocumentRecords,
    chunk_values,
)
from ingestd.store.manifest.reader import ManifestReader
from ingestd.store.manifest.sources import SourceRecords

__all__ = [
    "RECORD_COLUMNS",
    "AdoptedDocument",
    "ChunkRow",
    "DocRow",
    "DocumentRecord",
    "Manifest",
    "ModelMismatchError",
    "StateDamagedError",
    "chunk_values",
    "sqlite_url",
]


class Manifest(DocumentRecords, SourceRecords, CollectionRecords, ManifestReader):
    """Record of documents and their point ids, in any SQLAlchemy database.

    Args:
        url: SQLAlchemy URL; SQLite files get WAL, ``busy_timeout`` 10 s and foreign keys.
        now: the clock (seconds since the epoch); injected for tests.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be opened or migrated.
    """
