"""``ingestd chunk`` shows each chunk's verbatim text beside the text the model reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingestd.daemon.cli.main import cli


def test_chunk_preview_shows_verbatim_and_embedded_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the folder indexed: the ids are those of this source
    f = tmp_path / "page.md"
    f.write_text(
        "# Install {#install}\n\nSee [the guide](https://example.com/guide) first.\n\n"
        "[ref]: https://example.com/ref\n"
    )
    res = CliRunner().invoke(cli, ["chunk", str(f)])
    assert res.exit_code == 0, res.output
    (obj,) = [json.loads(x) for x in res.output.splitlines()]
    text = f.read_text()
    assert obj["text"] == text[obj["start_char"] : obj["end_char"]] == text.rstrip()
    assert obj["embed_text"] == "Install\n\nInstall\n\nSee the guide first."
