/* A node's, rack's, switch's or job's history charts (_entity_charts.html): each chart's figures
 * from /api/history?kind=&id=&metric= over the picked range (history-chart.js), the first
 * figure with its buckets' min-max band; percentages on a 0-100 axis (or higher, if a figure
 * passes 100), power and GPUs from zero.  Drag across any chart to zoom all of them: the
 * server answers the zoomed span finer. */
(function () {
  "use strict";
  var card = document.getElementById("entity-charts");
  if (!card) return;
  var P = window.TwinPanels;
  var H = window.TwinHistory;
  var range = document.getElementById("entity-range");
  var reset = document.getElementById("entity-reset");
  var note = document.getElementById("entity-charts-note");
  var charts = Array.prototype.slice.call(card.querySelectorAll(".entity-chart"));
  var zoom = null, clock = null;

  function query() {
    var q = zoom ? { from: zoom[0], to: zoom[1] } : { range: range ? range.value : "24h" };
    q.kind = card.dataset.kind;
    q.id = card.dataset.id;
    return q;
  }

  function yAxis(spec, answers) {
    var axis = { title: { text: spec.unit } };
    if (!spec.zero) return axis;
    axis.rangemode = "tozero";
    if (spec.unit === "%") {
      var top = 100;
      answers.forEach(function (a) {
        a.max.forEach(function (v) { if (v > top) top = v; });
      });
      axis.range = [0, top];
      axis.autorange = false;
    }
    return axis;
  }

  function draw(div, spec, answers) {
    var traces = [];
    answers.forEach(function (a, i) {
      var label = spec.metrics[i].label;
      if (!a.t.length) return;
      var x = a.t.map(clock.x);
      if (i === 0 && a.aggregate !== "as recorded") {  // the first figure's min-max band
        traces.push({ type: "scatter", mode: "lines", x: x, y: a.max, line: { width: 0 },
                      hoverinfo: "skip", showlegend: false },
                    { type: "scatter", mode: "lines", x: x, y: a.min, line: { width: 0 },
                      fill: "tonexty", fillcolor: "rgba(79,179,255,0.2)", hoverinfo: "skip",
                      name: label + ", min-max" });
      }
      traces.push(H.trace(a, label, clock));
    });
    var newest = Math.max.apply(null, answers.map(function (a) {
      return a.t.length ? a.t[a.t.length - 1] : -Infinity;
    }));
    var span = zoom ? null : H.RANGES_S[range ? range.value : "24h"];
    var xRange = zoom ? [clock.x(zoom[0]), clock.x(zoom[1])] :
      span && isFinite(newest) ? [clock.x(newest - span), clock.x(newest)] : null;
    Plotly.react(div, traces, P.layout({
      xaxis: { title: { text: clock.title }, type: clock.wall ? "date" : "linear",
               range: xRange || undefined, autorange: !xRange },
      yaxis: yAxis(spec, answers), dragmode: "zoom",
      legend: { orientation: "h", y: 1.15 } }), P.plotConfig);
    if (!div.dataset.zoomable) {
      div.dataset.zoomable = "1";
      H.zoomable(div, function () { return clock; },
                 function (from, to) { zoom = [from, to]; load(); }, unzoom);
    }
  }

  function unzoom() { zoom = null; load(); }

  function load() {
    var q = query();
    Promise.all(charts.map(function (div) {
      var spec = JSON.parse(div.dataset.spec);
      return Promise.all(spec.metrics.map(function (m) { return H.fetchSeries(m.name, q); }))
        .then(function (answers) { return { div: div, spec: spec, answers: answers }; });
    })).then(function (all) {
      if (reset) reset.hidden = !zoom;
      var first = null;
      all.forEach(function (c) {
        c.answers.forEach(function (a) { if (!first && a.t.length) first = a; });
      });
      if (!first) {
        note.textContent = zoom ? "No stored points in this span." :
          "No history recorded for it yet.";
        return;
      }
      clock = H.clockOf(first);
      all.forEach(function (c) { draw(c.div, c.spec, c.answers); });
      note.textContent = H.describe(first, clock) + ".";
    }).catch(function (err) { note.textContent = "Could not load the history: " + err.message; });
  }

  if (range) range.addEventListener("change", unzoom);
  if (reset) reset.addEventListener("click", unzoom);
  load();
})();
