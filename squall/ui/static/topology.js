/* The topology page: its graph, numbers over a window, live plots, and the actions. */
"use strict";

const topologyId = squall.params.get("id");
let windowId = squall.windowSelect(() => refreshTopology());
const sysBox = document.getElementById("sys");
sysBox.checked = squall.params.get("sys") === "1";
sysBox.addEventListener("change", () => refreshTopology());
let waitSet = false;

/* Live plots: points kept in memory, from the all-time counters' differences between polls. */
const MAX_POINTS = 600;
const series = {t: [], acked: [], emitted: [], latency: [], failed: []};
const RATE_SPAN = 15;  // seconds
const totals = [];
let previous = null;
window.squallPlots = {};

function makePlot(id, label, lines) {
  const opts = {
    width: 400, height: 180, legend: {show: true},
    scales: {x: {time: true}},
    series: [{}, ...lines.map(([name, colour]) => ({label: name, stroke: colour, width: 2}))],
    axes: [{}, {size: 80}],
  };
  const data = [[], ...lines.map(() => [])];
  window.squallPlots[id] = new uPlot(opts, data, document.getElementById("plot-" + id));
  window.squallPlots[id].label = label;
}

makePlot("throughput", "tuples/s", [["acked/s", "#1f6fd1"], ["emitted/s, all components", "#5aa05a"]]);
makePlot("latency", "ms", [["complete latency ms", "#a0522d"]]);
makePlot("failures", "/s", [["failed/s", "#c62828"]]);

function recordPoint(page) {
  const all = page.topologyStats.find(s => s.window === ":all-time");
  const recent = page.topologyStats.find(s => s.window === "600");
  const now = Date.now() / 1000;
  if (!all) return;
  // Totals move in steps (workers report every few seconds): rates are taken
  // over the last RATE_SPAN seconds of totals, not between two polls, so they
  // do not zigzag with the heartbeat rhythm.
  totals.push({t: now, acked: all.acked, emitted: all.emitted, failed: all.failed});
  while (totals.length > 2 && now - totals[1].t >= RATE_SPAN) totals.shift();
  const base = totals[0];
  if (previous && now > base.t) {
    const dt = now - base.t;
    const rate = key => Math.max(0, (all[key] - base[key]) / dt);
    series.t.push(now);
    series.acked.push(rate("acked"));
    series.emitted.push(rate("emitted"));
    series.failed.push(rate("failed"));
    series.latency.push(Number(recent ? recent.completeLatency : all.completeLatency));
    for (const key of Object.keys(series)) if (series[key].length > MAX_POINTS) series[key].shift();
    window.squallPlots.throughput.setData([series.t, series.acked, series.emitted]);
    window.squallPlots.latency.setData([series.t, series.latency]);
    window.squallPlots.failures.setData([series.t, series.failed]);
  }
  previous = {t: now, acked: all.acked, emitted: all.emitted, failed: all.failed};
}

function renderPage(page) {
  document.title = page.name + " - Squall UI";
  document.getElementById("title").textContent = "Topology " + page.name;
  document.getElementById("summary").replaceChildren(...[
    ["Status", squall.status(page.status)], ["Id", page.id], ["Uptime", page.uptime],
    ["Workers", page.workersTotal], ["Executors", page.executorsTotal], ["Tasks", page.tasksTotal],
    ["Message timeout", page.msgTimeout + " s"],
    // Scheduled by resources (docs/scheduling.md): what it asked, what it got, and why not.
    ...(page.schedulerInfo === undefined ? [] : [
      ["Memory MB", `${page.assignedTotalMem} of ${page.requestedTotalMem} requested`],
      ["Scheduler", page.schedulerInfo]]),
  ].map(([label, value]) => squall.el("div", {}, label, squall.el("b", {"data-key": label}, value))));
  if (!waitSet && page.msgTimeout !== null && page.msgTimeout !== undefined) {
    document.getElementById("kill-wait").value = page.msgTimeout;
    waitSet = true;
  }
  for (const node of document.querySelectorAll(".window-hint")) node.textContent = page.windowHint;
  const href = name => squall.componentHref(page.id, name, windowId);
  squall.table("stats", [["Window", "windowPretty"], ["Emitted", "emitted", {num: true}],
                         ["Transferred", "transferred", {num: true}],
                         ["Complete latency (ms)", "completeLatency", {num: true}],
                         ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}]],
               page.topologyStats.map(s => ({...s, _key: s.window})));
  squall.table("spouts", [
    ["Id", "spoutId", {render: s => squall.link(href(s.spoutId), s.spoutId)}],
    ["Executors", "executors", {num: true}], ["Tasks", "tasks", {num: true}],
    ["Emitted", "emitted", {num: true}], ["Transferred", "transferred", {num: true}],
    ["Complete latency (ms)", "completeLatency", {num: true}], ["Acked", "acked", {num: true}],
    ["Failed", "failed", {num: true}], ["of which timed out", "timedOut", {num: true}],
    ["Last error", "lastError", {cls: "error"}]],
  page.spouts.map(s => ({...s, _key: s.spoutId})));
  const boltColumns = [
    ["Id", "boltId", {render: b => squall.link(href(b.boltId), b.boltId)}],
    ["Executors", "executors", {num: true}], ["Tasks", "tasks", {num: true}],
    ["Emitted", "emitted", {num: true}], ["Transferred", "transferred", {num: true}],
    ["Capacity", "capacity", {num: true}], ["Execute latency (ms)", "executeLatency", {num: true}],
    ["Executed", "executed", {num: true}], ["Process latency (ms)", "processLatency", {num: true}],
    ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}],
    ["Last error", "lastError", {cls: "error"}]];
  if (page.batchGroups) {
    /* A Trident topology: which batch group (spout) each bolt serves, and the operations it fuses. */
    boltColumns.splice(1, 0, ["Batch group", "batchGroup"],
                       ["Trident operations", "tridentOperations", {render: b => (b.tridentOperations || []).join("; ")}]);
  }
  if (page.bolts.some(b => b.operations)) {
    /* A Streams API topology: the operations each generated bolt runs, chained by plain calls. */
    boltColumns.splice(1, 0, ["Operations", "operations", {render: b => (b.operations || []).join("; ")}]);
  }
  squall.table("bolts", boltColumns, page.bolts.map(b => ({...b, _key: b.boltId})));
  const blank = v => v === null || v === undefined;
  const mb = key => w => blank(w[key]) ? "" : (w[key] / 1048576).toFixed(1) + " MB";
  const pct = key => w => blank(w[key]) ? "" : Number(w[key]).toFixed(1) + " %";
  squall.table("workers", [["Host", "host"], ["Port", "port", {num: true, render: w => squall.logLink(w.workerLogLink, w.port)}],
                           ["Supervisor", "supervisorId"],
                           ["Uptime", "uptime"], ["RSS", "rssBytes", {num: true, render: mb("rssBytes")}],
                           ["CPU", "cpuPercent", {num: true, render: pct("cpuPercent")}],
                           ["GC", "gcPercent", {num: true, render: pct("gcPercent")}],
                           ["Threads", "threads", {num: true}], ["Queue depth", "queueDepth", {num: true}],
                           ["Backpressure", "backpressure", {render: w =>
                             blank(w.backpressure) ? "" : (w.backpressure ? squall.el("span", {class: "warn"}, "yes") : "no")}],
                           ["Frames sent", "framesSent", {num: true}],
                           ["Frames dropped", "framesDropped", {num: true}],
                           ["Sent", "bytesSent", {num: true, render: mb("bytesSent")}],
                           ["Executors", "executorsTotal", {num: true}],
                           ["Components (tasks)", "componentNumTasks", {render: w =>
                             Object.entries(w.componentNumTasks).map(([c, n]) => `${c}: ${n}`).join(", ")}],
                           ["Profiling", "profiling", {render: profilingCell}]],
               page.workers.map(w => ({...w, _key: w.host + ":" + w.port})));
  /* Storm's "Topology Configuration": every key the topology runs with (secrets redacted by nimbus). */
  squall.table("configuration", [["Key", "key"], ["Value", "value"]],
               Object.entries(page.configuration || {}).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
                 .map(([key, value]) => ({key, value: typeof value === "string" ? value : JSON.stringify(value),
                                          _key: key})));
}

/* Self-regulation's action log (squall.nimbus.autoscale): a cluster's nimbus only, so the
   section stays hidden where the API has none (local mode answers 404). */
function resolutionText(r) {
  const parts = Object.entries(r.executors || {}).map(([c, n]) => `executors ${c}=${n}`);
  if (r.workers !== undefined && r.workers !== null) parts.push(`workers=${r.workers}`);
  parts.push(...Object.entries(r.max_pending || {}).map(([s, n]) => `max spout pending ${s}=${n}`));
  return parts.join(", ") || "none";
}

async function refreshAutoscale() {
  let answer;
  try {
    answer = await squall.api("topology/" + encodeURIComponent(topologyId) + "/autoscale");
  } catch (e) {
    return;
  }
  document.getElementById("autoscale-section").hidden = false;
  document.getElementById("autoscale-state").textContent = answer.enabled ? "Enabled" : "Disabled";
  squall.table("autoscale", [["#", "id", {num: true}],
                             ["Time", "time", {render: a => new Date(a.time * 1000).toLocaleString()}],
                             ["Policy", "policy"], ["Component", "component"],
                             ["Status", "status", {render: a => a.id === answer.judging ? "judging" : a.status}],
                             ["Symptom", "symptom"], ["Diagnosis", "diagnosis"],
                             ["Resolution", "resolution", {render: a => resolutionText(a.resolution || {})}],
                             ["Outcome", "outcome"]],
               answer.actions.map(a => ({...a, _key: String(a.id)})));
}

for (const [button, action] of [["autoscale-enable", "enable"], ["autoscale-disable", "disable"]]) {
  document.getElementById(button).addEventListener("click", async () => {
    try {
      await squall.api("topology/" + encodeURIComponent(topologyId) + "/autoscale/" + action, "POST");
      squall.message(`self-regulation ${action}d`);
      await refreshAutoscale();
    } catch (e) {
      squall.message(String(e.message || e));
    }
  });
}

/* Storm's worker buttons (JStack, Profile, Restart Worker): each asks nimbus, whose request the
   worker's supervisor carries out with py-spy; what it writes is listed on the node's logviewer
   ("outputs", opened like a log link, signed in for that logviewer). */
function profilingCell(w) {
  const worker = w.host + ":" + w.port;
  const button = (text, action, title) => {
    const b = squall.el("button", {class: "profile", "data-action": action, title: title}, text);
    b.addEventListener("click", () => profileWorker(worker, action));
    return b;
  };
  return squall.el("span", {}, button("Stack dump", "dumpjstack", "every thread's stack (py-spy dump)"), " ",
                   button("Profile", "start", "a flame graph of the seconds set above (py-spy record)"), " ",
                   button("Restart", "restartworker", "kill the worker; its supervisor starts it again"), " ",
                   squall.logLink(w.workerDumpLink, "outputs"));
}

async function profileWorker(worker, action) {
  let path = "topology/" + encodeURIComponent(topologyId) + "/profiling/" + action + "/" + encodeURIComponent(worker);
  if (action === "start") {
    const secs = Math.max(1, Math.floor(Number(document.getElementById("profile-secs").value) || 30));
    path += "/" + secs + "s";
  }
  if (action === "restartworker" && !window.confirm(`Restart worker ${worker}?`)) return;
  try {
    const answer = await squall.api(path, "POST");
    const what = {dumpjstack: "stack dump", start: `profile of ${answer.seconds} s`, restartworker: "restart"}[action];
    squall.message(`${what} of ${worker} asked: its "outputs" will list it once written`);
  } catch (e) {
    squall.message(String(e.message || e));
  }
}

async function refreshTopology() {
  windowId = document.getElementById("window").value;
  const query = "?window=" + encodeURIComponent(windowId) + (sysBox.checked ? "&sys=1" : "");
  const id = encodeURIComponent(topologyId);
  const [page, graph] = await Promise.all([squall.api("topology/" + id + query),
                                           squall.api("topology/" + id + "/visualization" + query)]);
  renderPage(page);
  squall.debugButtons("topology/" + id, page, refreshTopology);
  drawGraph(document.getElementById("graph"), graph, name => squall.componentHref(page.id, name, windowId));
  recordPoint(page);
  await refreshAutoscale();
}

async function act(action) {
  let path = "topology/" + encodeURIComponent(topologyId) + "/" + action;
  let question = `${action} topology ${topologyId}?`;
  if (action === "kill") {
    const wait = Math.max(0, Math.floor(Number(document.getElementById("kill-wait").value) || 0));
    path += "/" + wait;
    question = `Kill topology ${topologyId}, waiting ${wait} s?`;
  }
  if (!window.confirm(question)) return;
  try {
    const answer = await squall.api(path, "POST");
    squall.message(`${answer.topologyOperation}: ${answer.status}`);
    if (action === "kill") {
      squall.message(`${answer.topologyOperation}: ${answer.status}; back to the cluster page`);
      setTimeout(() => { window.location.href = "/"; }, 2000);
    } else {
      await refreshTopology();
    }
  } catch (e) {
    squall.message(String(e.message || e));
  }
}

for (const action of ["activate", "deactivate", "kill"]) {
  document.getElementById(action).addEventListener("click", () => act(action));
}

squall.every(3, refreshTopology);
