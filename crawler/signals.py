"""Signals of this project (Scrapy signals are plain objects)."""

# Sent with ``request=`` when the page of a leased request has been handled (stored,
# or failed for good). The frontier scheduler acknowledges the lease.
page_handled = object()

# Sent with ``request=`` when a leased page could not be stored (StoreUnavailable): the
# scheduler gives the lease back, and the page is fetched again later.
page_not_stored = object()

# Sent when no more pages are coming soon (nothing due within a few seconds, nothing
# downloading): what waits for more pages (an open WARC batch) is stored at once.
frontier_waiting = object()

# Sent when URLs were added to the frontier outside the scheduler's own pushes (submissions
# taken from the list, or ``scrapy submit``'s counter moved): the scheduler looks for due
# hosts at once rather than at its next poll.
frontier_grew = object()
