"""The old name of config/schema.py, so that config files written against it
(`from acme_launch import experiment_config`) still load. New configs:
`from acme_launch.config import schema`."""

from acme_launch.config.schema import *  # pylint: disable=wildcard-import,unused-wildcard-import
from acme_launch.config.schema import add_missing_fields, base_config, validate  # pylint: disable=unused-import
