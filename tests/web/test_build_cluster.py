"""build_cluster: presets, custom fabrics, dry runs, JSON summaries and clear refusals."""

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from twin import models as m


def _json(capsys, *args):
    call_command("build_cluster", *args, "--json", "-")
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


def test_dry_run_prints_the_summary_and_writes_nothing(db, capsys):
    s = _json(capsys, "--preset", "dev-small", "--dry-run")
    assert (s["gpus"], s["nodes"]) == (512, 64)
    assert set(s) >= {"gpus", "nodes", "racks", "switches", "links", "transceivers",
                      "storage", "it_power_kw"}
    assert set(s["switches"]) == {"leaf", "spine", "core"}
    assert m.Cluster.objects.count() == 0 and m.Node.objects.count() == 0


def test_build_writes_rows_that_match_the_summary(db, capsys):
    s = _json(capsys, "--preset", "dev-small")
    cluster = m.Cluster.objects.get(name="dev-small")
    assert m.Accelerator.objects.count() == s["gpus"]
    assert m.Node.objects.count() == s["nodes"]
    assert m.Rack.objects.count() == s["racks"]
    assert m.Link.objects.filter(cluster=cluster).count() == s["links"]
    assert m.Link.objects.filter(node__isnull=False).count() == s["gpus"]
    for tier, n in s["switches"].items():
        assert m.Switch.objects.filter(tier=tier).count() == n
    assert m.StorageSystem.objects.filter(tier="central").count() == 1
    assert m.CloudPool.objects.count() == 1


def test_an_existing_cluster_needs_replace(db, build):
    build("--preset", "dev-small")
    with pytest.raises(CommandError, match="--replace") as err:
        build("--preset", "dev-small")
    assert err.value.returncode == 2
    build("--preset", "dev-small", "--replace")
    assert m.Cluster.objects.count() == 1
    assert m.Accelerator.objects.count() == m.Cluster.objects.get().summary["gpus"]


def test_if_empty_skips_a_database_that_has_a_cluster(db, build):
    build("--preset", "dev-small")
    before = m.Cluster.objects.get().pk
    build("--preset", "superpod-h100", "--if-empty")
    assert list(m.Cluster.objects.values_list("pk", flat=True)) == [before]


def test_radix_alone_builds_the_full_size_fat_tree(db, capsys):
    s = _json(capsys, "--fabric", "fat-tree", "--radix", "8", "--dry-run")
    assert s["gpus"] == 8 ** 3 // 4
    assert s["switches"] == {"leaf": 32, "spine": 32, "core": 16}


def test_gpus_sizes_a_custom_dragonfly(db, capsys):
    s = _json(capsys, "--fabric", "dragonfly+", "--gpus", "1024", "--radix", "16",
              "--accelerator", "MI300X", "--dry-run")
    assert s["gpus"] == 1024 and s["gpus_by_model"] == {"MI300X": 1024}


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "unknown preset"),
    (["--fabric", "torus", "--gpus", "64"], "unknown fabric"),
    (["--fabric", "fat-tree", "--gpus", "-8"], "positive integer"),
    (["--fabric", "fat-tree", "--gpus", "12.5"], "positive integer"),
    (["--fabric", "fat-tree", "--gpus", "12"], "multiple of 8"),
    (["--fabric", "fat-tree", "--radix", "7"], "radix"),
    (["--fabric", "fat-tree", "--accelerator", "A100", "--gpus", "64"], "unknown accelerator"),
    (["--preset", "dev-small", "--fabric", "rail"], "not both"),
])
def test_bad_input_is_refused_with_status_2_and_writes_nothing(db, build, args, message):
    with pytest.raises(CommandError, match=message) as err:
        build(*args)
    assert err.value.returncode == 2
    assert m.Cluster.objects.count() == 0


def test_command_line_error_is_one_line_with_exit_status_2(tmp_path):
    env_db = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    proc = subprocess.run([sys.executable, "manage.py", "build_cluster", "--preset", "nope"],
                          capture_output=True, text=True, env={"DATABASE_URL": env_db,
                                                               "CLUSTERTWIN_INSECURE_DEMO": "1",
                                                               "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "unknown preset" in proc.stderr
