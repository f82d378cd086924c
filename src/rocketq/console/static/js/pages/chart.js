// Time-series charts with the vendored uPlot (window.uPlot, loaded by index.html).
import { h } from "../dom.js";

const PALETTE = ["#c2410c", "#2563eb", "#15803d", "#7c3aed", "#b45309", "#0891b2", "#be185d", "#4b5563", "#65a30d", "#9333ea"];

const pad = (n) => String(n).padStart(2, "0");
function clock(sec) {
  const d = new Date(sec * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}${d.getSeconds() ? ":" + pad(d.getSeconds()) : ""}`;
}

// series: {name: [[ms, value], ...]}
export function lineChart(title, series, unit = "msg/s") {
  const box = h("div", { class: "chart" });
  const names = Object.keys(series);
  const times = [...new Set(names.flatMap((n) => series[n].map((p) => p[0])))].sort((a, b) => a - b);
  if (!names.length || times.length < 1 || typeof window.uPlot !== "function") {
    box.append(h("div", { class: "u-title" }, title), h("div", { class: "chart-empty" }, "Collecting samples…"));
    return box;
  }
  const data = [times.map((t) => t / 1000)];
  for (const n of names) {
    const m = new Map(series[n]);
    data.push(times.map((t) => (m.has(t) ? m.get(t) : null)));
  }
  const opts = {
    title,
    width: 600,
    height: 230,
    // at least two minutes wide, so a few first samples do not stretch over years
    scales: { x: { time: true, range: (u, min, max) => [Math.min(min, max - 120), max] } },
    series: [{}, ...names.map((n, i) => ({ label: n, stroke: PALETTE[i % PALETTE.length], width: 2, spanGaps: true,
      points: { show: times.length < 3 }, value: (u, v) => (v === null ? "-" : `${v.toFixed(1)} ${unit}`) }))],
    axes: [{ space: 80, values: (u, ticks) => ticks.map(clock) }, { size: 56, values: (u, vals) => vals.map((v) => (v >= 1000 ? `${(v / 1000).toFixed(1)}k` : `${v}`)) }],
  };
  const plot = new window.uPlot(opts, data, box);
  const fit = () => plot.setSize({ width: Math.max(300, box.clientWidth - 4), height: 230 });
  requestAnimationFrame(fit);
  const ro = new ResizeObserver(fit);
  ro.observe(box);
  box.dispose = () => { ro.disconnect(); plot.destroy(); };
  return box;
}
