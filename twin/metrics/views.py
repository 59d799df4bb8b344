"""``/metrics`` and ``/metrics/dcgm``: Prometheus text for scrapers, with access of their own.

The login wall (``twin.config.middleware``) lets these two paths through; each view checks access
itself. A request may read them when it comes from a logged-in user (a browser, as before), or
carries ``Authorization: Bearer <CLUSTERTWIN_METRICS_TOKEN>`` (compared in constant time; no
token set: bearer access off), or comes from an address in ``CLUSTERTWIN_METRICS_ALLOW``
(``REMOTE_ADDR`` only: a forwarded-for header is the client's to write). Anything else gets a
plain 401 with ``WWW-Authenticate: Bearer``, never a redirect to a login page a scraper cannot
use.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from twin import app_setting
from twin.inventory import selectors as inventory_selectors
from twin.live import selectors as live_selectors
from twin.metrics.collector import CONTENT_TYPE, TwinCollector, exposition
from twin.metrics.dcgm import (
    DcgmCollector,
    HoldersNotReported,
    HostDown,
    HostNotFound,
    dcgm_exposition_chunks,
    dcgm_inventory,
    dcgm_readings,
)
from twin.sockets import consumers

LIBRARY_MAX_GPUS = 4096
"""Up to this many GPUs ``prometheus_client`` writes the DCGM answer; past it the bulk writer
(same bytes, ``twin.metrics.dcgm.dcgm_exposition_chunks``) keeps a 100k-GPU scrape within
seconds."""


def _bearer_ok(request) -> bool | None:
    """True or False for a bearer token sent, None when none was."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    expected = app_setting("METRICS_TOKEN")
    return bool(expected) and hmac.compare_digest(token.strip().encode(), expected.encode())


def _address_allowed(request) -> bool:
    networks = app_setting("METRICS_ALLOW")
    if not networks:
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:  # ::ffff:a.b.c.d
        address = address.ipv4_mapped
    return any(address in net for net in networks)


def _denied(request) -> HttpResponse | None:
    """None when the request may read the metrics, else the 401 to send."""
    if request.user.is_authenticated:
        return None
    bearer = _bearer_ok(request)
    if bearer or _address_allowed(request):
        return None
    response = HttpResponse("metrics: log in, send Authorization: Bearer <token>, or scrape "
                            "from an allowed address\n", status=401,
                            content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = ('Bearer realm="clustertwin", error="invalid_token"'
                                    if bearer is False else 'Bearer realm="clustertwin"')
    return response


def _plain(text: str, status: int) -> HttpResponse:
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


@require_GET
def metrics(request):
    """The twin's own figures (``twin.metrics.collector``)."""
    denied = _denied(request)
    if denied is not None:
        return denied
    body = exposition(TwinCollector(live=live_selectors.live_state_get(),
                                    stream=consumers.stream_metrics()))
    return HttpResponse(body, content_type=CONTENT_TYPE)


@require_GET
def metrics_dcgm(request):
    """What dcgm-exporter would report for the simulated NVIDIA GPUs (``twin.metrics.dcgm``): the
    whole cluster, or one node with ``?hostname=NAME`` (as a per-node exporter is scraped)."""
    denied = _denied(request)
    if denied is not None:
        return denied
    cluster = live_selectors.cluster_current()
    if cluster is None:
        return _plain(live_selectors.cluster_choice_problem() or "no cluster built yet", 503)
    live = live_selectors.live_state_get()
    if live is None or live.placement is None:
        return _plain("the live engine has not published a frame yet", 503)
    if live.inventory.rpartition(":")[2] != str(cluster.pk):
        return _plain(f"the live engine does not run cluster {cluster.name}", 503)
    inv = dcgm_inventory(cluster.name, inventory_selectors.dcgm_nodes_get(cluster=cluster))
    try:
        readings = dcgm_readings(inv, placement=live.placement, frame=live.frame,
                                 hostname=request.GET.get("hostname") or None)
    except HostNotFound as exc:
        return _plain(f"no node {exc.args[0]!r} with NVIDIA GPUs in {cluster.name}", 404)
    except HostDown as exc:
        return _plain(f"node {exc.args[0]!r} is down: its exporter does not answer", 503)
    except HoldersNotReported as exc:
        return _plain(str(exc), 503)
    if readings.gpus.size <= LIBRARY_MAX_GPUS:
        return HttpResponse(exposition(DcgmCollector(inv, readings)), content_type=CONTENT_TYPE)
    return StreamingHttpResponse(dcgm_exposition_chunks(inv, readings),
                                 content_type=CONTENT_TYPE)
