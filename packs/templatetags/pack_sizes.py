"""Sizes as a reader means them: text in characters, files and JSON values in bytes."""

from __future__ import annotations

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma
from django.template.defaultfilters import filesizeformat

register = template.Library()


@register.filter
def resource_size(size: int, kind: str) -> str:
    """A resource's size by its kind: a text's length in characters ("1 character"), any other
    kind's bytes ("3 bytes", "2.0 KB"), as the compiler measures them."""
    if kind == "text":
        return f"{intcomma(size)} character{'' if size == 1 else 's'}"
    return str(filesizeformat(size))
