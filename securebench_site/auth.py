"""Login lockout (django-axes): the authentication backend and the page a locked-out user sees."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.timesince import timeuntil


class LoginLockoutBackend(AxesStandaloneBackend):
    """Refuses logins of a locked-out username and address; authenticates nobody itself.

    Every login over the network (the sign-in page, the admin's) passes the request. Code
    that authenticates without one (Django's test client, a shell) is not a network login, so
    it is neither counted nor refused, where django-axes' own backend would raise.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """The sign-in page again, with the reason and when to retry, answered 429."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form = AuthenticationForm(request, initial={"username": username})
    cool_off = get_cool_off(request)
    wait = f" Try again in {timeuntil(timezone.now() + cool_off)}," if cool_off else ""
    form.cleaned_data = {}  # add_error expects a cleaned form; this one is never validated
    form.add_error(
        None,
        "Too many failed sign-in attempts for this account from your address."
        f"{wait} or ask an admin to unlock it.",
    )
    context = {"form": form, "next": request.POST.get("next", "")}
    return render(request, "registration/login.html", context, status=429)
