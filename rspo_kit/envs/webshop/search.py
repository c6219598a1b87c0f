"""BM25 product search over the catalogue, as the original's pyserini index but with ``bm25s``.

The indexed text per product is what the original ``convert_product_file_format`` wrote: title,
description, first bullet point and ``"name: v1, and v2"`` option text, lower-cased. Lucene's BM25 with
pyserini's defaults (k1=0.9, b=0.4). Ties are broken by catalogue order, so results are deterministic.
One index per catalogue per process (built in about a second); query results are memoised.
"""

from __future__ import annotations

from functools import cache, lru_cache

import bm25s
import numpy as np

from rspo_kit.envs.webshop.catalogue import Catalogue, Product, words

TOP_N = 50  # the original returns the top 50 products, 10 to a page
# Lucene's English stop words: pyserini's default analyzer drops them as well.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)


def document_text(product: Product) -> str:
    option_text = ", and ".join(
        f"{name}: {', and '.join(values)}" for name, values in product.options.items()
    )
    first_bullet = product.bullets[0] if product.bullets else ""
    return " ".join([product.title, product.description, first_bullet, option_text]).lower()


def tokenize(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]


class SearchEngine:
    """``search(query)`` -> asins of the top ``TOP_N`` products with a positive BM25 score."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.asins = tuple(p.asin for p in catalogue.products)
        self._bm25 = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
        self._bm25.index([tokenize(document_text(p)) for p in catalogue.products], show_progress=False)
        self._vocab = self._bm25.vocab_dict
        self._order = np.arange(len(self.asins))
        self.search = lru_cache(maxsize=8192)(self._search)

    def _search(self, query: str, top_n: int = TOP_N) -> tuple[str, ...]:
        tokens = [t for t in tokenize(query) if t in self._vocab]
        if not tokens:
            return ()
        scores = self._bm25.get_scores(tokens)
        top = np.lexsort((self._order, -scores))[:top_n]  # score descending, then catalogue order
        return tuple(self.asins[i] for i in top if scores[i] > 0)


@cache
def engine_for(catalogue: Catalogue) -> SearchEngine:
    return SearchEngine(catalogue)
