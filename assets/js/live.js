// Live views, as progressive enhancement over pages that are whole without JavaScript.
//
// An element with data-live-src="/fragment/url" and data-live-on="run deployment node" (event
// kinds, space-separated) has its content replaced by a fresh GET of its URL whenever the
// master's event stream (/events, server-sent events) tells of a matching change: at most once
// a second per element, and once more after a burst. data-live-filter="cluster=5" (or
// deployment=N, node=N) narrows what matches. data-live-reload="deployment" reloads the whole
// page instead, once, when such an event comes (for a section whose actions change with it).
// When the stream cannot be opened, the elements are refreshed every five seconds instead.
(function () {
  "use strict";
  var boxes = Array.prototype.slice.call(document.querySelectorAll("[data-live-src]"));
  var reloaders = Array.prototype.slice.call(document.querySelectorAll("[data-live-reload]"));
  if (boxes.length === 0 && reloaders.length === 0) { return; }

  function words(el, name) {
    return (el.getAttribute(name) || "").split(/\s+/).filter(function (w) { return w; });
  }
  function filterOf(el) {
    var f = {};
    words(el, "data-live-filter").forEach(function (pair) {
      var kv = pair.split("=");
      if (kv.length === 2) { f[kv[0]] = Number(kv[1]); }
    });
    return f;
  }
  // Which ids a change concerns, as the server's filters read them.
  function idsOf(kind, data) {
    return {
      cluster: kind === "environment" ? data.id : data.cluster,
      deployment: kind === "deployment" ? data.id : data.deployment,
      node: kind === "node" ? data.id : data.node
    };
  }
  function matches(el, attr, kind, data) {
    if (words(el, attr).indexOf(kind) < 0) { return false; }
    var want = filterOf(el);
    var have = idsOf(kind, data);
    return Object.keys(want).every(function (k) { return have[k] === want[k]; });
  }

  var state = new Map();
  function refresh(el) {
    var s = state.get(el) || { busy: false, again: false, last: 0 };
    state.set(el, s);
    if (s.busy) { s.again = true; return; }
    var wait = Math.max(0, s.last + 1000 - Date.now());
    s.busy = true;
    window.setTimeout(function () {
      fetch(el.getAttribute("data-live-src"), { cache: "no-store", credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { el.innerHTML = html; })
        .catch(function () { /* the next event or poll tries again */ })
        .then(function () {
          s.busy = false;
          s.last = Date.now();
          if (s.again) { s.again = false; refresh(el); }
        });
    }, wait);
  }
  // A reload must not cancel what the person asked for: a change that comes as they follow a
  // link or send a form (a deployment ending as they open its page) would reload the page they
  // are leaving instead of taking them where they asked. Leaving starts with beforeunload; a
  // navigation that does not leave (a download, a 204) stops counting after 10 s.
  var leaving = false;
  window.addEventListener("beforeunload", function () {
    leaving = true;
    window.setTimeout(function () { leaving = false; }, 10000);
  });
  var reloading = false;
  function reload() {
    if (reloading || leaving) { return; }
    reloading = true;
    window.setTimeout(function () {
      if (leaving) { reloading = false; return; }
      window.location.reload();
    }, 300);
  }

  var kinds = {};
  boxes.forEach(function (el) { words(el, "data-live-on").forEach(function (k) { kinds[k] = 1; }); });
  reloaders.forEach(function (el) { words(el, "data-live-reload").forEach(function (k) { kinds[k] = 1; }); });
  // The server narrows the stream when every element asks for the same ids.
  var filters = boxes.concat(reloaders).map(function (el) { return el.getAttribute("data-live-filter") || ""; });
  var common = filters.every(function (f) { return f === filters[0]; }) ? filters[0] : "";
  var url = "/events?kinds=" + Object.keys(kinds).join(",");
  if (common) { url += "&" + common.split(/\s+/).join("&"); }

  function poll() {
    boxes.forEach(refresh);
    window.setTimeout(poll, 5000);
  }
  if (!window.EventSource) { window.setTimeout(poll, 5000); return; }
  var source = new EventSource(url);
  var failures = 0;
  // What changed between the page's rendering and the stream's start came with no event (a
  // deployment that ended meanwhile left the page "running" for good): refresh once when the
  // stream is first ready; from then on nothing is missed.
  var started = false;
  source.addEventListener("ready", function () {
    failures = 0;
    if (!started) { started = true; boxes.forEach(refresh); }
  });
  source.addEventListener("reset", function () { boxes.forEach(refresh); });
  Object.keys(kinds).forEach(function (kind) {
    source.addEventListener(kind, function (ev) {
      var data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      reloaders.forEach(function (el) { if (matches(el, "data-live-reload", kind, data)) { reload(); } });
      boxes.forEach(function (el) { if (matches(el, "data-live-on", kind, data)) { refresh(el); } });
    });
  });
  source.onerror = function () {
    failures += 1;
    // The browser reconnects by itself (with Last-Event-ID); after repeated failures, poll.
    if (failures >= 5 || source.readyState === EventSource.CLOSED) {
      source.close();
      window.setTimeout(poll, 5000);
    }
  };
})();
