// Keeps the page live: when the hub changes, the server says so (server-sent events) and
// the view is fetched again and swapped in, without reloading the page.
(function () {
  const status = document.getElementById("live");
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const url = new URL(location.href);
      url.searchParams.set("fragment", "1");
      const resp = await fetch(url, { headers: { "Accept": "text/html" } });
      if (resp.ok) {
        document.getElementById("view").innerHTML = await resp.text();
      }
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }
  const events = new EventSource("/events");
  events.addEventListener("open", () => { status.textContent = "live"; status.className = "live on"; refresh(); });
  events.addEventListener("error", () => { status.textContent = "reconnecting…"; status.className = "live off"; });
  events.addEventListener("change", refresh);
})();
