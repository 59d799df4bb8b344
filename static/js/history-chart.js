/* Charts from stored history (/api/history): the range picker's query, x values on the run's
 * clock (simulated hours; a mirror's wall time), and drag to zoom that asks the server for the
 * zoomed span (it downsamples any span to at most 1,000 points a series: bucket mean, min, max).
 */
(function () {
  "use strict";

  var P = window.TwinPanels;

  function fetchSeries(metric, query) {
    var params = new URLSearchParams(Object.assign({ metric: metric }, query));
    return fetch("/api/history?" + params.toString(), { credentials: "same-origin" })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error(body.error || "request failed");
          return body;
        });
      });
  }

  // The run's clock: simulated hours, or (a mirror, or a frame of one) the wall clock, whose
  // offset from the engine's seconds comes from the newest sample (or frame).
  function clock(wall, offsetS) {
    return {
      wall: wall,
      x: function (t) { return wall ? new Date((t + offsetS) * 1000) : t / 3600; },
      t: function (x) { return wall ? new Date(x).getTime() / 1000 - offsetS : Number(x) * 3600; },
      title: wall ? "wall clock (a mirror of a real cluster)" : "simulated time, h",
      name: wall ? "wall clock" : "simulated time",
    };
  }

  function clockOf(answer) {
    var wall = answer.clock === "wall clock";
    var last = answer.t.length - 1;
    return clock(wall, wall && last >= 0 ? Date.parse(answer.wall[last]) / 1000 - answer.t[last] : 0);
  }

  function clockOfFrame(msg) {
    var wall = msg.source === "mirror";
    return clock(wall, wall ? Date.now() / 1000 - msg.t : 0);
  }

  function describe(answer, c) {
    var n = answer.t.length;
    var how = answer.aggregate === "as recorded" ?
      "as recorded, every " + P.duration(answer.recorded_step_s) :
      "each the mean of " + P.duration(answer.step_s) + " (min and max on hover)";
    return P.fmt(n) + " stored points, " + how + "; " + c.name;
  }

  // one trace per answer; hover shows a bucket's min and max when there are buckets
  function trace(answer, name, c) {
    var bucketed = answer.aggregate !== "as recorded";
    return {
      x: answer.t.map(c.x), y: answer.v, name: name, mode: "lines", type: "scatter",
      customdata: bucketed ? answer.min.map(function (lo, i) { return [lo, answer.max[i]]; }) : null,
      hovertemplate: bucketed ? "%{y:.2f} (min %{customdata[0]:.2f}, max %{customdata[1]:.2f})" +
        "<extra>" + name + "</extra>" : undefined,
    };
  }

  // Drag to zoom is Plotly's box zoom; a zoom calls onZoom(tFrom, tTo) in engine seconds,
  // a double-click (autorange) onReset.  Returns relayout(update), which changes the axes
  // without being taken for the user's zoom.
  function zoomable(div, getClock, onZoom, onReset) {
    var quiet = 0;
    div.on("plotly_relayout", function (ev) {
      if (quiet) return;
      var lo = ev["xaxis.range[0]"], hi = ev["xaxis.range[1]"];
      if (lo === undefined && ev["xaxis.range"]) { lo = ev["xaxis.range"][0]; hi = ev["xaxis.range"][1]; }
      var c = getClock();
      if (lo !== undefined && c) onZoom(c.t(lo), c.t(hi));
      else if (ev["xaxis.autorange"]) onReset();
    });
    return function relayout(update) {
      quiet += 1;
      return Plotly.relayout(div, update).then(function () { quiet -= 1; },
                                               function () { quiet -= 1; });
    };
  }

  window.TwinHistory = {
    fetchSeries: fetchSeries, clockOf: clockOf, clockOfFrame: clockOfFrame,
    describe: describe, trace: trace, zoomable: zoomable,
    RANGES_S: { "15m": 900, "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800, "30d": 2592000 },
  };
})();
