from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path, register_converter
from django.views.generic import RedirectView

import twin.api.queue as views_queue
import twin.control.views as views_actions
import twin.studies.views as views_studies
import twin.studies.whatif_views as views_whatif
from twin.alerts import views as views_alerts
from twin.api import heatmap as views_heatmap
from twin.api import views as api_views
from twin.metrics import views as views_metrics
from twin.pages import entities as views_pages
from twin.pages import views as pages_views


class EngineIdConverter:
    """A core id in a URL: at most 18 digits, so it fits SQLite's and PostgreSQL's 64-bit
    integers (a longer one is a 404, not an overflow)."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(EngineIdConverter, "engine_id")
handler404 = "twin.pages.views.not_found"

admin.site.site_header = "ClusterTwin inventory"
admin.site.site_title = "ClusterTwin"

urlpatterns = [
    # browsers ask for /favicon.ico whatever the page says: send them to the static icon
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("", pages_views.home, name="home"),
    path("topology/", pages_views.topology, name="topology"),
    path("jobs/", pages_views.jobs, name="jobs"),
    path("failures/", pages_views.failures, name="failures"),
    path("events/", pages_views.events, name="events"),
    path("drills/", pages_views.drills, name="drills"),
    path("whatif/", views_whatif.whatif_page, name="whatif"),
    path("whatif/<engine_id:pk>/", views_whatif.whatif_result, name="whatif-result"),
    path("whatif/<engine_id:pk>/save-study", views_studies.whatif_save, name="whatif-save-study"),
    path("studies/", views_studies.studies_page, name="studies"),
    path("studies/<engine_id:pk>/", views_studies.study_page, name="study"),
    path("studies/<engine_id:pk>/resume", views_studies.study_resume, name="study-resume"),
    path("studies/<engine_id:pk>/<str:name>", views_studies.study_file, name="study-file"),
    path("search/", views_pages.search_page, name="search"),
    path("jobs/<str:name>/", views_pages.job_page, name="job"),
    path("jobs/<str:name>/actions", views_actions.job_action_form, name="job-action"),
    path("nodes/<engine_id:index>/drain", views_actions.node_action_form,
         {"action": "drain"}, name="node-drain"),
    path("nodes/<engine_id:index>/resume", views_actions.node_action_form,
         {"action": "resume"}, name="node-resume"),
    path("drills/<engine_id:pk>/end", views_actions.drill_end_form, name="drill-end"),
    path("api/jobs/<str:name>/actions", views_actions.api_job_action, name="api-job-action"),
    path("api/drills/<engine_id:pk>/end", views_actions.api_drill_end, name="api-drill-end"),
    path("nodes/<engine_id:index>/", views_pages.node_page, name="node"),
    path("switches/<engine_id:index>/", views_pages.switch_page, name="switch"),
    path("tenants/<str:name>/", views_pages.tenant_page, name="tenant"),
    path("alerts/", views_alerts.alerts_page, name="alerts"),
    path("alerts/<engine_id:pk>/ack", views_alerts.alert_ack_form, name="alert-ack"),
    path("api/alerts", views_alerts.api_alerts, name="api-alerts"),
    path("api/alerts/<engine_id:pk>/ack", views_alerts.api_alert_ack, name="api-alert-ack"),
    path("api/search", views_pages.api_search, name="api-search"),
    path("api/inventory", api_views.api_inventory, name="api-inventory"),
    path("api/state", api_views.api_state, name="api-state"),
    path("api/jobs", api_views.api_jobs, name="api-jobs"),
    path("api/queue", views_queue.api_queue, name="api-queue"),
    path("api/events", api_views.api_events, name="api-events"),
    path("api/history", api_views.api_history, name="api-history"),
    path("api/drills", api_views.api_drills, name="api-drills"),
    path("api/studies", views_studies.api_studies, name="api-studies"),
    path("api/studies/<engine_id:pk>", views_studies.api_study, name="api-study"),
    path("api/whatif", views_whatif.api_whatif, name="api-whatif"),
    path("api/whatif/<engine_id:pk>", views_whatif.api_whatif_detail, name="api-whatif-detail"),
    path("api/heatmap", views_heatmap.api_heatmap, name="api-heatmap"),
    path("api/racks/<engine_id:index>", api_views.api_rack, name="api-rack"),
    path("api/nodes/<engine_id:index>", api_views.api_node, name="api-node"),
    path("api/jobs/<str:name>", api_views.api_job, name="api-job"),
    path("metrics", views_metrics.metrics, name="metrics"),
    path("metrics/dcgm", views_metrics.metrics_dcgm, name="metrics-dcgm"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
