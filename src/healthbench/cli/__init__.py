"""Command line: each module registers its commands on `healthbench.cli.app.app`; no logic lives here."""

from healthbench.cli import data_cmd as data_cmd
from healthbench.cli import fake_server_cmd as fake_server_cmd
from healthbench.cli import interop_cmd as interop_cmd
from healthbench.cli import meta_eval_cmd as meta_eval_cmd
from healthbench.cli import run_cmd as run_cmd
from healthbench.cli import serve_cmd as serve_cmd
from healthbench.cli.app import app as app
from healthbench.cli.app import main as main

__all__ = ["app", "main"]
