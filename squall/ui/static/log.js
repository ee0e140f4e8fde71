/* The logviewer's page: a supervisor serves it where a browser opens a log link
   (/api/v1/log?file=...) with no token, and it reads the same address with the token
   (taken from "#token=", as the UI's pages do: one nimbus minted for this logviewer, a few
   minutes long), a page of bytes at a time. */
"use strict";

const logPage = {
  path: window.location.pathname,  // /api/v1/log or /api/v1/daemonlog
  file: squall.params.get("file") || "",
  length: Number(squall.params.get("length")) || 51200,
  start: squall.params.has("start") ? Number(squall.params.get("start")) : null,
  size: 0,
  end: 0,

  async fetch(query) {
    const token = sessionStorage.getItem("squall.token");
    const headers = {"Accept": "text/plain"};
    if (token) headers["Authorization"] = "Bearer " + token;
    const response = await fetch(logPage.path + "?" + query.toString(), {headers: headers});
    if (response.status === 401) {
      /* Expired, or never one for here: only a new link from the UI (or `squall logs`) helps;
         a user's own token is refused here, so no box asks for one. */
      sessionStorage.removeItem("squall.token");
      const body = await response.json().catch(() => ({}));
      throw new Error((body.error || "not signed in") + ": open this log again from the UI");
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error(body.error || response.statusText);
    }
    return response;
  },

  async show() {
    const query = new URLSearchParams({file: logPage.file, length: String(logPage.length)});
    if (logPage.start !== null) query.set("start", String(logPage.start));
    const grep = document.getElementById("grep").value;
    if (grep) query.set("grep", grep);
    const response = await logPage.fetch(query);
    const text = await response.text();
    logPage.size = Number(response.headers.get("X-Log-Size"));
    logPage.end = Number(response.headers.get("X-Log-End"));
    const start = Number(response.headers.get("X-Log-Start"));
    if (logPage.start !== null) logPage.start = start;
    document.getElementById("log").textContent = text;
    document.getElementById("range").textContent = `bytes ${start}-${logPage.end} of ${logPage.size}`;
    if (document.getElementById("follow").checked) window.scrollTo(0, document.body.scrollHeight);
  },

  async download() {
    const download = logPage.path.endsWith("daemonlog") ? "daemondownload" : "download";
    const token = sessionStorage.getItem("squall.token");
    const headers = token ? {"Authorization": "Bearer " + token} : {};
    const body = await fetch(`/api/v1/${download}?file=${encodeURIComponent(logPage.file)}`, {headers: headers});
    const link = squall.el("a", {href: URL.createObjectURL(await body.blob()),
                                 download: logPage.file.replaceAll("/", "-")});
    link.click();
  },
};

document.getElementById("file").textContent = logPage.file;
document.title = logPage.file + " - Squall logviewer";
document.getElementById("older").addEventListener("click", () => {
  const from = logPage.start === null ? Math.max(0, logPage.end - logPage.length) : logPage.start;
  logPage.start = Math.max(0, from - logPage.length);
  document.getElementById("follow").checked = false;
  logPage.show().catch(e => squall.message(String(e.message || e)));
});
document.getElementById("newer").addEventListener("click", () => {
  logPage.start = logPage.end >= logPage.size ? null : logPage.end;
  logPage.show().catch(e => squall.message(String(e.message || e)));
});
document.getElementById("grep").addEventListener("change", () => {
  logPage.show().catch(e => squall.message(String(e.message || e)));
});
document.getElementById("download").addEventListener("click", () => {
  logPage.download().catch(e => squall.message(String(e.message || e)));
});
document.getElementById("follow").addEventListener("change", () => {
  if (document.getElementById("follow").checked) logPage.start = null;  // back to the end, kept there
  logPage.show().catch(e => squall.message(String(e.message || e)));
});
/* The end of the file (no start asked for) is read again every two seconds. */
let shown = false;
squall.every(2, async () => {
  if (!shown || logPage.start === null) await logPage.show();
  shown = true;
});
