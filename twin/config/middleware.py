"""Login required everywhere: every page but the login page and static files."""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse

_OPEN_PREFIXES = ("/accounts/login/", "/static/", "/admin/", "/favicon.ico")
# Prometheus scrapers cannot log in: these views check a token or the address themselves
# (twin.metrics.views) and answer 401, not a redirect.
_SELF_GUARDED = frozenset({"/metrics", "/metrics/dcgm"})


class LoginRequiredEverywhere:
    """Send anonymous visitors to the login page (JSON 401 for the API).

    The admin keeps its own login, so it is left to Django's admin site.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (not request.user.is_authenticated and not request.path.startswith(_OPEN_PREFIXES)
                and request.path not in _SELF_GUARDED):
            if request.path.startswith("/api/"):
                return JsonResponse({"error": "authentication required"}, status=401)
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)
