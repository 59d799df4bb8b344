/* Alerts page: when the number of firing alerts in the live frame changes, the table is
 * re-read from /api/alerts (same filters as the page) and redrawn as the server draws it:
 * values with units, entities linked by name, silenced alerts marked; staff get Acknowledge
 * forms carrying the page's CSRF token and a Silence link. */
(function () {
  "use strict";

  var P = window.TwinPanels;
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

  /* key=value per label; a tenant, a job or a component (node, switch, rack ...) linked to
   * its page and shown by name (twin/templatetags/entity_names.py label_link). */
  function labelsCell(tr, labels, entities) {
    var td = cell(tr, "");
    td.className = "entities";
    if (entities) {  // named and linked when the alert fired (twin/alerts/entities.py)
      entities.forEach(function (e, i) {
        if (i) td.appendChild(document.createTextNode(", "));
        td.appendChild(e.url ? P.anchor(e.name, e.url) : document.createTextNode(e.name));
      });
      return;
    }
    Object.keys(labels).forEach(function (k) {
      var v = String(labels[k]);
      var named = k === "tenant" ? { name: v, url: P.tenantUrl(v) } :
        k === "job" ? { name: v, url: P.jobUrl(v) } : P.nameOf(k + " " + v);
      if (!named && k !== "tenant" && k !== "job") P.askName(k + " " + v);
      td.appendChild(document.createTextNode(k + "="));
      td.appendChild(named && named.url ? P.anchor(named.name, named.url)
                                        : document.createTextNode(v));
      td.appendChild(document.createTextNode(" "));
    });
  }

  function link(parent, text, href, className, title) {
    var el = document.createElement(href ? "a" : "span");
    if (href) el.href = href;
    if (className) el.className = className;
    if (title) el.title = title;
    el.textContent = text;
    parent.appendChild(el);
    return el;
  }

  function silenceLink(td, a) {
    if (!canAck) return;
    td.appendChild(document.createTextNode(" "));
    link(td, "Silence…", "?silence=" + a.id + "#silence-form", "silence-link");
  }

  function ruleCell(tr, a) {
    var td = cell(tr, "");
    link(td, a.rule, "", "", a.figure + " " + a.condition +
      (a.description ? " · " + a.description : ""));
    if (a.runbook_url) {
      td.appendChild(document.createTextNode(" "));
      link(td, "runbook", a.runbook_url, "runbook", "what to do");
    }
  }

  function entitiesCell(tr, a) {
    var td = cell(tr, "");
    td.className = "entities";
    if (!a.entities.length) link(td, "fleet", "", "muted");
    a.entities.forEach(function (e, i) {
      if (i) td.appendChild(document.createTextNode(", "));
      link(td, e.name, e.url, e.url ? "entity entity-" + e.key : "", e.key + "=" + e.value);
    });
  }

  function stateCell(tr, a) {
    var td = cell(tr, a.state);
    if (!a.silenced) return;
    td.appendChild(document.createTextNode(" "));
    link(td, "silenced", "", "silenced", "silence #" + a.silenced.id + " by " +
      a.silenced.by + ": " + a.silenced.comment);
  }

  function when(iso) { return iso.slice(0, 19).replace("T", " "); }

  function ackCell(tr, a) {
    if (a.acknowledged_at) {
      silenceLink(cell(tr, (a.acknowledged_by || "(deleted account)") + " at " +
        when(a.acknowledged_at)), a);
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
    silenceLink(td, a);
  }

  var lastData = null;
  P.onNames(function () { if (lastData) draw(lastData); });

  function draw(data) {
    lastData = data;
    rows.textContent = "";
    data.alerts.forEach(function (a) {
      var tr = document.createElement("tr");
      tr.dataset.id = a.id;
      tr.dataset.state = a.state;
      cell(tr, String(a.id));
      cell(tr, a.rule, a.figure + " " + a.comparison + " " + a.threshold);
      cell(tr, a.severity);
      cell(tr, a.state);
      labelsCell(tr, a.labels, a.entities);
      cell(tr, a.value.toFixed(3));
      cell(tr, String(Math.round(a.t_sim / 3600)));
      cell(tr, a.started_at.slice(0, 19).replace("T", " "));
      cell(tr, a.resolved_at ? a.resolved_at.slice(0, 19).replace("T", " ") : "–");
      ackCell(tr, a);
      rows.appendChild(tr);
    });
    if (!data.alerts.length) {
      var tr = document.createElement("tr");
      cell(tr, "No alerts match.").colSpan = 9;
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
