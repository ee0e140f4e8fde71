/* The cluster page: nimbuses, supervisors and their slots, topologies. */
"use strict";

async function refreshCluster() {
  const [cluster, nimbus, supervisors, topologies] = await Promise.all([
    squall.api("cluster/summary"), squall.api("nimbus/summary"),
    squall.api("supervisor/summary"), squall.api("topology/summary")]);
  const summary = document.getElementById("cluster");
  summary.replaceChildren(...[
    ["Version", cluster.stormVersion], ["Supervisors", cluster.supervisors],
    ["Slots used", cluster.slotsUsed], ["Slots free", cluster.slotsFree], ["Slots total", cluster.slotsTotal],
    ["Topologies", cluster.topologies], ["Executors", cluster.executorsTotal], ["Tasks", cluster.tasksTotal],
  ].map(([label, value]) => squall.el("div", {}, label, squall.el("b", {"data-key": label}, value))));
  squall.table("nimbuses", [["Host", "host"], ["Port", "port", {num: true}], ["Status", "status"],
                            ["Version", "version"], ["Uptime", "nimbusUpTime"]],
               nimbus.nimbuses.map(n => ({...n, _key: n.host + ":" + n.port})));
  squall.table("supervisors", [["Id", "id"], ["Host", "host"], ["Uptime", "uptime"],
                               ["Slots", "slotsTotal", {num: true}], ["Used", "slotsUsed", {num: true}],
                               ["Free", "slotsFree", {num: true}],
                               ["Memory MB", "usedMem", {num: true, render: s => s.totalMem == null ? ""
                                 : `${Math.round(s.usedMem)} / ${Math.round(s.totalMem)}`}],
                               ["CPU %", "usedCpu", {num: true, render: s => s.totalCpu == null ? ""
                                 : `${Math.round(s.usedCpu)} / ${Math.round(s.totalCpu)}`}],
                               ["Version", "version"],
                               ["Health", "healthy", {render: s => s.healthy ? "ok"
                                 : squall.el("span", {class: "warn", title: s.health || ""}, "failing: no new workers")}]],
               supervisors.supervisors.map(s => ({...s, _key: s.id})));
  squall.table("topologies", [
    ["Name", "name", {render: t => squall.link(squall.topologyHref(t.id), t.name)}], ["Id", "id"],
    ["Status", "status", {render: t => squall.status(t.status)}], ["Uptime", "uptime"],
    ["Workers", "workersTotal", {num: true}], ["Executors", "executorsTotal", {num: true}],
    ["Tasks", "tasksTotal", {num: true}],
    // The resource-aware scheduler's word (docs/scheduling.md); empty for the even scheduler's.
    ["Scheduler", "schedulerInfo", {render: t => !t.schedulerInfo ? ""
      : t.schedulerInfo === "Fully Scheduled" ? t.schedulerInfo
      : squall.el("span", {class: "warn"}, t.schedulerInfo)}]],
    topologies.topologies.map(t => ({...t, _key: t.id})));
}

squall.every(5, refreshCluster);
