/* Drills: show only the parameter fields the chosen kind takes; follow the live counters and
 * drill events; refresh the list of drills while any is pending. */
(function () {
  "use strict";

  var P = window.TwinPanels;
  var kindParams = JSON.parse(document.getElementById("kind-params").textContent);
  var kind = document.getElementById("id_kind");

  function showParams() {
    var takes = kindParams[kind.value] || [];
    document.querySelectorAll("[data-param]").forEach(function (field) {
      field.hidden = takes.indexOf(field.dataset.param) < 0;
    });
  }
  kind.addEventListener("change", showParams);
  showParams();

  TwinLive.on("data", function (msg) {
    P.counters(msg);
    P.events(msg);
  });

  function outcomeText(d) {
    var o = d.outcome || {};
    if (o.error) return o.error;
    if (d.status !== "applied") return "";
    var parts = [];
    if (Array.isArray(o.jobs)) parts.push(o.jobs.length + " job(s) hit");
    if (o.gpus !== undefined) parts.push(o.gpus + " GPUs");
    if (o.repair_s) parts.push("repair " + P.fmt(o.repair_s) + " s");
    return parts.join(", ");
  }

  function targetText(d) {
    var resolved = (d.outcome || {}).target;
    return resolved === undefined || resolved === null || String(resolved) === d.target ?
      d.target : d.target + " → " + resolved;
  }

  var pending = !!document.querySelector("#drill-rows .status-pending");

  function refresh() {
    fetch("/api/drills?limit=50", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error(r.status)); })
      .then(function (body) {
        pending = body.drills.some(function (d) { return d.status === "pending"; });
        P.fillTable("drill-rows", body.drills.map(function (d) {
          return [d.id, d.requested_by || "–", d.requested_at.slice(0, 19).replace("T", " "), d.kind,
                  targetText(d), d.status,
                  d.applied_at_sim === null ? "–" : P.fmt(d.applied_at_sim) + " s", outcomeText(d)];
        }), "No drills yet.");
      })
      .catch(function (err) { console.warn("drills refresh failed", err); });
  }
  setInterval(function () { if (pending) refresh(); }, 2000);
})();
