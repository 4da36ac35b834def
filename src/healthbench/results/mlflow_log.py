"""A stored eval run logged to MLflow (``--mlflow``; docs/interop.md): one MLflow run per call, in the
experiment ``$MLFLOW_EXPERIMENT_NAME`` (default ``healthbench``) of the tracking server of
``$MLFLOW_TRACKING_URI`` (default: MLflow's own, ``sqlite:///mlflow.db`` in the current directory).

- parameters: model, judge, dataset and its sha256, profile, grader template sha256, repeats, and the
  bootstrap's seed and resamples (``none`` for a missing value); a panel of judges' run adds ``judges``
  (its members' specs in panel order, a JSON list; ``judge`` is the chair) and ``panel_rule`` (the rule
  its scores were combined by);
- metrics: every numeric key of the metrics document ``--metrics-out`` writes (a panel's
  ``judge_agreement``, ``judge_fleiss_kappa`` and members' ``judge:<label>:*`` included), named by
  `mlflow_metric_name` (``axis:accuracy:ci_lower`` -> ``axis.accuracy.ci_lower``: flat names, valid in
  every MLflow store, the ``./mlruns`` file store included); nulls and the provenance strings are in the
  metrics artifact only;
- artifacts: ``<run>_allresults.json``, ``metrics.json`` (the ``--metrics-out`` file) and
  ``report.html`` (the HTML report).

MLflow (``pip install 'healthbench[mlflow]'``) is imported only when a run is logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from healthbench.defaults import DEFAULT_MLFLOW_EXPERIMENT
from healthbench.errors import ConfigError
from healthbench.results.metrics_out import write_metrics
from healthbench.results.simple_evals import write_allresults
from healthbench.results.views import RunView
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions
from healthbench.store.location import hide_password

MLFLOW_INSTALL_HINT = "--mlflow needs MLflow: pip install 'healthbench[mlflow]'"
METRICS_ARTIFACT = "metrics.json"
REPORT_ARTIFACT = "report.html"
# what a metric name must not hold: what MLflow refuses (colons on Windows too) and "/", which the file
# store makes a folder (``overall_score`` and ``overall_score/n_samples`` cannot both be files)
_REFUSED = re.compile(r"[^\w.\- ]")


class WritesHtml(Protocol):
    """The HTML report (`healthbench.analysis.report.Report`): writes itself to a path."""

    def write(self, path: str | os.PathLike[str]) -> Path: ...


@dataclass(frozen=True)
class MlflowLogged:
    """Where a run was logged: the MLflow run and experiment ids and the tracking URI (password hidden)."""

    run_id: str
    experiment_id: str
    experiment: str
    tracking_uri: str


def require_mlflow() -> None:
    """The one-line `ConfigError` naming the extra when MLflow is not installed (checked before a run
    starts, so that ``run --mlflow`` fails before any model call)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("mlflow") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(MLFLOW_INSTALL_HINT)


def mlflow_metric_name(key: str) -> str:
    """A metrics-document key as an MLflow metric name valid in every MLflow store: each ``:`` becomes
    ``.``, any other character outside letters, digits, ``_ - .`` and space becomes ``_`` (``/`` too:
    the file store makes it a folder), and an empty name or one starting with ``.`` gets a leading ``_``
    (MLflow refuses names that resolve to another path, such as ``..x``)."""
    name = _REFUSED.sub("_", key.replace(":", "."))
    return f"_{name}" if not name or name.startswith(".") else name


def mlflow_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric, finite values of a metrics document under their MLflow names; two keys with the
    same MLflow name are a `ConfigError` (never one value silently dropped)."""
    out: dict[str, float] = {}
    origin: dict[str, str] = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        name = mlflow_metric_name(key)
        if name in origin:
            raise ConfigError(f"metrics {origin[name]!r} and {key!r} have the same MLflow name {name!r}")
        origin[name] = key
        out[name] = float(value)
    return out


def mlflow_params(view: RunView, options: ScoringOptions) -> dict[str, str]:
    """The parameters of a logged run (see the module doc): a panel's ``judges`` and ``panel_rule``
    (the rule in force: `RunView.panel_rule`) after a single judge's, which are unchanged."""
    completions = view.config.completions
    values: dict[str, Any] = {
        "model": view.model_spec or (f"{completions} completions" if completions else None),
        "judge": view.judge_spec,
        "dataset": view.dataset_name,
        "dataset_sha256": view.dataset.get("sha256"),
        "profile": view.profile,
        "grader_template_sha256": view.grader_template_sha256,
        "repeats": view.config.n_repeats,
        "seed": options.seed,
        "n_resamples": options.n_resamples,
    }
    if view.is_panel:
        values.update(judges=json.dumps(view.judge_specs), panel_rule=view.panel_rule)
    return {key: "none" if value is None else str(value) for key, value in values.items()}


def log_to_mlflow(
    view: RunView,
    samples: Sequence[GradedSample],
    score: RunScore,
    metrics: Mapping[str, Any],
    *,
    report: WritesHtml | None = None,
    tracking_uri: str | None = None,
    experiment: str | None = None,
) -> MlflowLogged:
    """Log eval run ``view`` as a new MLflow run: ``samples`` and ``score`` are the run's (as every
    export takes them), ``metrics`` its metrics document (`metrics_out.metrics_document`), ``report``
    the HTML report to attach. ``tracking_uri`` and ``experiment`` default to ``$MLFLOW_TRACKING_URI``
    (else MLflow's default) and ``$MLFLOW_EXPERIMENT_NAME`` (else ``healthbench``).

    A failure is a one-line `ConfigError` naming the tracking URI; the MLflow run, if already created,
    is marked FAILED."""
    require_mlflow()
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient, get_tracking_uri

    uri = tracking_uri or get_tracking_uri()
    name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_MLFLOW_EXPERIMENT
    where = hide_password(uri)
    params = mlflow_params(view, score.options)
    values = mlflow_metrics(metrics)
    run_id: str | None = None
    with _quiet_mlflow():  # its log lines would break our one-line errors; failures are raised
        try:
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(name)
            experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
            run = client.create_run(
                experiment_id,
                run_name=view.name,
                tags={"healthbench.run": view.name, "healthbench.status": view.status},
            )
            run_id = run.info.run_id
            stamp = int(run.info.start_time or 0)
            client.log_batch(
                run_id,
                metrics=[Metric(key, value, stamp, 0) for key, value in values.items()],
                params=[Param(key, value) for key, value in params.items()],
            )
            with tempfile.TemporaryDirectory(prefix="healthbench-mlflow-") as scratch:
                folder = Path(scratch)
                write_allresults(
                    folder / f"{view.name}_allresults.json", samples, score, provenance=view.provenance()
                )
                write_metrics(folder / METRICS_ARTIFACT, metrics)
                if report is not None:
                    report.write(folder / REPORT_ARTIFACT)
                client.log_artifacts(run_id, str(folder))
            client.set_terminated(run_id, "FINISHED")
        except ImportError as exc:  # e.g. alembic, which MLflow's sqlite store needs
            raise ConfigError(f"{MLFLOW_INSTALL_HINT} ({exc})") from None
        # MlflowException, OSError, and the errors of the store's driver (sqlalchemy, requests)
        except Exception as exc:
            if run_id is not None:
                _mark_failed(client, run_id)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"MLflow at {where}: {hide_password(first)}") from None
    return MlflowLogged(run_id, experiment_id, name, where)


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    """MLflow's own log lines (table creation, retried connections) kept off the terminal while it works."""
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _mark_failed(client: Any, run_id: str) -> None:
    with contextlib.suppress(Exception):  # the store that just failed may fail again: the first
        client.set_terminated(run_id, "FAILED")  # error is the one shown
