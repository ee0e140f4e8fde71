/* The logviewer's page of a worker's profiling outputs: a supervisor serves it where a browser
   opens a "dumplink" (/api/v1/dumps/<topology id>/<host:port>) with no token; it reads the same
   address, and each file, with the token taken from "#token=" (one nimbus minted for this
   logviewer), as the log page does.  A stack dump is shown as text, a flame graph in a
   sandboxed frame (its scripts zoom it), a speedscope profile offered as a download. */
"use strict";

const dumps = {
  path: window.location.pathname,

  async fetch(path, accept) {
    const token = sessionStorage.getItem("squall.token");
    const headers = {"Accept": accept};
    if (token) headers["Authorization"] = "Bearer " + token;
    const response = await fetch(path, {headers: headers});
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      if (response.status === 401) sessionStorage.removeItem("squall.token");
      throw new Error((body.error || response.statusText) +
                      (response.status === 401 ? ": open this page again from the UI" : ""));
    }
    return response;
  },

  async open(file) {
    const response = await dumps.fetch(file.link, "*/*");
    const shown = document.getElementById("shown");
    const graph = document.getElementById("graph");
    document.getElementById("shown-name").textContent = file.name;
    shown.textContent = "";
    graph.style.display = "none";
    if (file.name.endsWith(".svg")) {
      graph.src = URL.createObjectURL(await response.blob());
      graph.style.display = "block";
    } else if (file.name.endsWith(".json")) {
      const link = squall.el("a", {href: URL.createObjectURL(await response.blob()), download: file.name});
      link.click();
      shown.textContent = "saved " + file.name + ": open it at https://www.speedscope.app";
    } else {
      shown.textContent = await response.text();
    }
  },

  async show() {
    const answer = await (await dumps.fetch(dumps.path, "application/json")).json();
    squall.table("files", [
      ["Written", "time", {render: f => squall.time(f.time)}],
      ["Kind", "kind"],
      ["File", "name", {render: f => {
        const b = squall.el("button", {class: "file"}, f.name);
        b.addEventListener("click", () => dumps.open(f).catch(e => squall.message(String(e.message || e))));
        return b;
      }}],
      ["Bytes", "bytes", {num: true}],
      ["Outcome", "failed", {render: f => f.failed ? squall.el("span", {class: "warn"}, "failed") : "ok"}]],
      answer.files.map(f => ({...f, _key: f.name})));
  },
};

const parts = dumps.path.split("/");
document.getElementById("worker").textContent = decodeURIComponent(parts[parts.length - 1]);
document.title = decodeURIComponent(parts[parts.length - 1]) + " profiling - Squall logviewer";
squall.every(3, dumps.show);
