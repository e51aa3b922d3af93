// Progressive enhancement for the Nodes list: the header checkbox ticks or clears every node on
// this page. Without JavaScript it stays hidden; "all matching" in the toolbar needs none.
(function () {
  "use strict";
  var all = document.getElementById("select-page");
  if (!all) { return; }
  var boxes = function () {
    return Array.prototype.slice.call(document.querySelectorAll('input[type="checkbox"][name="nodes"]'));
  };
  all.hidden = false;
  all.addEventListener("change", function () {
    boxes().forEach(function (b) { b.checked = all.checked; });
  });
  document.addEventListener("change", function (event) {
    if (event.target.name !== "nodes") { return; }
    var list = boxes();
    var ticked = list.filter(function (b) { return b.checked; }).length;
    all.checked = ticked === list.length;
    all.indeterminate = ticked > 0 && ticked < list.length;
  });
})();
