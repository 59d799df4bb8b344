"""The core is pure: importing all of scheduler/ loads no Django."""

import subprocess
import sys


def test_importing_the_core_loads_no_django():
    code = ("import pkgutil, importlib, sys, scheduler\n"
            "for m in pkgutil.walk_packages(scheduler.__path__, 'scheduler.'):\n"
            "    importlib.import_module(m.name)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'twin')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
