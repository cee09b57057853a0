"""Query and document prompts: the text an asymmetric model wants before each input.

Models such as e5, bge, nomic or arctic embed a question and a passage differently:
the caller puts a prompt before each (e5: ``"query: "`` and ``"passage: "``). ingestd
puts :attr:`ModelInfo.query_prompt` before every search query and
:attr:`ModelInfo.document_prompt` before every chunk (and every sentence the semantic
chunker compares), for every backend; the ``openai`` backend sends them as part of the
text, or, with input types (:mod:`ingestd.store.embedding.remote_backend`), says each
request's input type and lets the server put its prompt. A model without prompts
(the bundled all-MiniLM-L6-v2) gets its texts as they are.

Where the config leaves a prompt unset (``None``), the model's own comes from its
sentence-transformers config, ``config_sentence_transformers.json`` (keys ``prompts``
and ``default_prompt_name``, as ``SentenceTransformer.encode`` reads them).

The prompts are part of the model's fingerprint only when one is not empty
(:func:`prompted_fingerprint`): a model without prompts keeps its fingerprint, its
collections and its cached vectors; a changed prompt embeds everything again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ingestd.store.embedding.model import ModelInfo, Vectors

__all__ = [
    "DOCUMENT_PROMPT_NAMES",
    "Prompts",
    "embed_queries",
    "model_prompts",
    "prompted",
    "prompted_fingerprint",
    "with_prompts",
]

#: Names a sentence-transformers model gives its document prompt, in the order tried
#: when ``default_prompt_name`` names none (nomic: ``document``, e5: ``passage``, the
#: MTEB convention: ``corpus``/``document``).
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
_ST_CONFIG = "config_sentence_transformers.json"


@dataclass(frozen=True, slots=True)
class Prompts:
    """A query prompt and a document prompt; ``None``: the model's own.

    Attributes:
        query: text put before each search query.
        document: text put before each chunk.
    """

    query: str | None = None
    document: str | None = None


def model_prompts(folder: Path | None) -> Prompts:
    """The prompts a model folder's sentence-transformers config gives.

    ``query`` is its prompt named ``query``; ``document`` the prompt
    ``default_prompt_name`` names (what ``encode`` applies when told nothing), else the
    first of :data:`DOCUMENT_PROMPT_NAMES` it has. Each is ``""`` when it has none.

    Args:
        folder: the model's folder (``None``: a remote model, no prompts known).

    Raises:
        ValueError: the file exists but is not a JSON object with string prompts.
    """
    path = None if folder is None else folder / _ST_CONFIG
    if path is None or not path.is_file():
        return Prompts("", "")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read {path}: {e}") from e
    prompts = data.get("prompts") if isinstance(data, dict) else None
    if prompts is None:
        return Prompts("", "")
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ValueError(f"{path}: 'prompts' must map names to strings")
    default = data.get("default_prompt_name")
    names = ((default,) if isinstance(default, str) else ()) + DOCUMENT_PROMPT_NAMES
    document = next((prompts[n] for n in names if n in prompts), "")
    return Prompts(prompts.get("query", ""), document)


def prompted_fingerprint(fingerprint: str, query: str, document: str) -> str:
    """``fingerprint`` with the prompts in it; itself when both are empty.

    Returns:
        sha256 hex of the fingerprint and both prompts, or ``fingerprint`` unchanged.
    """
    if not query and not document:
        return fingerprint
    blob = json.dumps({"model": fingerprint, "query": query, "document": document})
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def with_prompts(info: ModelInfo, configured: Prompts | None = None) -> ModelInfo:
    """``info`` with its prompts: the configured ones, else the model's own.

    Its fingerprint takes them in by :func:`prompted_fingerprint`.

    Raises:
        ValueError: the model's sentence-transformers config is unreadable.
    """
    configured = configured or Prompts()
    own = model_prompts(info.path) if None in (configured.query, configured.document) else None
    query = configured.query if configured.query is not None else (own.query if own else "")
    document = (
        configured.document if configured.document is not None else (own.document if own else "")
    )
    query, document = query or "", document or ""
    return dataclasses.replace(
        info,
        fingerprint=prompted_fingerprint(info.fingerprint, query, document),
        query_prompt=query,
        document_prompt=document,
    )


def prompted(prompt: str, texts: Sequence[str]) -> Sequence[str]:
    """``texts`` each with ``prompt`` before it (``texts`` itself when it is empty)."""
    return [prompt + t for t in texts] if prompt else texts


def embed_queries(
    embed: Callable[[Sequence[str]], Vectors], info: ModelInfo, texts: Sequence[str]
) -> Vectors:
    """Vectors of search queries by ``embed``, the embedding callable of model ``info``.

    A remote model whose requests say their input type is asked through ``embed``'s
    ``queries`` method, the texts as they are (the server puts the query prompt); any
    other model gets each text with its query prompt before it.

    Returns:
        ``(len(texts), dim)`` float32 unit vectors.

    Raises:
        TypeError: ``info`` says input types but ``embed`` has no ``queries`` method.
    """
    if info.endpoint is None or not info.endpoint.input_types:
        return embed(prompted(info.query_prompt, texts))
    queries = getattr(embed, "queries", None)
    if queries is None:
        raise TypeError(f"{info.label} takes input types, but its embedder has no queries()")
    return queries(texts)
