"""healthbench: run, grade and analyse HealthBench on any chat model, scored exactly as simple-evals.

The Python API mirrors the CLI::

    from healthbench import Store, build_config, run_eval, score_stored_run
    store = Store("runs.db")
    outcome = run_eval(build_config({"dataset": "demo"}), store=store, name="smoke")
    print(score_stored_run(store, outcome.run).metrics()["overall_score"])

Heavy modules are imported on first use so ``import healthbench`` stays fast and never needs the
optional extras.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_inputs": "healthbench.analysis.inputs",
    "analyze": "healthbench.analysis.analyze",
    "write_analysis": "healthbench.analysis.analyze",
    "compare_runs": "healthbench.analysis.compare",
    "Conversation": "healthbench.data.schema",
    "MetaEvalRecord": "healthbench.data.schema",
    "RubricItem": "healthbench.data.schema",
    "load_conversations": "healthbench.data.sources",
    "load_meta_eval": "healthbench.data.sources",
    "select": "healthbench.data.subset",
    "Verdict": "healthbench.scoring.rubric",
    "conversation_metrics": "healthbench.scoring.rubric",
    "GradedSample": "healthbench.scoring.run_score",
    "ScoringOptions": "healthbench.scoring.run_score",
    "score_run": "healthbench.scoring.run_score",
    "aggregate": "healthbench.scoring.stats",
    "meta_metrics": "healthbench.scoring.meta",
    "Store": "healthbench.store",
    "RunConfig": "healthbench.config",
    "ModelConfig": "healthbench.config",
    "build_config": "healthbench.config",
    "run_eval": "healthbench.runner.run",
    "resume_run": "healthbench.runner.run",
    "regrade": "healthbench.runner.run",
    "graded_samples": "healthbench.results.run_results",
    "score_stored_run": "healthbench.results.run_results",
    "RunView": "healthbench.results.views",
    "aggregate_scores": "healthbench.results.aggregate",
    "iter_row_scores": "healthbench.results.rows",
    "read_allresults": "healthbench.results.simple_evals",
    "write_allresults": "healthbench.results.simple_evals",
    "build_report": "healthbench.analysis.report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'healthbench' has no attribute {name!r}")
