// Progressive enhancement: a <details> with an id that the reader opened or closed stays so when
// the part of the page around it is refreshed in place (data-live-src), instead of falling back
// to how the server renders it. Without JavaScript nothing is refreshed in place.
(function () {
  "use strict";
  var chosen = {};
  document.addEventListener("toggle", function (event) {
    var d = event.target;
    if (d && d.tagName === "DETAILS" && d.id && !d.hasAttribute("data-restoring")) {
      chosen[d.id] = d.open;
    }
  }, true);
  function restore(root) {
    Object.keys(chosen).forEach(function (id) {
      var d = document.getElementById(id);
      if (d && root.contains(d) && d.open !== chosen[id]) {
        d.setAttribute("data-restoring", "");
        d.open = chosen[id];
        window.setTimeout(function () { d.removeAttribute("data-restoring"); }, 0);
      }
    });
  }
  var observer = new MutationObserver(function (records) {
    records.forEach(function (r) { restore(r.target); });
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-live-src]"), function (box) {
    observer.observe(box, { childList: true });
  });
})();
