"""Every project setting with its default, from the settings table (crawler/config/settings.py:
one row a setting, with the rule its value must follow and what it does). The profiles
(local.py, distributed.py) change only what differs; any setting can still be set with
``-s NAME=VALUE``."""

from crawler.config.settings import defaults

globals().update(defaults())
