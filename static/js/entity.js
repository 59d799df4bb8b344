/* The tenant page's history: GPUs in use (from /api/history?metric=tenant.<name>.gpus, over
   the picked range, drag to zoom; history-chart.js) with each bucket's min-max band, and the
   GPU-hours they add up to over the span shown (the integral of that series). */
(function () {
  "use strict";
  var div = document.getElementById("tenant-history");
  if (!div) return;
  var note = document.getElementById("tenant-history-note");
  var range = document.getElementById("tenant-range");
  var reset = document.getElementById("tenant-reset");
  var P = window.TwinPanels;
  var H = window.TwinHistory;
  var clock = null, zoom = null, zoomable = false;

  /* GPU-hours up to each point: each point's GPUs held until the next one (the last until
     itself); trapezoids would invent use between samples the twin never saw. */
  function gpuHours(t, v) {
    var out = [], total = 0;
    for (var i = 0; i < t.length; i++) {
      if (i > 0) total += v[i - 1] * (t[i] - t[i - 1]) / 3600;
      out.push(total);
    }
    return out;
  }

  function unzoom() { zoom = null; load(); }

  function load() {
    var query = zoom ? { from: zoom[0], to: zoom[1] } : { range: range ? range.value : "24h" };
    H.fetchSeries(div.dataset.metric, query).then(function (body) {
      if (reset) reset.hidden = !zoom;
      if (!body.t.length) {
        note.textContent = zoom ? "No stored points in this span." : "No history recorded yet.";
        return;
      }
      clock = H.clockOf(body);
      var x = body.t.map(clock.x);
      var cumulative = gpuHours(body.t, body.v);
      note.textContent = "GPU-hours so far in the span shown: " +
        P.fmt(cumulative[cumulative.length - 1]) + " (each point held until the next). " +
        H.describe(body, clock) + ".";
      var traces = [];
      if (body.aggregate !== "as recorded") {  // each bucket's min-max band under its mean
        traces.push({ type: "scatter", mode: "lines", x: x, y: body.max, line: { width: 0 },
                      hoverinfo: "skip", showlegend: false },
                    { type: "scatter", mode: "lines", x: x, y: body.min, line: { width: 0 },
                      fill: "tonexty", fillcolor: "rgba(79,179,255,0.2)", hoverinfo: "skip",
                      name: "GPUs in use, min-max" });
      }
      traces.push(H.trace(body, "GPUs in use", clock),
                  { type: "scatter", mode: "lines", name: "GPU-hours (cumulative)", x: x,
                    y: cumulative, yaxis: "y2" });
      var span = zoom ? null : H.RANGES_S[range ? range.value : "24h"];
      var newest = body.t[body.t.length - 1];
      var xRange = zoom ? [clock.x(zoom[0]), clock.x(zoom[1])] :
        span ? [clock.x(newest - span), clock.x(newest)] : null;
      Plotly.react(div, traces, P.layout({
        xaxis: { title: { text: clock.title }, type: clock.wall ? "date" : "linear",
                 range: xRange || undefined, autorange: !xRange },
        yaxis: { title: { text: "GPUs" }, rangemode: "tozero" },
        yaxis2: { title: { text: "GPU-hours" }, overlaying: "y", side: "right",
                  rangemode: "tozero" },
        dragmode: "zoom", legend: { orientation: "h", y: 1.15 } }), P.plotConfig);
      if (!zoomable) {
        zoomable = true;
        H.zoomable(div, function () { return clock; },
                   function (from, to) { zoom = [from, to]; load(); }, unzoom);
      }
    }).catch(function (err) { note.textContent = "Could not load the history: " + err.message; });
  }

  if (range) range.addEventListener("change", unzoom);
  if (reset) reset.addEventListener("click", unzoom);
  load();
})();
