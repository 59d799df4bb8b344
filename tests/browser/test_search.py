"""Search and drill-down in a real browser: a search hit opens the right page, and rack ->
node -> GPU -> job -> tenant are linked, with the browser's back button returning the way it
came."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import log_in, wait_live
from tests.waiting import wait_until

pytestmark = pytest.mark.browser


def a_running_job(page) -> dict:
    """A running job of the live twin as ``/api/jobs/<name>`` shows it (nodes, racks); jobs
    end between two requests, so it asks until one answers."""
    return wait_until(lambda: page.evaluate(
        "async () => { const b = await (await fetch('/api/jobs')).json();"
        " for (const j of b.running_jobs) {"
        "  const r = await fetch('/api/jobs/' + encodeURIComponent(j.name));"
        "  if (r.ok) return await r.json(); }"
        " return null; }"), timeout=120, what="a job running in the live twin")


def test_a_search_hit_opens_its_page(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    job = a_running_job(page)
    page.fill("header input[name=q]", job["name"])
    page.press("header input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"/search/\?q="))
    page.click(f"#results-job a:text-is('{job['name']}')")
    page.wait_for_url(f"{server}/jobs/{job['name']}/")
    assert page.inner_text("h1").startswith(f"Job {job['name']}")

    page.fill("header input[name=q]", "dev-small-n000001")
    page.press("header input[name=q]", "Enter")
    page.click("#results-node a:text-is('dev-small-n000001')")
    page.wait_for_url(f"{server}/nodes/1/")
    assert "dev-small-n000001" in page.inner_text("h1")


def test_rack_to_node_to_gpu_to_job_to_tenant_and_back(server, page):
    log_in(page, server, "operator")
    wait_live(page)
    for _ in range(5):  # the twin runs fast: a job may end during the walk; take another
        job = a_running_job(page)
        node = job["node_ids"][0]
        rack = job["racks"][0]["id"]
        page.goto(f"{server}/racks/{rack}/")  # the rack, as search and pages link it
        page.click(f"#rack-nodes a[href='/nodes/{node}/']")
        page.wait_for_url(f"{server}/nodes/{node}/")
        # a GPU's row -> the job holding that GPU (a gang may hold only part of the node)
        link = page.locator(f"#node-gpus a.gpu-job:text-is('{job['name']}')")
        if link.count() == 0:
            continue  # it ended between the API and the node page
        gpu = link.first.locator("xpath=ancestor::tr").get_attribute("id")  # "gpu-<index>"
        link.first.click()
        page.wait_for_url(f"{server}/jobs/{job['name']}/")
        if page.locator(f"#job-nodes a[href='/nodes/{node}/']").count() == 1:
            break
    else:
        raise AssertionError("every job tried ended during the walk")
    page.click("#job-tenant")
    page.wait_for_url(re.compile(r"/tenants/[^/]+/$"))
    page.wait_for_function("() => document.getElementById('tenant-history-note')"
                           ".textContent.startsWith('GPU-hours so far')", timeout=30_000)
    assert page.locator(f"#tenant-running a:text-is('{job['name']}')").count() == 1
    page.go_back()
    page.wait_for_url(f"{server}/jobs/{job['name']}/")
    page.click(f"#job-gpus a[href='/nodes/{node}/#{gpu}']")  # job -> the same GPU
    page.wait_for_url(f"{server}/nodes/{node}/#{gpu}")
    assert page.locator(f"#{gpu} a.gpu-job:text-is('{job['name']}')").count() == 1
    page.go_back()
    page.wait_for_url(f"{server}/jobs/{job['name']}/")
    page.click(f"#job-nodes a[href='/nodes/{node}/']")  # job -> node
    page.wait_for_url(f"{server}/nodes/{node}/")
    page.click("#node-rack")  # node -> rack
    page.wait_for_url(f"{server}/racks/{rack}/")
    page.wait_for_selector(f"#rack-nodes a[href='/nodes/{node}/']")
