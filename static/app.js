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

// Live sections (`data-live`: the fleet page's "now" and chart, the dashboard's cards) poll
// on a timer. A hidden tab skips its polls, and refreshes once when it is shown again; a
// section holding keyboard focus skips them too (a swap would drop the focused element); a
// `<details>` with an id that was open stays open across a refresh. Between polls each
// "N s ago" (`.age`) counts up from the age it was rendered with.
(function () {
  var reopen = [];
  function live(elt) {
    return elt && elt.hasAttribute && elt.hasAttribute("data-live");
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (!live(elt)) return;
    var focused = document.activeElement;
    if (document.hidden || (focused && focused !== elt && elt.contains(focused))) {
      e.preventDefault();
    }
  });
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (!live(e.detail.target)) return;
    reopen = [];
    e.detail.target.querySelectorAll("details[open][id]").forEach(function (d) {
      reopen.push(d.id);
    });
  });
  document.addEventListener("htmx:afterSwap", function () {
    reopen.forEach(function (id) {
      var d = document.getElementById(id);
      if (d) d.open = true;
    });
    reopen = [];
  });
  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) return;
    document.querySelectorAll("[data-live]").forEach(function (el) {
      window.htmx.trigger(el, "live-refresh");
    });
  });
  function words(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + " s";
    if (s < 3600) {
      var m = Math.floor(s / 60), r = s % 60;
      return r === 0 || m >= 10 ? m + " min" : m + " min " + r + " s";
    }
    if (s < 86400) {
      var h = Math.floor(s / 3600), hm = Math.floor((s % 3600) / 60);
      return hm === 0 ? h + " h" : h + " h " + hm + " min";
    }
    var d = Math.floor(s / 86400), dh = Math.floor((s % 86400) / 3600);
    return dh === 0 ? d + " d" : d + " d " + dh + " h";
  }
  setInterval(function () {
    if (document.hidden) return;
    var now = Date.now();
    document.querySelectorAll(".age[data-since][data-rendered]").forEach(function (el) {
      if (!el.dataset.shownAt) el.dataset.shownAt = String(now);
      var age = Number(el.dataset.rendered) - Number(el.dataset.since) + (now - Number(el.dataset.shownAt));
      el.textContent = words(age) + " ago";
    });
  }, 1000);
})();

// The template editor: a gutter numbering the textarea's lines (findings cite them), kept in
// step with its scrolling; and a warning before leaving a form with unsaved edits.
(function () {
  function number(area) {
    var gutter = document.createElement("pre");
    gutter.className = "line-gutter";
    gutter.setAttribute("aria-hidden", "true");
    var wrap = document.createElement("div");
    wrap.className = "numbered";
    area.parentNode.insertBefore(wrap, area);
    wrap.appendChild(gutter);
    wrap.appendChild(area);
    var shown = 0;
    function update() {
      var lines = area.value.split("\n").length;
      if (lines !== shown) {
        var out = [];
        for (var i = 1; i <= lines; i++) out.push(i);
        gutter.textContent = out.join("\n");
        shown = lines;
      }
      gutter.scrollTop = area.scrollTop;
    }
    area.addEventListener("input", update);
    area.addEventListener("scroll", function () { gutter.scrollTop = area.scrollTop; });
    update();
  }
  var dirty = false;
  function watch(form) {
    form.addEventListener("input", function (e) {
      if (e.target && e.target.name === "body") dirty = true;
    });
    form.addEventListener("submit", function () { dirty = false; });
  }
  window.addEventListener("beforeunload", function (e) {
    if (dirty) { e.preventDefault(); e.returnValue = ""; }
  });
  function init() {
    document.querySelectorAll("textarea[data-line-numbers]").forEach(number);
    document.querySelectorAll("form[data-warn-unsaved]").forEach(watch);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
