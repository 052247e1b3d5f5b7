// Inline-SVG charts of per-minute series: stacked bars with a y scale, the
// window's ends on the x axis, a legend in text, and a summary sentence as
// the chart's accessible name (colour never carries the meaning alone).
import { h, svg } from '/lib/hookd.js';

const W = 640, H = 180, PAD_L = 44, PAD_R = 8, PAD_T = 10, PAD_B = 24;

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmtRate(v) {
  if (v === 0) return '0';
  if (v < 0.1) return v.toFixed(3);
  if (v < 10) return v.toFixed(2).replace(/\.?0+$/, '');
  return Math.round(v).toLocaleString('en-US');
}

/*
 * minutes: the API's per-minute rows; series: [{key, label, cls}] stacked in
 * that order; perSecond divides each minute's count by 60. Answers a figure
 * element with the chart, its legend and a summary line.
 */
export function barChart({ title, minutes, series, perSecond = true, unit = '/s' }) {
  const scale = perSecond ? 1 / 60 : 1;
  const totals = minutes.map((m) => series.reduce((a, s) => a + (m[s.key] || 0), 0) * scale);
  const max = niceMax(Math.max(0, ...totals));
  const n = Math.max(1, minutes.length);
  const plotW = W - PAD_L - PAD_R, plotH = H - PAD_T - PAD_B;
  const bw = plotW / n;
  const y = (v) => PAD_T + plotH - (v / max) * plotH;
  const bars = [];
  minutes.forEach((m, i) => {
    let acc = 0;
    for (const s of series) {
      const v = (m[s.key] || 0) * scale;
      if (v > 0) {
        bars.push(svg('rect', { x: (PAD_L + i * bw + 0.5).toFixed(2), y: y(acc + v).toFixed(2),
          width: Math.max(1, bw - 1).toFixed(2), height: Math.max(0.5, (v / max) * plotH).toFixed(2), class: s.cls }));
      }
      acc += v;
    }
  });
  const prev = totals.length > 1 ? totals[totals.length - 2] : latest; // the current minute is partial
  const peak = Math.max(0, ...totals);
  const avg = totals.length ? totals.reduce((a, b) => a + b, 0) / totals.length : 0;
  const span = `${minutes.length} min`;
  const summary = `${title}: average ${fmtRate(avg)}${unit} over the last ${span}, peak ${fmtRate(peak)}${unit}, ` +
    `last full minute ${fmtRate(prev)}${unit}`;
  const grid = [0, 0.5, 1].map((f) => [
    svg('line', { x1: PAD_L, x2: W - PAD_R, y1: y(max * f).toFixed(2), y2: y(max * f).toFixed(2), class: 'grid' }),
    svg('text', { x: PAD_L - 6, y: (y(max * f) + 4).toFixed(2), class: 'axis', 'text-anchor': 'end' }, fmtRate(max * f)),
  ]);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary, class: 'chart',
    preserveAspectRatio: 'xMidYMid meet' },
  grid, bars,
  svg('text', { x: PAD_L, y: H - 6, class: 'axis' }, `${span} ago`),
  svg('text', { x: W - PAD_R, y: H - 6, class: 'axis', 'text-anchor': 'end' }, 'now'));
  return h('figure', { class: 'chart-box' },
    h('figcaption', {}, h('span', { class: 'chart-title' }, title),
      h('span', { class: 'legend' }, series.map((s) => h('span', { class: 'legend-item' },
        h('span', { class: `swatch ${s.cls}`, 'aria-hidden': 'true' }), s.label)))),
    chart,
    h('p', { class: 'chart-summary muted' }, summary));
}
