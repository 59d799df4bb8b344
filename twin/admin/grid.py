"""The admin of grids (issue 30): a grid with its cloud regions and WAN links inline, and its
member clusters shown (a cluster joins a grid on its own page, through its ``grid`` field).

A WAN link is checked against the places the form will leave: the grid's member clusters and
the cloud regions of the same form, those added included and those deleted not.
"""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet

from twin.inventory.grid_models import SiteMirror
from twin.inventory.models import Cluster, Grid, GridCloudRegion, WanLink


class CloudRegionInline(admin.TabularInline):
    model = GridCloudRegion
    extra = 0
    fields = ("provider", "region", "jurisdiction", "accelerator_model", "quota_gpus",
              "on_demand_per_gpu_hour", "spot_per_gpu_hour", "spot_interruptions_per_hour",
              "startup_s", "stacks")


class WanLinkForm(forms.ModelForm):
    grid_places = None  # set by its formset: the places the form will leave

    def clean(self) -> dict:
        data = super().clean()
        if self.grid_places is not None:
            self.instance.pending_places = self.grid_places()
        return data


class WanLinkFormSet(BaseInlineFormSet):
    cloud_formset = None  # set by GridAdmin: the cloud regions' formset of the same form

    def places(self) -> tuple[str, ...]:
        grid = self.instance
        members = list(grid.clusters.order_by("id").values_list("name", flat=True)) \
            if grid.pk is not None else []
        clouds = self.cloud_formset
        if clouds is None:
            return tuple(members) + tuple(r.place for r in grid.cloud_regions.all()) \
                if grid.pk is not None else tuple(members)
        regions = []
        for form in clouds.forms:
            form.is_valid()  # a row with a bad price still names its place
            if clouds._should_delete_form(form):
                continue
            data = getattr(form, "cleaned_data", {})
            if data.get("provider") and data.get("region"):
                regions.append(f"{data['provider']}/{data['region']}")
        return tuple(members) + tuple(regions)

    def _construct_form(self, i, **kwargs):
        form = super()._construct_form(i, **kwargs)
        form.grid_places = self.places
        return form

    def clean(self) -> None:
        super().clean()
        seen: dict[frozenset, int] = {}
        for i, form in enumerate(self.forms):
            data = getattr(form, "cleaned_data", {})
            if not data or self._should_delete_form(form) or not (data.get("a")
                                                                  and data.get("b")):
                continue
            pair = frozenset((data["a"], data["b"]))
            if pair in seen:
                raise ValidationError(f"two WAN links join {data['a']} and {data['b']} "
                                      f"(rows {seen[pair] + 1} and {i + 1})")
            seen[pair] = i


class WanLinkInline(admin.TabularInline):
    model = WanLink
    form = WanLinkForm
    formset = WanLinkFormSet
    extra = 0
    fields = ("a", "b", "gbps", "latency_ms", "egress_per_gb", "egress_back_per_gb")


class MemberInline(admin.TabularInline):
    """The grid's sites: shown here, joined and left on the cluster's own page."""

    model = Cluster
    fk_name = "grid"
    verbose_name = "member cluster (site)"
    verbose_name_plural = "member clusters (sites): edit a cluster's grid on its own page"
    fields = ("name", "jurisdiction", "power_price_per_kwh", "stacks", "fabric_kind")
    readonly_fields = fields
    show_change_link = True
    extra = 0

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Grid)
class GridAdmin(admin.ModelAdmin):
    list_display = ("name", "weight_cost", "weight_start", "weight_gravity",
                    "checkpoint_replication_s")
    search_fields = ("name",)
    inlines = (MemberInline, CloudRegionInline, WanLinkInline)

    def _create_formsets(self, request, obj, change):
        formsets, inlines = super()._create_formsets(request, obj, change)
        clouds = next((f for f in formsets if f.model is GridCloudRegion), None)
        for formset in formsets:
            if isinstance(formset, WanLinkFormSet):
                formset.cloud_formset = clouds
        return formsets, inlines


@admin.register(SiteMirror)
class SiteMirrorAdmin(admin.ModelAdmin):
    """Where each site's Slurm is, for ``mirror_grid``: the token stays in the environment."""

    list_display = ("cluster", "kind", "slurm_conf", "rest_url", "token_env", "poll_s",
                    "timeout_s")
    list_select_related = ("cluster",)
    search_fields = ("cluster__name",)
