"""OpenAI's grader prompt, fetched from its source instead of shipped: ``--grader-template simple-evals``.

We may not redistribute the text, so it is downloaded once from simple-evals at the commit behind
OpenAI's published numbers, taken out of ``healthbench_eval.py`` by parsing the module with `ast`
(never importing or executing it), stripped as simple-evals strips it (the constant is written
``GRADER_TEMPLATE = \"\"\"...\"\"\".strip()``), checked against a known sha256, and cached next to the
datasets (atomic write, reused offline).
"""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

import httpx

from healthbench.data.sources import cache_dir, download
from healthbench.errors import ConfigError, DownloadError

OFFICIAL_NAME = "simple-evals"  # the --grader-template value that selects this template
SIMPLE_EVALS_COMMIT = "5e623c2b400af62a1278e23595f95b0853d7fe8a"
OFFICIAL_URL = (
    f"https://raw.githubusercontent.com/openai/simple-evals/{SIMPLE_EVALS_COMMIT}/healthbench_eval.py"
)
OFFICIAL_SHA256 = "2adffd51fd259554ebcd036ad1072d4aa2b7ce3aec2bbffe36271f911632ed3c"
CONSTANT = "GRADER_TEMPLATE"
AS_A_FILE = (
    "save simple-evals' GRADER_TEMPLATE (healthbench_eval.py at commit "
    f"{SIMPLE_EVALS_COMMIT[:7]}) to a file and pass --grader-template FILE"
)


def extract_grader_template(source: str, *, origin: str = "healthbench_eval.py") -> str:
    """The value of the module-level ``GRADER_TEMPLATE`` in ``source``, found by parsing (not running)
    it: a string literal, optionally followed by ``.strip()`` as in simple-evals, which is applied."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ConfigError(f"grader template: {origin} does not parse as Python (line {exc.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == CONSTANT for t in node.targets
        ):
            return _literal_value(node.value, origin)
    raise ConfigError(f"grader template: {origin} defines no {CONSTANT}")


def _literal_value(value: ast.expr, origin: str) -> str:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if (
        isinstance(value, ast.Call)
        and not value.args
        and not value.keywords
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "strip"
        and isinstance(value.func.value, ast.Constant)
        and isinstance(value.func.value.value, str)
    ):
        return value.func.value.value.strip()
    raise ConfigError(f"grader template: {CONSTANT} in {origin} is not a string literal (or literal.strip())")


def _checked(text: str, expected_sha256: str, origin: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != expected_sha256:
        raise ConfigError(
            f"grader template simple-evals: {CONSTANT} from {origin} has sha256 {digest[:12]}…, "
            f"expected {expected_sha256[:12]}…; {AS_A_FILE}"
        )
    return text


def official_grader_text(
    cache: str | os.PathLike[str] | None = None,
    *,
    url: str = OFFICIAL_URL,
    expected_sha256: str = OFFICIAL_SHA256,
    transport: httpx.BaseTransport | None = None,
) -> str:
    """simple-evals' grader prompt text, from the module cached in the data cache directory, else
    downloaded from ``url`` (atomically, as the datasets are) and checked.

    A cached module that no longer yields the expected text is fetched again. A download that fails
    (offline, no cache) or a text with another hash stops with one line saying how to pass the
    prompt as a file.
    """
    directory = cache_dir(cache)
    target = directory / f"simple-evals_{hashlib.sha256(url.encode()).hexdigest()[:16]}_healthbench_eval.py"
    if target.is_file():
        try:
            return _from_module(target, url, expected_sha256)
        except ConfigError:
            pass  # a damaged or stale copy: fetch it again
    try:
        download(url, target, transport=transport)
    except DownloadError:
        raise ConfigError(
            f"grader template simple-evals: cannot download {url} and no usable cached copy in "
            f"{directory}; {AS_A_FILE}"
        ) from None
    return _from_module(target, url, expected_sha256)


def _from_module(path: Path, url: str, expected_sha256: str) -> str:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"grader template simple-evals: cannot read {path} ({exc})") from None
    return _checked(extract_grader_template(source, origin=url), expected_sha256, url)
