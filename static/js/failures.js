/* Failures: interruptions by cause, mean time to failure by job size, spares and repairs. */
(function () {
  "use strict";

  var P = window.TwinPanels;
  var lastLemons = [];

  /* Lemon nodes (engine ids) by hostname, each linked to its page. */
  function lemonNodes(lemons) {
    lastLemons = lemons;
    var el = document.getElementById("lemon-nodes");
    if (!el) return;
    if (!lemons.length) { el.textContent = "None."; return; }
    var parts = [];
    lemons.forEach(function (n, i) {
      var named = P.nameOf("node " + n);
      if (!named) P.askName("node " + n);
      if (i) parts.push(document.createTextNode(", "));
      parts.push(P.anchor(named ? named.name : "node " + n, "/nodes/" + n + "/"));
    });
    el.replaceChildren.apply(el, parts);
  }
  P.onNames(function () { lemonNodes(lastLemons); });

  TwinLive.on("data", function (msg) {
    var inter = msg.interruptions || {};
    var failures = msg.failures || {};
    P.setText("interruptions-unplanned", P.fmt(inter.unplanned));
    P.setText("interruptions-planned", P.fmt(inter.planned));
    P.setText("failures-total", P.fmt(failures.total));
    P.setText("spares-free", P.fmt(failures.spares_free));
    P.setText("repairs-pending", P.fmt(failures.repairs_pending));
    var lemons = failures.lemon_nodes || [];
    P.setText("lemon-count", P.fmt(lemons.length));
    lemonNodes(lemons);
    P.fillTable("mttf-rows", (failures.mttf_by_size || []).map(function (b) {
      return [b.gpus, P.fmt(b.jobs), P.fmt(b.interruptions),
              b.mttf_hours === null ? "no failure yet" : P.durationH(b.mttf_hours),
              b.predicted_mttf_hours === null || b.predicted_mttf_hours === undefined ? "–" :
                P.durationH(b.predicted_mttf_hours)];
    }), "No jobs yet.");
    var byCause = inter.by_cause || {};
    var causes = Object.keys(byCause).sort(function (a, b) { return byCause[b] - byCause[a]; });
    P.setText("by-cause-note", causes.length ? "" : "No interruptions yet.");
    var chart = document.getElementById("interruptions-chart");
    chart.hidden = !causes.length;
    if (!causes.length) return;
    Plotly.react(chart, [{
      type: "bar", orientation: "h", y: causes.map(function (c) { return c.replace(/_/g, " "); }),
      x: causes.map(function (c) { return byCause[c]; }), marker: { color: "#ff6b6b" },
    }], P.layout({ xaxis: { title: { text: "interruptions" } }, yaxis: { autorange: "reversed" },
                   margin: { l: 160, r: 20, t: 20, b: 40 } }), P.plotConfig);
  });
})();
