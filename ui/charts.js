// Line charts of a job's metrics, one series per rank, on uPlot (vendored from npm by
// scripts/install-deps.sh and built into the coordinator). Points arrive in bulk (the job's
// metric history) and then one by one (its live stream); a chart redraws at most every
// 250 ms, whatever the rate of points.
'use strict';

const ConvoyCharts = (() => {
  const COLOURS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777',
    '#4b5563'];

  class SeriesChart {
    // `el`: the chart's container; `title` and `yLabel` are fixed texts of ours; `dots`: draw
    // each point (a series of a few points, one per evaluation, is no line).
    constructor(el, title, yLabel, format, dots, yRange) {
      this.el = el;
      this.yRange = yRange || null;
      this.title = title;
      this.yLabel = yLabel;
      this.dots = !!dots;
      this.format = format || ((v) => (v == null ? '-' : v.toPrecision(4)));
      this.ranks = new Map(); // rank -> Map(step -> value): a restarted attempt's step wins
      this.plot = null;
      this.pending = false;
      this.drawn = false;
      this.lastDraw = 0;
      this.points = 0;
      this.el.dataset.points = '0';
    }

    // One point; `step` and `value` numbers. The chart redraws soon.
    add(rank, step, value) {
      if (!Number.isFinite(step) || !Number.isFinite(value)) return;
      let series = this.ranks.get(rank);
      if (!series) {
        series = new Map();
        this.ranks.set(rank, series);
      }
      if (!series.has(step)) this.points++;
      series.set(step, value);
      if (this.drawn) this.schedule(); // before the first draw, points come in bulk
    }

    schedule() {
      if (this.pending) return;
      this.pending = true;
      const wait = Math.max(0, 250 - (performance.now() - this.lastDraw));
      setTimeout(() => requestAnimationFrame(() => {
        this.pending = false;
        this.draw();
      }), wait);
    }

    // The uPlot table: the steps of every rank, in order, and each rank's value or null.
    table() {
      const ranks = [...this.ranks.keys()].sort((a, b) => a - b);
      const all = new Set();
      for (const r of ranks) for (const s of this.ranks.get(r).keys()) all.add(s);
      const xs = Float64Array.from(all).sort();
      const index = new Map();
      xs.forEach((x, i) => index.set(x, i));
      const ys = ranks.map((r) => {
        const y = new Array(xs.length).fill(null);
        for (const [s, v] of this.ranks.get(r)) y[index.get(s)] = v;
        return y;
      });
      return { ranks, data: [Array.from(xs), ...ys] };
    }

    draw() {
      this.drawn = true;
      this.lastDraw = performance.now();
      const { ranks, data } = this.table();
      this.el.dataset.points = String(this.points);
      const width = Math.max(280, this.el.clientWidth || 600);
      if (this.plot && this.plot.series.length === ranks.length + 1) {
        this.plot.setData(data);
        return;
      }
      if (this.plot) this.plot.destroy();
      this.el.textContent = '';
      if (ranks.length === 0) {
        const none = document.createElement('p');
        none.className = 'muted chart-empty';
        none.textContent = `${this.title}: no points yet`;
        this.el.appendChild(none);
        return;
      }
      const fmt = this.format;
      const opts = {
        title: this.title,
        width,
        height: 220,
        scales: { x: { time: false }, y: this.yRange ? { range: this.yRange } : {} },
        legend: { live: true },
        cursor: { drag: { x: true, y: false } },
        series: [{ label: 'step' }].concat(ranks.map((r, i) => ({
          label: `rank ${r}`,
          stroke: COLOURS[i % COLOURS.length],
          width: 1.5,
          spanGaps: true,
          points: { show: this.dots, size: 7 },
          value: (u, v) => fmt(v),
        }))),
        axes: [{ label: 'step' }, { label: this.yLabel, size: 60 }],
      };
      this.plot = new uPlot(opts, data, this.el);
    }

    resize() {
      if (this.plot) this.plot.setSize({ width: Math.max(280, this.el.clientWidth), height: 220 });
    }
  }

  return { SeriesChart };
})();
