/* Incidents: the overview's "Incidents now" panel (#incidents-now, drawn from /api/incidents,
 * which names components and jobs, whenever the frame's open incidents change and every 10 s)
 * and the incidents page (#incident-rows, the server's rows swapped in every 5 s). */
(function () {
  "use strict";

  var PANEL_ROWS = 8;
  var P = window.TwinPanels;

  function link(text, url) {
    if (!url) return document.createTextNode(text);
    var a = document.createElement("a");
    a.href = url;
    a.textContent = text;
    return a;
  }

  function when(w, none) {
    if (!w) return document.createTextNode(none || "–");
    if (!w.wall) return document.createTextNode(P.simTime(w.t_sim));
    return P.whenElement(new Date(w.wall), w.t_sim, true);
  }

  function row(i) {
    var tr = document.createElement("tr");
    tr.dataset.id = i.id;
    tr.className = "incident incident-" + i.state + (i.drill ? " incident-drill" : "");
    var cells = [
      [link(i.component.name, i.component.url), document.createTextNode(" "),
       link("#" + i.id, i.url)],
      [document.createTextNode(i.cause + (i.drill ? " (drill)" : ""))],
      [when(i.since)],
      [when(i.expected_repair, "not known")],
      i.jobs.length ? i.jobs.reduce(function (out, j, k) {
        if (k) out.push(document.createTextNode(", "));
        out.push(link(j.name, j.url), document.createTextNode(" (" + P.fmt(j.gpus) + " GPUs)"));
        return out;
      }, []).concat(i.jobs_count > i.jobs.length ?
        [document.createTextNode(" … " + P.fmt(i.jobs_count) + " in all")] : [])
        : [document.createTextNode("–")],
      [document.createTextNode(P.fmt(i.gpu_hours_lost, 1))],
      [document.createTextNode(i.acknowledged_by ? i.acknowledged_by : "–")],
    ];
    var classes = ["incident-component", "incident-cause", "incident-since", "incident-repair",
                   "incident-jobs", "incident-lost", "incident-ack"];
    cells.forEach(function (nodes, k) {
      var td = document.createElement("td");
      td.className = classes[k];
      nodes.forEach(function (n) { td.appendChild(n); });
      tr.appendChild(td);
    });
    return tr;
  }

  // ------------------------------------------------------------- the overview's panel
  var panel = document.querySelector("#incidents-now tbody");
  var shownKey = null, fetchedAt = 0, busy = false;

  function panelDraw(body) {
    var rows = body.incidents.slice(0, PANEL_ROWS);
    var fragment = document.createDocumentFragment();
    rows.forEach(function (i) { fragment.appendChild(row(i)); });
    if (!rows.length) {
      var none = document.createElement("tr");
      var td = document.createElement("td");
      td.colSpan = 7;
      td.className = "muted";
      td.textContent = "Nothing is broken now.";
      none.appendChild(td);
      fragment.appendChild(none);
    }
    panel.replaceChildren(fragment);
    var c = body.counts || {};
    P.setText("incidents-summary", body.live ? P.fmt(c.open || 0) + " open" +
      (c.open_drills ? " (" + P.fmt(c.open_drills) + " drills)" : "") +
      (c.open > rows.length ? ", the worst " + rows.length + " shown" : "") + " · " +
      P.fmt(c.resolved || 0) + " resolved so far" : "Waiting for the live engine…");
  }

  function panelFetch(key) {
    busy = true;
    fetch("/api/incidents?state=open", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error(r.status)); })
      .then(function (body) { shownKey = key; fetchedAt = Date.now(); panelDraw(body); })
      .catch(function (err) { console.warn("incidents refresh failed", err); })
      .then(function () { busy = false; });
  }

  if (panel) {
    TwinLive.on("data", function (msg) {
      var inc = msg.incidents;
      if (!inc || busy) return;
      var key = inc.open.map(function (i) { return i.id; }).join(",") + "/" + inc.counts.resolved;
      if (key !== shownKey || Date.now() - fetchedAt > 10000) panelFetch(key);
    });
  }

  // ------------------------------------------------------------- the incidents page
  var table = document.getElementById("incident-rows");
  if (table) {
    setInterval(function () {
      if (document.activeElement && document.activeElement.closest("form")) return;
      fetch(window.location.href, { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          ["incident-rows", "incident-counts"].forEach(function (id) {
            var fresh = doc.getElementById(id), old = document.getElementById(id);
            if (fresh && old) old.innerHTML = fresh.innerHTML;
          });
          P.localiseTimes(table);
        })
        .catch(function (err) { console.warn("incidents page refresh failed", err); });
    }, 5000);
  }
})();
