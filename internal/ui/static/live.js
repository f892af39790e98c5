// Brings the access key to every request, and keeps the page live.
//
// The URL kubectl vidra ui prints carries the key in its fragment (#key=…), which the
// browser never sends to a server. This script keeps it in the tab's sessionStorage,
// which only this origin (port included) can read, unlike a cookie, and sends it as a
// bearer token with each request for the view, the events and the actions.
//
// When the hub changes, the server says so on an event stream (read with fetch, since
// EventSource cannot send the key) and the view is fetched again and swapped in, without
// reloading the page.
(function () {
  const storageKey = "vidra-ui-key";
  const status = document.getElementById("live");
  const view = document.getElementById("view");

  const fromURL = /^#key=([0-9a-f]+)$/.exec(location.hash);
  if (fromURL) {
    sessionStorage.setItem(storageKey, fromURL[1]);
    // Out of the address bar and the history, where it would outlive the tab.
    history.replaceState(null, "", location.pathname + location.search);
  }
  const key = sessionStorage.getItem(storageKey);

  function say(cls, text) {
    const p = document.createElement("p");
    p.className = cls;
    p.textContent = text;
    view.replaceChildren(p);
  }
  function locked() {
    sessionStorage.removeItem(storageKey);
    status.textContent = "no key";
    status.className = "live off";
    say("denied", "Open the URL kubectl vidra ui printed: it carries the key this page needs. " +
      "(A new tab does not have it: open the URL there, or stay in this tab.)");
  }
  if (!key) { locked(); return; }
  const auth = { "Authorization": "Bearer " + key };

  let busy = false, again = false, closed = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const resp = await fetch("/view" + location.pathname + location.search, { headers: { ...auth, "Accept": "text/html" }, cache: "no-store" });
      if (resp.status === 401 || resp.status === 403) { closed = true; locked(); return; }
      if (resp.ok) {
        view.innerHTML = await resp.text();
      } else {
        say("denied", await resp.text());
      }
    } catch (e) {
      // The stream's reconnection refreshes again.
    } finally {
      busy = false;
      if (again && !closed) { again = false; refresh(); }
    }
  }

  // The event stream: "event: change" messages, separated by blank lines.
  async function listen() {
    while (!closed) {
      try {
        const resp = await fetch("/events", { headers: { ...auth, "Accept": "text/event-stream" }, cache: "no-store" });
        if (resp.status === 401 || resp.status === 403) { closed = true; locked(); return; }
        if (!resp.ok) { throw new Error("events: HTTP " + resp.status); }
        status.textContent = "live";
        status.className = "live on";
        refresh(); // what changed while the stream was down
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) { break; }
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const message = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (message.split("\n").includes("event: change")) { refresh(); }
          }
        }
      } catch (e) {
        // Reconnect below.
      }
      if (closed) { return; }
      status.textContent = "reconnecting…";
      status.className = "live off";
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  // Actions are sent with the key too, then the view is fetched again.
  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.method.toLowerCase() !== "post") { return; }
    event.preventDefault();
    const resp = await fetch(form.action, { method: "POST", headers: auth, body: new URLSearchParams(new FormData(form)) });
    if (resp.status === 401) { closed = true; locked(); return; }
    if (!resp.ok) {
      const p = document.createElement("p");
      p.className = "denied";
      p.textContent = await resp.text();
      form.after(p);
      return;
    }
    refresh();
  });

  refresh();
  listen();
})();
