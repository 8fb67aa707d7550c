from django.urls import path, re_path

from gateway import run_calls, views

app_name = "gateway"

# The secret segment is the capability (gateway.services); the paths after it are fixed:
# nothing of the request's path reaches the provider's URL.
urlpatterns = [
    re_path(
        r"^gateway/(?P<secret>[^/]+)/v1/chat/completions/?$",
        views.chat_completions,
        name="chat-completions",
    ),
    re_path(r"^gateway/(?P<secret>[^/]+)/v1/messages/?$", views.messages, name="messages"),
    path("runs/<int:run_id>/model-calls/", run_calls.run_calls_view, name="run-calls"),
]
