"""Decoding file bytes into the text every chunk offset refers to.

The contract (DESIGN.md, "Decoded text"): UTF-8, BOM removed, CRLF and lone CR turned
into LF. A CRLF file and its LF twin therefore chunk identically.

Policy for bytes that are not text, applied by :func:`decode`:

* a file whose first 8,000 bytes contain a NUL byte is **binary** (git's own heuristic,
  ``buffer_is_binary`` in git's ``xdiff-interface.c``) and is skipped;
* a file that is not valid UTF-8 is **skipped** with the offset of the first bad byte:
  ingestd never guesses a legacy encoding, so it never produces mojibake chunks.
  Convert such a file to UTF-8 to index it.

Both raise :class:`UndecodableError`, whose message is the one log line and ``status``
entry for the document.
"""

from __future__ import annotations

from ingestd.chunkers.errors import DocumentError

__all__ = ["BinaryFileError", "NotUTF8Error", "UndecodableError", "decode"]

_BOM = "\ufeff"
_SNIFF_BYTES = 8000


class UndecodableError(DocumentError, ValueError):
    """The bytes of a file are not indexable text; the message says why."""


class BinaryFileError(UndecodableError):
    """The file looks binary (NUL byte near its start)."""


class NotUTF8Error(UndecodableError):
    """The file is not valid UTF-8."""


def decode(data: bytes) -> str:
    r"""Decode file bytes to the normalised text that chunks slice.

    Args:
        data: the file's bytes.

    Returns:
        The text: UTF-8 decoded, leading BOM removed, ``\r\n`` and lone ``\r``
        replaced by ``\n``.

    Raises:
        BinaryFileError: a NUL byte within the first 8,000 bytes.
        NotUTF8Error: invalid UTF-8 (the message gives the byte offset).
    """
    if b"\0" in data[:_SNIFF_BYTES]:
        raise BinaryFileError("binary file (NUL byte in the first 8000 bytes); skipped")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUTF8Error(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "skipped: convert the file to UTF-8 to index it"
        ) from None
    if text.startswith(_BOM):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
