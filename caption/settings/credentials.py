"""Secrets stay out of the run folder: Hydra writes every setting and override into it (.hydra/) before
the job starts (hydra/core/utils.py run_job), so a URL that carries a password must be refused before
that, in a callback of the run's start. A server's API key goes in an environment variable that
engine.api_key_env names; the job reads it when it connects and writes it nowhere.
"""

from __future__ import annotations

import re
import sys

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from vidcap_ko.exit_status import EXIT_USAGE

# scheme://user[:password]@host: a URL with credentials in it
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]+@")


def holds_credentials(text: str) -> bool:
    return bool(_USERINFO.search(str(text)))


def credentials_refusal(config: DictConfig) -> str | None:
    """Why the config must not be written anywhere (a setting or override with a URL's credentials), or None."""
    values = [str(override) for override in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []]
    base_url = OmegaConf.select(config, "engine.base_url", default=None, throw_on_missing=False)
    input_dir = OmegaConf.select(config, "input_dir", default=None, throw_on_missing=False)
    keyed = [value for value in [*values, str(base_url or ""), str(input_dir or "")] if holds_credentials(value)]
    if not keyed:
        return None
    if any(value == str(input_dir) or value.startswith("input_dir=") for value in keyed):
        return ("`input_dir=` carries credentials in its URL (user:password@): Hydra would write them into the "
                "run folder; give the store's URL without them and the credentials the standard way "
                "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an instance role: docs/object-storage.md)")
    return ("a setting holds a URL with credentials (user:password@): Hydra would write it into the run "
            "folder; give the server's address without them, put the key in an environment variable and name "
            "it in engine.api_key_env")


class CredentialsCheck(Callback):
    """Before Hydra writes the run (or sweep) folder's config: no credentials in it (exit status 2)."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        self._check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self._check(config)

    @staticmethod
    def _check(config: DictConfig) -> None:
        reason = credentials_refusal(config)
        if reason is not None:  # Hydra turns a callback's exception into a warning: exit here
            print(f"caption: invalid config: {reason}", file=sys.stderr)
            sys.exit(EXIT_USAGE)
