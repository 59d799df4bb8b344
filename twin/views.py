"""Thin views: authenticate (middleware), call a selector, render."""

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from twin import selectors


@require_GET
@login_required
def home(request):
    cluster = selectors.cluster_current()
    summary = selectors.inventory_summary(cluster=cluster) if cluster else None
    return render(request, "twin/home.html", {"summary": summary})


@require_GET
@login_required
def api_inventory(request):
    cluster = selectors.cluster_current()
    if cluster is None:
        return JsonResponse({"error": "no cluster built yet; run build_cluster"}, status=404)
    return JsonResponse({"cluster": cluster.name, **cluster.summary})
