// Trace page: live tokens and new messages over the WebSocket, resuming with ?since=
// after a reconnect; edited approval arguments are flagged so only real edits are sent.
(function () {
  "use strict";
  var script = document.currentScript;
  var traceId = script.getAttribute("data-trace");
  var since = parseInt(script.getAttribute("data-since"), 10) || 0;
  var fragmentUrl = script.getAttribute("data-fragment");
  var onMain = script.getAttribute("data-main") === "1";
  var live = document.getElementById("live");
  var liveText = document.getElementById("live-text");
  var messages = document.getElementById("messages");
  var events = document.getElementById("events");
  var statusBadge = document.getElementById("trace-status");
  var socket = null;
  var retry = 500;
  var ended = false;
  var chain = Promise.resolve();

  document.querySelectorAll("textarea[data-original]").forEach(function (area) {
    area.addEventListener("input", function () {
      area.form.elements.edited.value = area.value.trim() === area.getAttribute("data-original").trim() ? "0" : "1";
    });
  });

  function addEvent(ev) {
    if (!events) return;
    var li = document.createElement("li");
    li.className = "ev ev-" + ev.type;
    var id = document.createElement("span");
    id.className = "mono small muted";
    id.textContent = ev.event_id + " ";
    var type = document.createElement("span");
    type.className = "evtype";
    type.textContent = ev.type;
    li.appendChild(id);
    li.appendChild(type);
    events.appendChild(li);
  }

  function later(step) {
    // Steps run in event order; a failed step must not stop the ones after it.
    chain = chain.then(step).catch(function () {});
  }

  function appendMessage(sequence) {
    // The server renders (and sanitises) the message; order is kept by chaining.
    later(function () {
      if (document.getElementById("m" + sequence)) return;
      return fetch(fragmentUrl.replace(/0\/$/, sequence + "/"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : ""; })
        .then(function (html) {
          if (!html) return;
          var empty = document.getElementById("no-messages");
          if (empty) empty.remove();
          var holder = document.createElement("div");
          holder.innerHTML = html;
          while (holder.firstChild) messages.appendChild(holder.firstChild);
        });
    });
  }

  function handle(ev) {
    since = Math.max(since, ev.event_id);
    if (ev.type !== "token") addEvent(ev);
    var p = ev.payload || {};
    if (ev.type === "token" && p.text) {
      live.hidden = false;
      liveText.textContent += p.text;
    } else if (ev.type === "rewind" && onMain) {
      // The main path was cut: drop what now lies on the old branch.
      var cut = p.cut_sequence || p.after_sequence || 0;
      later(function () {
        messages.querySelectorAll(":scope > article.msg").forEach(function (el) {
          if (parseInt(el.getAttribute("data-sequence"), 10) > cut) el.remove();
        });
      });
    } else if (ev.type === "message") {
      if (p.role === "assistant") { liveText.textContent = ""; live.hidden = true; }
      if (onMain) appendMessage(p.sequence);
    } else if (["final", "error", "stopped", "waiting", "confirm_required"].indexOf(ev.type) >= 0) {
      if (statusBadge && p.status) { statusBadge.textContent = p.status; statusBadge.className = "badge big status-" + p.status; }
      ended = true;
      // Reload once the messages are in, so actions and the plan match the new state.
      later(function () { setTimeout(function () { window.location.reload(); }, 400); });
    }
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + window.location.host + "/api/traces/" + encodeURIComponent(traceId) + "/watch?since=" + since);
    socket.onopen = function () { retry = 500; document.body.classList.add("ws-open"); };
    socket.onmessage = function (msg) {
      try { handle(JSON.parse(msg.data)); } catch (e) { /* ignore a malformed frame */ }
    };
    socket.onclose = function (e) {
      document.body.classList.remove("ws-open");
      if (ended || e.code === 4401 || e.code === 4404) return;
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  if (script.getAttribute("data-live") === "1") connect();
})();
