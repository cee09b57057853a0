"""Secrets stay out of the index.

The bug this pins: with a broad include (``**/*``), ``.env``, ``id_rsa``, ``.ssh/*``,
``*.pem`` and ``credentials.json`` were indexed and their text was searchable. A
built-in deny-list of secret-bearing names and a check of the text for private-key
blocks and access tokens keep them out by default; each skipped file is a failed
document in ``status`` whose reason names the rule, never the secret.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestd.daemon.sync.preparing.secret_files import SecretPolicy, find_secret
from tests.daemon.harness import Harness
from tests.helpers import (
    CORPORA,
    CountingEmbedder,
    assert_matches_oracle,
    fake_vectors,
    make_engine,
    run_cli,
    store_snapshot,
    without_provenance,
)

# Made-up credentials in their issued formats (none is or was a live key).
KEY_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0"
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\n"
GITHUB_TOKEN = "ghp_" + "R4nd0mL00k1ngT0k3nF0rT3st1ngOnly0123"
SECRET_FILES = {
    ".env": "DATABASE_PASSWORD=hunter2-not-for-search\n",
    "deploy/id_rsa": PRIVATE_KEY,
    ".ssh/config": "Host prod\n  IdentityFile ~/.ssh/prod_key\n",
    "certs/server.pem": PRIVATE_KEY,
    "credentials.json": '{"token": "hunter2-not-for-search"}\n',
}
#: Secrets inside ordinary documents, found by the content check.
SECRET_TEXT = {
    "runbook.md": f"# Runbook\n\nLog in with this key:\n\n```\n{PRIVATE_KEY}```\n",
    "notes.md": f"# Notes\n\nCI token: {GITHUB_TOKEN}\n",
}


def _broad(root: Path) -> dict[str, Any]:
    return {"sources": [{"root": str(root), "include": ["**/*"]}]}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _texts(points: dict[str, dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in points.values())


def test_secret_bearing_names_and_texts_are_not_indexed(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    _write(docs, SECRET_FILES | SECRET_TEXT)
    state = tmp_path / "state"
    eng = make_engine(docs, state, fake_embedder, **_broad(docs))
    (name,) = eng.context.sources
    res = eng.sync(name)
    assert (res.indexed, res.failed) == (3, 7)
    failed = dict(eng.resources.manifest.failed(name))
    for rel in SECRET_FILES:
        assert failed[rel].startswith("secret-bearing file name (built-in deny-list); not read")
    assert failed["runbook.md"].startswith("holds a secret (private key block, line 6); skipped")
    assert failed["notes.md"].startswith("holds a secret (GitHub token, line 3); skipped")
    assert not any(s in e for e in failed.values() for s in (KEY_BODY, GITHUB_TOKEN, "hunter2"))
    assert eng.verify(name).clean
    eng.close()
    text = _texts(store_snapshot(state))
    assert "hunter2" not in text and KEY_BODY not in text and GITHUB_TOKEN not in text
    assert "A neighbour that must be indexed." in text
    # the from-scratch oracle applies the same policy
    assert_matches_oracle(docs, state, tmp_path, fake_vectors)


def test_documented_examples_and_placeholders_are_indexed(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    _write(
        docs,
        {
            "aws.md": "# AWS\n\nSet `AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE`.\n",
            "tls.md": "# TLS\n\n```\n-----BEGIN RSA PRIVATE KEY-----\n...\n```\n",
            ".env.example": "DATABASE_PASSWORD=change-me\n",
            "docs/secrets.md": "# Secrets\n\nWhere to keep your `.env` and `id_rsa`.\n",
        },
    )
    eng = make_engine(docs, tmp_path / "state", fake_embedder, **_broad(docs))
    (name,) = eng.context.sources
    res = eng.sync(name)
    assert (res.indexed, res.failed) == (7, 0), eng.resources.manifest.failed(name)
    eng.close()


def test_the_checks_are_lifted_only_explicitly(
    docs: Path, tmp_path: Path, fake_embedder: CountingEmbedder
) -> None:
    _write(docs, {".env": "GREETING=hello\n", "notes.md": SECRET_TEXT["notes.md"]})
    files = {"allow_secret_names": [".env"], "allow_secret_content": ["notes.md"]}
    state = tmp_path / "state"
    eng = make_engine(docs, state, fake_embedder, files=files, **_broad(docs))
    (name,) = eng.context.sources
    assert eng.sync(name).failed == 0
    eng.close()
    assert GITHUB_TOKEN in _texts(store_snapshot(state))
    assert_matches_oracle_with(docs, state, tmp_path, files=files, **_broad(docs))


def assert_matches_oracle_with(root: Path, state: Path, tmp: Path, **overrides: Any) -> None:
    from tests.helpers import oracle

    assert without_provenance(store_snapshot(state)) == oracle(root, tmp, fake_vectors, **overrides)


def test_policy_globs() -> None:
    p = SecretPolicy()
    for rel in (".env", "a/.env.local", "prod.env", "id_ed25519", "x/.ssh/known_hosts",
                ".aws/config", "k.pem", "tls/server.key", "credentials.json",
                ".git-credentials", "a/.bash_history", "prod.tfvars"):  # fmt: skip
        assert p.name_error(rel), rel
    for rel in ("id_rsa.pub", ".env.example", "docs/credentials.md", "keys.md", "README.md",
                "environment.md", "ssh/config.md"):  # fmt: skip
        assert p.name_error(rel) is None, rel
    assert SecretPolicy(allow_names=("*.pem",)).name_error("k.pem") is None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (PRIVATE_KEY, "private key block"),
        (
            '{"private_key": "-----BEGIN PRIVATE KEY-----\\n' + KEY_BODY + '\\n"}',
            "private key block",
        ),
        ("key AKIAZ7QWERTYUIOPASDF", "AWS access key id"),
        (GITHUB_TOKEN, "GitHub token"),
        ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "Slack token"),
        ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "Stripe live key"),
        ("AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "Google API key"),
        ("glpat-" + "aB3dE6gH9jK2mN5pQ8sT", "GitLab token"),
    ],
)
def test_token_formats(text: str, kind: str) -> None:
    assert find_secret(f"# Title\n\n{text}\n") == (kind, 3)


@pytest.mark.parametrize(
    "text",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n<your key here>\n-----END OPENSSH PRIVATE KEY-----",
        "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "task-runner and disk-usage",
    ],
)
def test_placeholders_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None


def test_no_secret_is_found_in_the_real_corpora() -> None:
    """The content check must not take ordinary documentation for a secret."""
    hits = []
    for path in sorted(CORPORA.rglob("*")):
        if path.is_file():
            try:
                found = find_secret(path.read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                continue
            if found:
                hits.append((path.relative_to(CORPORA).as_posix(), found))
    assert not hits


@pytest.mark.slow
def test_a_live_secret_file_is_skipped_by_the_daemon(
    docs: Path, scratch: Path, fake_embedder: CountingEmbedder
) -> None:
    with Harness(docs, scratch / "state", fake_embedder, **_broad(docs)) as h:
        b = h.service.batches_done
        _write(docs, {".env": SECRET_FILES[".env"], "notes.md": SECRET_TEXT["notes.md"]})
        h.settle(b)
        (src,) = h.service.status()["sources"]
        assert {f["path"] for f in src["failed_documents"]} == {".env", "notes.md"}
        assert "hunter2" not in json.dumps(h.service.status())
        h.assert_matches_oracle(scratch)


@pytest.mark.slow
def test_secrets_are_not_searchable_end_to_end(tmp_path: Path) -> None:
    """The real model, the real CLI: ``status`` shows the skip, ``search`` cannot find it."""
    root = tmp_path / "docs"
    root.mkdir()
    _write(root, {"guide.md": "# Guide\n\nDeploy with the staging token.\n", **SECRET_TEXT})
    _write(root, {".env": SECRET_FILES[".env"]})
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"sources:\n  - name: docs\n    root: {root}\n    include: ['**/*']\n")
    state = ["--state-dir", str(tmp_path / "state"), "--config", str(cfg)]
    res = run_cli("resync", *state, timeout=240)
    assert res.returncode == 0, res.stderr
    st = json.loads(run_cli("status", *state, "--json", check=True).stdout)
    failed = {f["path"]: f["error"] for f in st["sources"][0]["failed_documents"]}
    assert set(failed) == {".env", "notes.md", "runbook.md"}
    hits = json.loads(
        run_cli("search", *state, "--json", "CI token hunter2 password", timeout=240).stdout
    )
    assert hits and {h["path"] for h in hits} == {"guide.md"}
