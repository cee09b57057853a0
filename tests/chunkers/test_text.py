"""The decode policy: UTF-8, BOM dropped, CRLF and lone CR to LF, binary and bad bytes refused."""

from __future__ import annotations

import pytest

from ingestd.chunkers import BinaryFileError, NotUTF8Error, UndecodableError, decode


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"", ""),
        (b"plain\n", "plain\n"),
        (b"\xef\xbb\xbfwith bom\n", "with bom\n"),
        (b"a\r\nb\r\n", "a\nb\n"),
        (b"a\rb\r", "a\nb\n"),
        (b"a\r\r\nb", "a\n\nb"),
        (b"mixed\r\nends\rhere\n", "mixed\nends\nhere\n"),
        ("héllo — 日本\r\n".encode(), "héllo — 日本\n"),
    ],
    ids=["empty", "lf", "bom", "crlf", "lone-cr", "cr-crlf", "mixed", "multibyte"],
)
def test_decode_normalises_text(data: bytes, text: str) -> None:
    assert decode(data) == text


def test_bom_is_removed_only_at_the_start() -> None:
    assert decode("\ufeffa\ufeffb".encode()) == "a\ufeffb"


def test_crlf_file_decodes_like_its_lf_twin() -> None:
    lf = b"line one\n\nline two\n  indented\n"
    assert decode(lf.replace(b"\n", b"\r\n")) == decode(lf)


def test_nul_byte_means_binary() -> None:
    with pytest.raises(BinaryFileError, match="binary file"):
        decode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")


def test_nul_byte_after_the_sniffed_prefix_is_text() -> None:
    assert decode(b"a" * 8000 + b"\x00") == "a" * 8000 + "\x00"


def test_invalid_utf8_names_the_byte_and_the_fix() -> None:
    with pytest.raises(NotUTF8Error) as info:
        decode("café".encode("latin-1"))
    message = str(info.value)
    assert "0xe9" in message and "offset 3" in message and "convert the file to UTF-8" in message


def test_truncated_multibyte_sequence_is_not_utf8() -> None:
    with pytest.raises(NotUTF8Error, match="offset 1"):
        decode("é".encode()[:1].join([b"a", b""]))


def test_undecodable_errors_share_one_base() -> None:
    assert issubclass(BinaryFileError, UndecodableError)
    assert issubclass(NotUTF8Error, UndecodableError)
    assert issubclass(UndecodableError, ValueError)
