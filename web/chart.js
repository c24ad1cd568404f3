// The benchmark chart: per benchmark, this page's time per call or item beside the published
// Web figure, as horizontal bars on a log scale (a loopback WebSocket is a thousand times
// faster than a BLE connection interval). Plain SVG, no library.

import { num } from './suite.js';

const NS = 'http://www.w3.org/2000/svg';

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Draws `rows` ({ name, ours, published, per }) into `container`; `label` names our bars. */
export function drawChart(container, rows, label) {
  container.replaceChildren();
  const shown = rows.filter((r) => r.ours > 0 || r.published > 0);
  if (shown.length === 0) return;
  const values = shown.flatMap((r) => [r.ours, r.published]).filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...values)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...values)));
  const left = 190;
  const width = 960;
  const plot = width - left - 90;
  const barH = 14;
  const group = 2 * barH + 16;
  const top = 40;
  const height = top + shown.length * group + 40;
  const x = (v) => left + (Math.log10(v / lo) / Math.log10(hi / lo)) * plot;
  const svg = el('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'font-family': 'system-ui, sans-serif', 'font-size': 12 });
  svg.append(el('text', { x: left, y: 16, 'font-weight': 600 }, 'milliseconds per call or stream item (log scale; shorter is faster)'));
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    svg.append(el('line', { x1: x(d), x2: x(d), y1: top - 8, y2: height - 30, stroke: '#d8dee4' }));
    svg.append(el('text', { x: x(d), y: height - 14, 'text-anchor': 'middle', fill: '#57606a' }, num(d)));
  }
  shown.forEach((r, i) => {
    const y = top + i * group;
    svg.append(el('text', { x: left - 8, y: y + barH + 4, 'text-anchor': 'end' }, r.name));
    const bars = [
      [r.ours, '#0969da', label],
      [r.published, '#bf8700', 'published Web'],
    ];
    bars.forEach(([v, color, who], j) => {
      const by = y + j * (barH + 2);
      if (!(v > 0)) return;
      svg.append(el('rect', { x: left, y: by, width: Math.max(1, x(v) - left), height: barH, fill: color }));
      svg.append(el('text', { x: x(v) + 4, y: by + barH - 3, fill: '#1b1f24' }, `${num(v)} ms/${r.per} (${who})`));
    });
  });
  container.append(svg);
}
