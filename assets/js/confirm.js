// Progressive enhancement: a submit button or form carrying data-confirm="question" asks that
// question before the form is sent. The page's Content-Security-Policy forbids inline handlers, so
// this is the only way a destructive button asks first. Without JavaScript the form is sent at once.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
