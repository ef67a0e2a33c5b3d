"""The one error the planner raises for a setting that cannot work."""

from __future__ import annotations


class PlanError(ValueError):
    """An impossible or unfitting plan; the message names the config keys to change and to what.

    A ValueError, like caption.settings.config.ConfigError, so a caller that reports config errors reports
    these the same way without importing quant's types.
    """
