"""The text ``read`` extracts from a document, kept while the document's bytes are the same.

``read`` shows a document's lines as its rule's reader extracts them. For a PDF that
is every page through PDFium: about 7 s for a 338-page manual, on every call, though
an agent widening hits reads the same manual again and again. The line numbers of a
page depend on every page before it, so the whole text is needed; it is kept instead,
keyed by the rule's fingerprint (its reader and options) and the sha256 of the bytes:
an edited file, or another rule, is extracted anew. Least recently used documents go
first once the texts kept pass :data:`MAX_CHARS`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingestd.chunkers.readers.document import Extracted

__all__ = ["MAX_CHARS", "ExtractedCache", "extracted_cache"]

#: Most characters of extracted text kept (a 338-page manual is about 1,000,000).
MAX_CHARS = 8_000_000


class ExtractedCache:
    """Extracted documents by ``(rule fingerprint, sha256 of the bytes)``, least recent out.

    Shared by the threads of a daemon (a lock guards it; the extraction itself runs
    outside the lock).

    Args:
        max_chars: most characters of text kept; a larger document is not kept.
    """

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._docs: OrderedDict[tuple[str, str], Extracted] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        #: documents extracted (not found kept), since the start
        self.extractions = 0

    def get(self, key: tuple[str, str], extract: Callable[[], Extracted]) -> Extracted:
        """The document of ``key``: kept, else ``extract()`` (kept if it fits).

        Raises:
            Whatever ``extract`` raises (nothing is kept then).
        """
        with self._lock:
            doc = self._docs.get(key)
            if doc is not None:
                self._docs.move_to_end(key)
                return doc
        doc = extract()
        with self._lock:
            self.extractions += 1
            if len(doc.text) <= self.max_chars and key not in self._docs:
                self._docs[key] = doc
                self._chars += len(doc.text)
                while self._chars > self.max_chars:
                    _, old = self._docs.popitem(last=False)
                    self._chars -= len(old.text)
        return doc


#: The process's cache (the daemon's, or an ``ingestd mcp`` server's without one).
extracted_cache = ExtractedCache()
