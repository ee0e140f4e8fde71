/* The component page: per executor, per stream, and its errors. */
"use strict";

const topologyId = squall.params.get("id");
const componentId = squall.params.get("component");
squall.windowSelect(() => refreshComponent());

const num = {num: true};

async function refreshComponent() {
  const windowId = document.getElementById("window").value;
  const path = "topology/" + encodeURIComponent(topologyId) + "/component/" + encodeURIComponent(componentId);
  const page = await squall.api(path + "?window=" + encodeURIComponent(windowId));
  squall.debugButtons(path, page, refreshComponent);
  const spout = page.componentType === "spout";
  document.title = page.id + " - " + page.name + " - Squall UI";
  document.getElementById("title").textContent = (spout ? "Spout " : "Bolt ") + page.id;
  const link = document.getElementById("topology-link");
  link.href = squall.topologyHref(page.topologyId, windowId);
  link.textContent = page.name;
  document.getElementById("summary").replaceChildren(...[
    ["Topology", squall.link(squall.topologyHref(page.topologyId, windowId), page.name)],
    ["Status", squall.status(page.topologyStatus)], ["Type", page.componentType],
    ["Executors", page.executors], ["Tasks", page.tasks],
    ["Debug", page.debug ? `on, ${page.samplingPct} %` : "off"],
    /* Storm's "events": the sampled tuples, in the events.log of a worker running it. */
    ["Events", squall.logLink(page.eventLogLink, page.eventLogLink ? "events" : "no worker runs it")],
    ...(page.batchGroup ? [["Batch group", page.batchGroup],
                           ["Trident operations", (page.tridentOperations || []).join("; ") || page.tridentRole]] : []),
    ...(page.operations ? [["Operations", page.operations.join("; ")]] : []),
  ].map(([label, value]) => squall.el("div", {}, label, squall.el("b", {"data-key": label}, value))));
  for (const node of document.querySelectorAll(".window-hint")) node.textContent = page.windowHint;
  const counts = [["Emitted", "emitted", num], ["Transferred", "transferred", num]];
  if (spout) {
    squall.table("windows", [["Window", "windowPretty"], ...counts,
                             ["Complete latency (ms)", "completeLatency", num], ["Acked", "acked", num],
                             ["Failed", "failed", num]], page.spoutSummary.map(w => ({...w, _key: w.window})));
  } else {
    squall.table("windows", [["Window", "windowPretty"], ...counts, ["Executed", "executed", num],
                             ["Execute latency (ms)", "executeLatency", num],
                             ["Process latency (ms)", "processLatency", num], ["Capacity", "capacity", num],
                             ["Acked", "acked", num], ["Failed", "failed", num]],
                 page.boltStats.map(w => ({...w, _key: w.window})));
  }
  const executorColumns = [["Id", "id"], ["Uptime", "uptime"], ["Host", "host"],
                           ["Port", "port", {num: true, render: e => squall.logLink(e.workerLogLink, e.port)}],
                           ...counts];
  if (spout) {
    // Max spout pending: the auto-tuner's current value when it tunes (blank: unbounded).
    executorColumns.push(["Complete latency (ms)", "completeLatency", num], ["Pending", "pending", num],
                         ["Max spout pending", "maxSpoutPending", num]);
  } else {
    executorColumns.push(["Capacity", "capacity", num], ["Executed", "executed", num],
                         ["Execute latency (ms)", "executeLatency", num]);
  }
  executorColumns.push(["Acked", "acked", num], ["Failed", "failed", num]);
  squall.table("executors", executorColumns, page.executorStats.map(e => ({...e, _key: e.id})));
  squall.table("inputs", [
    ["Component", "component", {render: i => squall.link(squall.componentHref(page.topologyId, i.component,
                                                                              windowId), i.component)}],
    ["Stream", "stream"], ["Executed", "executed", num], ["Execute latency (ms)", "executeLatency", num],
    ["Process latency (ms)", "processLatency", num], ["Acked", "acked", num], ["Failed", "failed", num]],
  (page.inputStats || []).map(i => ({...i, _key: i.component + ":" + i.stream})));
  const outputColumns = [["Stream", "stream"], ...counts];
  if (spout) {
    outputColumns.push(["Complete latency (ms)", "completeLatency", num], ["Acked", "acked", num],
                       ["Failed", "failed", num]);
  }
  squall.table("outputs", outputColumns, page.outputStats.map(o => ({...o, _key: o.stream})));
  squall.table("errors", [["Time", "errorTime", {render: e => squall.time(e.errorTime)}],
                          ["Host", "errorHost"],
                          ["Port", "errorPort", {num: true, render: e => squall.logLink(e.errorWorkerLogLink, e.errorPort)}],
                          ["Error", "error", {cls: "error", render: e => squall.trace(e.error)}],
                          ["Log", "errorWorkerLogLink", {render: e => squall.logLink(e.errorWorkerLogLink, e.errorWorkerLogLink ? "worker log" : "")}]],
               errorRows(page.componentErrors));
}

/* Newest first, each keyed by when and where it happened (and its place among the
   errors of that second there), so that a trace opened stays open as errors come. */
function errorRows(errors) {
  const seen = new Map();
  return errors.map(e => {
    const where = e.errorTime + " " + e.errorHost + ":" + e.errorPort;
    seen.set(where, (seen.get(where) || 0) + 1);
    return {...e, _key: where + " #" + seen.get(where)};
  }).reverse();
}

squall.every(3, refreshComponent);
