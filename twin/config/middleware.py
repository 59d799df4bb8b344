"""Login required everywhere: every page but the login page and static files.  The API's
request bodies are bounded here too, before any other code reads them."""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse

from scheduler.limits.documents import MAX_BYTES
from twin.api.bodies import declared_length, too_large

_OPEN_PREFIXES = ("/accounts/login/", "/static/", "/admin/", "/favicon.ico")
# Prometheus scrapers cannot log in: these views check a token or the address themselves
# (twin.metrics.views) and answer 401, not a redirect.
_SELF_GUARDED = frozenset({"/metrics", "/metrics/dcgm"})


class LoginRequiredEverywhere:
    """Send anonymous visitors to the login page (JSON 401 for the API).

    The admin keeps its own login, so it is left to Django's admin site.  An API body
    declared over :data:`~scheduler.limits.documents.MAX_BYTES` is the API's JSON 413 before
    anything reads it (the CSRF check, a view): Django's own bound would answer a 400.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (not request.user.is_authenticated and not request.path.startswith(_OPEN_PREFIXES)
                and request.path not in _SELF_GUARDED):
            if request.path.startswith("/api/"):
                return JsonResponse({"error": "authentication required"}, status=401)
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        length = declared_length(request)
        if request.path.startswith("/api/") and length is not None and length > MAX_BYTES:
            return too_large(length)
        return self.get_response(request)
