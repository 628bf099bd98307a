// Trace page: follows the run over the WebSocket, its sub-traces' events included, and
// keeps every panel true without a reload. Streamed tokens go into the message being
// written; new messages are appended (a tool result re-renders its call, results
// folded in); the panels an event changes are re-fetched in one request, rendered and
// sanitised by the server as on first load. A reconnect resumes from the last event
// id of each trace, so nothing is missed or doubled.
(function () {
  "use strict";
  var script = document.currentScript;
  var data = script.dataset;
  var traceId = data.trace;
  var since = parseInt(data.since, 10) || 0;
  var cursors = JSON.parse(data.cursors || "{}"); // sub-trace id -> its last event id seen
  // Always with the sub-traces: a child's first event is in its own log (the parent's
  // log says nothing until the child is done), and the socket finds new children itself.
  var children = true;
  var onMain = data.main === "1"; // the newest page of the main path: new messages belong here
  var watchPort = data.watchPort || "";
  var panelsUrl = data.panels;
  var fragmentUrl = data.fragment;
  var live = document.getElementById("live");
  var liveText = document.getElementById("live-text");
  var liveState = document.getElementById("live-state");
  var events = document.getElementById("events");
  var eventCount = document.getElementById("event-count");
  var socket = null;
  var retry = 500;
  var ended = false;
  var chain = Promise.resolve();
  var dirty = {};
  var timer = null;
  var MAX_TIMELINE = 300;
  var EVERYTHING = ["header", "requests", "plan", "subtraces", "side", "continue", "messages", "tree"];
  var STATUS_EVENTS = ["run_started", "final", "error", "stopped", "waiting"];
  var PANELS_FOR = {
    message: ["header", "tree"],
    goal_added: ["plan"], goal_updated: ["plan"], goal_tree_rebuilt: ["plan"],
    confirm_required: ["requests", "header"], confirm_response: ["requests", "side", "header"],
    human_answered: ["requests", "subtraces"], settings_changed: ["continue"],
    sub_trace_completed: ["subtraces", "plan", "header"], reflect_started: ["tree", "side"],
    compaction: ["header", "tree"], rewind: ["header", "tree", "plan"], loop_detected: ["header"],
    experiences_retrieved: ["side"], round_start: [], tool_call: [],
    route_decided: ["header"], plan_made: ["plan", "header"], plan_failed: ["header"],
    plan_step_ended: ["plan"], reflexion_lesson: ["tree", "side"], reflexion_failed: [],
    project_context_changed: ["project"], memory_recalled: ["side"],
  };
  var CHILD_PANELS = {
    token: [], round_start: [], tool_call: [],
    confirm_required: ["subtraces", "requests", "header"], confirm_response: ["subtraces", "requests"],
    waiting: ["subtraces", "requests", "header"], final: ["subtraces", "requests", "plan", "header"],
    error: ["subtraces", "requests", "header"], stopped: ["subtraces", "requests", "header"],
  };

  var steps = 0; // steps queued in the chain and not done yet
  function later(step) {
    // Steps run in event order; a failed step must not stop the ones after it.
    steps += 1;
    chain = chain.then(step).catch(function () {}).then(function () { steps -= 1; });
  }

  function bindEdits(root) {
    root.querySelectorAll("textarea[data-original]").forEach(function (area) {
      area.addEventListener("input", function () {
        var same = area.value.trim() === area.getAttribute("data-original").trim();
        area.form.elements.edited.value = same ? "0" : "1";
      });
    });
  }

  function busy(panel) {
    // Never take away what the expert is typing or has opened.
    var active = document.activeElement;
    if (active && panel.contains(active) && /^(TEXTAREA|INPUT|SELECT)$/.test(active.tagName)) return true;
    var typed = Array.prototype.some.call(panel.querySelectorAll("textarea, input[type=text], input:not([type])"),
      function (field) { return field.value !== field.defaultValue; });
    return typed || panel.querySelector("details.rewind[open], details.action[open], details.edit-fork[open]") !== null;
  }

  function refresh(names) {
    names.forEach(function (name) { dirty[name] = true; });
    if (!timer) timer = setTimeout(flush, 150);
  }

  function flush() {
    timer = null;
    var names = Object.keys(dirty).filter(function (name) {
      if (name === "messages" && !onMain) return false; // another page or branch stays as asked for
      return document.querySelector('[data-panel="' + name + '"]') !== null;
    });
    dirty = {};
    if (!names.length) return;
    later(function () {
      var url = panelsUrl + (panelsUrl.indexOf("?") < 0 ? "?" : "&") + "names=" + names.join(",");
      return fetch(url, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (answer) { if (answer) apply(answer); });
    });
  }

  function apply(answer) {
    Object.keys(answer.panels).forEach(function (name) {
      var current = document.querySelector('[data-panel="' + name + '"]');
      var holder = document.createElement("template");
      holder.innerHTML = answer.panels[name].trim();
      var fresh = holder.content.firstElementChild;
      if (!current || !fresh) return;
      if (current.dataset.key !== undefined && current.dataset.key === fresh.dataset.key) return;
      if (busy(current)) { setTimeout(function () { refresh([name]); }, 2000); return; }
      current.replaceWith(fresh);
      bindEdits(fresh);
      if (name === "messages") { liveText.textContent = ""; live.hidden = true; setLiveState(null); }
    });
    if (!answer.live && ended) {
      data.live = "0"; // the run is over and the page shows its final state
      document.body.classList.remove("following");
      if (socket) socket.close();
    }
  }

  // The events the server rendered with the page. A run that writes between the page's
  // cursor (data-since, read first) and its timeline query puts some events in both;
  // the socket's replay of those must not list them twice.
  var rendered = {};
  if (events) {
    events.querySelectorAll("li.ev:not(.ev-child) > .mono:first-child").forEach(function (span) {
      rendered[span.textContent.trim()] = true;
    });
  }

  function addEvent(ev) {
    if (!events) return;
    if ((!ev.trace_id || ev.trace_id === traceId) && rendered[String(ev.event_id)]) return;
    var li = document.createElement("li");
    li.className = "ev ev-" + ev.type;
    [[ev.event_id + " ", "mono small muted"], [ev.type, "evtype"], [" " + (ev.created_at || "").slice(11, 19), "small muted"]]
      .forEach(function (part) {
        var span = document.createElement("span");
        span.textContent = part[0];
        span.className = part[1];
        li.appendChild(span);
      });
    if (ev.type === "tool_result" && ev.payload && ev.payload.source) {
      var source = document.createElement("span"); // an MCP server's tool: "mcp:<server>"
      source.className = "chip small ev-source";
      source.title = "the tool's source";
      source.textContent = String(ev.payload.source).slice(0, 80);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(source);
    }
    if (ev.type === "tool_result" && ev.payload && ev.payload.url) {
      var visited = document.createElement("span"); // the page a browser or webfetch call reached
      visited.className = "small mono ev-url";
      visited.textContent = " " + String(ev.payload.url).slice(0, 160);
      li.appendChild(visited);
    }
    events.appendChild(li);
    while (events.children.length > MAX_TIMELINE) events.removeChild(events.firstElementChild);
    if (eventCount) eventCount.textContent = String((parseInt(eventCount.textContent, 10) || 0) + 1);
  }

  function showMessage(sequence) {
    // The server renders (and sanitises) the message: a tool result comes back as its call.
    later(function () {
      if (document.getElementById("m" + sequence)) return;
      return fetch(fragmentUrl.replace(/0\/$/, sequence + "/"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : ""; })
        .then(function (html) {
          var holder = document.createElement("template");
          holder.innerHTML = html.trim();
          var article = holder.content.querySelector("article.msg");
          if (!article) return;
          var list = document.getElementById("messages");
          var shown = document.getElementById(article.id);
          if (shown && shown.tagName === "ARTICLE") {
            shown.replaceWith(article);
          } else if (!shown && list) {
            var empty = document.getElementById("no-messages");
            if (empty) empty.remove();
            list.appendChild(article);
          }
          bindEdits(article);
        });
    });
  }

  function handleChild(ev) {
    var last = cursors[ev.trace_id] || 0;
    if (ev.event_id <= last) return;
    if (!last) refresh(["subtraces", "header"]); // a child we had not seen
    cursors[ev.trace_id] = ev.event_id;
    var box = document.querySelector('[data-child-live="' + CSS.escape(ev.trace_id) + '"]');
    var p = ev.payload || {};
    if (ev.type === "token") {
      if (box && p.text) { box.hidden = false; box.textContent = (box.textContent + p.text).slice(-400); }
      return;
    }
    if (ev.type === "message" && box) { box.textContent = ""; box.hidden = true; }
    refresh(CHILD_PANELS[ev.type] || ["subtraces"]);
  }

  function handle(ev) {
    if (ev.type === "watch_status") {
      // Not an event (no event_id): the server reads the event table on a short poll
      // while its channel layer (Redis) is down, "ok" again once it is back.
      document.body.classList.toggle("ws-degraded", ev.live === "degraded");
      return;
    }
    if (ev.trace_id && ev.trace_id !== traceId) return handleChild(ev);
    if (ev.event_id <= since) return;
    since = ev.event_id;
    var p = ev.payload || {};
    if (ev.type === "token") {
      if (p.text) { live.hidden = false; liveText.textContent += p.text; setLiveState(null); }
      else if (p.pulse) { live.hidden = false; setLiveState(p.seconds); } // no first token yet
      return;
    }
    addEvent(ev);
    if (ev.type.indexOf("subagent_") === 0) {
      refresh(["subtraces", "plan", "header", "requests"]);
    } else if (ev.type === "rewind" && onMain) {
      // The main path was cut: drop what now lies on the old branch.
      var cut = p.cut_sequence || p.after_sequence || 0;
      later(function () {
        document.querySelectorAll("#messages > article.msg").forEach(function (el) {
          if (parseInt(el.getAttribute("data-sequence"), 10) > cut) el.remove();
        });
      });
    } else if (ev.type === "message") {
      if (p.role === "assistant") { liveText.textContent = ""; live.hidden = true; setLiveState(null); }
      if (onMain) showMessage(p.sequence);
    }
    if (STATUS_EVENTS.indexOf(ev.type) >= 0) {
      var badge = document.getElementById("trace-status");
      if (badge && p.status) { badge.textContent = p.status; badge.className = "badge big status-" + p.status; }
      ended = ["final", "error", "stopped"].indexOf(ev.type) >= 0;
      refresh(EVERYTHING);
    } else {
      refresh(PANELS_FOR[ev.type] || ["header"]);
    }
  }

  function setLiveState(seconds) {
    // The first-feedback pulse (a token event without text): the model has not answered
    // yet, so the live box says "thinking…" until the first token or the message arrives.
    if (!liveState) return;
    var thinking = seconds !== null && seconds !== undefined;
    liveState.textContent = thinking ? "thinking… " + Math.round(Number(seconds) || 0) + " s" : "streaming…";
    liveState.classList.toggle("thinking", thinking);
  }

  function watchUrl() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    // The watch sockets' own server on this host when the service runs one (AGENT_WATCH_PORT)
    var host = watchPort ? window.location.hostname + ":" + watchPort : window.location.host;
    var url = scheme + host + "/api/traces/" + encodeURIComponent(traceId) + "/watch?since=" + since;
    if (children) url += "&children=1&cursors=" + encodeURIComponent(JSON.stringify(cursors));
    return url;
  }

  function connect() {
    socket = new WebSocket(watchUrl());
    socket.onopen = function () { retry = 500; document.body.classList.add("ws-open"); };
    socket.onmessage = function (msg) {
      var ev;
      try { ev = JSON.parse(msg.data); } catch (e) { return; } // ignore a malformed frame
      handle(ev);
    };
    socket.onclose = function (e) {
      document.body.classList.remove("ws-open", "ws-degraded");
      if ((ended && data.live === "0") || e.code === 4401 || e.code === 4404 || e.code === 4400) return;
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  // Edit-and-fork forms wait in <template>s: their textareas repeat each message's text,
  // which must not read as a second copy of the conversation (find in page, copy, screen
  // readers). Opened, a form is made from its template once.
  document.addEventListener(
    "toggle",
    function (e) {
      var details = e.target;
      if (!details.classList || !details.classList.contains("edit-fork") || !details.open) return;
      var template = details.querySelector(":scope > template");
      if (template && !details.querySelector(":scope > form")) {
        details.appendChild(template.content.cloneNode(true));
      }
    },
    true
  );

  // For the console and the browser tests: drop the socket as a network blip would.
  window.tracePage = {
    drop: function () { if (socket) socket.close(); },
    // No refresh waiting or under way: what the page shows will not change by itself.
    settled: function () { return !timer && steps === 0; },
  };
  bindEdits(document);
  refresh(["tree"]); // the tree loads on demand, after the first screen
  if (data.live === "1") {
    document.body.classList.add("following");
    connect();
  }
})();
