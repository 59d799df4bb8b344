/* Jobs: the queue in policy order with reserved starts, running jobs with their span and MFU,
 * and each tenant's GPUs against its quota. */
(function () {
  "use strict";

  var P = window.TwinPanels;

  function hours(h) {
    return h === null || h === undefined ? "–" : P.fmt(h, 2) + " h";
  }

  TwinLive.on("data", function (msg) {
    var jobs = msg.jobs || {};
    P.setText("jobs-queued", P.fmt(jobs.queued));
    P.setText("jobs-running", P.fmt(jobs.running));
    P.setText("jobs-recovering", P.fmt(jobs.recovering));
    P.setText("jobs-in-cloud", P.fmt(jobs.in_cloud));
    P.setText("jobs-done", P.fmt(jobs.done));
    P.setText("preemptions", P.fmt(jobs.preemptions));
    P.fillTable("queue-rows", (msg.queue || []).map(function (q) {
      return [q.position, q.name, q.tenant, P.fmt(q.gpus), q.priority, hours(q.wait_h),
              q.reason !== undefined ? "Slurm: " + (q.reason || "None") :
              q.reserved_start_h === null ? "–" : "at " + hours(q.reserved_start_h)];
    }), "The queue is empty.");
    P.fillTable("running-rows", (msg.running_jobs || []).map(function (r) {
      return [r.name, r.tenant, P.fmt(r.gpus), r.model, r.state,
              r.span.pods + " pod(s), " + r.span.leaves + " leaf switch(es)",
              P.pct(r.mfu), hours(r.running_h)];
    }), "No job is running.");
    var tenants = msg.tenants || [];
    P.fillTable("tenant-rows", tenants.map(function (t) {
      return [t.tenant, P.fmt(t.used_gpus), P.fmt(t.quota_gpus),
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
