"""Moving the models into their packages changed no table: the app keeps its label, every
table keeps its name, and the migrations describe the models exactly (a database made by an
earlier release migrates in place, with nothing to apply)."""

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command

TABLES = {
    "twin_accelerator", "twin_acceleratormodel", "twin_alert", "twin_alertrule",
    "twin_auditentry", "twin_cloudpool", "twin_cluster", "twin_coolingloop", "twin_datahall",
    "twin_drill", "twin_enginecommand", "twin_engineevent", "twin_enginesnapshot",
    "twin_entitychunk", "twin_entitysample", "twin_historysample", "twin_link",
    "twin_livestate", "twin_node", "twin_powerfeed",
    "twin_rack", "twin_silence", "twin_site", "twin_storagesystem", "twin_study", "twin_studyrun",
    "twin_switch", "twin_whatif", "twin_grid", "twin_gridcloudregion", "twin_wanlink",
    "twin_gridstate", "twin_sitemirror", "twin_gridwhatif",
}
"""The tables of the release before the packages (ddaa64d), by name, and those added since
(``twin_silence``, ``twin_entitysample`` and ``twin_entitychunk``: issue 27; ``twin_grid``,
``twin_gridcloudregion``, ``twin_wanlink``, ``twin_gridstate``, ``twin_sitemirror`` and
``twin_gridwhatif``: issue 30)."""


def test_every_model_keeps_its_app_label_and_table():
    models = apps.get_app_config("twin").get_models()
    assert {m._meta.db_table for m in models} == TABLES


@pytest.mark.django_db
def test_the_migrations_describe_the_models_exactly():
    out = StringIO()
    try:
        call_command("makemigrations", "twin", "--check", "--dry-run", stdout=out)
    except SystemExit as exc:  # --check exits non-zero when a migration is missing
        pytest.fail(f"the models moved away from their migrations: {out.getvalue()}"
                    f" (exit {exc.code})")
    assert "No changes detected" in out.getvalue()
