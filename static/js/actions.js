/* Staff actions (job and node pages, drills page): a destructive button asks for confirmation
 * first; its data-confirm text says what will happen.  Declining sends nothing. */
(function () {
  "use strict";

  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var text = button && button.dataset ? button.dataset.confirm : null;
    if (text && !window.confirm(text)) {
      event.preventDefault();
    }
  });
})();
