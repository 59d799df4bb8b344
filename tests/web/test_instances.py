"""Instances that cannot cross on one Redis (issue 28): a name of each instance's own in every
channel, group and key; a claim on it while a process runs; the published key refused with
Redis.

Settings are read once per process, so start-up behaviour is tested in child processes with a
clean environment. The Redis tests need a server at ``REDIS_TEST_URL`` (``.ci/run`` starts
one) and are skipped without it. Deadlines only guard against a hang.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.core.exceptions import ImproperlyConfigured

from bench.live_server import free_port, redis_reachable
from twin.config import checks
from twin.config import instance as inst
from twin.live import broadcast

ROOT = Path(__file__).resolve().parents[2]
MANAGE = str(ROOT / "manage.py")
REDIS_URL = os.environ.get("REDIS_TEST_URL")
A_KEY = "k" * 20 + "-a-key-of-this-deployment-only-" + "q" * 20
SQLITE = "django.db.backends.sqlite3"
PG = "django.db.backends.postgresql"



def needs_redis(test):
    test = pytest.mark.skipif(not redis_reachable(REDIS_URL), reason=(
        "no Redis at REDIS_TEST_URL (redis-server --daemonize yes; "
        "REDIS_TEST_URL=redis://127.0.0.1:6379/0)"))(test)
    return pytest.mark.redis(test)


def clean_env(**env: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "DJANGO_SETTINGS_MODULE": "twin.config.settings", "LOG_LEVEL": "WARNING", **env}


def django_json(code: str, *, cwd: Path, **env: str):
    """The JSON ``code`` prints after ``django.setup()``, in a child started in ``cwd``."""
    proc = subprocess.run([sys.executable, "-c", f"import django; django.setup()\n{code}"],
                          cwd=cwd, env={**clean_env(**env), "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def manage(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, MANAGE, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# ----------------------------------------------------------------- the name
def test_default_names_differ_for_one_relative_sqlite_path_in_two_folders(tmp_path,
                                                                         monkeypatch):
    names = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        names.append(inst.instance_name_default({"ENGINE": SQLITE, "NAME": "db.sqlite3"}))
    assert names[0] != names[1]


def test_default_name_is_one_for_one_file_however_it_is_reached(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    absolute = str(tmp_path / "a" / "db.sqlite3")
    monkeypatch.chdir(tmp_path / "a")
    names = {inst.instance_name_default({"ENGINE": SQLITE, "NAME": "db.sqlite3"}),
             inst.instance_name_default({"ENGINE": SQLITE, "NAME": absolute})}
    monkeypatch.chdir(tmp_path / "b")
    names |= {inst.instance_name_default({"ENGINE": SQLITE, "NAME": absolute}),
              inst.instance_name_default({"ENGINE": SQLITE, "NAME": "../a/db.sqlite3"}),
              inst.instance_name_default({"ENGINE": SQLITE,
                                          "NAME": str(tmp_path / "link" / "db.sqlite3")})}
    assert len(names) == 1


def test_default_names_follow_the_database_and_the_host_it_lives_on():
    sqlite = {"ENGINE": SQLITE, "NAME": "/srv/twin/db.sqlite3"}
    remote = {"ENGINE": PG, "HOST": "db.example", "PORT": "", "NAME": "twin"}
    local = {**remote, "HOST": "localhost"}

    def name(database, host):
        return inst.instance_name_default(database, hostname=host)

    # a file and a server on this host are this host's; a server on the network is everyone's
    assert name(sqlite, "web1") != name(sqlite, "web2")
    assert name(local, "web1") != name(local, "web2")
    assert name(remote, "web1") == name(remote, "web2")
    assert name(remote, "web1") == name({**remote, "PORT": "5432", "HOST": "DB.example"}, "x")
    assert name(remote, "web1") != name({**remote, "PORT": "5433"}, "web1")
    assert name(remote, "web1") != name({**remote, "NAME": "twin-staging"}, "web1")
    assert name(remote, "web1") != name({**remote, "HOST": "db2.example"}, "web1")
    for database in (sqlite, remote, local):
        assert inst.NAME_RE.fullmatch(name(database, "web1.example.org"))


@pytest.mark.parametrize("given", ["", "-twin", "a.b", "a/b", "a b", "twin\u00e9", "x" * 49])
def test_a_bad_instance_name_is_refused(given):
    with pytest.raises(ImproperlyConfigured, match="CLUSTERTWIN_INSTANCE"):
        inst.instance_name(given, {"ENGINE": SQLITE, "NAME": "db.sqlite3"})


def test_an_instance_name_given_is_taken_as_it_is():
    assert inst.instance_name("twin_prod-2", {"ENGINE": SQLITE, "NAME": "x"}) == "twin_prod-2"


PRINT_NAMES = ("import json; from django.conf import settings as s; print(json.dumps("
               "[s.CLUSTERTWIN['INSTANCE'], s.CLUSTERTWIN['CHANNEL_PREFIX'], "
               "s.CHANNEL_LAYERS['default']['CONFIG']['prefix']]))")


def test_two_instances_on_one_relative_sqlite_path_get_two_prefixes(tmp_path):
    """The probe of issue 28: ``DATABASE_URL=sqlite:///db.sqlite3`` started in two folders."""
    env = {"DATABASE_URL": "sqlite:///db.sqlite3", "REDIS_URL": "redis://127.0.0.1:6379/3",
           "SECRET_KEY": A_KEY}
    found = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        found.append(django_json(PRINT_NAMES, cwd=tmp_path / folder, **env))
    for name, prefix, layer_prefix in found:
        assert prefix == layer_prefix == f"ct.{name}.3."
    assert found[0] != found[1]
    given = django_json(PRINT_NAMES, cwd=tmp_path / "a", CLUSTERTWIN_INSTANCE="twin-prod", **env)
    assert given == ["twin-prod", "ct.twin-prod.3.", "ct.twin-prod.3."]


# ----------------------------------------------------------------- settings that refuse
@pytest.mark.parametrize("flags", [{"CLUSTERTWIN_INSECURE_DEMO": "1"}, {"DEBUG": "1"}, {}],
                         ids=["demo flag", "DEBUG", "neither"])
def test_the_development_key_with_redis_refuses_to_load(tmp_path, flags):
    env = clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                    REDIS_URL="redis://127.0.0.1:6379/0", **flags)
    line = one_line(manage("check", env=env).stderr)
    assert "published development key" in line
    if flags:  # without a flag the key is refused already, Redis or not
        assert "REDIS_URL" in line
    assert manage("check", env={**env, "SECRET_KEY": A_KEY}).returncode == 0


def test_the_retired_channel_prefix_variable_is_refused(tmp_path):
    env = clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", SECRET_KEY=A_KEY,
                    CLUSTERTWIN_CHANNEL_PREFIX="ct.mine.")
    proc = manage("check", env=env)
    assert proc.returncode == 2
    assert "CLUSTERTWIN_INSTANCE" in one_line(proc.stderr)


def test_the_deploy_check_asks_for_an_explicit_name_on_redis(settings):
    assert checks.instance_name_check() == []  # no Redis: nothing to share
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "INSTANCE": inst.instance_name_default(
        settings.DATABASES["default"])}
    assert [m.id for m in checks.instance_name_check()] == ["clustertwin.W005"]
    settings.CLUSTERTWIN = {**settings.CLUSTERTWIN, "INSTANCE": "twin-prod"}
    assert checks.instance_name_check() == []


# ----------------------------------------------------------------- channels on one Redis
JOIN_AND_LIST = """
import asyncio, json, time
import redis.asyncio
from channels.layers import get_channel_layer
from django.conf import settings
from twin.live import broadcast

async def main():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await broadcast.frames_join(layer, channel, lambda message: None)
    await layer.group_add(broadcast.ENGINE_GROUP, channel)
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    end = time.monotonic() + 10
    while True:
        seen = sorted(c.decode() for c in await client.pubsub_channels(layer.prefix + "*"))
        if len(seen) >= 3 or time.monotonic() > end:
            break
        await asyncio.sleep(0.05)
    print(json.dumps({"prefix": layer.prefix, "channel": channel, "seen": seen}))

asyncio.run(main())
"""


@needs_redis
def test_group_and_channel_names_on_redis_carry_the_instance_prefix(tmp_path):
    name = f"t-{uuid.uuid4().hex[:12]}"
    got = django_json(JOIN_AND_LIST, cwd=ROOT, DATABASE_URL=f"sqlite:///{tmp_path / 'db'}",
                      REDIS_URL=REDIS_URL, SECRET_KEY=A_KEY, CLUSTERTWIN_INSTANCE=name)
    prefix = broadcast.channel_prefix(name, REDIS_URL)
    assert got["prefix"] == prefix and got["channel"].startswith(prefix)
    assert got["seen"] == sorted([got["channel"],
                                  f"{prefix}__group__{broadcast.FRAMES_GROUP}",
                                  f"{prefix}__group__{broadcast.ENGINE_GROUP}"])


@needs_redis
@pytest.mark.asyncio
async def test_frames_and_commands_of_one_instance_never_reach_another_on_one_redis():
    """Two instances on one Redis with one ``SECRET_KEY``: each hears only its own; a second
    process of an instance (the same prefix) hears it, so the test would see a crossing."""
    a, b = (broadcast.channel_prefix(f"t-{uuid.uuid4().hex[:12]}", REDIS_URL) for _ in "ab")
    layers = {"a": RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=a),
              "a2": RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=a),
              "b": RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix=b)}
    sockets, engines = {}, {}
    try:
        for key in ("a2", "b"):
            sockets[key] = await layers[key].new_channel()
            await broadcast.frames_join(layers[key], sockets[key], lambda message: None)
            engines[key] = await layers[key].new_channel()
            await layers[key].group_add(broadcast.ENGINE_GROUP, engines[key])
        # sent in this order: a message of A that reached B would arrive before B's own
        await broadcast.frame_publish({"from": "a"}, 1, 60.0, layer=layers["a"])
        await broadcast.command_send_async("pause", layer=layers["a"])
        await broadcast.frame_publish({"from": "b"}, 2, 60.0, layer=layers["b"])
        await broadcast.command_send_async("resume", layer=layers["b"])

        async def first(key, channel):
            return await asyncio.wait_for(layers[key].receive(channel), 10)

        assert json.loads((await first("b", sockets["b"]))["text"])["from"] == "b"
        assert (await first("b", engines["b"]))["command"] == "resume"
        assert json.loads((await first("a2", sockets["a2"]))["text"])["from"] == "a"
        assert (await first("a2", engines["a2"]))["command"] == "pause"
    finally:
        for layer in layers.values():
            await layer.flush()


# ----------------------------------------------------------------- the claim
HOLD = """
import sys
import django
django.setup()
from twin.config import instance
claim = instance.claim_or_exit(engine={engine})
print("claimed", claim.holder, flush=True)
sys.stdin.read()
"""


def deployment(tmp_path, name: str, *, folder: str = "a", **env: str) -> dict[str, str]:
    """The environment of a deployment named ``name`` with its database in ``folder``."""
    (tmp_path / folder).mkdir(exist_ok=True)
    return clean_env(DATABASE_URL=f"sqlite:///{tmp_path / folder / 'db.sqlite3'}",
                     REDIS_URL=REDIS_URL, SECRET_KEY=A_KEY, CLUSTERTWIN_INSTANCE=name,
                     CLUSTERTWIN_INSECURE_DEMO="1", PYTHONPATH=str(ROOT), **env)


def read_line(proc: subprocess.Popen, stream, timeout: float = 60) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if select.select([stream], [], [], 0.2)[0]:
            return stream.readline()
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"no line from the process (exit {proc.poll()}): "
                         f"{proc.stderr.read() if proc.stderr else ''}")


class Holder:
    """A process that claims the instance (and its engine, with ``engine``) until told."""

    def __init__(self, env: dict, *, engine: bool):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD.format(engine=engine)],
                                     cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = read_line(self.proc, self.proc.stdout)
        assert line.startswith("claimed "), line
        self.id = line.split()[1]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(60)
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(60)


@pytest.fixture
def claims():
    """Keys of the claims a test makes (deleted after it), and a redis-py client."""
    client = redis.Redis.from_url(REDIS_URL)
    names, holders = [], []

    def keys_of(name: str) -> tuple[str, str, str]:
        names.append(name)
        return inst.claim_keys(broadcast.channel_prefix(name, REDIS_URL))

    yield client, keys_of, holders
    for holder in holders:
        holder.kill()
    for name in names:
        client.delete(*inst.claim_keys(broadcast.channel_prefix(name, REDIS_URL)))
    client.close()


@needs_redis
def test_a_second_engine_under_one_name_refuses_with_one_line(tmp_path, claims):
    client, keys_of, holders = claims
    name = f"t-{uuid.uuid4().hex[:12]}"
    _, _, engine_key = keys_of(name)
    env = deployment(tmp_path, name)
    holders.append(first := Holder(env, engine=True))
    for args in (["run_engine"], ["serve", "--port", str(free_port())]):  # serve: embedded
        proc = manage(*args, env=env)
        assert proc.returncode == 2
        line = one_line(proc.stderr)
        assert name in line and "already runs its live engine" in line and first.id in line
    assert client.get(engine_key).decode() == first.id  # the refused ones took nothing
    # a web worker of the same deployment joins it (frames come from the engine)
    web = subprocess.Popen([sys.executable, MANAGE, "serve", "--port", str(free_port()),
                            "--no-access-log"], cwd=ROOT, text=True,
                           env={**env, "CLUSTERTWIN_ENGINE": "separate"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert read_line(web, web.stdout).startswith("serving on ")
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(60)
    assert first.stop() == 0


@needs_redis
def test_another_deployment_under_a_name_in_use_refuses_with_one_line(tmp_path, claims):
    _, keys_of, holders = claims
    name = f"t-{uuid.uuid4().hex[:12]}"
    keys_of(name)
    holders.append(Holder(deployment(tmp_path, name), engine=False))
    other_database = {**deployment(tmp_path, name, folder="b"), "CLUSTERTWIN_ENGINE": "separate"}
    other_key = {**deployment(tmp_path, name), "SECRET_KEY": A_KEY.replace("q", "z")}
    for args, env in ((["serve", "--port", str(free_port())], other_database),
                      (["run_engine"], other_key)):
        proc = manage(*args, env=env)
        assert proc.returncode == 2
        line = one_line(proc.stderr)
        assert name in line and "another deployment" in line


@needs_redis
def test_a_clean_exit_releases_the_claim(tmp_path, claims):
    client, keys_of, holders = claims
    name = f"t-{uuid.uuid4().hex[:12]}"
    keys = keys_of(name)
    holders.append(holder := Holder(deployment(tmp_path, name), engine=True))
    assert client.exists(*keys) == 3
    assert holder.stop() == 0
    assert client.exists(*keys) == 0


@needs_redis
def test_the_claim_expires_when_its_holder_dies(tmp_path, claims):
    client, keys_of, holders = claims
    name = f"t-{uuid.uuid4().hex[:12]}"
    keys = keys_of(name)
    holder = Holder(deployment(tmp_path, name, CLUSTERTWIN_INSTANCE_CLAIM_S="2"), engine=True)
    holder.kill()  # SIGKILL: no release
    assert client.exists(*keys) == 3
    end = time.monotonic() + 30
    while client.exists(*keys):
        assert time.monotonic() < end, "the dead holder's claim never expired"
        time.sleep(0.1)
    # the name is free again, for another deployment too
    holders.append(Holder(deployment(tmp_path, name, folder="b"), engine=True))


@needs_redis
def test_the_heartbeat_keeps_a_claim_alive_past_its_expiry(tmp_path, claims):
    client, keys_of, holders = claims
    name = f"t-{uuid.uuid4().hex[:12]}"
    _, holders_key, engine_key = keys_of(name)
    holders.append(holder := Holder(deployment(tmp_path, name, CLUSTERTWIN_INSTANCE_CLAIM_S="1"),
                                    engine=True))
    first = client.zscore(holders_key, holder.id)
    # refreshed until it runs past the expiry its first claim had
    end = time.monotonic() + 30
    while (client.zscore(holders_key, holder.id) or 0) <= first + 1000:
        assert time.monotonic() < end, "the claim was never refreshed"
        time.sleep(0.1)
    assert client.get(engine_key).decode() == holder.id


@needs_redis
def test_a_process_whose_claim_was_taken_stops(tmp_path, claims):
    client, keys_of, holders = claims
    name = f"t-{uuid.uuid4().hex[:12]}"
    _, _, engine_key = keys_of(name)
    holders.append(holder := Holder(deployment(tmp_path, name, CLUSTERTWIN_INSTANCE_CLAIM_S="1"),
                                    engine=True))
    # what another engine does once this one stalled past its claim's expiry
    client.set(engine_key, "elsewhere:1:0", px=60_000)
    assert holder.proc.wait(60) == -signal.SIGTERM
    stderr = holder.proc.stderr.read()
    assert "lost the claim on Redis" in stderr and "elsewhere:1:0" in stderr


@needs_redis
def test_an_engine_claim_of_a_dead_process_on_this_host_is_taken_over_at_once(claims):
    """After ``kill -9`` the claim would last its expiry (here 600 s): a restart on the same
    host finds its holder's process gone and takes the engine over; a holder on another host
    (whose processes this one cannot see) still refuses."""
    client, keys_of, _ = claims
    import socket
    name = f"t-{uuid.uuid4().hex[:12]}"
    _, _, engine_key = keys_of(name)
    prefix = broadcast.channel_prefix(name, REDIS_URL)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()

    def claim(holder: str = "") -> inst.Claim:
        return inst.Claim(client=client, name=name, prefix=prefix, fingerprint="f" * 64,
                          engine=True, expiry_s=600.0, holder=holder)

    elsewhere = claim(f"{socket.gethostname()}-not:{gone}:dead")
    assert elsewhere.take() is None
    refused = claim().take()
    assert refused and "already runs its live engine" in refused
    client.delete(engine_key)
    client.delete(*inst.claim_keys(prefix))
    dead = claim(f"{socket.gethostname()}:{gone}:dead")
    assert dead.take() is None
    restart = claim()
    assert restart.take() is not None  # a heartbeat never takes over: only a start does
    assert restart.take(takeover=True) is None  # at once, not in 600 s
    assert client.get(engine_key).decode() == restart.holder
    assert client.zscore(inst.claim_keys(prefix)[1], dead.holder) is None
