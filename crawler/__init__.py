"""A distributed web crawler built on Scrapy."""

__version__ = "0.1.0"  # (pyproject.toml reads it)
