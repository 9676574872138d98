"""The build ``scrapyd-deploy`` runs (``python setup.py bdist_egg``) to make the egg it
uploads to scrapyd. Everything is declared in pyproject.toml (name, packages, package
data, the ``scrapy`` entry point naming the settings module); with this file present,
scrapyd-deploy uses it instead of writing a setup.py of its own."""

from setuptools import setup

setup()
