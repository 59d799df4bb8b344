"""The admin: how operators edit inventory.

Changelists must stay fast at 100,000 accelerators: every list joins what it shows
(``list_select_related``), filters only on small choice fields, and skips the second
full-table count (``show_full_result_count``).
"""

from django.contrib import admin, messages
from django.shortcuts import redirect
from django.urls import reverse

from twin.admin.base import FastChangelist, action_report
from twin.admin.live_pages import LivePage, live_ids, node_url, page_of, rack_url, switch_url
from twin.control import edits
from twin.inventory.adapter import cluster_delete
from twin.inventory.grid_membership import delete_refusal
from twin.inventory.models import (
    Accelerator,
    AcceleratorModel,
    AcceleratorStatus,
    CloudPool,
    Cluster,
    CoolingLoop,
    DataHall,
    Link,
    LinkStatus,
    Node,
    PowerFeed,
    Rack,
    Site,
    StorageStatus,
    StorageSystem,
    Switch,
)
from twin.pages.columns import LiveColumn

STATUS_READONLY = ("status",)
"""Status is changed by the list actions only: they are audited and reach the live engine."""



@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "preset", "fabric_kind", "failure_profile", "created_at")
    readonly_fields = ("summary", "fabric_params", "created_at")
    search_fields = ("name",)

    def view_on_site(self, obj) -> str | None:
        """The overview, for the cluster the twin shows."""
        ids = live_ids()
        return reverse("home") if ids is not None and ids.cluster.pk == obj.pk else None

    def get_deleted_objects(self, objs, request):
        """A site of a grid that WAN links name cannot go: the delete page lists why (as
        Django lists protected rows) and offers no confirmation."""
        deleted, counts, perms, protected = super().get_deleted_objects(objs, request)
        refusals = [why for why in map(delete_refusal, objs) if why]
        return deleted, counts, perms, [*protected, *refusals]

    def delete_model(self, request, obj) -> None:
        cluster_delete(cluster=obj)

    def delete_queryset(self, request, queryset) -> None:
        for cluster in queryset:
            cluster_delete(cluster=cluster)


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "region", "pue")
    list_select_related = ("cluster",)


class RackInline(admin.TabularInline):
    model = Rack
    extra = 0
    fields = ("name", "row", "column", "power_capacity_kw", "cooling_capacity_kw")
    show_change_link = True
    max_num = 400


@admin.register(DataHall)
class DataHallAdmin(admin.ModelAdmin):
    list_display = ("name", "site")
    list_select_related = ("site",)


@admin.action(description="Mark selected power feeds failed")
def feed_failed(modeladmin, request, queryset):
    n = edits.power_feeds_set_status(feeds=queryset, status="down", user=request.user)
    action_report(modeladmin, request, n, "power feeds marked failed")


@admin.action(description="Mark selected power feeds repaired")
def feed_repaired(modeladmin, request, queryset):
    n = edits.power_feeds_set_status(feeds=queryset, status="up", user=request.user)
    action_report(modeladmin, request, n, "power feeds marked repaired")


@admin.action(description="Mark selected cooling loops failed")
def loop_failed(modeladmin, request, queryset):
    n = edits.cooling_loops_set_status(loops=queryset, status="down", user=request.user)
    action_report(modeladmin, request, n, "cooling loops marked failed")


@admin.action(description="Mark selected cooling loops repaired")
def loop_repaired(modeladmin, request, queryset):
    n = edits.cooling_loops_set_status(loops=queryset, status="up", user=request.user)
    action_report(modeladmin, request, n, "cooling loops marked repaired")


@admin.register(PowerFeed)
class PowerFeedAdmin(FastChangelist):
    list_display = ("name", "hall", "capacity_kw", "status")
    list_select_related = ("hall__site",)
    search_fields = ("name",)
    list_filter = ("status",)
    actions = (feed_failed, feed_repaired)
    readonly_fields = STATUS_READONLY


@admin.register(CoolingLoop)
class CoolingLoopAdmin(FastChangelist):
    list_display = ("name", "hall", "kind", "capacity_kw", "status")
    list_select_related = ("hall__site",)
    list_filter = ("kind", "status")
    search_fields = ("name",)
    actions = (loop_failed, loop_repaired)
    readonly_fields = STATUS_READONLY


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    fields = ("slot", "hostname", "accelerator_model", "accelerator_count", "status")
    show_change_link = True


@admin.register(Rack)
class RackAdmin(LivePage, LiveColumn, FastChangelist):
    list_display = ("name", "engine_id", "hall", "row", "column", "power_capacity_kw",
                    "cooling_capacity_kw", "live_engine")
    list_select_related = ("hall__site",)
    search_fields = ("name",)
    raw_id_fields = ("power_feed", "cooling_loop")
    inlines = (NodeInline,)
    readonly_fields = ("engine_id",)

    def live_pages(self, ids, objs):
        return {o.pk: page_of(ids.rack(o.pk), rack_url) for o in objs}

    def live_statuses(self, view, objs):
        return view.racks([o.pk for o in objs])


@admin.register(AcceleratorModel)
class AcceleratorModelAdmin(admin.ModelAdmin):
    list_display = ("name", "vendor", "bf16_tflops", "hbm_gb", "hbm_tb_s", "scaleup_gb_s",
                    "scaleup_domain", "tdp_w", "per_node", "unconfirmed")
    list_filter = ("vendor",)
    search_fields = ("name", "vendor")


class AcceleratorInline(admin.TabularInline):
    model = Accelerator
    extra = 0
    fields = ("index", "serial", "status")
    readonly_fields = STATUS_READONLY


@admin.action(description="Drain selected nodes")
def drain(modeladmin, request, queryset):
    n = edits.nodes_drain(nodes=queryset, user=request.user)
    action_report(modeladmin, request, n, "nodes drained")


@admin.action(description="Undrain selected nodes")
def undrain(modeladmin, request, queryset):
    n = edits.nodes_undrain(nodes=queryset, user=request.user)
    action_report(modeladmin, request, n, "nodes undrained")


@admin.action(description="Mark selected nodes failed")
def node_failed(modeladmin, request, queryset):
    action_report(modeladmin, request, edits.nodes_mark_failed(nodes=queryset, user=request.user),
            "nodes marked failed")


@admin.action(description="Mark selected nodes repaired")
def node_repaired(modeladmin, request, queryset):
    action_report(modeladmin, request, edits.nodes_mark_repaired(nodes=queryset, user=request.user),
            "nodes marked repaired")


@admin.register(Node)
class NodeAdmin(LivePage, LiveColumn, FastChangelist):
    list_display = ("hostname", "engine_id", "rack", "slot", "accelerator_model",
                    "accelerator_count", "nvlink_domain", "is_spare", "operator_status",
                    "live_engine")
    list_select_related = ("rack", "accelerator_model")
    list_filter = ("status", "is_spare", "accelerator_model")
    search_fields = ("hostname", "rack__name")
    raw_id_fields = ("rack",)
    actions = (drain, undrain, node_failed, node_repaired)
    inlines = (AcceleratorInline,)
    readonly_fields = STATUS_READONLY + ("status_reason", "engine_id", "live_engine")

    def live_statuses(self, view, objs):
        return view.nodes([o.pk for o in objs])

    def live_pages(self, ids, objs):
        return {o.pk: page_of(ids.node(o.pk), node_url) for o in objs}

    def delete_view(self, request, object_id, extra_context=None):
        node = self.get_object(request, object_id)
        why = edits.node_removal_refusal(node=node) if node is not None else None
        if why:
            self.message_user(request, why, messages.ERROR)
            return redirect(reverse("admin:twin_node_change", args=[object_id]))
        return super().delete_view(request, object_id, extra_context)

    def delete_queryset(self, request, queryset):
        refused = [(n.pk, why) for n in queryset
                   if (why := edits.node_removal_refusal(node=n))]
        for _, why in refused:
            self.message_user(request, why, messages.ERROR)
        super().delete_queryset(request, queryset.exclude(pk__in=[pk for pk, _ in refused]))


@admin.action(description="Mark selected accelerators failed")
def accelerator_failed(modeladmin, request, queryset):
    n = edits.accelerators_set_status(accelerators=queryset,
                                          status=AcceleratorStatus.FAILED, user=request.user)
    action_report(modeladmin, request, n, "accelerators marked failed")


@admin.action(description="Mark selected accelerators repaired")
def accelerator_repaired(modeladmin, request, queryset):
    n = edits.accelerators_set_status(accelerators=queryset,
                                          status=AcceleratorStatus.OK, user=request.user)
    action_report(modeladmin, request, n, "accelerators marked repaired")


@admin.register(Accelerator)
class AcceleratorAdmin(LivePage, FastChangelist):
    list_display = ("serial", "node", "index", "engine_id", "model_name", "status")
    list_select_related = ("node__accelerator_model",)
    list_filter = ("status",)
    search_fields = ("=serial", "node__hostname")
    raw_id_fields = ("node",)
    actions = (accelerator_failed, accelerator_repaired)
    readonly_fields = STATUS_READONLY + ("engine_id",)

    def live_pages(self, ids, objs):
        """A GPU's engine id, linked to its node's page."""
        out = {}
        for o in objs:
            node, gpu = ids.node(o.node_id), ids.gpu(o.node_id, o.index)
            out[o.pk] = None if node is None or gpu is None else (gpu, node_url(node))
        return out

    @admin.display(description="model", ordering="node__accelerator_model__name")
    def model_name(self, obj):
        return obj.node.accelerator_model.name


@admin.action(description="Mark selected switches failed")
def switch_failed(modeladmin, request, queryset):
    n = edits.switches_set_status(switches=queryset, status=LinkStatus.DOWN,
                                     user=request.user)
    action_report(modeladmin, request, n, "switches marked failed")


@admin.action(description="Mark selected switches repaired")
def switch_repaired(modeladmin, request, queryset):
    n = edits.switches_set_status(switches=queryset, status=LinkStatus.UP,
                                     user=request.user)
    action_report(modeladmin, request, n, "switches marked repaired")


@admin.register(Switch)
class SwitchAdmin(LivePage, LiveColumn, FastChangelist):
    list_display = ("name", "engine_id", "cluster", "tier", "radix", "port_gbps", "rail", "pod",
                    "operator_status", "live_engine")
    list_select_related = ("cluster",)
    list_filter = ("tier", "status")
    search_fields = ("name",)
    actions = (switch_failed, switch_repaired)
    readonly_fields = STATUS_READONLY + ("engine_id", "live_engine")

    def live_statuses(self, view, objs):
        return view.switches([(o.pk, o.index, o.cluster_id) for o in objs])

    def live_pages(self, ids, objs):
        live = ids.cluster.pk
        return {o.pk: page_of(o.index if o.cluster_id == live else None, switch_url)
                for o in objs}


@admin.action(description="Mark selected links down")
def link_down(modeladmin, request, queryset):
    n = edits.links_set_status(links=queryset, status=LinkStatus.DOWN, user=request.user)
    action_report(modeladmin, request, n, "links marked down")


@admin.action(description="Mark selected links repaired")
def link_up(modeladmin, request, queryset):
    n = edits.links_set_status(links=queryset, status=LinkStatus.UP, user=request.user)
    action_report(modeladmin, request, n, "links marked repaired")


@admin.register(Link)
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
        return view.links([(o.pk, o.node_id, o.node_port, o.switch.index) for o in objs])


@admin.action(description="Mark selected storage systems down")
def storage_down(modeladmin, request, queryset):
    n = edits.storage_systems_set_status(systems=queryset, status=StorageStatus.DOWN,
                                            user=request.user)
    action_report(modeladmin, request, n, "storage systems marked down")


@admin.action(description="Mark selected storage systems degraded (each keeps its "
                          "'bandwidth left when degraded')")
def storage_degraded(modeladmin, request, queryset):
    n = edits.storage_systems_set_status(systems=queryset, status=StorageStatus.DEGRADED,
                                            user=request.user)
    action_report(modeladmin, request, n, "storage systems marked degraded")


@admin.action(description="Mark selected storage systems up")
def storage_up(modeladmin, request, queryset):
    n = edits.storage_systems_set_status(systems=queryset, status=StorageStatus.UP,
                                            user=request.user)
    action_report(modeladmin, request, n, "storage systems marked up")


@admin.register(StorageSystem)
class StorageSystemAdmin(LiveColumn, admin.ModelAdmin):
    list_display = ("name", "cluster", "tier", "capacity_tb", "read_gb_s", "write_gb_s",
                    "gpudirect", "operator_status", "degraded_factor", "live_engine")
    list_select_related = ("cluster",)
    list_filter = ("tier", "status")
    actions = (storage_down, storage_degraded, storage_up)

    def get_readonly_fields(self, request, obj=None):
        # while degraded, the factor the engine runs with changes only through the service
        degraded = obj is not None and obj.status == StorageStatus.DEGRADED
        return STATUS_READONLY + ("live_engine",) + (("degraded_factor",) if degraded else ())

    def live_statuses(self, view, objs):
        return view.storage([o.pk for o in objs])


@admin.register(CloudPool)
class CloudPoolAdmin(admin.ModelAdmin):
    list_display = ("provider", "region", "cluster", "accelerator_model", "max_gpus",
                    "price_per_gpu_hour", "provisioning_delay_s")
    list_select_related = ("cluster", "accelerator_model")
