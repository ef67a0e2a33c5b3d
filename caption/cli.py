"""`caption`: the Hydra entry point. Compose the config, run the job, report.

    caption input_dir=clips/ output=captions.jsonl [engine=hf] [video=fps] [gpu=cpu]
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from caption.config import CONF_DIR, ConfigError


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _main(cfg: DictConfig) -> float | None:
    from caption.job import run_job

    try:
        summary = run_job(cfg)
    except ConfigError as exc:
        logging.getLogger("caption").error("invalid config: %s", exc)
        print(f"caption: invalid config: {exc}", file=sys.stderr)
        sys.exit(2)
    # the return value is what a Hydra sweeper optimises / records
    return summary.get("videos_per_s")


def main() -> None:
    _main()


if __name__ == "__main__":
    main()
