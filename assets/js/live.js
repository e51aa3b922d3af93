// Progressive enhancement: every element with data-live-src is refreshed from that URL (an HTML
// fragment rendered by the same template part as the page) every two seconds while the page
// shows something running (an element with data-status="running"); when nothing runs any more
// the page reloads once, so every part of it is current. The elements also carry
// data-live-on (event kinds) and data-live-filter, for the event stream that replaces this
// polling. Without JavaScript the page still works; reload to see progress.
(function () {
  "use strict";
  var boxes = Array.prototype.slice.call(document.querySelectorAll("[data-live-src]"));
  if (boxes.length === 0) { return; }
  function running() {
    return document.querySelector('[data-status="running"]') !== null;
  }
  function refresh(box) {
    return fetch(box.getAttribute("data-live-src"), { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { box.innerHTML = html; });
  }
  function tick() {
    if (!running()) { return; }
    Promise.all(boxes.map(refresh))
      .then(function () {
        if (!running()) { window.location.reload(); return; }
        window.setTimeout(tick, 2000);
      })
      .catch(function () { window.setTimeout(tick, 5000); });
  }
  window.setTimeout(tick, 2000);
})();
