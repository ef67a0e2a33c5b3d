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

from vidcap_ko_outputs.exit_status import EXIT_USAGE

# scheme://user[:password]@host: a URL with credentials in it
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]+@")


def holds_credentials(text: str) -> bool:
    return bool(_USERINFO.search(str(text)))


def credentials_refusal(config: DictConfig) -> str | None:
    """Why the config must not be written anywhere (a setting or override with a URL's credentials), or None."""
    values = [str(override) for override in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []]
    base_url = OmegaConf.select(config, "engine.base_url", default=None, throw_on_missing=False)
    if any(holds_credentials(value) for value in [*values, str(base_url or "")]):
        return ("a setting holds a URL with credentials (user:password@): Hydra would write it into the run "
                "folder; give the server's address without them, put the key in an environment variable and name "
                "it in engine.api_key_env")
    return None


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
