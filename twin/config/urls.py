from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path, register_converter
from django.views.generic import RedirectView

from twin.alerts import views as alerts_views
from twin.api import heatmap as api_heatmap
from twin.api import queue as api_queue
from twin.api import views as api_views
from twin.control import drills_api
from twin.control import views as control_views
from twin.metrics import views as metrics_views
from twin.pages import entities as pages_entities
from twin.pages import grid as pages_grid
from twin.pages import incidents as pages_incidents
from twin.pages import rack as pages_rack
from twin.pages import views as pages_views
from twin.studies import views as studies_views
from twin.studies import whatif_views


class EngineIdConverter:
    """A core id in a URL: at most 18 digits, so it fits SQLite's and PostgreSQL's 64-bit
    integers (a longer one is a 404, not an overflow)."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(EngineIdConverter, "engine_id")
handler400 = "twin.pages.errors.bad_request"
handler403 = "twin.pages.errors.permission_denied"
handler404 = "twin.pages.views.not_found"
handler500 = "twin.pages.errors.server_error"

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
    path("grids/", pages_grid.grids_page, name="grids"),
    path("grids/<slug:name>/", pages_grid.grid_page, name="grid"),
    path("grids/<slug:name>/drills", pages_grid.grid_drill_form, name="grid-drill"),
    path("grids/<slug:name>/whatifs", pages_grid.grid_whatif_form, name="grid-whatif"),
    path("grids/<slug:name>/sites/<path:place>/", pages_grid.grid_site_page, name="grid-site"),
    path("api/grids/<slug:name>/", pages_grid.api_grid, name="api-grid"),
    path("incidents/", pages_incidents.incidents_page, name="incidents"),
    path("incidents/<engine_id:pk>/", pages_incidents.incident_page, name="incident"),
    path("incidents/<engine_id:pk>/ack", pages_incidents.incident_ack_form, name="incident-ack"),
    path("api/incidents", pages_incidents.api_incidents, name="api-incidents"),
    path("api/incidents/<engine_id:pk>", pages_incidents.api_incident, name="api-incident"),
    path("api/incidents/<engine_id:pk>/ack", pages_incidents.api_incident_ack,
         name="api-incident-ack"),
    path("whatif/", whatif_views.whatif_page, name="whatif"),
    path("whatif/<engine_id:pk>/", whatif_views.whatif_result, name="whatif-result"),
    path("whatif/<engine_id:pk>/save-study", studies_views.whatif_save, name="whatif-save-study"),
    path("studies/", studies_views.studies_page, name="studies"),
    path("studies/<engine_id:pk>/", studies_views.study_page, name="study"),
    path("studies/<engine_id:pk>/resume", studies_views.study_resume, name="study-resume"),
    path("studies/<engine_id:pk>/<str:name>", studies_views.study_file, name="study-file"),
    path("search/", pages_entities.search_page, name="search"),
    path("jobs/<str:name>/", pages_entities.job_page, name="job"),
    path("jobs/<str:name>/actions", control_views.job_action_form, name="job-action"),
    path("nodes/<engine_id:index>/drain", control_views.node_action_form,
         {"action": "drain"}, name="node-drain"),
    path("nodes/<engine_id:index>/resume", control_views.node_action_form,
         {"action": "resume"}, name="node-resume"),
    path("drills/<engine_id:pk>/end", control_views.drill_end_form, name="drill-end"),
    path("api/jobs/<str:name>/actions", control_views.api_job_action, name="api-job-action"),
    path("api/drills/<engine_id:pk>/end", control_views.api_drill_end, name="api-drill-end"),
    path("nodes/<engine_id:index>/", pages_entities.node_page, name="node"),
    path("switches/<engine_id:index>/", pages_entities.switch_page, name="switch"),
    path("racks/<engine_id:index>/", pages_rack.rack_page, name="rack"),
    path("tenants/<str:name>/", pages_entities.tenant_page, name="tenant"),
    path("alerts/", alerts_views.alerts_page, name="alerts"),
    path("alerts/<engine_id:pk>/ack", alerts_views.alert_ack_form, name="alert-ack"),
    path("alerts/silences", alerts_views.silence_create_form, name="alert-silences"),
    path("alerts/silences/<engine_id:pk>/expire", alerts_views.silence_expire_form,
         name="alert-silence-expire"),
    path("alerts/runbooks/", alerts_views.runbooks_page, name="alert-runbooks"),
    path("api/alerts", alerts_views.api_alerts, name="api-alerts"),
    path("api/alerts/<engine_id:pk>/ack", alerts_views.api_alert_ack, name="api-alert-ack"),
    path("api/search", pages_entities.api_search, name="api-search"),
    path("api/names", pages_entities.api_names, name="api-names"),
    path("api/inventory", api_views.api_inventory, name="api-inventory"),
    path("api/state", api_views.api_state, name="api-state"),
    path("api/jobs", api_views.api_jobs, name="api-jobs"),
    path("api/queue", api_queue.api_queue, name="api-queue"),
    path("api/events", api_views.api_events, name="api-events"),
    path("api/history", api_views.api_history, name="api-history"),
    path("api/drills", drills_api.api_drills, name="api-drills"),
    path("api/studies", studies_views.api_studies, name="api-studies"),
    path("api/studies/<engine_id:pk>", studies_views.api_study, name="api-study"),
    path("api/whatif", whatif_views.api_whatif, name="api-whatif"),
    path("api/whatif/<engine_id:pk>", whatif_views.api_whatif_detail, name="api-whatif-detail"),
    path("api/heatmap", api_heatmap.api_heatmap, name="api-heatmap"),
    path("api/racks/<engine_id:index>", api_views.api_rack, name="api-rack"),
    path("api/nodes/<engine_id:index>", api_views.api_node, name="api-node"),
    path("api/jobs/<str:name>", api_views.api_job, name="api-job"),
    path("metrics", metrics_views.metrics, name="metrics"),
    path("metrics/dcgm", metrics_views.metrics_dcgm, name="metrics-dcgm"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
