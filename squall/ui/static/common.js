/* Squall UI: helpers shared by the pages.  Everything comes from nimbus's REST API. */
"use strict";

/* Signing in: `squall ui` prints this page's address with "#token=..." (a fragment never
   reaches a server or its logs); the token moves to this tab's sessionStorage and off the
   address bar, and every API call sends it as a bearer token. */
function takeToken() {
  const hash = new URLSearchParams(window.location.hash.slice(1));
  if (!hash.get("token")) return false;
  sessionStorage.setItem("squall.token", hash.get("token"));
  history.replaceState(null, "", window.location.pathname + window.location.search);
  return true;
}
takeToken();
/* The signed-in address pasted over a page already open here: no load happens, so reload. */
window.addEventListener("hashchange", () => { if (takeToken()) window.location.reload(); });

const squall = {
  params: new URLSearchParams(window.location.search),

  async api(path, method) {
    const token = sessionStorage.getItem("squall.token");
    const headers = token ? {"Authorization": "Bearer " + token} : {};
    const response = await fetch("/api/v1/" + path, {method: method || "GET", headers: headers});
    const body = await response.json();
    if (response.status === 401) {
      /* A token kept here that no longer works (rotated, a past run's) must not hide a good cookie. */
      sessionStorage.removeItem("squall.token");
      squall.signIn(body.error);
      throw new Error("sign in: " + (body.error || "a token is needed"));
    }
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  },

  /* A token box, once, saying how to sign in (the server's 401 does: `squall ui` prints a
     cluster's signed-in address, `squall local --ui` its own, whose token becomes a cookie). */
  signIn(how) {
    if (document.getElementById("sign-in")) return;
    const input = squall.el("input", {type: "password", id: "token", placeholder: "token", autocomplete: "off"});
    const button = squall.el("button", {id: "sign-in-button"}, "Sign in");
    button.addEventListener("click", () => {
      sessionStorage.setItem("squall.token", input.value.trim());
      window.location.reload();
    });
    const box = squall.el("div", {id: "sign-in", class: "sign-in"},
      (how || "Not signed in") + ". Or paste your token: ", input, button);
    document.querySelector("main").prepend(box);
  },

  el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null) continue;
      if (key === "class") node.className = value; else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  },

  link(href, text) { return squall.el("a", {href: href}, text); },

  /* Storm's "Debug" and "Stop Debug" (the topology page's, a component page's): a share of
     the tuples emitted, asked for here, goes to the workers' events.log until stopped.
     ``path``: the topology's or the component's API path; ``page``: its latest answer. */
  debugButtons(path, page, refresh) {
    const start = document.getElementById("debug"), stop = document.getElementById("stop-debug");
    start.disabled = Boolean(page.debug);
    stop.disabled = !page.debug;
    start.title = page.debug ? `sampling ${page.samplingPct} % into events.log` : "";
    start.onclick = () => squall.debug(path, true, page.samplingPct, refresh);
    stop.onclick = () => squall.debug(path, false, page.samplingPct, refresh);
  },

  async debug(path, enable, pct, refresh) {
    let spct = String(pct === undefined || pct === null ? 10 : pct);
    if (enable) {
      const asked = window.prompt("Sampling percentage (0-100): the share of emitted tuples written to " +
                                  "the workers' events.log", spct);
      if (asked === null) return;
      spct = asked.trim();
    }
    try {
      const answer = await squall.api(path + "/debug/" + (enable ? "enable" : "disable") + "/" +
                                      encodeURIComponent(spct || "?"), "POST");
      squall.message(`${answer.topologyOperation}: ${answer.status}`);
      await refresh();
    } catch (e) {
      squall.message(String(e.message || e));
    }
  },

  /* A worker's log on its node's logviewer (Storm's workerLogLink), opened in a new tab
     signed in with a token nimbus mints for that logviewer and this user, a few minutes
     long (in the address's fragment, which no server sees).  This tab's own token goes to
     nimbus only: a logviewer runs beside users' code.  Plain text where the node serves
     no logs; the link as it is when there is no token (an insecure cluster). */
  logLink(href, text) {
    if (!href) return text === undefined || text === null ? "" : String(text);
    const a = squall.el("a", {href: href, class: "log-link", target: "_blank", rel: "noopener"}, text);
    a.addEventListener("click", event => {
      if (!sessionStorage.getItem("squall.token")) return;
      event.preventDefault();
      /* The tab opens within the click (popup blockers allow that, not after an await) and
         is sent on once nimbus answered; it gets no way back to this page. */
      const tab = window.open("", "_blank");
      if (tab) tab.opener = null;
      squall.logToken(href).then(minted => {
        const url = minted ? href + "#token=" + encodeURIComponent(minted) : href;
        if (tab) tab.location.href = url; else window.open(url, "_blank", "noopener");
      }).catch(e => {
        if (tab) tab.close();
        squall.message("the log cannot be opened: " + String(e.message || e));
      });
    });
    return a;
  },

  /* A token for reading the logviewer at href's origin as this user, which nimbus mints
     (POST /api/v1/logviewer/token); null from an insecure cluster. */
  async logToken(href) {
    const token = sessionStorage.getItem("squall.token");
    const response = await fetch("/api/v1/logviewer/token", {
      method: "POST",
      headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
      body: JSON.stringify({logviewer: new URL(href, window.location.href).origin}),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body.token;
  },

  topologyHref(id, window) {
    return "/ui/topology.html?id=" + encodeURIComponent(id) + (window ? "&window=" + encodeURIComponent(window) : "");
  },

  componentHref(id, component, window) {
    return "/ui/component.html?id=" + encodeURIComponent(id) + "&component=" + encodeURIComponent(component) +
      (window ? "&window=" + encodeURIComponent(window) : "");
  },

  /* columns: [header, key, {num, render}]; fills the table whose id is given. */
  table(id, columns, rows) {
    const target = document.getElementById(id);
    const head = squall.el("tr", {}, ...columns.map(c => squall.el("th", {}, c[0])));
    const table = squall.el("table", {id: id}, squall.el("thead", {}, head));
    const body = squall.el("tbody");
    if (!rows.length) {
      body.append(squall.el("tr", {}, squall.el("td", {class: "empty", colspan: columns.length}, "none")));
    }
    for (const row of rows) {
      const tr = squall.el("tr", {"data-row": row._key});
      for (const [, key, opts] of columns) {
        const o = opts || {};
        const raw = o.render ? o.render(row) : row[key];
        // Counts grouped by thousands (1,234,567), as numbers are read; decimals as given.
        const value = o.num && Number.isInteger(raw) ? raw.toLocaleString("en-US") : raw;
        tr.append(squall.el("td", {"data-key": key, class: o.cls || (o.num ? "num" : null)}, value));
      }
      body.append(tr);
    }
    table.append(body);
    // A refresh must not close the trace a reader opened, nor pull a link from under a
    // click: what was open stays open (by row and column), and a table that did not
    // change is left as it is.
    const where = d => d.closest("tr").dataset.row + "\u0000" + d.closest("td").dataset.key;
    const opened = new Set(Array.from(target.querySelectorAll("tr[data-row] td[data-key] details[open]"), where));
    for (const d of table.querySelectorAll("tr[data-row] td[data-key] details")) {
      if (opened.has(where(d))) d.open = true;
    }
    if (target.tagName === "TABLE" && target.innerHTML === table.innerHTML) return;
    target.replaceWith(table);
  },

  /* An error: its last line (the exception) at once, the whole trace on a click. */
  trace(text) {
    const lines = String(text || "").trimEnd().split("\n");
    if (lines.length < 2) return lines[0];
    return squall.el("details", {class: "trace"}, squall.el("summary", {}, lines[lines.length - 1]),
                     squall.el("pre", {}, lines.join("\n")));
  },

  status(text) {
    return squall.el("span", {class: "status-" + text}, text);
  },

  time(secs) {
    return secs === null || secs === undefined ? "" : new Date(secs * 1000).toLocaleString();
  },

  message(text) {
    const node = document.getElementById("message");
    if (node) node.textContent = text || "";
  },

  /* Calls fn now and every `secs` seconds (?refresh= overrides), showing its failures. */
  every(secs, fn) {
    const period = 1000 * (Number(squall.params.get("refresh")) || secs);
    let failing = false;
    const tick = async () => {
      try {
        await fn();
        if (failing) squall.message("");
        failing = false;
      } catch (e) {
        failing = true;
        squall.message(String(e.message || e));
      }
      setTimeout(tick, period);
    };
    tick();
  },

  windowSelect(onChange) {
    const select = document.getElementById("window");
    const current = squall.params.get("window") || "600";
    select.value = current;
    select.addEventListener("change", () => {
      squall.params.set("window", select.value);
      history.replaceState(null, "", "?" + squall.params.toString());
      onChange(select.value);
    });
    return current;
  },
};
