"""A page's structured data (JSON-LD and microdata, through extruct) read into the metadata's
product, recipe and article fields, capped in the values visited and never raising
(crawler/page/metadata.py).
"""

from __future__ import annotations

import json
from collections import deque

import lxml.etree
import lxml.html

from crawler.page.decode import _clean

_JSONLD_XPATH = lxml.etree.XPath('//script[@type="application/ld+json"]')


_ITEMTYPE_XPATH = lxml.etree.XPath("//*[@itemscope][@itemtype]")


# extruct's microdata XPaths are quadratic in the itemprops of a scope (set:difference) and
# in the nesting of scopes: a scope past these bounds is not read (hostile or absurd pages)
_MAX_ITEMPROPS = 2000


_MAX_NESTED_SCOPES = 500


_MAX_NESTED_NODES = 10_000  # summed over the nested scopes (a node under k of them counts k times)


_COUNT_ITEMPROPS = lxml.etree.XPath("count(descendant-or-self::*[@itemprop])")


_NESTED_SCOPES = lxml.etree.XPath(f"(descendant::*[@itemscope])[position() <= {_MAX_NESTED_SCOPES + 1}]")


_COUNT_NODES = lxml.etree.XPath("count(descendant-or-self::node())")


# a JSON-LD block bigger than this is checked with json.loads first: extruct retries a
# broken block with jstyleson, pure Python, ~0.2 s per MB
_JSONLD_PRECHECK = 64 * 1024


_ARTICLE_TYPES = frozenset(
    {
        "Article",
        "NewsArticle",
        "BlogPosting",
        "TechArticle",
        "ScholarlyArticle",
        "MedicalScholarlyArticle",
        "Report",
        "SatiricalArticle",
        "LiveBlogPosting",
        "SocialMediaPosting",
        "DiscussionForumPosting",
        "AnalysisNewsArticle",
        "AskPublicNewsArticle",
        "BackgroundNewsArticle",
        "OpinionNewsArticle",
        "ReportageNews",
        "ReviewNewsArticle",
    }
)


_PRODUCT_TYPES = frozenset({"Product", "ProductModel", "IndividualProduct", "SomeProducts", "ProductGroup"})


_RECIPE_TYPES = frozenset({"Recipe"})


_MAX_NODES = 5000  # structured-data values visited per page


_MAX_AUTHORS = 20


def _jsonld(root, base: str, problems: list) -> list:
    """The JSON-LD items of the page, one block at a time (a broken block costs only itself)."""
    out = []
    for script in _JSONLD_XPATH(root):
        try:
            if len(script.text or "") > _JSONLD_PRECHECK:
                json.loads(script.text, strict=False)  # ValueError: not JSON, and no slow retry
            out.extend(_structured(script, base, "json-ld"))
        except Exception:  # not JSON (ValueError), nested too deep (RecursionError)...
            problems.append("jsonld")
    return out


def _structured(element, base: str, syntax: str) -> list:
    """extruct's items of ``syntax`` in ``element``. extruct (and rdflib, which it
    imports) is imported when first needed: a worker whose pages are read in page
    processes never needs it (10 MB); a page process imports it when it starts."""
    import extruct

    return extruct.extract(element, base_url=base, syntaxes=[syntax], uniform=True)[syntax]


def _has_itemscope(text: str) -> bool:
    return "itemscope" in text or "itemscope" in text.lower()  # (a case-insensitive regex is 10x slower)


def _microdata(root, base: str, problems: list) -> list:
    """The microdata items of the first Product, Recipe and Article scopes of the page
    (each with what it nests). Only those: extruct's cost grows with every itemscope, and a
    product listing can have hundreds. A scope too costly for extruct is skipped."""
    chosen: list = []
    wanted = [_PRODUCT_TYPES, _RECIPE_TYPES, _ARTICLE_TYPES]
    seen_types: set[str] = set()  # a listing repeats the same itemtype many times
    for el in _ITEMTYPE_XPATH(root):
        itemtype = el.get("itemtype") or ""
        if itemtype in seen_types:
            continue
        seen_types.add(itemtype)
        names = _type_names(itemtype.split())
        for group in wanted:
            if group.intersection(names):
                wanted.remove(group)
                chosen.append(el)
                break
        if not wanted:
            break
    out = []
    for el in chosen:
        if _microdata_too_large(el):
            problems.append("microdata_too_large")
            continue
        try:
            out.extend(_structured(el, base, "microdata"))
        except Exception:  # e.g. RecursionError on absurdly nested scopes
            problems.append("microdata")
    return out


def _microdata_too_large(scope) -> bool:
    """Whether extruct would take too long on ``scope``: its XPaths merge the node sets of
    the nested scopes (quadratic in their summed size) and compare the itemprops of each
    scope with those of its nested scopes (quadratic in their number)."""
    if _COUNT_ITEMPROPS(scope) > _MAX_ITEMPROPS:
        return True
    nested = _NESTED_SCOPES(scope)
    if len(nested) > _MAX_NESTED_SCOPES:
        return True
    total = 0
    for el in nested:  # outer scopes first: the sum passes the bound early on a deep chain
        total += _COUNT_NODES(el)
        if total > _MAX_NESTED_NODES:
            return True
    return False


def _type_names(value) -> list[str]:
    """schema.org type names of an @type value: "Product", ["Product", "Thing"],
    "http://schema.org/Product", "schema:Product" all give "Product"."""
    if isinstance(value, str):
        value = [value]
    elif not isinstance(value, list):
        return []
    return [_short_name(v) for v in value if isinstance(v, str)]


def _short_name(value: str) -> str:
    value = value.strip().rstrip("/")
    return value[max(value.rfind("/"), value.rfind(":"), value.rfind("#")) + 1 :]


def _availability(value: str) -> str:
    """ "https://schema.org/InStock", "schema:InStock" -> "InStock"; other text as it is."""
    return _short_name(value) if "schema.org/" in value or value.startswith("schema:") else value


def _text(value) -> str | None:
    """A string of a schema.org value: strings, numbers, {"@value"}, {"name"}, or the
    first of a list."""
    for _ in range(8):  # bounded unwrapping
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return repr(value) if value == value and abs(value) != float("inf") else None
        if isinstance(value, dict):
            value = value.get("@value", value.get("name"))
        elif isinstance(value, list):
            value = next((v for v in value if v not in (None, "", [], {})), None)
        else:
            return None
    return None


class _StructuredData:
    """The typed nodes of a page's JSON-LD, then of its microdata, each breadth first
    (top-level items and the members of an @graph before what they nest), with @id
    references resolvable."""

    def __init__(self, *sources: list):
        self.nodes: list[tuple[list[str], dict]] = []
        self.ids: dict[str, dict] = {}
        visited = 0
        for items in sources:
            queue = deque(items)
            while queue and visited < _MAX_NODES:
                value = queue.popleft()
                visited += 1
                if isinstance(value, dict):
                    node_id = value.get("@id")
                    if isinstance(node_id, str) and len(value) > 1:
                        self.ids.setdefault(node_id, value)
                    types = _type_names(value.get("@type"))
                    if types:
                        self.nodes.append((types, value))
                    graph = value.get("@graph")
                    if isinstance(graph, list):  # its members are top-level nodes
                        queue.extendleft(reversed([v for v in graph if isinstance(v, (dict, list))]))
                    queue.extend(v for k, v in value.items() if k != "@graph" and isinstance(v, (dict, list)))
                elif isinstance(value, list):
                    queue.extend(v for v in value if isinstance(v, (dict, list)))

    def first(self, types: frozenset) -> dict | None:
        return next((node for names, node in self.nodes if types.intersection(names)), None)

    def deref(self, value):
        if isinstance(value, dict) and isinstance(value.get("@id"), str) and len(value) == 1:
            return self.ids.get(value["@id"], value)
        return value

    def date(self, key: str) -> str | None:
        article = self.first(_ARTICLE_TYPES)
        if article is not None and _text(article.get(key)):
            return _text(article.get(key))
        return next((_text(node[key]) for _, node in self.nodes if _text(node.get(key))), None)

    def fields(self, max_length: int):
        product = self.first(_PRODUCT_TYPES)
        if product is not None:
            yield "product:name", _text(product.get("name"))
            yield from self._offer(product.get("offers"))
        recipe = self.first(_RECIPE_TYPES)
        if recipe is not None:
            ingredients = recipe.get("recipeIngredient") or recipe.get("ingredients")
            yield "recipe:ingredients", _json_list(ingredients, max_length)
        article = self.first(_ARTICLE_TYPES)
        if article is not None:
            yield "article:headline", _text(article.get("headline")) or _text(article.get("name"))
            yield "article:author", self._author(article.get("author"))

    def _offer(self, offers):
        """product:price, :currency, :availability of the first priced offer (depth first
        through lists and AggregateOffers)."""
        stack, price, currency, availability, seen = [offers], None, None, None, 0
        while stack and seen < 200:
            seen += 1
            offer = self.deref(stack.pop())
            if isinstance(offer, list):
                stack.extend(reversed(offer))
                continue
            if not isinstance(offer, dict):
                continue
            aggregate = "AggregateOffer" in _type_names(offer.get("@type"))
            keys = ("lowPrice", "price") if aggregate else ("price", "lowPrice")
            spec = self.deref(offer.get("priceSpecification"))
            if isinstance(spec, list):
                spec = next((self.deref(s) for s in spec if isinstance(self.deref(s), dict)), None)
            spec = spec if isinstance(spec, dict) else {}
            offer_price = next((_text(offer.get(k)) for k in keys if _text(offer.get(k))), None)
            offer_price = offer_price or _text(spec.get("price"))
            offer_currency = _text(offer.get("priceCurrency")) or _text(spec.get("priceCurrency"))
            if availability is None and _text(offer.get("availability")):
                availability = _availability(_text(offer.get("availability")))
            if price is None and offer_price:
                price, currency = offer_price, offer_currency
            if price is not None and availability is not None:
                break
            if offer.get("offers") is not None:
                stack.append(offer["offers"])
        yield "product:price", price
        yield "product:currency", currency
        yield "product:availability", availability

    def _author(self, value) -> str | None:
        value = self.deref(value)
        if not isinstance(value, list):
            value = [value]
        names: list[str] = []
        for author in value[:_MAX_AUTHORS]:
            author = self.deref(author)
            name = _text(author.get("name")) if isinstance(author, dict) else _text(author)
            name = " ".join(name.split()) if name else ""
            if name and name not in names:
                names.append(name)
        return ", ".join(names) or None


def _json_list(values, max_length: int) -> str | None:
    """A JSON array of the strings in ``values`` that fits in ``max_length`` characters."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return None
    out: list[str] = []
    size = 2
    for value in values:
        text = _text(value) if not isinstance(value, list) else None
        text = _clean(text, max_length) if text else ""
        if not text:
            continue
        encoded = len(json.dumps(text, ensure_ascii=False)) + (2 if out else 0)
        if size + encoded > max_length:
            if not out:  # a first ingredient too long on its own: its longest prefix that fits
                low, high = 0, len(text)
                while low < high:
                    mid = (low + high + 1) // 2
                    if len(json.dumps([text[:mid]], ensure_ascii=False)) <= max_length:
                        low = mid
                    else:
                        high = mid - 1
                if text[:low].strip():
                    out.append(text[:low].rstrip())
            break
        out.append(text)
        size += encoded
    return json.dumps(out, ensure_ascii=False) if out else None
