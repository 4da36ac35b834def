"""Command line: each module registers its commands on `healthbench.cli.app.app`; no logic lives here.

`COMMANDS` says which module defines each top-level command; modules are imported only when their
command runs (see `healthbench.cli.app.LazyGroup`), so ``healthbench --help`` stays fast. A new
command module adds its commands here.
"""

from healthbench.cli.app import LazyCommand, app, main

COMMANDS: dict[str, LazyCommand] = {
    "analyze": LazyCommand(
        "healthbench.cli.analysis_cmd",
        "Theme and axis tables with 95% CIs for many runs and models, written to --out.",
    ),
    "compare": LazyCommand(
        "healthbench.cli.analysis_cmd",
        "Paired comparison of B against A, with an exit code a CI job can gate on.",
    ),
    "data": LazyCommand(
        "healthbench.cli.data_cmd", "Download, describe and validate HealthBench dataset files."
    ),
    "fake-server": LazyCommand(
        "healthbench.cli.fake_server_cmd",
        "Run an OpenAI- and Anthropic-compatible fake model server (deterministic answers, injected faults).",
    ),
    "import": LazyCommand(
        "healthbench.cli.interop_cmd",
        "Re-score FILE (simple-evals' rules, our bootstrap), print the summary, write the outputs.",
    ),
    "meta-eval": LazyCommand(
        "healthbench.cli.meta_eval_cmd",
        "Grade the meta-eval rows with a judge (or several) and measure their agreement with physicians.",
    ),
    "regrade": LazyCommand(
        "healthbench.cli.run_cmd",
        "Grade an existing run's answers with another judge or template, without re-sampling.",
    ),
    "report": LazyCommand(
        "healthbench.cli.report_cmd",
        "Write one self-contained HTML report (scores, charts, conversation browser) that works offline.",
    ),
    "results": LazyCommand(
        "healthbench.cli.results_cmd", "Show a stored run's scores again and export them (no model call)."
    ),
    "run": LazyCommand(
        "healthbench.cli.run_cmd",
        "Sample a model on HealthBench, grade every rubric criterion with a judge, and report the scores.",
    ),
    "runs": LazyCommand(
        "healthbench.cli.results_cmd",
        "List the runs in the store (a store that does not exist yet lists nothing and is not created).",
    ),
    "serve": LazyCommand(
        "healthbench.cli.serve_cmd",
        "Run the job service: HealthBench jobs over HTTP (OpenAPI at /docs), workers in the background.",
    ),
    "new-token": LazyCommand(
        "healthbench.cli.serve_cmd",
        "Make an API token for the job service; it is printed once and only its hash is stored.",
    ),
    "tokens": LazyCommand(
        "healthbench.cli.serve_cmd",
        "List the job service's API tokens: id (start of the hash), workspaces, label, creation time.",
    ),
    "revoke-token": LazyCommand(
        "healthbench.cli.serve_cmd",
        "Revoke an API token of the job service (a running service stops accepting it within seconds).",
    ),
}


def load_all() -> None:
    """Import every command module (for the generated CLI reference and its tests)."""
    import importlib

    for spec in COMMANDS.values():
        importlib.import_module(spec.module)


__all__ = ["COMMANDS", "app", "load_all", "main"]
