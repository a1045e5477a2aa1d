// Polls the page's live fragment (data-src of #live) every two seconds and
// swaps it in. Nothing else: the forms work without it.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !live.dataset.src) return;
  var busy = false;
  function tick() {
    if (busy) return;
    busy = true;
    fetch(live.dataset.src, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        document.body.dataset.state = r.ok ? "live" : "error";
        return r.ok ? r.text() : null;
      })
      .then(function (html) { if (html !== null) live.innerHTML = html; })
      .catch(function () { document.body.dataset.state = "offline"; })
      .then(function () { busy = false; });
  }
  setInterval(tick, 2000);
})();
