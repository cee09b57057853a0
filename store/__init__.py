"""Persistence: the manifest (SQLAlchemy), the embedder and its cache, the vector store.

Heavy modules (qdrant-client, sentence-transformers) are imported only when used; this
package itself exports only :class:`ManifestReader`, which imports nothing heavy.
"""

from ingestd.store.manifest.reader import ManifestReader

__all__ = ["ManifestReader"]
