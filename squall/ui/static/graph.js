/* The topology as SVG: columns by distance from the spouts, nodes coloured by capacity,
   edges' width and colour by tuples/s. */
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 150, NODE_H = 58, COL_GAP = 170, ROW_GAP = 30, PAD = 20;

function capacityColour(capacity) {
  if (capacity >= 0.8) return "#f28b82";
  if (capacity >= 0.5) return "#ffc870";
  return "#8fd19e";
}

function rateColour(fraction) {
  // grey (idle) to a strong blue (the busiest edge)
  const f = Math.max(0, Math.min(1, fraction));
  const mix = (a, b) => Math.round(a + (b - a) * f);
  return `rgb(${mix(170, 25)},${mix(170, 90)},${mix(170, 200)})`;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

/* node id -> column: the longest path from a spout (nodes without inputs count as spouts). */
function layers(nodes, edges) {
  const layer = {};
  for (const n of nodes) layer[n.id] = 0;
  for (let round = 0; round < nodes.length; round++) {  // bounded: cycles cannot loop forever
    let changed = false;
    for (const e of edges) {
      if (e.from === e.to || !(e.from in layer) || !(e.to in layer)) continue;
      if (layer[e.to] < layer[e.from] + 1) { layer[e.to] = layer[e.from] + 1; changed = true; }
    }
    if (!changed) break;
  }
  return layer;
}

/* A label cut to what a node's width holds (its whole name is in the node's title). */
const FIT_CHARS = 22;
function fit(text) {
  return text.length <= FIT_CHARS ? text : text.slice(0, FIT_CHARS - 1) + "\u2026";
}

function fmtRate(rate) {
  return rate >= 100 ? rate.toFixed(0) : rate >= 10 ? rate.toFixed(1) : rate.toFixed(2);
}

function drawGraph(target, graph, hrefOf) {
  const layer = layers(graph.nodes, graph.edges);
  const columns = [];
  for (const n of graph.nodes) (columns[layer[n.id]] = columns[layer[n.id]] || []).push(n);
  const pos = {};
  const tallest = Math.max(1, ...columns.map(c => (c || []).length));
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * ROW_GAP + 20;
  columns.forEach((column, i) => {
    const used = column.length * NODE_H + (column.length - 1) * ROW_GAP;
    column.forEach((n, j) => {
      pos[n.id] = {x: PAD + i * (NODE_W + COL_GAP), y: (height - used) / 2 + j * (NODE_H + ROW_GAP)};
    });
  });
  const width = PAD * 2 + Math.max(1, columns.length) * NODE_W + Math.max(0, columns.length - 1) * COL_GAP;
  // Drawn at its own size, shrunk to the page's width when wider (never clipped).
  const drawn = Math.max(width, 400);
  target.setAttribute("viewBox", `0 0 ${drawn} ${height}`);
  target.setAttribute("width", drawn);
  target.setAttribute("height", height);
  target.style.maxWidth = "100%";
  target.style.height = "auto";
  target.replaceChildren();
  const defs = svg("defs");
  const marker = svg("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                                markerHeight: 7, orient: "auto-start-reverse", markerUnits: "userSpaceOnUse"});
  marker.append(svg("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#555"}));
  defs.append(marker);
  target.append(defs);
  const maxRate = Math.max(0, ...graph.edges.map(e => e.rate));
  for (const e of graph.edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    const fraction = maxRate > 0 ? e.rate / maxRate : 0;
    const g = svg("g", {class: "edge", "data-from": e.from, "data-to": e.to, "data-stream": e.stream,
                        "data-rate": e.rate});
    let d, lx, ly;
    if (e.from === e.to) {  // a loop: over the node's top
      const x = a.x + NODE_W / 2, y = a.y;
      d = `M ${x - 20} ${y} C ${x - 40} ${y - 50}, ${x + 40} ${y - 50}, ${x + 20} ${y}`;
      lx = x; ly = y - 40;
    } else {
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
      const dx = Math.max(40, Math.abs(x2 - x1) / 2);
      d = `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`;
      lx = (x1 + x2) / 2; ly = (y1 + y2) / 2 - 6;
    }
    g.append(svg("path", {d: d, fill: "none", stroke: rateColour(fraction), "stroke-width": 1.5 + 8 * fraction,
                          "marker-end": "url(#arrow)"}));
    g.append(svg("text", {x: lx, y: ly, "text-anchor": "middle"}, `${e.stream} (${e.grouping})`));
    g.append(svg("text", {x: lx, y: ly + 22, "text-anchor": "middle"}, `${fmtRate(e.rate)}/s`));
    g.append(svg("title", {}, `${e.from} -> ${e.to}, stream ${e.stream}, ${e.grouping} grouping` +
                 (e.fields && e.fields.length ? ` on ${e.fields.join(", ")}` : "") +
                 `: ${fmtRate(e.rate)} tuples/s (${e.executed} executed)`));
    target.append(g);
  }
  for (const n of graph.nodes) {
    const p = pos[n.id];
    const link = svg("a", {href: hrefOf(n.id)});
    const g = svg("g", {class: "node", "data-id": n.id, "data-type": n.type, "data-capacity": n.capacity});
    g.append(svg("rect", {x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: n.type === "spout" ? 22 : 4,
                          fill: capacityColour(n.capacity)}));
    g.append(svg("text", {class: "name", x: p.x + NODE_W / 2, y: p.y + 17, "text-anchor": "middle"},
                 fit(`${n.id} (${n.type})`)));
    const count = v => Number.isInteger(v) ? v.toLocaleString("en-US") : v;
    const line2 = fit(n.type === "spout" ? `emitted ${count(n.emitted)}` : `executed ${count(n.executed)}`);
    g.append(svg("text", {x: p.x + NODE_W / 2, y: p.y + 33, "text-anchor": "middle"}, line2));
    const line3 = fit(n.type === "spout" ? `acked ${count(n.acked)}  failed ${count(n.failed)}`
      : `capacity ${n.capacity.toFixed(3)}`);
    g.append(svg("text", {x: p.x + NODE_W / 2, y: p.y + 48, "text-anchor": "middle"}, line3));
    g.append(svg("title", {}, `${n.id}: ${n.executors} executor(s)` + (n.lastError ? `\nlast error: ${n.lastError}` : "")));
    link.append(g);
    target.append(link);
  }
}
