"""One page of a list page's rows (``?page=N``), for the pages of packs and of the apps above."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.http import HttpRequest
from django.utils.functional import cached_property


class CountedPaginator(Paginator):
    """A paginator told its count when the caller knows it, e.g. from a done evaluation's
    summary: a COUNT over 14k results on every page load is then saved."""

    def __init__(self, object_list: Any, per_page: int, *, count: int | None = None) -> None:
        super().__init__(object_list, per_page)
        self._known_count = count

    @cached_property
    def count(self) -> int:
        return self._known_count if self._known_count is not None else super().count


def paginate(
    request: HttpRequest,
    items: Any,
    per_page: int,
    *,
    count: int | None = None,
    page_param: str = "page",
) -> Page:
    """The page the request asks for (a bad or missing number: the first or the last page).
    ``count``, when known, saves the COUNT query; ``page_param`` names the query parameter
    when a page shows two paged lists."""
    return CountedPaginator(items, per_page, count=count).get_page(request.GET.get(page_param))
