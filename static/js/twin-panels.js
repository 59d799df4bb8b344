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

  function missing(value) {
    return value === null || value === undefined || value === "" || !Number.isFinite(Number(value));
  }

  // a simulated instant as the engine's clock: "day 3, 05:18" (twin/pages/formats.py sim_time)
  function simTime(seconds) {
    if (missing(seconds)) return "–";
    var s = Math.max(0, Math.floor(Number(seconds)));
    var days = Math.floor(s / 86400), rest = s - 86400 * days;
    return "day " + days + ", " + pad(Math.floor(rest / 3600)) + ":" + pad(Math.floor(rest % 3600 / 60));
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // a span of seconds: "45 s", "14 min", "2 h 14 min", "3 d 5 h" (formats.py duration)
  function duration(seconds) {
    if (missing(seconds)) return "–";
    var s = Math.round(Number(seconds));
    var sign = s < 0 ? "-" : "";
    s = Math.abs(s);
    if (s < 60) return sign + s + " s";
    var m = Math.round(s / 60);
    if (m < 60) return sign + m + " min";
    var h = Math.floor(m / 60);
    m -= 60 * h;
    if (h < 24) return sign + h + " h" + (m ? " " + m + " min" : "");
    var hours = Math.round(s / 3600), d = Math.floor(hours / 24);
    h = hours - 24 * d;
    return sign + d + " d" + (h ? " " + h + " h" : "");
  }

  function durationH(hours) { return missing(hours) ? "–" : duration(Number(hours) * 3600); }

  // a wall-clock instant in the browser's zone: "2025-06-01 14:03:12" (formats.py wall_text);
  // compact: "14:03:12" today, "06-01 14:03" another day
  function wallTime(date, compact) {
    var day = date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate());
    var clock = pad(date.getHours()) + ":" + pad(date.getMinutes());
    if (compact) {
      var today = new Date();
      return date.toDateString() === today.toDateString() ?
        clock + ":" + pad(date.getSeconds()) : day.slice(5) + " " + clock;
    }
    return day + " " + clock + ":" + pad(date.getSeconds());
  }

  function isoTime(date) { return date.toISOString().slice(0, 19) + "Z"; }

  /* A <time>: wall-clock text, ISO and simulated time on hover (formats.py when_html). */
  function whenElement(date, tSim, compact) {
    var el = document.createElement("time");
    el.className = "wall";
    el.dateTime = isoTime(date);
    el.title = isoTime(date) + " · simulated " + simTime(tSim);
    el.textContent = wallTime(date, compact);
    return el;
  }

  // the pages render wall times in the server's zone; show them in the browser's
  function localiseTimes(root) {
    (root || document).querySelectorAll("time.wall[datetime]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (!Number.isNaN(date.getTime())) el.textContent = wallTime(date);
    });
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
    if (msg.mfu_window_s !== undefined) setText("mfu-window-label", "MFU last " + duration(msg.mfu_window_s));
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

  /* Each event kind's severity and whether it is routine scheduling ({% event_kinds_json %},
     from twin/api/events.py); a kind not listed is info. */
  var kindTable = null;
  function kindOf(kind) {
    if (kindTable === null) {
      var el = document.getElementById("event-kinds");
      kindTable = el ? JSON.parse(el.textContent) : {};
    }
    return kindTable[kind] || { severity: "info", routine: false };
  }

  var lastEvents = null;

  /* The frame's recent events, newest first, in <ol id="event-log">: severity colours, wall
     time (estimated from the frame's simulated time and speed-up; ISO and simulated time on
     hover); routine scheduling only while #event-log-routine is checked. */
  function events(msg, filterKind) {
    var list = document.getElementById("event-log");
    if (!list) return;
    lastEvents = [msg, filterKind];
    var toggle = document.getElementById("event-log-routine");
    var routine = toggle ? toggle.checked : true;
    var all = (msg.events || []).slice().reverse();
    if (filterKind) all = all.filter(function (e) { return e.kind === filterKind; });
    var items = routine ? all : all.filter(function (e) { return !kindOf(e.kind).routine; });
    var now = Date.now(), speed = msg.speed > 0 ? msg.speed : 1;
    var fragment = document.createDocumentFragment();
    items.forEach(function (e) {
      var li = document.createElement("li");
      var sev = kindOf(e.kind).severity;
      li.className = "event event-" + e.kind + " sev-" + sev;
      li.dataset.severity = sev;
      var when = document.createElement("span");
      when.className = "when";
      when.appendChild(whenElement(new Date(now - 1000 * Math.max(0, msg.t - e.t) / speed), e.t, true));
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
      none.textContent = all.length ? "Only routine scheduling lately (" + fmt(all.length) +
        " events): tick “routine scheduling” to see them." : "No events yet.";
      fragment.appendChild(none);
    }
    list.replaceChildren(fragment);
    var count = document.getElementById("event-log-hidden");
    if (count) count.textContent = routine ? "" : fmt(all.length - items.length) + " hidden";
  }

  document.addEventListener("DOMContentLoaded", function () {
    localiseTimes();
    var toggle = document.getElementById("event-log-routine");
    if (toggle) toggle.addEventListener("change", function () {
      if (lastEvents) events(lastEvents[0], lastEvents[1]);
    });
  });

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
    fmt: fmt, pct: pct, simTime: simTime, duration: duration, durationH: durationH,
    wallTime: wallTime, whenElement: whenElement, localiseTimes: localiseTimes,
    setText: setText, counters: counters,
    fillTable: fillTable, events: events, layout: layout,
    plotConfig: { displaylogo: false, responsive: true },
  };
})();
