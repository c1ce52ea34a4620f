// The pool updates live: the server sends it, rendered, whenever it changes.
(function () {
  var pool = document.getElementById("pool");
  if (!pool || !window.EventSource) return;
  var live = document.getElementById("live");
  var es = new EventSource("/ui/events");
  es.addEventListener("pool", function (e) {
    pool.innerHTML = e.data;
    if (live) live.className = "live on";
  });
  es.onerror = function () { if (live) live.className = "live off"; };
})();
