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

  /* A link to an entity's page; its text is set with textContent. */
  function anchor(text, href) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  function jobUrl(name) { return "/jobs/" + encodeURIComponent(name) + "/"; }
  function tenantUrl(name) { return "/tenants/" + encodeURIComponent(name) + "/"; }

  /* A cell: a text, or {text, href} (a link), or a list of those (joined by ", "). */
  function cell(row, text, className) {
    var td = document.createElement("td");
    var parts = Array.isArray(text) ? text : [text];
    parts.forEach(function (part, i) {
      if (i) td.appendChild(document.createTextNode(", "));
      if (part !== null && typeof part === "object") {
        td.appendChild(part.href ? anchor(String(part.text), part.href)
                                 : document.createTextNode(String(part.text)));
      } else {
        td.appendChild(document.createTextNode(part === null || part === undefined ? "" : String(part)));
      }
    });
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  /* Names of components the log names by engine id ("host 100" -> n000100 and its page),
     asked of /api/names (twin/inventory/names.py) once each, in batches; redraw() runs when
     new ones arrive. */
  var known = {};
  var asked = {};
  var waiting = [];
  var namesTimer = null;
  var namesRedraw = [];
  function nameOf(text) { return known[text] || null; }
  function askName(text) {
    if (!text || text in asked) return;
    asked[text] = true;
    waiting.push(text);
    if (namesTimer === null) namesTimer = setTimeout(fetchNames, 50);
  }
  function fetchNames() {
    namesTimer = null;
    var batch = waiting.splice(0, 200);
    if (!batch.length) return;
    var q = batch.map(function (t) { return "c=" + encodeURIComponent(t); }).join("&");
    fetch("/api/names?" + q, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body) return;
        Object.keys(body.names).forEach(function (t) { known[t] = body.names[t]; });
        namesRedraw.forEach(function (f) { f(); });
        if (waiting.length) fetchNames();
      })
      .catch(function (err) { console.warn("names: lookup failed", err); });
  }
  function onNames(f) { namesRedraw.push(f); }

  /* The words the log puts before a unit id ({% component_words_json %}). */
  var unitPattern;
  function unitRegex() {
    if (unitPattern === undefined) {
      var el = document.getElementById("component-words");
      var words = el ? JSON.parse(el.textContent) : [];
      words.sort(function (a, b) { return b.length - a.length; });
      unitPattern = words.length ?
        new RegExp("(^|[^\\w-])((?:" + words.join("|") + ") \\d+)(?![\\w.])", "g") : null;
    }
    return unitPattern;
  }
  function escapeRe(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  /* An event's text as nodes: components named by id shown by name and linked, job names
     linked (twin/pages/event_rows.py linked_text does the same on the server). */
  function linkedText(text, jobs) {
    var spans = [];
    var re = unitRegex();
    var m;
    if (re) {
      re.lastIndex = 0;
      while ((m = re.exec(text)) !== null) {
        var start = m.index + m[1].length;
        var named = nameOf(m[2]);
        if (named) spans.push([start, start + m[2].length, named.name, named.url]);
        else askName(m[2]);
      }
    }
    var names = (jobs || []).filter(function (j) { return typeof j === "string" && j; });
    if (names.length) {
      names.sort(function (a, b) { return b.length - a.length; });
      var jre = new RegExp("(^|[^\\w-])(" + names.map(escapeRe).join("|") + ")(?![\\w-])", "g");
      while ((m = jre.exec(text)) !== null) {
        var s0 = m.index + m[1].length;
        spans.push([s0, s0 + m[2].length, m[2], jobUrl(m[2])]);
      }
    }
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var out = [], at = 0;
    spans.forEach(function (sp) {
      if (sp[0] < at) return;
      if (sp[0] > at) out.push(document.createTextNode(text.slice(at, sp[0])));
      out.push(sp[3] ? anchor(sp[2], sp[3]) : document.createTextNode(sp[2]));
      at = sp[1];
    });
    if (at < text.length) out.push(document.createTextNode(text.slice(at)));
    return out;
  }

  /* What an event is about, as the stored log names it (twin/live/services.py _component). */
  function componentOf(e) {
    if (e.component) return String(e.component);
    var keys = ["switch", "link", "node"];
    for (var i = 0; i < keys.length; i++) {
      if (e[keys[i]] !== undefined && e[keys[i]] !== null) return keys[i] + " " + e[keys[i]];
    }
    return "";
  }

  /* Replace a tbody's rows: rows is a list of lists of cells (see cell()). */
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
      var jobs = (e.jobs || []).slice();
      if (e.job) jobs.push(e.job);
      text.append.apply(text, linkedText(String(e.text), jobs));
      li.append(when, kind);
      var comp = componentOf(e);
      var named = comp ? nameOf(comp) : null;
      if (comp && named === null) askName(comp);
      if (named && named.url && String(e.text).indexOf(comp) < 0 &&
          String(e.text).indexOf(named.name) < 0) {
        var where = document.createElement("span");
        where.className = "component";
        where.appendChild(anchor(named.name, named.url));
        li.append(where);
      }
      li.append(text);
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

  onNames(function () { if (lastEvents) events(lastEvents[0], lastEvents[1]); });

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
    anchor: anchor, jobUrl: jobUrl, tenantUrl: tenantUrl, nameOf: nameOf, askName: askName,
    onNames: onNames, linkedText: linkedText,
    plotConfig: { displaylogo: false, responsive: true },
  };
})();
