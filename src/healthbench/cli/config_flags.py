"""The one table from the model-call and run flags of `run`, `regrade` and `meta-eval` to the run
config: each command declares its flags (options.py) and hands its parameters here, so a flag means
the same in every command, and what `--resume` refuses is derived from the config (`HOW_FIELDS`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import typer

from healthbench.cli.options import base_urls, parse_json_option, parse_key_values, split_list
from healthbench.config import HOW_FIELDS
from healthbench.errors import ConfigError

# what --resume may change: the stored "how" of a run, except its scoring settings (kept as stored;
# --seed and --n-resamples only change how the result is reported, see REPORT_FLAGS)
RESUMABLE = HOW_FIELDS - {"scoring"}
REPORT_FLAGS = frozenset({"seed", "n_resamples"})
# parameters that are no config setting but name or define the run: never with --resume
DEFINING = frozenset({"name", "config"})
# per-member judge flags (repeatable like --judge): given once, every member's; given once per member,
# each member's in the order of the --judge flags
PER_MEMBER = ("judge_base_url", "judge_api_key_env")


def _text(value: Any) -> str:
    return str(value)


def _json(flag: str) -> Callable[[Any], Any]:
    return lambda value: parse_json_option(flag, value)


def _key_values(flag: str) -> Callable[[Any], Any]:
    return lambda value: parse_key_values(flag, value)


@dataclass(frozen=True)
class ConfigFlag:
    """Where a command parameter's value goes in the run config (one or more paths), converted."""

    paths: tuple[tuple[str, ...], ...]
    convert: Callable[[Any], Any] | None = None


def _to(*path: str, convert: Callable[[Any], Any] | None = None) -> ConfigFlag:
    return ConfigFlag((path,), convert)


CONFIG_FLAGS: dict[str, ConfigFlag] = {
    # the candidate
    "model": _to("model", "spec"),
    "base_url": _to("model", "base_url"),
    "api_key_env": _to("model", "api_key_env"),
    "temperature": _to("model", "settings", "temperature"),
    "max_tokens": _to("model", "settings", "max_tokens"),
    "reasoning_effort": _to("model", "settings", "reasoning_effort"),
    "extra_body": _to("model", "settings", "extra_body", convert=_json("--extra-body")),
    "system_message": _to("model", "settings", "system_message"),
    # the judge
    "judge": _to("judge", "spec"),
    "judge_base_url": _to("judge", "base_url"),
    "judge_api_key_env": _to("judge", "api_key_env"),
    "judge_temperature": _to("judge", "settings", "temperature"),
    "judge_max_tokens": _to("judge", "settings", "max_tokens"),
    "judge_reasoning_effort": _to("judge", "settings", "reasoning_effort"),
    "judge_extra_body": _to("judge", "settings", "extra_body", convert=_json("--judge-extra-body")),
    "judge_system_message": _to("judge", "settings", "system_message"),
    "timeout": ConfigFlag((("model", "settings", "timeout"), ("judge", "settings", "timeout"))),
    "judge_json": _to("judge_structured_output"),
    "grader_template": _to("grader_template", convert=_text),
    "profile": _to("profile"),
    "vllm_engine_arg": _to("vllm_engine_args", convert=_key_values("--vllm-engine-arg")),
    # the data
    "dataset": _to("dataset"),
    "data": _to("data", convert=_text),
    "limit": _to("limit"),
    "ids": _to("ids", convert=split_list),
    "theme": _to("themes", convert=split_list),
    "category": _to("categories", convert=split_list),
    "n_repeats": _to("n_repeats"),
    "completions": _to("completions"),
    "group": _to("group"),
    # scoring
    "seed": _to("scoring", "seed"),
    "n_resamples": _to("scoring", "n_resamples"),
    "length_center": _to("scoring", "length_center"),
    "length_penalty": _to("scoring", "length_penalty"),
    # how the calls are made (may change between sessions)
    "max_connections": _to("max_connections"),
    "rpm": _to("requests_per_minute"),
    "tpm": _to("tokens_per_minute"),
    "max_retries": _to("retry", "max_retries"),
    "max_outage": _to("retry", "max_outage"),
    "judge_retries": _to("judge_retries"),
    "prices": _to("prices", convert=_text),
    "cache_dir": _to("cache_dir", convert=_text),
    "executor": _to("executor"),
    "ray_address": _to("ray_address"),
    "batch": _to("batch"),
    "batch_fallback": _to("batch_fallback"),
    "batch_poll_interval": _to("batch_poll_interval"),
    "warm_first": _to("warm_first"),
    "ray_connect_timeout": _to("ray_connect_timeout"),
}


def config_layer(
    params: Mapping[str, Any], *, candidate: bool = True, only: frozenset[str] | set[str] | None = None
) -> dict[str, Any]:
    """The run-config layer of a command's flags (unset ones left out so lower layers show), the
    endpoints resolved as the SDKs do (`base_urls`). ``candidate`` False: a command with no candidate
    (regrade, meta-eval; its --timeout is the judge's); ``only``: just these top-level settings."""
    values = dict(params)
    specs = _listed(values.get("judge"))
    members = _per_member(values, len(specs))
    values["judge"] = specs[0] if specs else None
    for param in PER_MEMBER:
        values[param] = members[0][param] if members else _listed(values.get(param), one=True)
    if "judge" in values or "base_url" in values:
        values["base_url"], values["judge_base_url"] = base_urls(
            values.get("model"), values.get("base_url"), values.get("judge"), values.get("judge_base_url")
        )
    layer: dict[str, Any] = {}
    for param, flag in CONFIG_FLAGS.items():
        value = values.get(param)
        if value is None:
            continue
        value = flag.convert(value) if flag.convert is not None else value
        for path in flag.paths:
            wanted = only is None or path[0] in only
            if value is not None and wanted and (candidate or path[0] != "model"):
                _put(layer, path, value)
    if len(specs) > 1 and "judge" in layer:  # a panel: the chair first, each with its own endpoint
        common = layer.pop("judge")
        layer["judges"] = [
            _member(common, spec, given, values.get("model"), values.get("base_url"))
            for spec, given in zip(specs, members, strict=True)
        ]
    return layer


def _listed(value: Any, *, one: bool = False) -> Any:
    """A repeatable flag's values as a list (``one``: the single value, None when not given)."""
    items = [] if value is None else list(value) if isinstance(value, list | tuple) else [value]
    if one:
        return items[0] if items else None
    return items


def _per_member(values: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Each member's per-member flags (`PER_MEMBER`) for a panel of ``n`` judges (none for one): a flag
    given once is every member's, given ``n`` times each member's in order; any other count is an error."""
    if n < 2:
        for param in PER_MEMBER:
            given = _listed(values.get(param))
            if len(given) > 1:
                raise ConfigError(f"--{param.replace('_', '-')} given {len(given)} times for one --judge")
        return []
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for param in PER_MEMBER:
        given = _listed(values.get(param))
        if len(given) not in (0, 1, n):
            raise ConfigError(
                f"--{param.replace('_', '-')} given {len(given)} times for {n} judges: give it once (for "
                f"every judge) or {n} times (one per --judge, in order)"
            )
        for member, value in zip(out, given * n if len(given) == 1 else given or [None] * n, strict=True):
            member[param] = value
    return out


def _member(
    common: Mapping[str, Any], spec: str, given: Mapping[str, Any], model: Any, base_url: Any
) -> dict[str, Any]:
    """One member's config: the judge settings every member shares, its spec and its own endpoint."""
    member = {k: v for k, v in common.items() if k not in ("spec", "base_url", "api_key_env")}
    member["spec"] = spec
    _, url = base_urls(model, base_url, spec, given.get("judge_base_url"))
    if url is not None:
        member["base_url"] = url
    if given.get("judge_api_key_env") is not None:
        member["api_key_env"] = given["judge_api_key_env"]
    return member


def resume_overrides(params: Mapping[str, Any]) -> dict[str, Any]:
    """What a `--resume` may change of the stored run: its "how" settings, from their flags."""
    return config_layer(params, only=RESUMABLE)


def refuse_with_resume(ctx: typer.Context, *, also: tuple[str, ...] = ()) -> None:
    """--resume continues a run with its stored settings: a flag that would change them (any flag of
    the config outside `RESUMABLE`), names the run, or is in ``also`` is an error naming them all."""
    refused = DEFINING | set(also)
    given = given_flags(ctx, lambda param: param in refused or _changes_the_run(param))
    if given:
        raise ConfigError(
            f"--resume keeps the run's stored name and settings; drop {', '.join(given)} "
            "(or start a new run without --resume)"
        )


def given_flags(ctx: typer.Context, pick: Callable[[str], bool]) -> list[str]:
    """The flags given on the command line (not left unset) whose parameter name ``pick`` accepts."""
    return [
        _flag_name(param.opts, param.name)
        for param in ctx.command.params
        if param.name is not None and _given(ctx.params.get(param.name)) and pick(param.name)
    ]


def _changes_the_run(param: str) -> bool:
    flag = CONFIG_FLAGS.get(param)
    if flag is None or param in REPORT_FLAGS:
        return False
    return any(path[0] not in RESUMABLE for path in flag.paths)


def _given(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return bool(value)
    return value is not None and value is not False


def _flag_name(opts: Sequence[str], name: str) -> str:
    """How a parameter is written on the command line: its long flag (``--judge`` of ``--judge``/``-j``)."""
    return max(opts, key=len) if opts else name


def _put(layer: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    *parents, last = path
    for key in parents:
        layer = layer.setdefault(key, {})
    layer[last] = value
