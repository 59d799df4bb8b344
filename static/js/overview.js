/* Overview: utilisation, MFU and goodput from stored history (range picker, drag to zoom;
 * history-chart.js) extended by live frames, the MFU-loss
 * waterfall, counters, the event log and (staff) the engine's speed and pause controls. */
(function () {
  "use strict";

  var MAX_POINTS = 1000;  // what /api/history serves at most per series
  var HISTORY = ["fleet.allocated_pct", "fleet.mfu_pct", "fleet.mfu_window_pct",
                 "fleet.goodput_pct"];
  var NAMES = ["GPUs allocated %", "MFU since start %", "MFU last hour %", "goodput %"];
  var range = document.getElementById("series-range");
  var P = window.TwinPanels;
  var H = window.TwinHistory;
  var series = document.getElementById("series-chart");
  var waterfall = document.getElementById("mfu-waterfall");
  var lastT = null;     // engine seconds of the newest point drawn
  var clock = null;     // the run's clock (TwinHistory), from the history or the first frame
  var zoom = null;      // [from, to] engine seconds while the user is zoomed in
  var bucketS = null;   // bucket width of the drawn history (null: samples as recorded)
  var relayout = null;  // TwinHistory.zoomable's, once the chart exists

  function point(msg) {
    var util = msg.util || {};
    var allocated = util.gpus ? 100 * util.allocated / util.gpus : null;
    var windowed = msg.mfu_window === null || msg.mfu_window === undefined ? null
      : 100 * msg.mfu_window;
    return [allocated, 100 * (msg.mfu || 0), windowed, 100 * (msg.goodput || 0)];
  }

  function seriesDraw(traces, xRange) {
    Plotly.react(series, traces, P.layout({
      xaxis: { title: { text: clock.title }, type: clock.wall ? "date" : "linear",
               range: xRange || undefined, autorange: !xRange },
      yaxis: { title: { text: "%" }, rangemode: "tozero" },
      legend: { orientation: "h", y: 1.15 }, dragmode: "zoom",
    }), P.plotConfig);
    if (!relayout) {
      relayout = H.zoomable(series, function () { return clock; }, function (from, to) {
        zoom = [from, to];
        historyLoad();
      }, seriesUnzoom);
    }
  }

  function seriesReset(msg) {
    clock = clock || H.clockOfFrame(msg);
    var y = point(msg);
    seriesDraw(NAMES.map(function (name, i) {
      return { x: [clock.x(msg.t)], y: [y[i]], name: name, mode: "lines", type: "scatter" };
    }), null);
  }

  // the x range a picked span shows: the span back from the newest point (null: all of it)
  function pickedRange(newest) {
    var span = range ? H.RANGES_S[range.value] : null;
    return span ? [clock.x(newest - span), clock.x(newest)] : null;
  }

  // The chart starts from the stored history (it survives reloads and restarts) over the
  // picked range (or the zoomed span), downsampled by the server, then live frames extend it.
  function historyLoad() {
    var status = document.getElementById("series-range-status");
    var query = zoom ? { from: zoom[0], to: zoom[1] } : { range: range ? range.value : "24h" };
    Promise.all(HISTORY.map(function (metric) {
      return H.fetchSeries(metric, query).catch(function () { return null; });
    })).then(function (answers) {
      var first = answers[0];
      if (!first) throw new Error("no answer");
      if (!first.t.length) {
        if (status) status.textContent = zoom ? "no stored points in this span" : "no history yet";
        return;
      }
      clock = H.clockOf(first);
      bucketS = first.aggregate === "as recorded" ? null : first.step_s;
      var newest = Math.max(first.t[first.t.length - 1], zoom ? 0 : (lastT || 0));
      seriesDraw(answers.map(function (a, i) {
        return a ? H.trace(a, NAMES[i], clock) : { x: [], y: [], name: NAMES[i] };
      }), zoom ? [clock.x(zoom[0]), clock.x(zoom[1])] : pickedRange(newest));
      if (!zoom) lastT = first.t[first.t.length - 1];
      if (status) status.textContent = H.describe(first, clock) + (zoom ? "; zoomed" : "");
      var reset = document.getElementById("series-reset");
      if (reset) reset.hidden = !zoom;
    }).catch(function () {
      if (status) status.textContent = "history unavailable";
    });
  }

  function seriesUnzoom() {
    zoom = null;
    historyLoad();
  }

  function rangeFollow(newest) {
    var shown = pickedRange(newest);
    if (shown && relayout) relayout({ "xaxis.range": shown });
  }

  if (range) range.addEventListener("change", seriesUnzoom);
  var reset = document.getElementById("series-reset");
  if (reset) reset.addEventListener("click", seriesUnzoom);
  historyLoad();

  // Live frames extend samples drawn as recorded; buckets are asked again once a new one
  // has filled (the chart never holds more than MAX_POINTS points a series).  A zoomed
  // chart stays as the user left it.
  function seriesAppend(msg) {
    if (lastT === null || msg.t < lastT) {
      var restarted = lastT !== null;  // from an older snapshot: its history was cut there
      seriesReset(msg);  // first data, or the engine restarted
      lastT = msg.t;
      if (restarted) historyLoad();
    } else if (msg.t > lastT && !zoom) {
      if (bucketS) {
        if (msg.t >= lastT + bucketS) {
          lastT = msg.t;
          historyLoad();
        }
        return;
      }
      var x = clock.x(msg.t);
      var y = point(msg);
      Plotly.extendTraces(series, { x: [[x], [x], [x], [x]], y: [[y[0]], [y[1]], [y[2]], [y[3]]] },
                          [0, 1, 2, 3], MAX_POINTS);
      lastT = msg.t;
      rangeFollow(msg.t);
    }
  }

  function waterfallDraw(msg) {
    var loss = msg.loss_pp || {};
    var causes = Object.keys(loss).filter(function (k) { return loss[k] > 0; })
      .sort(function (a, b) { return loss[b] - loss[a]; });
    var x = ["peak"].concat(causes.map(function (k) { return k.replace(/_/g, " "); }), ["MFU"]);
    var y = [100].concat(causes.map(function (k) { return -loss[k]; }), [0]);
    var measure = ["absolute"].concat(causes.map(function () { return "relative"; }), ["total"]);
    Plotly.react(waterfall, [{
      type: "waterfall", x: x, y: y, measure: measure,
      connector: { line: { color: "#4a5563" } },
      decreasing: { marker: { color: "#ff6b6b" } }, totals: { marker: { color: "#4fb3ff" } },
      increasing: { marker: { color: "#8b98a5" } },
      hovertemplate: "%{x}: %{y:.2f} pp<extra></extra>",
    }], P.layout({ yaxis: { title: { text: "% of peak FLOPs" } }, xaxis: { tickangle: -30 },
                   showlegend: false, margin: { l: 50, r: 20, t: 20, b: 110 } }),
    P.plotConfig);
  }

  function pairs(obj) {
    var keys = Object.keys(obj || {});
    return keys.length ? keys.map(function (k) { return k + " " + obj[k]; }).join(", ") : "none";
  }

  function number(value, unit, digits) {
    return value === null || value === undefined ? "no data" :
      Number(value).toFixed(digits === undefined ? 1 : digits) + unit;
  }

  // A mirror's card: each source's status and what the real cluster reported.
  function mirrorDraw(msg) {
    var card = document.getElementById("mirror-card");
    if (!card) return;
    var mirror = msg.mirror;
    card.hidden = !mirror;
    var engineCard = document.getElementById("engine-card");
    if (engineCard) engineCard.hidden = !!mirror;  // no speed or pause on a real cluster
    if (!mirror) return;
    var body = document.querySelector("#mirror-sources tbody");
    body.textContent = "";
    var sources = msg.sources || {};
    Object.keys(sources).forEach(function (name) {
      var s = sources[name];
      var missing = Object.keys(s.problems || {}).map(function (k) {
        return k.replace(/_/g, " ") + " " + s.problems[k].count;
      }).join(", ");
      var row = document.createElement("tr");
      row.dataset.source = name;
      row.dataset.state = s.state;
      [name, s.state + (s.error ? ": " + s.error : ""),
       s.age_s === null ? "never" : Math.round(s.age_s) + " s ago",
       s.read_s === null ? "–" : s.read_s + " s", missing || "–"].forEach(function (text) {
        var cell = document.createElement("td");
        cell.textContent = text;
        row.appendChild(cell);
      });
      body.appendChild(row);
    });
    var tel = mirror.telemetry || {};
    P.setText("mirror-reporting", tel.gpus_reporting + " of " + tel.gpus);
    P.setText("mirror-power", number(tel.power_kw, " kW", 2));
    P.setText("mirror-util", number(tel.util_mean_pct, " %"));
    P.setText("mirror-temp", number(tel.temp_max_c, " °C", 0));
    P.setText("mirror-tensor", number(tel.tensor_active_mean, "", 3));
    P.setText("mirror-pending", pairs(mirror.pending_reasons));
    P.setText("mirror-ended", pairs(mirror.ended));
    P.setText("mirror-xid", pairs(mirror.xid));
    P.setText("mirror-rejected", mirror.rejected_count ? mirror.rejected_count + ": " +
      Object.keys(mirror.rejected).map(function (k) { return k + " (" + mirror.rejected[k] + ")"; })
        .join("; ") : "none");
    P.setText("mirror-suspended", String(mirror.suspended || 0));
    var resv = mirror.reservations || [];
    P.setText("mirror-reservations", resv.length ? resv.map(function (r) {
      var until = r.end ? ", until " + new Date(r.end * 1000).toLocaleString() : "";
      return r.name + (r.maintenance ? " (maintenance window" : " (reservation") + ", " +
        r.nodes + " node" + (r.nodes === 1 ? "" : "s") + ": " + r.hosts.join(", ") +
        (r.nodes > r.hosts.length ? " …" : "") + until + ")";
    }).join("; ") : "none");
    var fm = mirror.failures_measured;
    P.setText("mirror-failures", fm ? fm.nodes_down + " node(s) down in " +
      Math.round(fm.node_hours).toLocaleString() + " node-hours watched; what-ifs draw " +
      (fm.fitted ? "the measured rate" : "profile " + (fm.profile || "the default")) : "–");
  }

  TwinLive.on("data", function (msg) {
    mirrorDraw(msg);
    P.counters(msg);
    P.events(msg);
    seriesAppend(msg);
    waterfallDraw(msg);
    P.setText("speed-value", msg.speed ? "×" + msg.speed : "–");
    P.setText("paused-value", msg.paused ? "paused" : "running");
    var pause = document.getElementById("pause-toggle");
    if (pause) {
      pause.textContent = msg.paused ? "Resume" : "Pause";
      pause.dataset.paused = msg.paused ? "true" : "false";
    }
  });

  var controls = document.getElementById("engine-controls");
  if (!controls) return;
  function say(text, isError) {
    var out = document.getElementById("control-status");
    out.textContent = text;
    out.classList.toggle("error", !!isError);
  }
  controls.addEventListener("submit", function (event) {
    event.preventDefault();
    var factor = Number(document.getElementById("speed-input").value);
    if (!TwinLive.send({ type: "speed", factor: factor })) say("Not connected.", true);
  });
  document.getElementById("pause-toggle").addEventListener("click", function (event) {
    var paused = event.currentTarget.dataset.paused === "true";
    if (!TwinLive.send({ type: "pause", paused: !paused })) say("Not connected.", true);
  });
  TwinLive.on("ack", function (msg) {
    say(msg.of === "speed" ? "Speed set to ×" + msg.factor + "." :
        msg.paused ? "Pausing the engine." : "Resuming the engine.");
  });
  TwinLive.on("error", function (msg) { say(msg.message, true); });
})();
