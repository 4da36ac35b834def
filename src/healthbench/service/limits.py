"""What the job service refuses in a job's model roles (secrets, credentials in URLs) and what an
operator lets its users do: the body size, a workspace's quota, the endpoints a job may call, the
local model files it may load and the Ray clusters it may join (`healthbench serve` options; see
docs/service.md, "Running it for a team"). Checked when a job is created, so a refused job leaves
nothing behind."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from urllib.parse import urlsplit

from healthbench.config import secret_key_in
from healthbench.defaults import DEFAULT_MAX_UPLOAD_MB
from healthbench.service.errors import ServiceError
from healthbench.service.schemas import ModelRef
from healthbench.store.jobs import WorkspaceUsage

LOCAL_NAMED = ("smollm2",)  # local models that are not a file path


@dataclass(frozen=True)
class ServiceLimits:
    """None means "not limited": what an in-process `JobService` (``Client.local``, the caller is the
    operator) gets by default; `healthbench serve` passes its options (defaults in defaults.py)."""

    max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB  # request body cap (HTTP only)
    workspace_upload_mb: float | None = None  # uploads kept for a workspace's jobs, together
    workspace_queued_jobs: int | None = None  # a workspace's jobs pending or running at once
    allow_base_urls: tuple[str, ...] | None = None  # fnmatch patterns a job's base_url must match
    model_dirs: tuple[Path, ...] | None = None  # folders local/PATH.gguf models may be in
    ray_addresses: tuple[str, ...] | None = None  # Ray clusters a job may name as its ray_address

    def check_quota(self, workspace: str, usage: WorkspaceUsage, new_chars: int) -> None:
        """429 when the job would take the workspace past its quota."""
        jobs = self.workspace_queued_jobs
        if jobs is not None and usage.queued >= jobs:
            raise ServiceError(
                429, f"workspace {workspace!r} has {usage.queued} jobs queued or running (quota {jobs})"
            )
        quota = self.workspace_upload_mb
        if quota is not None and new_chars and (usage.upload_chars + new_chars) / 1e6 > quota:
            raise ServiceError(
                429,
                f"workspace {workspace!r} would hold {(usage.upload_chars + new_chars) / 1e6:.1f} MB of "
                f"uploads (quota {quota:g} MB): delete jobs it no longer needs",
            )

    def check_model(self, field: str, ref: ModelRef | None) -> None:
        """422 for a secret in the role's body (always: the body is stored and shown to every reader),
        an endpoint the operator does not allow, or a local model file outside the allowed folders.
        The message names the field, never the allowed patterns or folders."""
        if ref is None:
            return
        found = secret_key_in(ref.settings.extra_body)  # the rule `--vllm-engine-arg` applies
        if found is not None:
            raise ServiceError(
                422,
                f"{field}.settings.extra_body: key {found!r} looks like a secret and would be stored with "
                "the job (keys come from the service's environment)",
            )
        if ref.base_url is not None and "@" in urlsplit(ref.base_url.strip()).netloc:
            raise ServiceError(422, f"{field}.base_url: must not carry credentials")
        if ref.base_url is not None and self.allow_base_urls is not None:
            url = _normal(ref.base_url)
            if not any(fnmatchcase(url, pattern.lower()) for pattern in self.allow_base_urls):
                raise ServiceError(422, f"{field}.base_url: this service does not call that endpoint")
        provider, _, model = ref.spec.strip().partition("/")
        if provider == "local" and model not in LOCAL_NAMED and self.model_dirs is not None:
            path = Path(model).expanduser().resolve()
            if not any(path.is_relative_to(folder.expanduser().resolve()) for folder in self.model_dirs):
                raise ServiceError(422, f"{field}.spec: this service runs no local model file from there")

    def check_ray_address(self, address: str | None) -> None:
        """422 when a job names a Ray cluster the operator does not allow (the worker's own cluster,
        ``ray_address`` unset, is always allowed)."""
        if address is None or self.ray_addresses is None:
            return
        if address.strip() not in self.ray_addresses:
            raise ServiceError(422, "ray_address: this service joins no Ray cluster there")


def _normal(url: str) -> str:
    """Scheme and host in lower case, no trailing slash: what the patterns are matched against."""
    parts = urlsplit(url.strip())
    rest = url.strip()[len(f"{parts.scheme}://{parts.netloc}") :].rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{rest}"
