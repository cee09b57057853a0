"""The commands that help choose chunking rules: ``chunk`` and ``eval``.

``chunk`` previews one file's chunks (:mod:`~ingestd.daemon.cli.preview`) without a
store; ``eval`` scores rule sets and search modes on questions
(:mod:`ingestd.daemon.evaluation`).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click

from ingestd.daemon.cli.shared.errors import Fatal, handle_errors
from ingestd.daemon.cli.shared.options import common_options, echo_json
from ingestd.daemon.cli.shared.state import load, manifest_reader, runner

__all__ = ["chunk_cmd", "eval_cmd"]


@click.command("chunk")
@common_options
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--rule", "rule_name", help="Use this configured rule (default: the matching one).")
@click.option("--chunker", "chunker_name", help="Use this strategy instead of a rule.")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Strategy option (with --chunker); repeatable. Values are YAML.",
)
@click.option("--stats", is_flag=True, help="Print count and min/mean/max tokens instead.")
@handle_errors
def chunk_cmd(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    file: Path,
    rule_name: str | None,
    chunker_name: str | None,
    params: tuple[str, ...],
    stats: bool,
) -> None:
    """Preview the chunks of FILE as JSON lines; needs no daemon and no store.

    `source`, `path` and ids are those `resync` would give: from the configured or
    indexed source whose root holds FILE (the deepest one), else from the current
    directory as the source root.

    Example:

    
        ingestd chunk docs/install.md | jq -c '{start_line, n_tokens, heading_path}'
        ingestd chunk --chunker token --param max_tokens=128 --param overlap=16 --stats README.md
    """
    from ingestd.chunkers.text import UndecodableError
    from ingestd.daemon.cli.preview import preview

    cfg, sd = load(config_path, (), state_dir, log_level)
    known: list[tuple[str, str]] = []
    with contextlib.suppress(Fatal), manifest_reader(cfg, sd) as m:
        known = [(s["name"], s["root"]) for s in m.sources()] if m is not None else []
    try:
        for line in preview(
            cfg,
            file,
            rule_name=rule_name,
            chunker_name=chunker_name,
            params=params,
            stats=stats,
            known=known,
        ):
            click.echo(json.dumps(line, ensure_ascii=False))
    except UndecodableError as exc:  # the file, not the command, is at fault
        raise Fatal(f"{file}: {exc}", 1) from None
    except ValueError as exc:
        raise Fatal(str(exc), 2) from None


@click.command("eval")
@common_options
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--corpus",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The folder the questions' paths are relative to.",
)
@click.option(
    "--rules",
    "rule_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A YAML file with a `rules:` list as in the config; repeatable, one row each "
    "[default: the configured rules].",
)
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["hybrid", "dense", "sparse"]),
    help="Search mode; repeatable [default: hybrid, dense and sparse].",
)
@click.option(
    "--resamples",
    default=10_000,
    show_default=True,
    type=click.IntRange(100, 1_000_000),
    help="Bootstrap samples of each interval.",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap samples.")
@click.option(
    "--qrels",
    "qrels_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Graded page judgements by question id (JSON lines with qrels, or TREC qrels "
    "lines); a JSON line with a question adds it; repeatable.",
)
@click.option(
    "--run",
    "run_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TREC run file (QID Q0 PATH RANK SCORE TAG) of another system, scored at page "
    "level beside ingestd; repeatable.",
)
@click.option(
    "--save-run",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the first row's page ranking as a TREC run file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON, ranks included.")
@handle_errors
def eval_cmd(
    config_path: Path | None,
    state_dir: Path | None,
    log_level: str | None,
    questions: Path,
    corpus: Path,
    rule_files: tuple[Path, ...],
    modes: tuple[str, ...],
    resamples: int,
    seed: int,
    qrels_files: tuple[Path, ...],
    run_files: tuple[Path, ...],
    save_run: Path | None,
    as_json: bool,
) -> None:
    """Score chunking rules and search modes on QUESTIONS (JSON lines) over a corpus.

    Indexes the corpus with each rule set into a throw-away collection (through the
    daemon when one holds the state dir, else in a scratch state dir; vectors come from
    the state dir's embedding cache), asks every question in each mode and prints
    recall@1/5/10 and MRR@10 at path level (a hit in the gold file) and span level (a
    hit covering the whole answer), and each row's difference to the first row with
    its paired-bootstrap 95% interval. docs/guides/evaluation.md gives the format.

    Example:

    
        ingestd eval qa.jsonl --corpus ./docs
        ingestd eval qa.jsonl --corpus ./docs --rules small.yaml --rules big.yaml --mode hybrid
    """
    from ingestd.daemon.cli import eval_client as eval_cli
    from ingestd.daemon.config import ConfigError
    from ingestd.daemon.evaluation import report as eval_report
    from ingestd.daemon.evaluation.evaluate import MODES, EvalError, EvalPlan
    from ingestd.daemon.evaluation.questions import (
        QuestionError,
        add_judgements,
        load_questions,
    )
    from ingestd.daemon.evaluation.rulesets import rule_sets
    from ingestd.daemon.evaluation.trec import read_run, write_run

    cfg, sd = load(config_path, (), state_dir, log_level)
    try:
        sets = rule_sets(rule_files, cfg, config_path)
        qs = load_questions(questions, corpus)
        for f in qrels_files:
            qs = add_judgements(qs, f)
        runs = {f.stem: read_run(f) for f in run_files}
    except (ConfigError, QuestionError) as exc:
        raise Fatal(str(exc), 2) from None
    try:
        plan = EvalPlan(corpus, qs, sets, modes or MODES)
        raw = eval_cli.run(cfg, sd, plan, runner=runner(sd, None))
    except EvalError as exc:
        raise Fatal(str(exc)) from None
    report = eval_report.summarise(
        raw, qs, resamples=resamples, seed=seed, question_set=str(questions), runs=runs
    )
    if save_run is not None:
        first = raw["rule_sets"][0]
        mode = raw["modes"][0]
        ranking = dict(zip([q.id for q in qs], first["pages"][mode], strict=True))
        write_run(save_run, ranking, f"ingestd-{mode}")
    if as_json:
        echo_json(report)
    else:
        click.echo(eval_report.format_table(report))
