"""The defaults of model calls and of the bootstrap, each defined once here (a module that imports only
`typing`, so that help texts and light commands read them without loading the modules that use them)."""

from typing import Final

DEFAULT_TIMEOUT = 120.0  # seconds per request
DEFAULT_MAX_CONNECTIONS = 64  # concurrent calls per endpoint (candidate and judge together)
DEFAULT_MAX_RETRIES = 8  # retries of a failed call
DEFAULT_MAX_OUTAGE = 600.0  # seconds an endpoint that answered before may fail every call
DEFAULT_JUDGE_RETRIES = 3  # re-asks when a judge answer has no usable verdict
DEFAULT_RESAMPLES = 1000  # bootstrap resamples
DEFAULT_SEED = 0  # bootstrap seed: the same seed gives the same stds and CIs
DEFAULT_MIN_PHYSICIAN_RATINGS = 50  # meta-eval: rating pairs a physician needs (more than) to count
DEFAULT_BATCH_OPEN_ITEMS = 10_000  # --batch: conversations x repeats in progress at once (a full run)
# warm-first judging (executors/local.py, docs/cost.md): with a judge whose provider caches prompt
# prefixes, one criterion of each conversation is asked first and its siblings once it has answered
DEFAULT_WARM_FIRST = True
# judge panels (scoring/panel.py, docs/panels.md): how members' verdicts on a criterion become the run's
PANEL_RULES = ("majority", "unanimous", "any", "calibrated")
DEFAULT_PANEL_RULE = "majority"
DEFAULT_BATCH_POLL = 30.0  # --batch: longest wait (seconds) between polls of a provider batch
DEFAULT_BATCH_LINGER = 2.0  # --batch: idle seconds before a partial batch is submitted
DEFAULT_BATCH_MAX_WAIT = 60.0  # --batch: longest a request waits to be put in a batch
DEFAULT_BATCH_TRANSFER_TIMEOUT = 900.0  # --batch: seconds to upload a batch file or download results
OFFLINE_MODEL = "local/smollm2"  # candidate and judge when none is given: a smoke test, no network
MAX_RESAMPLES = 100_000  # the most bootstrap resamples a command takes (memory and time grow with it)
DEFAULT_RAY_CONNECT_TIMEOUT = 30.0  # seconds `--executor ray` may take to reach a cluster given by address
DEFAULT_PAGE_SIZE = 50  # jobs per page of the service's job list
DEFAULT_PROGRESS_EVERY = 5.0  # seconds between two progress lines (CLI without a terminal, job logs)
DEFAULT_MLFLOW_EXPERIMENT = "healthbench"  # MLflow experiment of --mlflow (unless $MLFLOW_EXPERIMENT_NAME)
DEFAULT_CONFIDENCE = 0.95  # the level of every bootstrap CI (and of the judge check of a correction)
DEFAULT_BOOTSTRAP_WORKERS = 2  # ScoringConfig.workers of stored configs (unused: no bootstrap threads)
DEFAULT_META_EVAL_VARIANT = "demo_meta_eval"  # the meta-eval dataset of `healthbench meta-eval`
DEFAULT_SERVICE_WORKERS = 2  # jobs a service (or `Client.local`) process runs at once
DEFAULT_SERVICE_CONNECTIONS = 256  # the service's connection budget per endpoint, shared by its jobs
DEFAULT_LEASE = 15.0  # seconds an active job stays claimed without a heartbeat
DEFAULT_COMMIT_WAIT = 0.02  # seconds a run's finished calls wait at most to be committed together
DEFAULT_STATUS_CACHE = 0.1  # seconds the service reuses a job's status read (a burst of polls: one read)

# `healthbench serve`: what one request and one workspace may hold (see docs/service.md)
DEFAULT_MAX_UPLOAD_MB = 128  # request body cap: the full HealthBench JSONL (~60 MB) as JSON text fits
DEFAULT_WORKSPACE_UPLOAD_MB = 1024  # uploads kept for a workspace's jobs, all together
DEFAULT_WORKSPACE_QUEUED_JOBS = 100  # a workspace's jobs waiting or running at once
# the endpoints a job's base_url may name: the providers' own (the SDKs send the service's provider key
# to any base_url, so an operator allows others one by one)
DEFAULT_ALLOWED_BASE_URLS = (
    "https://api.openai.com/*",
    "https://api.anthropic.com",
    "https://api.anthropic.com/*",
)
# judge panels (scoring/panel.py, docs/panels.md): how members' verdicts on one criterion become the
# run's verdict; `scoring.panel.PanelRule` is the Literal of these names
PANEL_RULES: Final = ("majority", "unanimous", "any", "calibrated")
DEFAULT_PANEL_RULE: Final = "majority"  # Final: a `PanelRule` literal to mypy
