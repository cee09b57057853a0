"""systemd integration: the unit files, sd_notify, and a test that plays systemd.

``systemd-analyze verify`` checks the units (it needs the ExecStart binary to exist, so
a temporary copy points at the installed ``ingestd``). The process test opens a real
``AF_UNIX`` datagram socket, starts ``ingestd run`` with ``NOTIFY_SOCKET`` and
``WATCHDOG_USEC`` pointing at it, and checks the messages and their order: READY=1
before the first reconcile is done, STATUS= progress, WATCHDOG=1 pings, RELOADING=1
then READY=1 around SIGHUP (an invalid config is refused and logged), STOPPING=1 and
exit 0 on SIGTERM.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from ingestd.daemon.service import systemd
from tests.helpers import REPO, ingestd_cmd

UNITS = REPO / "systemd"
ANALYZE = shutil.which("systemd-analyze")


def _unit_settings(path: Path) -> dict[str, list[str]]:
    """``Key`` -> every value it is given (sections merged; systemd allows repeats)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def _installed_copy(tmp_path: Path) -> Path:
    exe = Path(ingestd_cmd()[0])
    if not exe.name.startswith("ingestd"):
        pytest.skip("the ingestd console script is not installed")
    out = tmp_path / "units"
    out.mkdir()
    for f in UNITS.iterdir():
        if f.suffix in (".service", ".timer"):
            text = f.read_text().replace("/usr/local/bin/ingestd", str(exe))
            text = text.replace("%h/.local/share/ingestd/bin/ingestd", str(exe))  # the user unit
            (out / f.name).write_text(text)
    return out


# -- the unit files -----------------------------------------------------------------------------


def test_service_unit_settings() -> None:
    s = _unit_settings(UNITS / "ingestd.service")
    one = {k: v[-1] for k, v in s.items()}
    assert one["Type"] == "notify"
    assert one["ExecStart"] == "/usr/local/bin/ingestd run --config /etc/ingestd/config.yaml"
    assert one["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert one["Restart"] == "on-failure"
    assert re.fullmatch(r"\d+s", one["WatchdogSec"])
    assert one["StateDirectory"] == one["RuntimeDirectory"] == "ingestd"
    assert one["RuntimeDirectoryMode"] == "0750"  # the ingestd group reaches the socket
    assert one["User"] == one["Group"] == "ingestd"
    assert any("HF_HUB_OFFLINE=1" in v for v in s["Environment"])
    for key, value in {
        "ProtectSystem": "strict",
        "ProtectHome": "read-only",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
    }.items():
        assert one[key] == value, key
    assert "Nice" in one and "CPUWeight" in one and "ReadOnlyPaths" in one
    sysusers = (UNITS / "ingestd.sysusers.conf").read_text()
    assert re.search(r"^u ingestd - .* /var/lib/ingestd$", sysusers, re.M)


def test_user_unit_runs_from_the_home_folder_without_root() -> None:
    """``systemctl --user``: documentation under ``$HOME``, state in ``~/.local/state``."""
    s = _unit_settings(UNITS / "ingestd-user.service")
    one = {k: v[-1] for k, v in s.items()}
    assert one["Type"] == "notify"
    assert one["ExecStart"] == (
        "%h/.local/share/ingestd/bin/ingestd run --config %E/ingestd/config.yaml"
    )
    assert one["UMask"] == "0077" and one["WantedBy"] == "default.target"
    # nothing a user manager cannot do, and no tree of the system unit; no
    # StateDirectory=: systemd 252 puts a user service's under ~/.config, where the
    # CLI would not look (the daemon finds ~/.local/state/ingestd as the CLI does)
    for key in (
        "User",
        "Group",
        "ReadOnlyPaths",
        "ProtectHome",
        "ProtectSystem",
        "StateDirectory",
    ):
        assert key not in s, key
    text = (UNITS / "ingestd-user.service").read_text()
    assert "/srv" not in text and "STATE_DIRECTORY=" not in text


def test_verify_timer_starts_the_verify_service() -> None:
    timer = _unit_settings(UNITS / "ingestd-verify.timer")
    svc = _unit_settings(UNITS / "ingestd-verify.service")
    assert timer["OnCalendar"] and timer["WantedBy"] == ["timers.target"]
    assert svc["Type"] == ["oneshot"]
    assert svc["ExecStart"][0].startswith("/usr/local/bin/ingestd verify")


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    units = _installed_copy(tmp_path)
    files = sorted(str(p) for p in units.iterdir())
    proc = subprocess.run(
        [str(ANALYZE), "verify", "--man=no", *files], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    # unknown keys and bad values are only warnings: none is allowed either
    complaints = [line for line in proc.stderr.splitlines() if str(units) in line]
    assert not complaints, "\n".join(complaints)


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_service_unit_is_hardened(tmp_path: Path) -> None:
    units = _installed_copy(tmp_path)
    proc = subprocess.run(
        [str(ANALYZE), "security", "--offline=yes", str(units / "ingestd.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for ingestd\.service: ([\d.]+)", proc.stdout)
    if m is None:
        pytest.skip(f"systemd-analyze security --offline is not supported: {proc.stderr[:200]}")
    assert float(m.group(1)) <= 3.0, proc.stdout


# -- sd_notify ----------------------------------------------------------------------------------


def _listen(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    return sock


def test_notify_sends_a_datagram(tmp_path: Path) -> None:
    sock = _listen(str(tmp_path / "n.sock"))
    try:
        assert systemd.notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "n.sock")})
        assert sock.recv(4096) == b"READY=1"
        assert systemd.notify("STATUS=indexing é", {"NOTIFY_SOCKET": str(tmp_path / "n.sock")})
        assert sock.recv(4096) == "STATUS=indexing é".encode()
    finally:
        sock.close()


def test_notify_abstract_socket() -> None:
    name = f"ingestd-test-{os.getpid()}-{time.monotonic_ns()}"
    sock = _listen("\0" + name)
    try:
        assert systemd.notify("WATCHDOG=1", {"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096) == b"WATCHDOG=1"
    finally:
        sock.close()


def test_notify_is_a_noop_without_socket_and_never_raises(tmp_path: Path) -> None:
    assert systemd.notify("READY=1", {}) is False
    assert systemd.notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "missing.sock")}) is False


def test_watchdog_is_pinged_at_most_every_quarter_of_watchdog_usec_or_second() -> None:
    # so that the gap between two pings stays well under half of WATCHDOG_USEC
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 1.0
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "2000000"}) == 0.5
    assert systemd.watchdog_interval({}) is None
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "junk"}) is None
    mine = {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid())}
    assert systemd.watchdog_interval(mine) == 0.25
    assert systemd.watchdog_interval({**mine, "WATCHDOG_PID": "1"}) is None


# -- playing systemd ------------------------------------------------------------------------------


class _Systemd:
    """The notify socket's side: collects datagrams with their arrival times."""

    def __init__(self, path: Path) -> None:
        self.sock = _listen(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []

    def pump(self) -> None:
        """Read what arrives for up to half a second (pings may never pause longer)."""
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            try:
                self.messages.append(self.sock.recv(65536).decode())
            except TimeoutError:
                return

    def wait(
        self,
        pred: object,
        timeout: float,
        proc: subprocess.Popen[bytes],
        log: Path,
        start: int = 0,
    ) -> int:
        """Wait until a message from index ``start`` on satisfies ``pred``; returns its index."""
        deadline = time.monotonic() + timeout
        seen = start
        while time.monotonic() < deadline:
            self.pump()
            for i in range(seen, len(self.messages)):
                if pred(self.messages[i]):  # type: ignore[operator]
                    return i
            seen = len(self.messages)
            if proc.poll() is not None:
                break
        raise AssertionError(
            f"no matching message within {timeout} s (exit {proc.poll()}); got "
            f"{self.messages[-20:]}\n--- log ---\n{log.read_text()[-3000:]}"
        )


def _config(path: Path, root: Path, txt_max_tokens: int) -> None:
    path.write_text(
        f"""\
sources:
  - name: docs
    root: {root}
rules:
  - match: ["*.md"]
    chunker: markdown
  - match: ["*.txt"]
    chunker: token
    params: {{max_tokens: {txt_max_tokens}, overlap: 4}}
watch:
  debounce_ms: 100
  rescan_interval_s: 0
"""
    )


@pytest.mark.slow
def test_ingestd_run_speaks_sd_notify(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "intro.md").write_text("# Intro\n\nThe collector receives traces and metrics.\n")
    (root / "notes.txt").write_text("Exporters send data to a backend. " * 12)
    cfg = tmp_path / "config.yaml"
    _config(cfg, root, 64)
    notify = _Systemd(tmp_path / "notify.sock")
    log = tmp_path / "ingestd.log"
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(tmp_path / "notify.sock"),
        "WATCHDOG_USEC": "600000",  # ping at least every 0.3 s (at most every 0.15 s)
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("JOURNAL_STREAM", None)
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*ingestd_cmd(), "run", "--config", str(cfg), "--state-dir", str(tmp_path / "state")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        m = notify
        ready = m.wait(lambda s: s == "READY=1", 60, proc, log)
        synced = m.wait(lambda s: s.startswith("STATUS=watching"), 90, proc, log)
        assert ready < synced, "READY=1 must come before the first reconcile is done"
        i = m.wait(lambda s: s == "WATCHDOG=1", 5, proc, log, synced)
        i = m.wait(lambda s: s == "WATCHDOG=1", 5, proc, log, i + 1)
        m.wait(lambda s: s == "WATCHDOG=1", 5, proc, log, i + 1)  # keeps pinging when idle

        # an invalid config is refused: the old one keeps running
        cfg.write_text("sources: [\n")
        n = len(m.messages)
        proc.send_signal(signal.SIGHUP)
        i = m.wait(lambda s: s == "RELOADING=1", 20, proc, log, n)
        j = m.wait(lambda s: s == "READY=1", 20, proc, log, i)
        assert proc.poll() is None
        deadline = time.monotonic() + 10
        while "reload failed" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "reload failed, keeping the running config" in log.read_text()
        assert "invalid YAML" in log.read_text()

        # a changed rule is applied
        _config(cfg, root, 32)
        n = len(m.messages)
        proc.send_signal(signal.SIGHUP)
        i = m.wait(lambda s: s == "RELOADING=1", 20, proc, log, n)
        j = m.wait(lambda s: s == "READY=1", 20, proc, log, i)
        m.wait(lambda s: s.startswith("STATUS=watching"), 60, proc, log, j)
        text = log.read_text()
        assert "configuration reloaded" in text
        assert re.search(
            r"source docs in sync: 1 indexed", text.split("configuration reloaded")[-1]
        )

        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        assert code == 0, log.read_text()[-3000:]
        assert time.monotonic() - t0 < 30
        m.wait(lambda s: s == "STOPPING=1", 5, proc, log, j)
        statuses = [s for s in m.messages if s.startswith("STATUS=")]
        assert statuses, m.messages
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        notify.sock.close()
