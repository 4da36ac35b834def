"""A panel of judges in a run's config: ``judges`` beside ``judge`` (docs/panels.md)."""

from __future__ import annotations

import pytest

from healthbench.config import RunConfig, build_config
from healthbench.errors import ConfigError
from healthbench.runner.run import _identity


def test_judges_name_the_panel_and_the_first_is_the_judge() -> None:
    config = build_config(
        {"judges": [{"spec": "openai/a"}, {"spec": "anthropic/b", "base_url": "http://x/v1"}]}
    )
    assert [m.label for m in config.panel] == ["openai/a", "anthropic/b"]
    assert config.judge.label == "openai/a"  # the chair: what every single-judge reader sees
    # stored and read back, the same panel
    assert RunConfig.model_validate(config.model_dump(mode="json")).panel == config.panel


def test_one_judge_is_a_panel_of_one_with_the_identity_of_before() -> None:
    config = build_config({"judge": {"spec": "openai/a"}})
    assert [m.label for m in config.panel] == ["openai/a"] and config.judges == []
    assert "judges" not in _identity(config)  # runs stored before panels resume as they were
    assert _identity(build_config({"judges": [{"spec": "openai/a"}]}))["judges"][0]["spec"] == "openai/a"


def test_a_panel_names_each_judge_once_and_not_beside_judge() -> None:
    with pytest.raises(ConfigError, match="judge 'openai/a' is named twice"):
        build_config({"judges": [{"spec": "openai/a"}, {"spec": "openai/a"}]})
    with pytest.raises(ConfigError, match="judge and judges both name the judge"):
        build_config({"judge": {"spec": "openai/a"}, "judges": [{"spec": "openai/b"}]})


def test_the_panel_rule_is_a_scoring_setting() -> None:
    assert build_config({}).scoring.panel == "majority"
    assert build_config(
        {"scoring": {"panel": "calibrated", "calibrate_with": ["m1"]}}
    ).scoring.calibrate_with == ["m1"]
    with pytest.raises(ConfigError, match="panel"):
        build_config({"scoring": {"panel": "vote"}})
