"""Persistence: the manifest (SQLAlchemy), the embedder and its cache, the vector store.

Heavy modules (qdrant-client, sentence-transformers) are imported only when used.
"""
