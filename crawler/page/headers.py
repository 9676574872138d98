"""The one header look-up of a page's headers ({name: [values]}, as a Page keeps them):
any case, the last value of several, as Scrapy's ``Headers`` gives it
(tests/*/test_metadata.py holds it to Scrapy's on generated headers). Written without
Scrapy: page processes import none of Scrapy or Twisted (some 20 MB each).
"""

from __future__ import annotations


def header(headers, name: str) -> str | None:
    """The value of header ``name`` in ``headers`` (keys str or bytes, values a list or one
    value), as text; None when it is not there or has no value."""
    wanted = name.lower()
    found = None
    try:
        for key, values in (headers or {}).items():
            if isinstance(key, bytes):
                key = key.decode("latin-1")
            if not isinstance(key, str) or key.lower() != wanted:
                continue
            if isinstance(values, list | tuple):
                found = values[-1] if values else None
            else:
                found = values
    except (AttributeError, TypeError):
        return None
    if isinstance(found, bytes):
        found = found.decode("latin-1")
    return found if isinstance(found, str) else None
