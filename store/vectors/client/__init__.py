"""The stores on qdrant-client: its local mode (``local``) and a Qdrant server (``server``).

Owns the two engines' specs (``local_engine``, ``server_engine``) and their one store
class (``qdrant``, its collections and aliases in ``qdrant_collections``).
"""
