// Shows htmx request failures (403, 404, 5xx, network) as a toast, since htmx does not swap
// them in. Everything else in headroom works without JavaScript.
(function () {
  function toast(text) {
    var box = document.getElementById("toasts");
    if (!box) return;
    var t = document.createElement("div");
    t.className = "toast";
    t.setAttribute("role", "alert");
    t.textContent = text;
    box.appendChild(t);
    setTimeout(function () { t.remove(); }, 8000);
  }
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail.xhr;
    var doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
    var detail = doc.querySelector(".error-text");
    toast((detail ? detail.textContent : xhr.statusText) + " (" + xhr.status + ")");
  });
  document.addEventListener("htmx:sendError", function () {
    toast("headroom did not answer; check your connection and try again.");
  });
})();
