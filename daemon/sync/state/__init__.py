"""The state a sync engine owns: the manifest, the vector store, the embedding cache.

Owns opening and closing them (``resources``), the record that proves a clean close
(``clean_close``), the store's owning state dir (``ownership``), the embedding cache
healed when damaged (``healing_cache``) and damaged state files moved aside
(``damage``).
"""
