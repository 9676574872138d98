"""``scrapy serve``: the UrlStore's read API and the live dashboard (app.py, static/)."""
