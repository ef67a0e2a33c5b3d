"""vidcap-ko's caption job. From Python: `from caption import Captioner, caption_folder` (caption/api.py).

The names load on first use: `caption` (the command) imports this package before its signal handlers
are in place, so nothing heavy is imported here.
"""

__all__ = ["Captioner", "ConfigError", "EngineDidNotLoad", "OutputBusy", "OutputRefused", "caption_folder"]


def __getattr__(name: str):
    if name in ("Captioner", "caption_folder"):
        from caption import api

        return getattr(api, name)
    if name == "ConfigError":
        from caption.settings.config import ConfigError

        return ConfigError
    if name == "OutputRefused":  # an output the job will not write (a user's file, other settings, changed clips)
        from caption.output.checks import OutputRefused

        return OutputRefused
    if name == "EngineDidNotLoad":  # the model did not load: its folder and the library's reason
        from caption.outcome import EngineDidNotLoad

        return EngineDidNotLoad
    if name == "OutputBusy":  # another job writes the output
        from caption.output.lock import OutputBusy

        return OutputBusy
    raise AttributeError(f"module 'caption' has no attribute {name!r}")
