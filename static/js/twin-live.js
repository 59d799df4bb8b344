/* The live twin's one WebSocket per page, with a small publish/subscribe for page scripts.
 *
 *   TwinLive.on("data", fn)      every snapshot and frame (the full live state), in seq order
 *   TwinLive.on("snapshot", fn)  a full snapshot (on connect and after a resync)
 *   TwinLive.on("frame", fn)     a frame that follows the previous one
 *   TwinLive.on("ack", fn)       the server accepted a command (speed, pause)
 *   TwinLive.on("error", fn)     the server refused a message ({message})
 *   TwinLive.on("status", fn)    {connected, stale} whenever either changes
 *   TwinLive.send(obj)           send a JSON message; false while disconnected
 *
 * Frames carry a sequence number: on a gap the client asks for a fresh snapshot ({"type":
 * "resync"}) and ignores frames until it arrives. A dropped connection is retried with
 * exponential backoff (1 s doubling to 30 s, with jitter); while disconnected, when no frame
 * came for 5 s, or when the engine says it is stopped or down, #stale-banner is shown. It says
 * why (reconnecting; the engine off here, CLUSTERTWIN_ENGINE=off; stopped; down, no heartbeat;
 * not answering) and how old the data shown is: "engine off: showing the state of 14:03:21
 * (12 min ago)". The banner's data-* attributes (twin/templatetags/engine_state.py) give the
 * engine mode, when the live state was last written and the server's clock.
 */
(function () {
  "use strict";

  var STALE_AFTER_MS = 5000;
  var BACKOFF_MIN_MS = 1000;
  var BACKOFF_MAX_MS = 30000;

  var handlers = {};
  var socket = null;
  var attempt = 0;
  var lastSeq = null;
  var awaitingSnapshot = false;
  var lastDataAt = Date.now();
  var status = { connected: false, stale: false };
  var engineMode = "";
  var lastHealth = null;
  var dataAt = null;   // server epoch ms of the newest state shown
  var clockOffset = 0; // server clock minus this browser's, ms
  // what an engine that writes no more says; any other health comes with a fresh heartbeat
  var HALTED = { stopped: true, down: true };

  function on(topic, fn) {
    (handlers[topic] = handlers[topic] || []).push(fn);
  }

  function emit(topic, message) {
    (handlers[topic] || []).forEach(function (fn) {
      try {
        fn(message);
      } catch (err) {
        console.error("TwinLive " + topic + " handler failed", err);
      }
    });
  }

  function url() {
    return (location.protocol === "https:" ? "wss" : "ws") + "://" + location.host + "/ws/twin/";
  }

  function send(message) {
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    socket.send(JSON.stringify(message));
    return true;
  }

  function setStatus(connected, stale) {
    var banner = document.getElementById("stale-banner");
    if (banner && stale) banner.textContent = staleText(connected);
    if (status.connected === connected && status.stale === stale) return;
    status = { connected: connected, stale: stale };
    if (banner) banner.hidden = !stale;
    document.body.classList.toggle("is-stale", stale);
    emit("status", status);
  }

  function checkStale() {
    var open = !!socket && socket.readyState === WebSocket.OPEN;
    setStatus(open, !open || Date.now() - lastDataAt > STALE_AFTER_MS ||
      HALTED[lastHealth] === true);
  }

  function ageText(seconds) {
    if (seconds === null || seconds === undefined) return "never read";
    if (seconds < 120) return Math.round(seconds) + " s ago";
    var minutes = Math.round(seconds / 60);
    if (minutes < 120) return minutes + " min ago";
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min ago";
  }

  function two(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // Why no live data comes, then the age of what the page shows.
  function staleText(open) {
    var why = !open ? "connection lost, reconnecting" :
      engineMode === "off" ? "engine off (CLUSTERTWIN_ENGINE=off)" :
      lastHealth === "stopped" ? "engine stopped" :
      lastHealth === "down" ? "engine down (no heartbeat)" :
      "engine not answering";
    if (dataAt === null) return why + ": no live state yet";
    var local = new Date(dataAt - clockOffset);
    var age = Math.max(0, (Date.now() + clockOffset - dataAt) / 1000);
    return why + ": showing the state of " + two(local.getHours()) + ":" +
      two(local.getMinutes()) + ":" + two(local.getSeconds()) + " (" + ageText(age) + ")";
  }

  // A frame says when it was sent; a snapshot is as fresh as its heartbeat unless the engine
  // has stopped writing, when the page's data-state-at (the last write) stands.
  function noteData(message) {
    var at = null;
    if (typeof message.sent_at === "number") at = message.sent_at * 1000;
    else if (message.health && !HALTED[message.health]) at = Date.now() + clockOffset;
    if (at !== null && (dataAt === null || at > dataAt)) dataAt = at;
  }

  function readPage() {
    var banner = document.getElementById("stale-banner");
    if (!banner) return;
    engineMode = banner.dataset.engineMode || "";
    var now = parseFloat(banner.dataset.serverNow);
    if (isFinite(now)) clockOffset = now * 1000 - Date.now();
    var written = parseFloat(banner.dataset.stateAt);
    if (isFinite(written)) dataAt = written * 1000;
  }

  // A mirror's sources (Slurm, Prometheus): a banner names each one that is not ok, with its
  // error and the age of the state still shown (the twin keeps the last state it read).
  function showSources(message) {
    var banner = document.getElementById("source-banner");
    if (!banner) return;
    var sources = message.source === "mirror" ? (message.sources || {}) : {};
    var lines = [];
    Object.keys(sources).forEach(function (name) {
      var s = sources[name];
      if (s.state === "ok") return;
      var what = s.state === "stale" ? " has not answered for a while" :
        s.state === "waiting" ? " not read yet" : " unreachable";
      lines.push(name + what + (s.error ? " (" + s.error + ")" : "") +
        (s.state === "waiting" ? "" : s.age_s === null ? " — nothing read from it yet" :
          " — showing the state read " + ageText(s.age_s)));
    });
    banner.textContent = lines.join(" · ");
    banner.hidden = lines.length === 0;
    banner.dataset.sources = lines.length ? "problem" : "ok";
  }

  function showHealth(message) {
    var badge = document.getElementById("engine-health");
    if (!badge || !message.health) return;
    var text = "engine " + message.health;
    if (message.source === "mirror") {
      text += " · mirror";
    } else {
      if (message.paused) text += " · paused";
      if (message.speed) text += " · ×" + message.speed;
    }
    badge.textContent = text;
    badge.dataset.health = message.health;
    showSources(message);
    showAlerts(message);
  }

  function showAlerts(message) {
    var count = document.getElementById("alert-badge");
    if (!count || !message.alerts) return;  // frames from before alerts, or evaluation failed
    var n = message.alerts.firing;
    count.textContent = String(n);
    count.dataset.health = n > 0 ? "error" : "ok";
    count.title = n + " alert" + (n === 1 ? "" : "s") + " firing";
  }

  function deliver(topic, message) {
    lastSeq = message.seq;
    lastDataAt = Date.now();
    if (message.health) lastHealth = message.health;
    noteData(message);
    checkStale();
    showHealth(message);
    emit(topic, message);
    emit("data", message);
  }

  function handle(message) {
    switch (message.type) {
      case "snapshot":
        awaitingSnapshot = false;
        attempt = 0;
        if (message.pending) {
          lastSeq = message.seq;  // connected, but the engine has no frame yet
          if (message.health) lastHealth = message.health;
          return;
        }
        deliver("snapshot", message);
        return;
      case "frame":
        if (awaitingSnapshot || (lastSeq !== null && message.seq <= lastSeq)) return;
        if (lastSeq !== null && message.seq !== lastSeq + 1) {
          awaitingSnapshot = true;
          send({ type: "resync" });
          return;
        }
        deliver("frame", message);
        return;
      case "ack":
        emit("ack", message);
        return;
      case "error":
        emit("error", message);
        return;
      default:
        console.warn("TwinLive: unknown message type", message.type);
    }
  }

  function connect() {
    socket = new WebSocket(url());
    socket.onopen = function () {
      lastDataAt = Date.now();
      checkStale();
    };
    socket.onmessage = function (event) {
      var message;
      try {
        message = JSON.parse(event.data);
      } catch (err) {
        console.error("TwinLive: a message that is not JSON", err);
        return;
      }
      handle(message);
    };
    socket.onclose = function () {
      socket = null;
      awaitingSnapshot = false;
      checkStale();
      var ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * Math.pow(2, attempt));
      attempt += 1;
      setTimeout(connect, Math.max(BACKOFF_MIN_MS, ceiling / 2 + Math.random() * ceiling / 2));
    };
  }

  window.TwinLive = { on: on, send: send, status: function () { return status; } };

  document.addEventListener("DOMContentLoaded", function () {
    readPage();
    setInterval(checkStale, 1000);
    connect();
  });
})();
