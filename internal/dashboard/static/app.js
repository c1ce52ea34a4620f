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

// A job's log: read once, and followed while its attempt runs (the server serves it from
// a byte offset, so each read fetches only what is new).
(function () {
  var log = document.getElementById("log");
  if (!log || !window.fetch) return;
  var offset = 0, decoder = new TextDecoder();
  function read() {
    fetch(log.dataset.src + (log.dataset.src.indexOf("?") < 0 ? "?" : "&") + "offset=" + offset, {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.arrayBuffer() : new ArrayBuffer(0); })
      .then(function (b) {
        offset += b.byteLength;
        if (b.byteLength > 0) {
          log.textContent += decoder.decode(b, {stream: true});
          log.scrollTop = log.scrollHeight;
        }
        if (log.dataset.live === "true") setTimeout(read, 1000);
      })
      .catch(function () { if (log.dataset.live === "true") setTimeout(read, 2000); });
  }
  read();
})();
