"""Signals of this project (Scrapy signals are plain objects)."""

# Sent with ``request=`` when the page of a leased request has been handled (stored,
# or failed for good). The frontier scheduler acknowledges the lease.
page_handled = object()
