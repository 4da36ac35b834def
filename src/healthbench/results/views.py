"""The typed read layer over a stored run: every reader (CLI, service, client, analysis, report)
reads a run through a `RunView`, never through the store's tables.

A view parses the run's stored config once into `RunConfig`, and gives its dataset info, grader
template sha, conversations (or meta-eval rows), graded samples (all at once or streamed in pages),
scores and usage/cost totals.

A run graded by a panel of judges (docs/panels.md) stores each member's verdicts; its samples carry
every member's (`StoredSample.members`) and the panel's, combined by the panel rule at read time
(`RunView.with_panel` overrides the stored rule: no call is made). A single judge's verdicts pass
through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from healthbench.errors import RunError, a_kind
from healthbench.models.tally import CallTally
from healthbench.scoring.verdict import Verdict
from healthbench.store.runs import RunRecord, SampleRow, Store

if TYPE_CHECKING:  # loaded on first use: listing runs (`healthbench runs`) needs neither pydantic nor numpy
    from healthbench.config import RunConfig
    from healthbench.data.schema import Conversation, MetaEvalRecord
    from healthbench.data.shapes import ClassicLine
    from healthbench.scoring.panel import Calibration, PanelRule
    from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions

    # a stored item of `RunView._pages`: id, conversation, repeat, its sample, the page's verdicts
    _StoredItem = tuple[
        str, ClassicLine, int, SampleRow | None, dict[tuple[str, int, str], tuple[str, str | None]]
    ]

VERDICTS = {"met": Verdict.MET, "not_met": Verdict.NOT_MET, "ungraded": Verdict.UNGRADED}
VERDICT_NAMES = {verdict: name for name, verdict in VERDICTS.items()}
PAGE_SIZE = 500


@dataclass(frozen=True)
class StoredSample:
    """One (conversation, repeat) of a run: the graded sample the scoring core takes, the stored
    sample row behind it (None when the conversation was never sampled) and its item id (the prompt
    id, except in baseline runs, where one prompt can have several graded completions)."""

    graded: GradedSample  # the run's verdicts: the panel's (a single judge's own)
    sample: SampleRow | None
    item_id: str
    # each member's own verdicts and explanations, by label in panel order (the chair first); a single
    # judge's: its one member, whose sample is `graded` itself
    members: Mapping[str, GradedSample] = field(default_factory=dict)


@dataclass(frozen=True)
class UsageTotals:
    """Calls, tokens and cost of each role over a run."""

    candidate: CallTally
    judge: CallTally

    @property
    def cost(self) -> float:
        return self.candidate.cost + self.judge.cost


@dataclass(frozen=True)
class RunView:
    """A stored run, read-only. Build it with `RunView.open(store, name)` or `RunView.of(store, run)`."""

    store: Store
    record: RunRecord
    # the panel rule and calibration asked for (`with_panel`); None: the run's stored settings
    rule_override: PanelRule | None = None
    calibration_override: Calibration | None = None

    @classmethod
    def open(cls, store: Store, name: str) -> RunView:
        """The view of run ``name``; a `RunError` naming the store if there is none."""
        return cls.of(store, store.require_run(name))

    @classmethod
    def of(cls, store: Store, run: RunRecord) -> RunView:
        return cls(store, run)

    def with_panel(self, rule: PanelRule | None, calibration: Calibration | None = None) -> RunView:
        """This view with its panel's verdicts combined by ``rule`` (None: the stored one) and, for the
        calibrated rule, ``calibration`` (None: from the stored ``calibrate_with`` runs)."""
        return replace(self, rule_override=rule, calibration_override=calibration)

    @cached_property
    def config(self) -> RunConfig:
        """The run's settings as stored, parsed once on first use (what ``runs`` lists needs none)."""
        from healthbench.config import RunConfig

        return RunConfig.model_validate(self.record.config["run"])

    # -- what the run is ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.record.name

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def dataset(self) -> dict[str, Any]:
        """Variant, source, path, sha256 and size of the dataset the run was built from."""
        return dict(self.record.config.get("dataset", {}))

    @property
    def dataset_name(self) -> str:
        """The dataset as exports name it: a local file's name (``--data FILE``; its sha256 is in
        `dataset`), else the variant (``demo``, ``hard``, ``imported``...)."""
        dataset = self.dataset
        if dataset.get("source") == "local" and dataset.get("path"):
            return Path(str(dataset["path"])).name
        return str(dataset.get("variant") or Path(str(dataset.get("path") or "?")).name)

    @property
    def grader_template_sha256(self) -> str | None:
        sha = self.record.config.get("grader_template_sha256")
        return str(sha) if sha is not None else None

    @property
    def profile(self) -> str | None:
        """The reference profile the run was made under (None: our defaults; docs/profiles.md); read
        as `model_spec` is, without parsing the config."""
        profile = self.record.config["run"].get("profile")
        return str(profile) if profile is not None else None

    def provenance(self) -> dict[str, str | None]:
        """How the verdicts were asked for: profile and grader prompt sha256 (in every export)."""
        return {"profile": self.profile, "grader_template_sha256": self.grader_template_sha256}

    def describe_provenance(self) -> str:
        """``profile simple-evals · grader prompt 2adffd51fd25`` for titles and summaries."""
        sha = self.grader_template_sha256 or "unknown"
        return f"profile {self.profile or 'none'} · grader prompt {sha[:12]}"

    @property
    def model_spec(self) -> str | None:
        """The candidate's spec as stored (the stored settings are `RunConfig`'s own dump, so this is
        ``config.model.spec`` without parsing the whole config); None for a run without one."""
        model = self.record.config["run"].get("model")
        return str(model["spec"]) if model else None

    @property
    def completions(self) -> str | None:
        """What a run without a candidate grades (``physician`` or ``references`` completions; read as
        `model_spec` is), None for any other run."""
        completions = self.record.config["run"].get("completions")
        return str(completions) if completions is not None else None

    @property
    def judge_spec(self) -> str:
        """The judge's spec as stored (``config.judge.spec``, read as `model_spec` is)."""
        return str(self.record.config["run"]["judge"]["spec"])

    # -- its judges --------------------------------------------------------------------------
    @property
    def members(self) -> list[str]:
        """The labels of the judges that graded the run, the chair first (one for a single judge)."""
        return [member.label for member in self.config.panel]

    @property
    def is_panel(self) -> bool:
        return len(self.config.panel) > 1

    @property
    def panel_rule(self) -> PanelRule:
        """How the members' verdicts become the run's: the rule asked for, else the stored one."""
        return self.rule_override or self.config.scoring.panel

    @cached_property
    def calibration(self) -> Calibration | None:
        """What the calibrated rule weighs members by: the one given to `with_panel`, else the stored
        ``calibrate_with`` meta-eval runs'; None for any other rule or a single judge. A `RunError`
        naming ``--calibrate-with`` when the calibrated rule has none."""
        if not self.is_panel or self.panel_rule != "calibrated":
            return None
        calibration = self.calibration_override
        if calibration is None:
            names = self.config.scoring.calibrate_with
            if not names:
                raise RunError(
                    f"the calibrated panel rule needs the members' meta-eval runs: give --calibrate-with "
                    f"META_RUN... (run {self.name!r} stores none)"
                )
            from healthbench.results.calibration import load_calibration

            calibration = load_calibration(self.store, names)
        missing = [label for label in self.members if label not in calibration.rates]
        if missing:
            raise RunError(
                f"no meta-eval run measured judge {missing[0]!r} of run {self.name!r}: give --calibrate-with "
                "a meta-eval run of every member"
            )
        return calibration

    @property
    def judge_specs(self) -> list[str]:
        """Every member's spec as stored, the chair first (read as `judge_spec` is, without parsing)."""
        judges = self.record.config["run"].get("judges") or []
        return [str(member["spec"]) for member in judges] or [self.judge_spec]

    def require_kind(self, kind: str) -> RunView:
        if self.kind != kind:
            wanted = "an eval" if kind == "eval" else "a meta-eval"
            raise RunError(f"run {self.name!r} is {a_kind(self.kind)} run, not {wanted} run")
        return self

    # -- its items ----------------------------------------------------------------------------
    def conversations(self) -> list[Conversation]:
        from healthbench.data.schema import Conversation

        return [Conversation.model_validate(r) for _, r in self.store.load_items(self.record.id)]

    def meta_records(self) -> list[MetaEvalRecord]:
        from healthbench.data.schema import MetaEvalRecord

        return [MetaEvalRecord.model_validate(r) for _, r in self.store.load_items(self.record.id)]

    def unanswered(self) -> tuple[int, int]:
        """(conversations × repeats without an answer, conversations × repeats) of an eval run, counted
        by the store (no answer is read)."""
        n_repeats = int(self.record.config["run"].get("n_repeats", 1))
        progress = self.store.run_progress(self.record.id, n_repeats, None)
        expected = progress.items * n_repeats
        return expected - progress.samples_done, expected

    def n_rows(self) -> int:
        """(conversation, repeat) pairs: the rows of the row-scores document."""
        return self.store.count_items(self.record.id) * self.config.n_repeats

    # -- graded samples -----------------------------------------------------------------------
    def iter_samples(self, page_size: int = PAGE_SIZE) -> Iterator[StoredSample]:
        """The run's samples in (repeat, conversation) order, read ``page_size`` conversations at a
        time. Missing grades count as ungraded; a conversation whose sample failed (or was never
        made) has an empty completion and every criterion ungraded, so it is counted, never dropped.
        """
        for page in self.iter_sample_pages(page_size):
            yield from page

    def iter_sample_pages(self, page_size: int = PAGE_SIZE) -> Iterator[list[StoredSample]]:
        """`iter_samples` a page (one store read) at a time."""
        labels = self.members
        combine = self._combiner() if len(labels) > 1 else None
        for page in self._pages(page_size):
            stored = []
            for item_id, conversation, repeat, sample, verdicts in page:
                members = {
                    label: _graded(item_id, conversation, repeat, sample, verdicts, label) for label in labels
                }
                graded = members[labels[0]] if combine is None else combine(members)
                stored.append(StoredSample(graded, sample, item_id, members))
            yield stored

    def _combiner(self) -> Callable[[Mapping[str, GradedSample]], GradedSample]:
        """The panel's sample from its members' (`scoring.panel.combine` on every criterion, in panel
        order; the criterion's category for the calibrated rule)."""
        from healthbench.scoring.panel import combine, criterion_category

        rule, calibration, labels = self.panel_rule, self.calibration, tuple(self.members)

        def panel_sample(members: Mapping[str, GradedSample]) -> GradedSample:
            chair = members[labels[0]]
            rubrics = chair.conversation.rubrics
            votes = list(zip(*(members[label].verdicts for label in labels), strict=True))
            verdicts = tuple(
                combine(
                    criterion_votes,
                    rule,
                    labels=labels,
                    calibration=calibration,
                    category=criterion_category(item.tags) if calibration is not None else None,
                )
                for criterion_votes, item in zip(votes, rubrics, strict=True)
            )
            return replace(chair, verdicts=verdicts, explanations=_panel_explanations(members, labels))

        return panel_sample

    def _pages(self, page_size: int) -> Iterator[list[_StoredItem]]:
        """Every (item id, conversation, repeat, sample or None, that page's verdicts) of the run in
        `iter_samples` order, a page of items (one read of samples and one of verdicts) at a time. A
        stored conversation is decoded as the dataset reader's shape (`stored_conversation`)."""
        from healthbench.data.shapes import stored_conversation

        self.require_kind("eval")
        run_id = self.record.id
        for repeat in range(self.config.n_repeats):
            for page in self.store.iter_item_pages(run_id, page_size):
                ids = [item_id for item_id, _ in page]
                samples = self.store.load_samples(run_id, item_ids=ids, repeat=repeat)
                verdicts = self.store.load_verdicts(run_id, item_ids=ids, repeat=repeat)
                yield [
                    (
                        item_id,
                        stored_conversation(record),
                        repeat,
                        samples.get((item_id, repeat)),
                        verdicts,
                    )
                    for item_id, record in page
                ]

    def graded_samples(self) -> list[GradedSample]:
        """Every graded sample of the run, in `iter_samples` order (what `score_run` takes)."""
        return [stored.graded for stored in self.iter_samples()]

    def scoring_options(self, *, seed: int | None = None, n_resamples: int | None = None) -> ScoringOptions:
        """The run's scoring settings (``seed`` / ``n_resamples`` override the stored ones)."""
        from healthbench.scoring.run_score import ScoringOptions

        scoring = self.config.scoring
        return ScoringOptions(
            n_resamples=scoring.n_resamples if n_resamples is None else n_resamples,
            seed=scoring.seed if seed is None else seed,
            length_penalty=scoring.length_penalty,
            length_center=scoring.length_center,
            error_rate=self.config.dataset == "consensus",
        )

    def score(self, options: ScoringOptions | None = None) -> RunScore:
        """The run's `RunScore` (the numbers of ``--metrics-out``): `score_samples` of `graded_samples`,
        read a page at a time, each sample kept as scoring reads it (`_scored_only`, no explanation):
        a 5,000-conversation run's scores do not hold its ~70 MB of texts at once."""
        return self.score_samples([_scored_only(stored.graded) for stored in self.iter_samples()], options)

    def score_samples(
        self, samples: Sequence[GradedSample], options: ScoringOptions | None = None
    ) -> RunScore:
        """`score_run` of samples already read from this view, with its settings unless ``options``."""
        from healthbench.scoring.run_score import score_run

        return score_run(samples, options or self.scoring_options())

    def judge_usage(self, page: Sequence[StoredSample]) -> list[CallTally]:
        """The judge's calls, tokens and cost for each sample of ``page`` (one page of
        `iter_sample_pages`, all of one repeat): what grading that answer took."""
        tallies = {(stored.item_id, stored.graded.repeat): CallTally() for stored in page}
        for repeat in {stored.graded.repeat for stored in page}:
            ids = [stored.item_id for stored in page if stored.graded.repeat == repeat]
            for grade in self.store.load_grades(self.record.id, item_ids=ids, repeat=repeat).values():
                tally = tallies[(grade.item_id, grade.repeat)]
                tally.count(grade.usage, grade.cost, cached=grade.cached, failed=grade.error is not None)
        return [tallies[(stored.item_id, stored.graded.repeat)] for stored in page]

    def usage_totals(self) -> UsageTotals:
        """Calls, tokens and cost of every stored sample (candidate) and grade (judge)."""
        totals = {"candidate": CallTally(), "judge": CallTally()}
        for row in self.store.iter_usage(self.record.id):
            totals[row.role].count(row.usage, row.cost, cached=row.cached, failed=row.failed)
        return UsageTotals(totals["candidate"], totals["judge"])


def _graded(
    item_id: str,
    conversation: ClassicLine,
    repeat: int,
    sample: SampleRow | None,
    grades: Mapping[tuple[str, int, str], tuple[str, str | None]],
    judge: str,
) -> GradedSample:
    """A stored sample and ``judge``'s grades (a label) as the scoring core takes them (missing grade =
    ungraded). The item id is the prompt id, except in baseline runs (one item per graded completion)."""
    from healthbench.scoring.run_score import GradedSample

    n = len(conversation.rubrics)
    found = [grades.get((item_id, index, judge), ("ungraded", None)) for index in range(n)]
    ok = sample is not None and sample.error is None
    verdicts = tuple(VERDICTS[status] for status, _ in found)
    return GradedSample(
        conversation=conversation,
        completion=(sample.completion or "") if ok and sample else "",
        verdicts=verdicts if ok else (Verdict.UNGRADED,) * n,
        explanations=tuple(explanation for _, explanation in found),
        repeat=repeat,
        prompt_messages=tuple(sample.messages or ()) if sample else None,
        usage=sample.usage if sample else None,
    )


def _scored_only(sample: GradedSample) -> GradedSample:
    """What scoring reads of a sample: its verdicts, repeat and completion (its length), and of its
    conversation the prompt id, each criterion's points and tags and the example tags; no prompt,
    criterion text, explanation or usage."""
    from healthbench.data.shapes import ClassicLine, RubricEntry

    c = sample.conversation
    rubrics = [RubricEntry("", item.points, tuple(item.tags)) for item in c.rubrics]
    conversation = ClassicLine([], c.prompt_id, rubrics, list(c.example_tags))
    return replace(sample, conversation=conversation, explanations=(), prompt_messages=None, usage=None)


def _panel_explanations(members: Mapping[str, GradedSample], labels: Sequence[str]) -> tuple[str | None, ...]:
    """A panel's explanation of each criterion: every member's verdict and explanation, one line each
    (``[openai/gpt-4.1: met] The answer ...``); None when no member explained it."""
    n = len(members[labels[0]].verdicts)
    out: list[str | None] = []
    for index in range(n):
        lines = []
        for label in labels:
            member = members[label]
            explanation = member.explanations[index] if member.explanations else None
            if explanation is not None or member.verdicts[index] is not Verdict.UNGRADED:
                lines.append(
                    f"[{label}: {VERDICT_NAMES[member.verdicts[index]]}] {explanation or ''}".rstrip()
                )
        out.append("\n".join(lines) if lines else None)
    return tuple(out)
