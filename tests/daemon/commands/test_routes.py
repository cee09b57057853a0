"""The control commands' routing table: where each command runs, and how urgently."""

from __future__ import annotations

import pytest

from ingestd.daemon.commands.evaluate import evaluate as evaluate_cmd
from ingestd.daemon.commands.query.search import wire_answer as search_cmd
from ingestd.daemon.commands.routes import ROUTES, Priority, Route, Thread
from ingestd.daemon.evaluation.runs import eval_cancel, eval_progress


def test_every_command_the_daemon_answers_has_one_route() -> None:
    assert sorted(ROUTES) == [
        "chunks",
        "eval",
        "eval-cancel",
        "eval-progress",
        "forget",
        "migrate",
        "read",
        "resync",
        "search",
        "status",
        "sync",
        "verify",
    ]
    assert all(isinstance(r, Route) for r in ROUTES.values())


def test_searches_reads_and_migrate_are_urgent_other_engine_commands_wait() -> None:
    on_engine = {n: r for n, r in ROUTES.items() if r.thread is Thread.ENGINE}
    assert {n for n, r in on_engine.items() if r.priority is Priority.URGENT} == {
        "search",
        "read",
        "chunks",
        "migrate",
    }
    assert {n for n, r in on_engine.items() if r.priority is Priority.CHANGES} == {
        "eval",
        "resync",
        "sync",
        "verify",
        "forget",
    }
    assert ROUTES["search"].fn is search_cmd
    assert ROUTES["eval"].fn is evaluate_cmd
    assert [n for n, r in ROUTES.items() if r.rescans] == ["migrate"]


class _Daemon:
    def status(self) -> dict[str, str]:
        return {"answered": "off the engine thread"}


def test_status_and_eval_watching_are_answered_on_the_control_thread() -> None:
    control = {n for n, r in ROUTES.items() if r.thread is Thread.CONTROL}
    assert control == {"status", "eval-progress", "eval-cancel"}
    assert ROUTES["status"].fn(_Daemon()) == {"answered": "off the engine thread"}
    assert ROUTES["eval-progress"].fn(_Daemon(), run="0123abcd") == eval_progress("0123abcd")
    assert ROUTES["eval-cancel"].fn(_Daemon(), run="0123abcd") == eval_cancel("0123abcd")


def test_a_search_request_with_an_unknown_argument_is_refused_naming_it() -> None:
    from ingestd.daemon.wire.errors import DaemonError

    with pytest.raises(DaemonError, match="unknown search argument.*: colour") as got:
        ROUTES["search"].fn(None, query="q", colour="red")
    assert got.value.exit_code == 2
