"""Logging: one line per event, level from configuration."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level, format=FORMAT, stream=sys.stderr, force=True)
    # aiokafka is chatty about group membership at INFO; keep its warnings.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLevelName(level)))
