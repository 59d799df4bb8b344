/* Drills: show only the parameter fields the chosen kind takes; follow the live counters and
 * drill events; refresh the list of drills while any is pending. */
(function () {
  "use strict";

  var P = window.TwinPanels;
  var kindParams = JSON.parse(document.getElementById("kind-params").textContent);
  var kindBounds = JSON.parse(document.getElementById("kind-bounds").textContent);
  var kind = document.getElementById("id_kind");

  /* The chosen kind's bounds (the engine's table) on each of its fields: min, max, step and
   * the help text. */
  function showParams() {
    var takes = kindParams[kind.value] || [];
    var bounds = kindBounds[kind.value] || {};
    document.querySelectorAll("[data-param]").forEach(function (field) {
      var name = field.dataset.param;
      field.hidden = takes.indexOf(name) < 0;
      var b = bounds[name];
      var input = field.querySelector("input");
      if (input) input.disabled = field.hidden;  // a hidden field is not sent with the drill
      if (!b || !input) return;
      input.min = b.min;
      input.max = b.max;
      input.step = b.step;
      var help = field.querySelector(".help");
      if (help) help.textContent = b.help;
    });
  }
  /* The target suggestions of the chosen kind: the names of what it can hit. */
  var kindTargets = JSON.parse(document.getElementById("kind-targets").textContent);
  function showTargets() {
    var list = document.getElementById("drill-targets");
    if (!list) return;
    var fragment = document.createDocumentFragment();
    (kindTargets[kind.value] || kindTargets.any || []).forEach(function (name) {
      var option = document.createElement("option");
      option.value = name;
      fragment.appendChild(option);
    });
    list.replaceChildren(fragment);
  }
  kind.addEventListener("change", showParams);
  kind.addEventListener("change", showTargets);
  showParams();
  showTargets();

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
    if (o.repair_s) parts.push("repair " + P.duration(o.repair_s));
    return parts.join(", ");
  }

  /* The target by name, linked to its page (the API names it: target_named, chosen_named). */
  function targetText(d) {
    var asked = d.target_named ? { text: d.target_named.name, href: d.target_named.url } :
      d.target;
    var resolved = (d.outcome || {}).target;
    if (resolved === undefined || resolved === null || String(resolved) === d.target) return asked;
    var chosen = d.chosen_named ? { text: "→ " + d.chosen_named.name, href: d.chosen_named.url } :
      "→ " + resolved;
    return [asked, chosen];
  }

  var pending = !!document.querySelector("#drill-rows .status-pending");

  function refresh() {
    fetch("/api/drills?limit=50", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error(r.status)); })
      .then(function (body) {
        var was = pending;
        pending = body.drills.some(function (d) { return d.status === "pending"; });
        if (was && !pending) {  // settled: the server draws the End buttons of drills now applied
          redrawRows();
          return;
        }
        P.fillTable("drill-rows", body.drills.map(function (d) {
          var ended = (d.outcome || {}).ended;
          return [d.id, d.requested_by || "–", d.requested_at.slice(0, 19).replace("T", " "), d.kind,
                  targetText(d), d.status,
                  d.applied_at_sim === null ? "–" : P.simTime(d.applied_at_sim), outcomeText(d),
                  ended ? "ended by " + (ended.by || "an operator") : "–"];
        }), "No drills yet.");
      })
      .catch(function (err) { console.warn("drills refresh failed", err); });
  }
  /* The list as the server renders it (with its End forms), swapped in without a reload. */
  function redrawRows() {
    fetch("/drills/", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error(r.status)); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("drill-rows");
        if (fresh) document.getElementById("drill-rows").innerHTML = fresh.innerHTML;
      })
      .catch(function (err) { console.warn("drills redraw failed", err); });
  }

  setInterval(function () { if (pending) refresh(); }, 2000);
})();
