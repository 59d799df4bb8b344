/* The tenant page's history: GPUs in use (from /api/history?metric=tenant.<name>.gpus) and
   the GPU-hours they add up to (the integral of that series over simulated time). */
(function () {
  "use strict";
  var div = document.getElementById("tenant-history");
  if (!div) return;
  var note = document.getElementById("tenant-history-note");
  var P = window.TwinPanels;

  /* GPU-hours up to each sample: each sample's GPUs held until the next one (the last until
     itself), trapezoids would invent use between samples the twin never saw. */
  function gpuHours(t, v) {
    var out = [], total = 0;
    for (var i = 0; i < t.length; i++) {
      if (i > 0) total += v[i - 1] * (t[i] - t[i - 1]) / 3600;
      out.push(total);
    }
    return out;
  }

  fetch("/api/history?metric=" + encodeURIComponent(div.dataset.metric),
        { credentials: "same-origin" })
    .then(function (r) { return r.json().then(function (body) { return [r.ok, body]; }); })
    .then(function (result) {
      var body = result[1];
      if (!result[0]) throw new Error(body.error || "request failed");
      if (!body.t.length) { note.textContent = "No history recorded yet."; return; }
      var hours = body.t.map(function (s) { return s / 3600; });
      var cumulative = gpuHours(body.t, body.v);
      note.textContent = "GPU-hours so far: " +
        Math.round(cumulative[cumulative.length - 1]).toLocaleString("en-US") +
        " (each sample held until the next; step " + body.step_s + " s).";
      var layout = P ? P.layout : function (x) { return x; };
      Plotly.react(div, [
        { type: "scatter", mode: "lines", name: "GPUs in use", x: hours, y: body.v },
        { type: "scatter", mode: "lines", name: "GPU-hours (cumulative)", x: hours,
          y: cumulative, yaxis: "y2" },
      ], layout({ xaxis: { title: { text: "simulated hours" } },
                  yaxis: { title: { text: "GPUs" } },
                  yaxis2: { title: { text: "GPU-hours" }, overlaying: "y", side: "right" } }),
      P ? P.plotConfig : {});
    })
    .catch(function (err) { note.textContent = "Could not load the history: " + err.message; });
})();
