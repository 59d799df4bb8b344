/* Alerts page: when the number of firing alerts in the live frame changes, the table is
 * re-read from /api/alerts (same filters as the page) and redrawn; staff get Acknowledge forms
 * carrying the page's CSRF token. */
(function () {
  "use strict";

  var shown = document.getElementById("alert-count");
  var table = document.getElementById("alert-table");
  var rows = document.getElementById("alert-rows");
  if (!shown || !rows) return;
  var canAck = table.dataset.canAck === "1";
  var token = document.querySelector("#ack-template input[name=csrfmiddlewaretoken]");
  var firing = Number(shown.dataset.firing);
  var loading = false;

  function cell(tr, text, title) {
    var td = document.createElement("td");
    td.textContent = text;
    if (title) td.title = title;
    tr.appendChild(td);
    return td;
  }

  function ackCell(tr, a) {
    if (a.acknowledged_at) {
      cell(tr, (a.acknowledged_by || "(deleted account)") + " at " +
        a.acknowledged_at.slice(0, 19).replace("T", " "));
      return;
    }
    var td = cell(tr, canAck ? "" : "–");
    td.className = "ack";
    if (!canAck || !token) return;
    var form = document.createElement("form");
    form.method = "post";
    form.action = "/alerts/" + a.id + "/ack";
    form.className = "inline";
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "csrfmiddlewaretoken";
    input.value = token.value;
    var button = document.createElement("button");
    button.type = "submit";
    button.textContent = "Acknowledge";
    form.appendChild(input);
    form.appendChild(button);
    td.appendChild(form);
  }

  function draw(data) {
    rows.textContent = "";
    data.alerts.forEach(function (a) {
      var tr = document.createElement("tr");
      tr.dataset.id = a.id;
      tr.dataset.state = a.state;
      cell(tr, String(a.id));
      cell(tr, a.rule, a.figure + " " + a.comparison + " " + a.threshold);
      cell(tr, a.severity);
      cell(tr, a.state);
      cell(tr, Object.keys(a.labels).map(function (k) { return k + "=" + a.labels[k]; })
        .join(" "));
      cell(tr, a.value.toFixed(3));
      cell(tr, String(Math.round(a.t_sim / 3600)));
      cell(tr, a.started_at.slice(0, 19).replace("T", " "));
      cell(tr, a.resolved_at ? a.resolved_at.slice(0, 19).replace("T", " ") : "–");
      ackCell(tr, a);
      rows.appendChild(tr);
    });
    if (!data.alerts.length) {
      var tr = document.createElement("tr");
      cell(tr, "No alerts match.").colSpan = 10;
      rows.appendChild(tr);
    }
    shown.textContent = data.firing + " firing";
    shown.dataset.firing = data.firing;
  }

  function reload() {
    if (loading) return;
    loading = true;
    fetch("/api/alerts" + window.location.search, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) draw(data); })
      .catch(function (err) { console.warn("alerts: could not reload", err); })
      .then(function () { loading = false; });
  }

  TwinLive.on("data", function (msg) {
    if (!msg.alerts || msg.alerts.firing === firing) return;
    firing = msg.alerts.firing;
    reload();
  });
})();
