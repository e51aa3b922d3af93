// Progressive enhancement: a submit button or form carrying data-confirm="question" asks that
// question before the form is sent, and once answered yes adds confirmed=1, which the master
// needs before it acts. The page's Content-Security-Policy forbids inline handlers, so this is
// the only way a destructive button asks here. Without JavaScript the form arrives without
// confirmed=1 and the master answers with a confirmation page instead (pages::confirm).
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (!question) { return; }
    if (!window.confirm(question)) {
      event.preventDefault();
      return;
    }
    if (!form.querySelector('input[name="confirmed"]')) {
      var yes = document.createElement("input");
      yes.type = "hidden";
      yes.name = "confirmed";
      yes.value = "1";
      form.appendChild(yes);
    }
  });
})();
