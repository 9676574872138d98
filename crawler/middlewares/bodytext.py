"""Scrapy's decompression and meta-refresh middlewares, kept from decoding whole pages
in the reactor thread.

A page's text is decoded once, in the page process (crawler/page/reader.py). Two of
Scrapy's own downloader middlewares decode it in the reactor besides, where every
millisecond delays the hosts that are due (bench/throughput.py measured them at some
15% of the reactor's time):

- ``HttpCompressionMiddleware`` replaces a compressed response with its decompressed
  body through ``Response.replace``, which reads every attribute of the old response,
  ``encoding`` included: a charset detection (charset-normalizer) over the *compressed*
  bytes, whose result is thrown away (the new response detects its own). Here the old
  response is told its encoding first, so that nothing is detected for it.
- ``MetaRefreshMiddleware`` looks for ``<meta http-equiv="refresh">`` in the first 4,096
  characters of ``response.text``, which decodes the whole body first. Here a page whose
  first 16 KB (4,096 characters of UTF-8 at most) hold no NUL byte, so that its encoding
  spells ASCII as ASCII, and no "refresh" in any case, cannot match w3lib's pattern and is
  let through without decoding; any other page gets Scrapy's own check.
"""

from __future__ import annotations

from scrapy.downloadermiddlewares import httpcompression, redirect
from scrapy.http import TextResponse

META_REFRESH_HEAD = 4 * 4096  # bytes that hold Scrapy's 4,096 characters in any ASCII-compatible encoding


class HttpCompressionMiddleware(httpcompression.HttpCompressionMiddleware):
    def process_response(self, request, response, spider=None):
        if isinstance(response, TextResponse) and response.headers.get(b"Content-Encoding"):
            # the compressed response is replaced, with encoding=None (detected anew on
            # the decompressed body): its own would be detected only to be discarded
            response._encoding = "latin-1"
        return super().process_response(request, response)


class MetaRefreshMiddleware(redirect.MetaRefreshMiddleware):
    def process_response(self, request, response, spider=None):
        head = response.body[:META_REFRESH_HEAD]
        if b"\x00" not in head and b"refresh" not in head.lower():
            return response
        return super().process_response(request, response)
