"""Judge-error-corrected scores of a stored run, from a stored meta-eval run of the same judge.

`corrected_scores(store, run_name, meta_run_name)` is the one entry point (CLI ``healthbench results
RUN --correct-with META_RUN``, and any other reader). The method and its limits: docs/correction.md;
the math: `healthbench.scoring.correction`.

A run graded by a panel of judges is corrected with a meta-eval run of the same panel: its error rates
are the panel's, its verdict on each meta-eval row combined from the members' under the rule the run's
scores use (`judge_labels`; `healthbench.scoring.panel_meta.panel_verdicts`, as the panel's meta-eval
measures each rule), then counted against the physicians exactly as a single judge's verdicts are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from healthbench.defaults import DEFAULT_PANEL_RULE
from healthbench.errors import RunError, a_kind
from healthbench.results.meta_results import stored_labels, stored_verdicts
from healthbench.results.views import RunView
from healthbench.scoring.correction import (
    DEFAULT_EPSILON,
    DEFAULT_MIN_ROWS,
    CorrectionError,
    CorrectionResult,
    correct,
    error_model,
    judge_cells,
    key_tables,
    pooled_uses,
)
from healthbench.scoring.panel import Calibration, PanelRule
from healthbench.scoring.panel_meta import panel_verdicts
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.stats import BootstrapOptions, conversation_clusters
from healthbench.store.runs import RunRecord, Store

if TYPE_CHECKING:
    from healthbench.data.schema import MetaEvalRecord


def corrected_scores(
    store: Store,
    run_name: str,
    meta_run_name: str,
    *,
    options: BootstrapOptions | None = None,
    min_rows: int = DEFAULT_MIN_ROWS,
    epsilon: float = DEFAULT_EPSILON,
    panel_rule: PanelRule | None = None,
    calibration: Calibration | None = None,
) -> CorrectionResult:
    """The run's raw and corrected overall, example-tag and rubric-tag scores with joint bootstrap CIs.

    ``options`` (resamples, seed, CI level) default to the run's own scoring settings. A panel's run is
    scored, and its error rates measured, under ``panel_rule`` (None: the run's stored rule) with, for
    the calibrated rule, ``calibration`` (None: the run's stored ``calibrate_with`` runs'), as
    `RunView.with_panel`. Raises `RunError` (one line) when the meta-eval run is of another judge or
    panel, settings or grader prompt, or when the correction is undefined or unstable for these rows.
    """
    run, meta = store.require_run(run_name), store.require_run(meta_run_name)
    if run.kind != "eval":
        raise RunError(f"run {run_name!r} is {a_kind(run.kind)} run; only eval runs can be corrected")
    if meta.kind != "meta_eval":
        raise RunError(f"--correct-with needs a meta-eval run; {meta_run_name!r} is {a_kind(meta.kind)} run")
    check_same_judge(run, meta)
    view = RunView.of(store, run).with_panel(panel_rule, calibration)
    options = options or view.scoring_options()
    rows, labels = judge_labels(store, meta, view)
    cells = judge_cells([r.category for r in rows], [r.binary_labels for r in rows], labels)
    samples = view.graded_samples()
    try:
        model = error_model(cells, min_rows=min_rows, epsilon=epsilon)
        conversations = [s.conversation for s in samples]
        tables = key_tables(conversations, [s.verdicts for s in samples], model)
        if OVERALL not in tables:
            raise CorrectionError(f"run {run_name!r} has no graded conversation")
        result = correct(
            tables,
            len(tables[OVERALL].rows),
            cells,
            model,
            options=options,
            epsilon=epsilon,
            clusters=conversation_clusters([s.conversation.prompt_id for s in samples if not s.ungraded]),
        )
        graded = [c for c, v in zip(conversations, samples, strict=True) if not v.ungraded]
        return replace(result, pooled=pooled_uses(graded, model))
    except CorrectionError as exc:
        raise RunError(f"{run_name!r} corrected with {meta_run_name!r}: {exc}") from None


def judge_labels(
    store: Store, meta: RunRecord, view: RunView
) -> tuple[list[MetaEvalRecord], list[bool | None]]:
    """The meta-eval rows (repeated ``n_repeats`` times) and, on each, the verdict of what graded the
    run of ``view`` (None = ungraded): a single judge's own; a panel's combined from its members' votes
    (in the run's panel order) by the run's rule in force (`panel_verdicts`; the calibrated rule weighs
    them by the run's calibration, the rates its own verdicts were combined with)."""
    if not view.is_panel:
        return stored_labels(store, meta)
    rows, verdicts = stored_verdicts(store, meta)
    members = {label: verdicts[label] for label in view.members}
    combined = panel_verdicts(rows, members, view.panel_rule, calibration=view.calibration)
    return rows, [verdict.criteria_met for verdict in combined]


def judge_identity(run: RunRecord) -> dict[str, Any]:
    """What defines a judge's verdicts: model, endpoint, settings, structured output, grader prompt."""
    identity = run.config.get("identity", {})
    return {
        "judge": identity.get("judge"),
        "judge_structured_output": identity.get("judge_structured_output"),
        "grader prompt": run.config.get("grader_template_sha256"),
    }


def grading_setup(run: RunRecord, rule: PanelRule | None = None) -> dict[str, Any]:
    """The full grading setup two runs must share for their scores to be comparable: the judge's
    identity (`judge_identity`: model, endpoint, settings, structured output, grader prompt) and the
    run's profile. A panel's adds ``judges``, its members' identities in panel order (`judge_members`),
    and ``panel_rule``, the rule its verdicts are combined by: ``rule`` (the one in force, e.g.
    `RunView.panel_rule`), else the run's stored one. A single judge's setup has the first keys only,
    as before panels (``rule`` is then ignored)."""
    setup = {**judge_identity(run), "profile": run.config.get("run", {}).get("profile")}
    members = judge_members(run)
    if len(members) > 1:
        stored = run.config.get("run", {}).get("scoring", {}).get("panel") or DEFAULT_PANEL_RULE
        setup.update(judges=list(members.values()), panel_rule=rule or stored)
    return setup


def setup_differences(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """What differs between two `grading_setup` values, in words (judge model, endpoint, ...; for
    panels: ``panel members`` (another set of judges), ``panel order`` (the same judges in another
    order: another chair, other ties), a member's ``<label>'s endpoint`` or ``settings``, and
    ``panel rule``). Two panels' chairs are compared as members, not as the judge."""
    names = {"spec": "judge model", "url": "judge endpoint", "settings": "judge settings"}
    panels = "judges" in first and "judges" in second
    out: list[str] = []
    for key in dict.fromkeys([*first, *second]):
        a, b = first.get(key), second.get(key)
        if key == "judge" and panels:
            continue
        if key == "judge" and isinstance(a, dict) and isinstance(b, dict):
            out += [names.get(k, f"judge {k}") for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        elif key == "judges":
            out += _member_differences(a or [], b or [])
        elif key == "panel_rule":
            out += ["panel rule"] if panels and a != b else []
        elif a != b:
            out.append(key.replace("_", " "))
    return out


def _member_differences(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[str]:
    """`setup_differences` of two panels' members (a single judge has none: ``panel members``)."""
    labels = [str(m.get("spec")) for m in first], [str(m.get("spec")) for m in second]
    if sorted(labels[0]) != sorted(labels[1]):
        return ["panel members"]
    if labels[0] != labels[1]:
        return ["panel order"]
    names = {"url": "endpoint", "settings": "settings"}
    return [
        f"{a.get('spec')}'s {names.get(key, key)}"
        for a, b in zip(first, second, strict=True)
        for key in dict.fromkeys([*a, *b])
        if a.get(key) != b.get(key)
    ]


def setup_judges(setup: dict[str, Any]) -> str:
    """Who graded, from a `grading_setup`: ``judges a, b, c by majority`` or ``judge a``."""
    if "judges" in setup:
        labels = ", ".join(str(m.get("spec")) for m in setup["judges"])
        return f"judges {labels} by {setup.get('panel_rule')}"
    return f"judge {(setup.get('judge') or {}).get('spec')}"


def judge_members(run: RunRecord) -> dict[str, Any]:
    """Each judge that graded ``run`` by label (its spec text), the chair first, with its identity
    (model, endpoint, settings); a single judge is a panel of one."""
    stored, identity = run.config.get("run", {}), run.config.get("identity", {})
    labels = [str(judge.get("spec")) for judge in stored.get("judges") or [stored.get("judge") or {}]]
    return dict(zip(labels, identity.get("judges") or [identity.get("judge")], strict=True))


def check_same_judge(run: RunRecord, meta: RunRecord) -> None:
    """Refuse a meta-eval run whose judge (or panel) differs from the run's in any way that changes
    verdicts."""
    if len(judge_members(run)) > 1 or len(judge_members(meta)) > 1:
        check_same_panel(run, meta)
        return
    ours, theirs = judge_identity(run), judge_identity(meta)
    changed = [name for name in ours if ours[name] != theirs[name]]
    if changed:
        spec = (theirs["judge"] or {}).get("spec"), (ours["judge"] or {}).get("spec")
        raise RunError(
            f"meta-eval run {meta.name!r} measured another judge than run {run.name!r} "
            f"(differs in {', '.join(changed)}: {spec[0]} vs {spec[1]}); correct with a meta-eval run of "
            "the same judge, settings and grader prompt"
        )


def check_same_panel(run: RunRecord, meta: RunRecord) -> None:
    """Refuse a meta-eval run whose judges are not the run's panel (the same labels, whatever their
    order: the run's order is the one the votes are combined in), or whose members' endpoint or
    settings, structured output or grader prompt differ from the run's."""
    ours, theirs = judge_members(run), judge_members(meta)
    if set(ours) != set(theirs):
        raise RunError(
            f"meta-eval run {meta.name!r} measured {_judges(theirs)}, run {run.name!r} is graded by "
            f"{_judges(ours)}; correct with a meta-eval run of the same judges, settings and grader prompt"
        )
    names = {"spec": "model", "url": "endpoint", "settings": "settings"}
    changed = [
        f"{label}'s {names.get(key, key)}"
        for label, identity in ours.items()
        for key in dict.fromkeys([*(identity or {}), *(theirs[label] or {})])
        if (identity or {}).get(key) != (theirs[label] or {}).get(key)
    ]
    setup, measured = judge_identity(run), judge_identity(meta)
    changed += [
        name.replace("_", " ")
        for name in ("judge_structured_output", "grader prompt")
        if setup[name] != measured[name]
    ]
    if changed:
        raise RunError(
            f"meta-eval run {meta.name!r} measured another panel than run {run.name!r} (differs in "
            f"{', '.join(changed)}); correct with a meta-eval run of the same judges, settings and "
            "grader prompt"
        )


def _judges(members: dict[str, Any]) -> str:
    """``judge a alone`` or ``a panel of 3 judges (a, b, c)``."""
    if len(members) == 1:
        return f"judge {next(iter(members))} alone"
    return f"a panel of {len(members)} judges ({', '.join(members)})"
