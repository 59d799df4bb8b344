/* Renderers shared by the dashboard pages: counters, the event log, tables, number formats.
 * Everything is written with textContent (never innerHTML): frames hold job and tenant names.
 */
(function () {
  "use strict";

  function fmt(value, digits) {
    if (value === null || value === undefined || Number.isNaN(value)) return "–";
    return Number(value).toLocaleString("en-US", {
      maximumFractionDigits: digits === undefined ? 0 : digits,
      minimumFractionDigits: digits === undefined ? 0 : digits,
    });
  }

  function pct(value, digits) {
    return value === null || value === undefined ? "–" : fmt(100 * value, digits === undefined ? 1 : digits) + " %";
  }

  function simTime(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    var days = Math.floor(seconds / 86400);
    var hours = (seconds - 86400 * days) / 3600;
    return "day " + days + ", " + hours.toFixed(1) + " h";
  }

  // a window's length in simulated time: "45 min", "1.0 h"
  function span(seconds) {
    return seconds < 3600 ? Math.round(seconds / 60) + " min" : (seconds / 3600).toFixed(1) + " h";
  }

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el && el.textContent !== text) el.textContent = text;
  }

  function counters(msg) {
    var util = msg.util || {};
    var jobs = msg.jobs || {};
    var inter = msg.interruptions || {};
    setText("sim-time", simTime(msg.t));
    setText("gpus-allocated", fmt(util.allocated));
    setText("gpus-idle", fmt(util.idle));
    setText("gpus-down", fmt(util.down));
    setText("gpus-spare", fmt(util.spare));
    setText("jobs-queued", fmt(jobs.queued));
    setText("jobs-running", fmt(jobs.running));
    setText("interruptions", fmt((inter.unplanned || 0) + (inter.planned || 0)));
    setText("mfu", pct(msg.mfu, 2));
    setText("mfu-window", pct(msg.mfu_window, 2));
    if (msg.mfu_window_s !== undefined) setText("mfu-window-label", "MFU last " + span(msg.mfu_window_s));
    setText("goodput", pct(msg.goodput, 2));
    var power = msg.power;
    var inference = msg.inference || {};
    setText("it-mw", power ? fmt(power.it_mw, 2) : "–");
    setText("facility-mw", power ? fmt(power.facility_mw, 2) : "–");
    setText("pue", power && power.it_mw > 0 ? fmt(power.facility_mw / power.it_mw, 2) : "–");
    setText("throttled", power ? fmt(power.throttled_gpus) : "–");
    setText("ettr", msg.ettr === null || msg.ettr === undefined ? "–" : fmt(msg.ettr, 3));
    setText("slo", inference.slo_attainment === null || inference.slo_attainment === undefined
      ? "–" : pct(inference.slo_attainment, 2));
  }

  function cell(row, text, className) {
    var td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  /* Replace a tbody's rows: rows is a list of lists of cell texts. */
  function fillTable(tbodyId, rows, emptyText) {
    var tbody = document.getElementById(tbodyId);
    if (!tbody) return;
    var fragment = document.createDocumentFragment();
    rows.forEach(function (cells) {
      var tr = document.createElement("tr");
      cells.forEach(function (text) { cell(tr, text); });
      fragment.appendChild(tr);
    });
    if (!rows.length) {
      var tr = document.createElement("tr");
      var td = cell(tr, emptyText || "None.", "muted");
      td.colSpan = 99;
      fragment.appendChild(tr);
    }
    tbody.replaceChildren(fragment);
  }

  /* The frame's recent events, newest first, in <ol id="event-log">. */
  function events(msg, filterKind) {
    var list = document.getElementById("event-log");
    if (!list) return;
    var items = (msg.events || []).slice().reverse();
    if (filterKind) items = items.filter(function (e) { return e.kind === filterKind; });
    var fragment = document.createDocumentFragment();
    items.forEach(function (e) {
      var li = document.createElement("li");
      li.className = "event event-" + e.kind;
      var when = document.createElement("span");
      when.className = "when";
      when.textContent = (e.t / 3600).toFixed(2) + " h";
      var kind = document.createElement("span");
      kind.className = "kind";
      kind.textContent = e.kind;
      var text = document.createElement("span");
      text.className = "text";
      text.textContent = e.text;
      li.append(when, kind, text);
      fragment.appendChild(li);
    });
    if (!items.length) {
      var none = document.createElement("li");
      none.className = "muted";
      none.textContent = "No events yet.";
      fragment.appendChild(none);
    }
    list.replaceChildren(fragment);
  }

  var DARK = {
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: "#e6e6e6", size: 12 }, margin: { l: 50, r: 20, t: 30, b: 40 },
  };

  var AXIS = { gridcolor: "#243040", zerolinecolor: "#3a4a5c", linecolor: "#3a4a5c" };

  /* Dark layout; axes given in extra keep the dark grid colours. */
  function layout(extra) {
    var out = Object.assign({}, DARK, extra || {});
    out.xaxis = Object.assign({}, AXIS, out.xaxis || {});
    out.yaxis = Object.assign({}, AXIS, out.yaxis || {});
    return out;
  }

  window.TwinPanels = {
    fmt: fmt, pct: pct, simTime: simTime, setText: setText, counters: counters,
    fillTable: fillTable, events: events, layout: layout,
    plotConfig: { displaylogo: false, responsive: true },
  };
})();
