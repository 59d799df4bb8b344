"""``serve``: the web process (daphne, in-process), with the embedded live engine.

With ``CLUSTERTWIN_ENGINE=embedded`` (``make run``) the engine starts with the server, before
anyone opens a page, and SIGTERM or SIGINT stops it with a snapshot. With ``separate`` the
frames come from ``manage.py run_engine`` through Redis; with ``off`` there is no engine.
"""

import gc
import multiprocessing

from twin import app_setting
from twin.config import instance
from twin.management.one_line import OneLineCommand, refuse

MODES = {"embedded": "the live engine starts with the server",
         "separate": "frames come from `manage.py run_engine` through the channel layer",
         "off": "no live engine"}


WORKERS_END_S = 5.0
"""How long a stopped server waits for its worker processes to end once told to."""


def _workers_end() -> None:
    """End the worker processes still running as the server stops (a what-if's): else the
    exit waits until they finish, minutes for a long what-if. Their rows say they failed (or
    the next reader marks them abandoned, as after a crash: ``twin.studies.whatif``)."""
    workers = multiprocessing.active_children()
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(WORKERS_END_S)


def _port(raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise refuse(f"--port must be a TCP port (1-65535), not {raw!r}")
    return int(raw)


class Command(OneLineCommand):
    help = ("Serve the twin (HTTP and WebSockets, with daphne); with CLUSTERTWIN_ENGINE="
            "embedded the live engine starts with the server.")

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1", help="address (default 127.0.0.1)")
        parser.add_argument("--port", default="8000", help="TCP port (default 8000)")
        parser.add_argument("--proxy-headers", action="store_true",
                            help="take the client's address, port and scheme from "
                            "X-Forwarded-For/-Port/-Proto (behind a proxy you trust)")
        parser.add_argument("--no-access-log", action="store_true",
                            help="do not write the access log to standard output")

    def handle(self, *args, **opts):
        port = _port(str(opts["port"]))
        instance.claim_or_exit(engine=app_setting("ENGINE_MODE") == "embedded")
        from twin.config.asgi import application
        from twin.config.serving import server_build
        from twin.mirror.poller import live_driver

        mode = app_setting("ENGINE_MODE")

        def ready():
            self.stdout.write(f"serving on http://{opts['bind']}:{port} "
                              f"({mode}: {MODES.get(mode, mode)})")
            self.stdout.flush()

        server = server_build(application, bind=opts["bind"], port=port, make_driver=live_driver,
                              access_log=not opts["no_access_log"],
                              proxy_headers=opts["proxy_headers"], on_ready=ready)
        server.run()
        _workers_end()
        # the engine's millions of objects are freed with the process, not walked by the
        # interpreter's last collections (seconds at noc-4k)
        gc.freeze()
        if server.abort_start:
            raise refuse(f"could not listen on {opts['bind']}:{port}")
