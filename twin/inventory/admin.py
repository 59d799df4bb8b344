"""The admin: how operators edit inventory.

Changelists must stay fast at 100,000 accelerators: every list joins what it shows
(``list_select_related``), filters only on small choice fields, and skips the second
full-table count (``show_full_result_count``).
"""

from django.contrib import admin, messages
from django.shortcuts import redirect
from django.urls import reverse

from twin import models as m
from twin.alerts import rules as alerts
from twin.inventory import services
from twin.live.columns import LiveColumn


class FastChangelist(admin.ModelAdmin):
    list_per_page = 100
    show_full_result_count = False


class AuditTrail(FastChangelist):
    """An audit record: shown, never added, changed or deleted here, superusers included."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

STATUS_READONLY = ("status",)
"""Status is changed by the list actions only: they are audited and reach the live engine."""


def _report(modeladmin, request, n: int, what: str) -> None:
    modeladmin.message_user(request, f"{n} {what}.", messages.SUCCESS)


@admin.register(m.Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "preset", "fabric_kind", "failure_profile", "created_at")
    readonly_fields = ("summary", "fabric_params", "created_at")
    search_fields = ("name",)


@admin.register(m.Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "region", "pue")
    list_select_related = ("cluster",)


class RackInline(admin.TabularInline):
    model = m.Rack
    extra = 0
    fields = ("name", "row", "column", "power_capacity_kw", "cooling_capacity_kw")
    show_change_link = True
    max_num = 400


@admin.register(m.DataHall)
class DataHallAdmin(admin.ModelAdmin):
    list_display = ("name", "site")
    list_select_related = ("site",)


@admin.action(description="Mark selected power feeds failed")
def feed_failed(modeladmin, request, queryset):
    n = services.power_feeds_set_status(feeds=queryset, status="down", user=request.user)
    _report(modeladmin, request, n, "power feeds marked failed")


@admin.action(description="Mark selected power feeds repaired")
def feed_repaired(modeladmin, request, queryset):
    n = services.power_feeds_set_status(feeds=queryset, status="up", user=request.user)
    _report(modeladmin, request, n, "power feeds marked repaired")


@admin.action(description="Mark selected cooling loops failed")
def loop_failed(modeladmin, request, queryset):
    n = services.cooling_loops_set_status(loops=queryset, status="down", user=request.user)
    _report(modeladmin, request, n, "cooling loops marked failed")


@admin.action(description="Mark selected cooling loops repaired")
def loop_repaired(modeladmin, request, queryset):
    n = services.cooling_loops_set_status(loops=queryset, status="up", user=request.user)
    _report(modeladmin, request, n, "cooling loops marked repaired")


@admin.register(m.PowerFeed)
class PowerFeedAdmin(FastChangelist):
    list_display = ("name", "hall", "capacity_kw", "status")
    list_select_related = ("hall__site",)
    search_fields = ("name",)
    list_filter = ("status",)
    actions = (feed_failed, feed_repaired)
    readonly_fields = STATUS_READONLY


@admin.register(m.CoolingLoop)
class CoolingLoopAdmin(FastChangelist):
    list_display = ("name", "hall", "kind", "capacity_kw", "status")
    list_select_related = ("hall__site",)
    list_filter = ("kind", "status")
    search_fields = ("name",)
    actions = (loop_failed, loop_repaired)
    readonly_fields = STATUS_READONLY


class NodeInline(admin.TabularInline):
    model = m.Node
    extra = 0
    fields = ("slot", "hostname", "accelerator_model", "accelerator_count", "status")
    show_change_link = True


@admin.register(m.Rack)
class RackAdmin(LiveColumn, FastChangelist):
    list_display = ("name", "hall", "row", "column", "power_capacity_kw", "cooling_capacity_kw",
                    "live_engine")
    list_select_related = ("hall__site",)
    search_fields = ("name",)
    raw_id_fields = ("power_feed", "cooling_loop")
    inlines = (NodeInline,)

    def live_statuses(self, view, objs):
        return view.racks([o.pk for o in objs])


@admin.register(m.AcceleratorModel)
class AcceleratorModelAdmin(admin.ModelAdmin):
    list_display = ("name", "vendor", "bf16_tflops", "hbm_gb", "hbm_tb_s", "scaleup_gb_s",
                    "scaleup_domain", "tdp_w", "per_node", "unconfirmed")
    list_filter = ("vendor",)
    search_fields = ("name", "vendor")


class AcceleratorInline(admin.TabularInline):
    model = m.Accelerator
    extra = 0
    fields = ("index", "serial", "status")
    readonly_fields = STATUS_READONLY


@admin.action(description="Drain selected nodes")
def drain(modeladmin, request, queryset):
    n = services.nodes_drain(nodes=queryset, user=request.user)
    _report(modeladmin, request, n, "nodes drained")


@admin.action(description="Undrain selected nodes")
def undrain(modeladmin, request, queryset):
    n = services.nodes_undrain(nodes=queryset, user=request.user)
    _report(modeladmin, request, n, "nodes undrained")


@admin.action(description="Mark selected nodes failed")
def node_failed(modeladmin, request, queryset):
    _report(modeladmin, request, services.nodes_mark_failed(nodes=queryset, user=request.user),
            "nodes marked failed")


@admin.action(description="Mark selected nodes repaired")
def node_repaired(modeladmin, request, queryset):
    _report(modeladmin, request, services.nodes_mark_repaired(nodes=queryset, user=request.user),
            "nodes marked repaired")


@admin.register(m.Node)
class NodeAdmin(LiveColumn, FastChangelist):
    list_display = ("hostname", "rack", "slot", "accelerator_model", "accelerator_count",
                    "nvlink_domain", "is_spare", "operator_status", "live_engine")
    list_select_related = ("rack", "accelerator_model")
    list_filter = ("status", "is_spare", "accelerator_model")
    search_fields = ("hostname", "rack__name")
    raw_id_fields = ("rack",)
    actions = (drain, undrain, node_failed, node_repaired)
    inlines = (AcceleratorInline,)
    readonly_fields = STATUS_READONLY + ("status_reason", "live_engine")

    def live_statuses(self, view, objs):
        return view.nodes([o.pk for o in objs])

    def delete_view(self, request, object_id, extra_context=None):
        node = self.get_object(request, object_id)
        why = services.node_removal_refusal(node=node) if node is not None else None
        if why:
            self.message_user(request, why, messages.ERROR)
            return redirect(reverse("admin:twin_node_change", args=[object_id]))
        return super().delete_view(request, object_id, extra_context)

    def delete_queryset(self, request, queryset):
        refused = [(n.pk, why) for n in queryset
                   if (why := services.node_removal_refusal(node=n))]
        for _, why in refused:
            self.message_user(request, why, messages.ERROR)
        super().delete_queryset(request, queryset.exclude(pk__in=[pk for pk, _ in refused]))


@admin.action(description="Mark selected accelerators failed")
def accelerator_failed(modeladmin, request, queryset):
    n = services.accelerators_set_status(accelerators=queryset,
                                          status=m.AcceleratorStatus.FAILED, user=request.user)
    _report(modeladmin, request, n, "accelerators marked failed")


@admin.action(description="Mark selected accelerators repaired")
def accelerator_repaired(modeladmin, request, queryset):
    n = services.accelerators_set_status(accelerators=queryset,
                                          status=m.AcceleratorStatus.OK, user=request.user)
    _report(modeladmin, request, n, "accelerators marked repaired")


@admin.register(m.Accelerator)
class AcceleratorAdmin(FastChangelist):
    list_display = ("serial", "node", "index", "model_name", "status")
    list_select_related = ("node__accelerator_model",)
    list_filter = ("status",)
    search_fields = ("=serial", "node__hostname")
    raw_id_fields = ("node",)
    actions = (accelerator_failed, accelerator_repaired)
    readonly_fields = STATUS_READONLY

    @admin.display(description="model", ordering="node__accelerator_model__name")
    def model_name(self, obj):
        return obj.node.accelerator_model.name


@admin.action(description="Mark selected switches failed")
def switch_failed(modeladmin, request, queryset):
    n = services.switches_set_status(switches=queryset, status=m.LinkStatus.DOWN,
                                     user=request.user)
    _report(modeladmin, request, n, "switches marked failed")


@admin.action(description="Mark selected switches repaired")
def switch_repaired(modeladmin, request, queryset):
    n = services.switches_set_status(switches=queryset, status=m.LinkStatus.UP,
                                     user=request.user)
    _report(modeladmin, request, n, "switches marked repaired")


@admin.register(m.Switch)
class SwitchAdmin(LiveColumn, FastChangelist):
    list_display = ("name", "cluster", "tier", "radix", "port_gbps", "rail", "pod",
                    "operator_status", "live_engine")
    list_select_related = ("cluster",)
    list_filter = ("tier", "status")
    search_fields = ("name",)
    actions = (switch_failed, switch_repaired)
    readonly_fields = STATUS_READONLY + ("live_engine",)

    def live_statuses(self, view, objs):
        return view.switches([(o.pk, o.index, o.cluster_id) for o in objs])


@admin.action(description="Mark selected links down")
def link_down(modeladmin, request, queryset):
    n = services.links_set_status(links=queryset, status=m.LinkStatus.DOWN, user=request.user)
    _report(modeladmin, request, n, "links marked down")


@admin.action(description="Mark selected links repaired")
def link_up(modeladmin, request, queryset):
    n = services.links_set_status(links=queryset, status=m.LinkStatus.UP, user=request.user)
    _report(modeladmin, request, n, "links marked repaired")


@admin.register(m.Link)
class LinkAdmin(LiveColumn, FastChangelist):
    list_display = ("id", "switch", "peer_switch", "node", "node_port", "speed_gbps", "medium",
                    "transceiver_model", "operator_status", "live_engine")
    list_select_related = ("switch", "peer_switch", "node")
    list_filter = ("medium", "status")
    search_fields = ("switch__name", "node__hostname")
    raw_id_fields = ("switch", "peer_switch", "node")
    actions = (link_down, link_up)
    readonly_fields = STATUS_READONLY + ("live_engine",)

    def live_statuses(self, view, objs):
        return view.links([(o.pk, o.node_id, o.node_port) for o in objs])


@admin.action(description="Mark selected storage systems down")
def storage_down(modeladmin, request, queryset):
    n = services.storage_systems_set_status(systems=queryset, status=m.StorageStatus.DOWN,
                                            user=request.user)
    _report(modeladmin, request, n, "storage systems marked down")


@admin.action(description="Mark selected storage systems degraded (each keeps its "
                          "'bandwidth left when degraded')")
def storage_degraded(modeladmin, request, queryset):
    n = services.storage_systems_set_status(systems=queryset, status=m.StorageStatus.DEGRADED,
                                            user=request.user)
    _report(modeladmin, request, n, "storage systems marked degraded")


@admin.action(description="Mark selected storage systems up")
def storage_up(modeladmin, request, queryset):
    n = services.storage_systems_set_status(systems=queryset, status=m.StorageStatus.UP,
                                            user=request.user)
    _report(modeladmin, request, n, "storage systems marked up")


@admin.register(m.StorageSystem)
class StorageSystemAdmin(LiveColumn, admin.ModelAdmin):
    list_display = ("name", "cluster", "tier", "capacity_tb", "read_gb_s", "write_gb_s",
                    "gpudirect", "operator_status", "degraded_factor", "live_engine")
    list_select_related = ("cluster",)
    list_filter = ("tier", "status")
    actions = (storage_down, storage_degraded, storage_up)

    def get_readonly_fields(self, request, obj=None):
        # while degraded, the factor the engine runs with changes only through the service
        degraded = obj is not None and obj.status == m.StorageStatus.DEGRADED
        return STATUS_READONLY + ("live_engine",) + (("degraded_factor",) if degraded else ())

    def live_statuses(self, view, objs):
        return view.storage([o.pk for o in objs])


@admin.register(m.CloudPool)
class CloudPoolAdmin(admin.ModelAdmin):
    list_display = ("provider", "region", "cluster", "accelerator_model", "max_gpus",
                    "price_per_gpu_hour", "provisioning_delay_s")
    list_select_related = ("cluster", "accelerator_model")


@admin.register(m.Drill)
class DrillAdmin(AuditTrail):
    """Drills are requested on the Drills page or the API (audited there), never here."""

    list_display = ("requested_at", "kind", "target", "requested_by", "status")
    list_select_related = ("requested_by",)
    list_filter = ("kind", "status")


@admin.register(m.AuditEntry)
class AuditEntryAdmin(AuditTrail):
    """Who changed what in the inventory, and when."""

    list_display = ("created_at", "username", "action", "target")
    list_filter = ("action",)
    search_fields = ("username", "target")


class StaffEdits(admin.ModelAdmin):
    """Editable by every member of staff (the alert rules are operations' own), not only by
    accounts holding the model permissions."""

    def _staff(self, request) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request) -> bool:
        return self._staff(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._staff(request)

    def has_add_permission(self, request) -> bool:
        return self._staff(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._staff(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._staff(request)


@admin.register(m.AlertRule)
class AlertRuleAdmin(StaffEdits):
    """Alert rules; the figure path and threshold are checked by ``AlertRule.clean``."""

    list_display = ("name", "figure", "comparison", "threshold", "for_s", "severity", "enabled")
    list_filter = ("severity", "enabled")
    search_fields = ("name", "figure")
    actions = ("enable", "disable")

    @admin.action(description="Enable the selected rules")
    def enable(self, request, queryset) -> None:
        _report(self, request, queryset.update(enabled=True), "rule(s) enabled")
        alerts.rules_changed()

    @admin.action(description="Disable the selected rules (their alerts resolve)")
    def disable(self, request, queryset) -> None:
        _report(self, request, queryset.update(enabled=False), "rule(s) disabled")
        alerts.rules_changed()

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        alerts.rules_changed()

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        alerts.rules_changed()


@admin.register(m.Alert)
class AlertAdmin(AuditTrail):
    """Alerts fire and resolve with the live engine; staff acknowledge them on /alerts/."""

    list_display = ("started_at", "rule", "state", "value", "labels", "acknowledged_by")
    list_select_related = ("rule", "acknowledged_by")
    list_filter = ("state", "rule__severity")

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request) or super().has_module_permission(request)
