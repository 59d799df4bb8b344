/* Jobs: the whole queue (GET /api/queue: sorted by any column, paged) with pending reasons and
 * reserved starts, running jobs with their span and MFU, and each tenant's GPUs against its
 * quota. */
(function () {
  "use strict";

  var P = window.TwinPanels;
  var view = { sort: "position", order: "asc", page: 1, per_page: 50 };
  var pages = 1;
  var lastFetch = 0;
  var REFRESH_MS = 2000;

  function hours(h) { return P.durationH(h); }
  function job(name) { return { text: name, href: P.jobUrl(name) }; }
  function tenant(name) { return name ? { text: name, href: P.tenantUrl(name) } : "–"; }

  function loadQueue() {
    lastFetch = Date.now();
    var q = new URLSearchParams(view).toString();
    fetch("/api/queue?" + q, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body) { return; }
        pages = body.pages;
        P.setText("queue-page", "page " + P.fmt(body.page) + " of " + P.fmt(body.pages) +
                  " · " + P.fmt(body.total) + " queued");
        P.fillTable("queue-rows", body.rows.map(function (q) {
          return [q.position, job(q.name), tenant(q.tenant), P.fmt(q.gpus), q.priority,
                  hours(q.wait_h),
                  q.reason || "–",
                  q.reserved_start_h === null ? "–" : "at " + P.simTime(3600 * q.reserved_start_h)];
        }), "The queue is empty.");
        document.querySelectorAll("#queue-table th[data-sort]").forEach(function (th) {
          th.setAttribute("aria-sort", th.dataset.sort !== view.sort ? "none" :
                          view.order === "asc" ? "ascending" : "descending");
        });
      });
  }

  document.querySelectorAll("#queue-table th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      view.order = view.sort === th.dataset.sort && view.order === "asc" ? "desc" : "asc";
      view.sort = th.dataset.sort;
      view.page = 1;
      loadQueue();
    });
  });
  [["queue-prev", -1], ["queue-next", 1]].forEach(function (b) {
    var el = document.getElementById(b[0]);
    if (el) {
      el.addEventListener("click", function () {
        view.page = Math.min(Math.max(1, view.page + b[1]), pages);
        loadQueue();
      });
    }
  });

  TwinLive.on("data", function (msg) {
    var jobs = msg.jobs || {};
    P.setText("jobs-queued", P.fmt(jobs.queued));
    P.setText("jobs-running", P.fmt(jobs.running));
    P.setText("jobs-recovering", P.fmt(jobs.recovering));
    P.setText("jobs-in-cloud", P.fmt(jobs.in_cloud));
    P.setText("jobs-done", P.fmt(jobs.done));
    P.setText("preemptions", P.fmt(jobs.preemptions));
    if (Date.now() - lastFetch >= REFRESH_MS) { loadQueue(); }
    P.fillTable("running-rows", (msg.running_jobs || []).map(function (r) {
      return [job(r.name), tenant(r.tenant), P.fmt(r.gpus), r.model, r.state,
              r.span.pods + " pod(s), " + r.span.leaves + " leaf switch(es)",
              P.pct(r.mfu), hours(r.running_h)];
    }), "No job is running.");
    var tenants = msg.tenants || [];
    P.fillTable("tenant-rows", tenants.map(function (t) {
      return [tenant(t.tenant), P.fmt(t.used_gpus), P.fmt(t.quota_gpus),
              t.quota_gpus ? P.pct(t.used_gpus / t.quota_gpus) : "–"];
    }), "No tenants.");
    var names = tenants.map(function (t) { return t.tenant; });
    Plotly.react("tenant-chart", [
      { type: "bar", name: "quota", x: names, y: tenants.map(function (t) { return t.quota_gpus; }),
        marker: { color: "#2a3847" } },
      { type: "bar", name: "in use", x: names, y: tenants.map(function (t) { return t.used_gpus; }),
        marker: { color: "#4fb3ff" } },
    ], P.layout({ barmode: "overlay", yaxis: { title: { text: "GPUs" } } }), P.plotConfig);
  });
})();
